"""What a window probe returns and the interface every probe implements (capture/window.py picks one;
capture/wayland/ holds the Wayland desktops' probes). Its own module so that the probes and the module that
chooses among them do not import each other."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TypedDict

log = logging.getLogger("capture.window")


class Rect(TypedDict, total=False):
    """A window's rectangle as WindowInfo's keyword arguments; empty where the probe could not read it."""

    left: int | None
    top: int | None
    width: int | None
    height: int | None


@dataclass(frozen=True)
class WindowInfo:
    """The active window: app name, title and its rectangle on the virtual screen (if known)."""

    app: str
    title: str
    left: int | None = None
    top: int | None = None
    width: int | None = None
    height: int | None = None
    wm_class: str = ""  # X11 instance name, e.g. "keepassxc"
    process: str = ""  # executable name when known
    id: int = 0

    @property
    def region(self) -> dict | None:
        """mss-style region dict, or None when the geometry is unknown."""
        if None in (self.left, self.top, self.width, self.height) or not self.width or not self.height:
            return None
        return {"left": self.left, "top": self.top, "width": self.width, "height": self.height}


class WindowProbe:
    """Interface: `active()` returns the active window or None when none has focus or it cannot tell;
    `visible()` lists the windows showing, where the desktop lets a program see them.

    Subclasses implement `_active()`; an OS call that fails there is logged and counted in
    `failures` / `last_error` (the screen source copies them into health) and reads as "unknown"
    instead of stopping capture.
    """

    name = "none"
    available = True  # False: this probe can never tell (NoWindowProbe), so nothing may be grabbed
    reason = ""
    failures = 0
    last_error = ""

    def active(self) -> WindowInfo | None:
        """The currently focused window, or None when unknown (including when the OS call failed)."""
        try:
            return self._active()
        except Exception as e:  # noqa: BLE001 - any OS/binding failure means "unknown", never a crash
            self.failures += 1
            self.last_error = f"{type(e).__name__}: {e}"
            # Once, then every 100th: a probe failing every 2 s must not flood the log.
            if self.failures == 1 or self.failures % 100 == 0:
                log.warning("%s window probe failed (%d so far): %s", self.name, self.failures, self.last_error)
            return None

    def _active(self) -> WindowInfo | None:
        return None

    def visible(self) -> list[WindowInfo] | None:
        """Every window showing now, focused or not, where this probe can list them (sway, Hyprland); None
        where it cannot, or when the call failed (then counted in `failures`, as active() does)."""
        try:
            return self._visible()
        except Exception as e:  # noqa: BLE001 - as in active(): the screen source sees the failure and grabs nothing
            self.failures += 1
            self.last_error = f"{type(e).__name__}: {e}"
            if self.failures == 1 or self.failures % 100 == 0:
                log.warning("%s window listing failed (%d so far): %s", self.name, self.failures, self.last_error)
            return None

    def _visible(self) -> list[WindowInfo] | None:
        return None

    def close(self) -> None:
        """Release OS handles."""


class NoWindowProbe(WindowProbe):
    """No way to learn the focused window here; `reason` says why and what would fix it.

    The screen source grabs nothing while this is the probe: with the window unknown, any frame
    could show an excluded app (fail closed, docs/architecture.md invariant 4).
    """

    available = False

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.name = f"none: {reason}"


def proc_name(pid: int) -> str:
    """The executable name of a process (/proc/PID/comm), or "" when it is gone."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""
