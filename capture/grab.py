"""Reading pixels: one small interface over mss (X11, Windows, macOS), grim and the Screenshot portal (Wayland).

A grabber has `name`, `monitors` (mss's layout: [0] = the bounding box of all outputs, then one per
output, in the coordinates window rectangles use), `grab(region) -> Shot` (BGRA pixels, as mss
returns them, so change detection and OCR do not care where they came from) and `close()`. One that
reads the whole screen whatever region it is asked for (the portal) sets `reads_whole_screen`: the
screen source then checks every window showing, not just those in the region.
`open_grabber()` picks one for this session; where none can work it raises GrabUnavailable, whose
message says what is missing and how to get it (shown in `mirador status` and `mirador doctor`).
"""

from __future__ import annotations

import shutil

from capture.shot import GrabError, GrabUnavailable, Shot
from capture.wayland.session import Session, detect

__all__ = ["BACKENDS", "GrabError", "GrabUnavailable", "MssGrabber", "Shot", "choose", "open_grabber"]

BACKENDS = ("auto", "x11", "grim", "portal")


class MssGrabber:
    """mss: X11 through libX11 (also Windows and macOS); owned by the thread that made it."""

    name = "mss"

    def __init__(self) -> None:
        import mss

        self._mss = (getattr(mss, "MSS", None) or mss.mss)()
        self.name = {"linux": "mss (X11)"}.get(_os(), "mss")

    @property
    def monitors(self) -> list[dict]:
        """mss's monitor list."""
        return self._mss.monitors

    def grab(self, region: dict):
        """mss's ScreenShot (raw BGRA, width, height, size)."""
        return self._mss.grab(region)

    def close(self) -> None:
        """Release the display connection."""
        self._mss.close()


def _os() -> str:
    import sys

    return "linux" if sys.platform.startswith("linux") else sys.platform


def choose(backend: str = "auto", session: Session | None = None) -> str:
    """Which grabber `open_grabber` builds for this session: x11 | grim | portal. Raises GrabUnavailable."""
    s = session or detect()
    if backend not in BACKENDS:
        raise GrabUnavailable(f"capture.screen_backend = {backend!r} is not one of {', '.join(BACKENDS)}; "
                              "set it to auto")
    if backend != "auto":
        return backend
    if s.kind in ("windows", "macos", "x11"):
        return "x11"
    if s.kind == "none":
        raise GrabUnavailable("no display: neither WAYLAND_DISPLAY nor DISPLAY is set, so there is no screen to "
                              "read; start Mirador from your desktop session")
    # Wayland. wlroots compositors offer screencopy, which grim reads in ~20 ms without asking anyone;
    # GNOME and KDE offer only the portal (the desktop may ask the person once).
    if s.desktop in ("sway", "hyprland", "wlroots"):
        if shutil.which("grim"):
            return "grim"
        raise GrabUnavailable(f"{s.desktop} needs `grim` to read the screen (wlroots screencopy) and it is not "
                              "installed: sudo apt-get install grim (or your distribution's grim package)")
    return "portal"


def open_grabber(backend: str = "auto", session: Session | None = None, outputs=None):
    """A grabber for this session (see choose()).

    outputs: a callable listing the outputs in layout coordinates (the sway or Hyprland probe's), which
    grim grabs from and the portal's screenshot is scaled to; None where the probe cannot list them.
    """
    kind = choose(backend, session)
    if kind == "x11":
        return MssGrabber()
    if kind == "grim":
        from capture.wayland.grim import GrimGrabber

        return GrimGrabber(outputs=outputs)
    from capture.wayland.portal import PortalGrabber

    return PortalGrabber(outputs=outputs)
