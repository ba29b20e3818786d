"""Pixels on wlroots compositors (sway, Hyprland, river, Wayfire) through `grim` (wlr-screencopy).

One short `grim` process per grab, writing uncompressed PPM to a pipe: 17-20 ms CPU for a 1280x800
window on headless sway (60 ms wall on a loaded 2-core machine; bench/wayland_grab.py, bench/RESULTS.md),
nothing written to disk, no permission prompt — wlroots lets any client of the session copy the
screen, as X11 did.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable

import numpy as np

from capture.shot import GrabError, GrabUnavailable, Shot

_PPM_HEADER = re.compile(rb"\AP6\s+(?:#[^\n]*\n\s*)*(\d+)\s+(\d+)\s+(\d+)\s")
OUTPUTS_TTL = 10.0  # seconds a list of outputs is trusted; a monitor plugged in shows within this


def parse_ppm(data: bytes) -> np.ndarray:
    """An H x W x 3 RGB array from binary PPM (P6, 8 bits), as `grim -t ppm` writes it."""
    m = _PPM_HEADER.match(data)
    if not m:
        raise GrabError(f"grim wrote {len(data)} bytes that are not a PPM image (starts {data[:16]!r})")
    w, h, maxval = (int(g) for g in m.groups())
    if maxval != 255:
        raise GrabError(f"grim wrote a {maxval}-level PPM; only 8-bit images are read")
    body = data[m.end():m.end() + w * h * 3]
    if len(body) != w * h * 3:
        raise GrabError(f"grim's {w}x{h} image is cut short ({len(body)} of {w * h * 3} bytes)")
    return np.frombuffer(body, np.uint8).reshape(h, w, 3)


def bounding_box(outputs: list[dict]) -> dict:
    """The rectangle around every output (mss's monitors[0])."""
    left, top = min(o["left"] for o in outputs), min(o["top"] for o in outputs)
    right = max(o["left"] + o["width"] for o in outputs)
    bottom = max(o["top"] + o["height"] for o in outputs)
    return {"left": left, "top": top, "width": right - left, "height": bottom - top}


class GrimGrabber:
    """grab(region) runs `grim -g "x,y wxh" -t ppm -`; regions are in the compositor's layout coordinates.

    outputs: returns the active outputs as {left, top, width, height} (the sway or Hyprland IPC);
    None = learn the layout's size from one whole-screen grab (other wlroots compositors).
    """

    name = "grim (wlroots screencopy)"

    def __init__(self, outputs: Callable[[], list[dict]] | None = None, grim: str | None = None,
                 timeout: float = 5.0) -> None:
        found = grim or shutil.which("grim")
        if not found:
            raise GrabUnavailable("`grim` is not installed, and it is how Mirador reads the screen on wlroots "
                                  "compositors (sway, Hyprland, river): sudo apt-get install grim")
        self.grim: str = found
        self._outputs = outputs
        self.timeout = timeout
        self._monitors: list[dict] | None = None
        self._monitors_at = 0.0

    @property
    def monitors(self) -> list[dict]:
        """[bounding box, output 1, output 2, ...], re-read every OUTPUTS_TTL seconds."""
        if self._monitors is None or time.monotonic() - self._monitors_at > OUTPUTS_TTL:
            outs = self._outputs() if self._outputs else None
            if not outs:
                shot = self._run([])
                outs = [{"left": 0, "top": 0, "width": shot.width, "height": shot.height}]
            self._monitors, self._monitors_at = [bounding_box(outs), *outs], time.monotonic()
        return self._monitors

    def grab(self, region: dict) -> Shot:
        """The pixels of one rectangle of the layout."""
        return self._run(["-g", f"{region['left']},{region['top']} {region['width']}x{region['height']}"])

    def _run(self, args: list[str]) -> Shot:
        try:
            p = subprocess.run([self.grim, "-t", "ppm", *args, "-"], capture_output=True, timeout=self.timeout)
        except subprocess.TimeoutExpired as e:
            raise GrabError(f"grim did not answer within {self.timeout:.0f}s; is the compositor frozen?") from e
        if p.returncode != 0:
            err = p.stderr.decode("utf-8", "replace").strip().splitlines()
            raise GrabError(f"grim exited {p.returncode}: {err[-1] if err else 'no message'} — the compositor may "
                            "not offer wlr-screencopy; set capture.screen_backend = \"portal\" to use the portal")
        return Shot.from_rgb(parse_ppm(p.stdout))

    def close(self) -> None:
        """Nothing held between grabs."""
