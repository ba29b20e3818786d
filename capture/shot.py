"""What a grab returns, and its two errors: shared by capture/grab.py (which picks a grabber) and the grabbers
of capture/wayland/, so that neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from memory.errors import MiradorError


class GrabUnavailable(MiradorError):
    """No way to read this session's pixels; the message says what to install or allow."""

    code = "grab_unavailable"


class GrabError(RuntimeError):
    """One grab failed (the compositor refused, a helper exited); reported and retried next cycle."""


@dataclass
class Shot:
    """One grabbed region: BGRA bytes, 4 per pixel, rows top to bottom (mss's ScreenShot fields)."""

    raw: bytes
    width: int
    height: int

    @property
    def size(self) -> tuple[int, int]:
        """(width, height), as PIL wants it."""
        return self.width, self.height

    @classmethod
    def from_rgb(cls, rgb: np.ndarray) -> Shot:
        """From an H x W x 3 RGB array (grim's PPM, the portal's PNG)."""
        h, w = rgb.shape[:2]
        bgra = np.empty((h, w, 4), np.uint8)
        bgra[..., 0], bgra[..., 1], bgra[..., 2], bgra[..., 3] = rgb[..., 2], rgb[..., 1], rgb[..., 0], 255
        return cls(bgra.tobytes(), w, h)
