"""Pixels through the xdg-desktop-portal Screenshot portal: how GNOME and KDE let a program read the screen.

Each grab asks the portal for a non-interactive screenshot, reads the PNG it names and deletes that
file at once (the portal writes it outside the data folder, unsealed: the wlr backend to /tmp, GNOME to
the Pictures folder), then crops the requested region. The desktop may ask the person once whether
Mirador may take screenshots; a refusal is reported, not retried silently. 106-179 ms a grab (p50) at
1280x800 on headless sway with xdg-desktop-portal-wlr (bench/wayland_grab.py): slower than grim, which
wlroots compositors use instead.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np

from capture.shot import GrabError, GrabUnavailable, Shot
from capture.wayland.dbus import call, session_bus

DESKTOP = "org.freedesktop.portal.Desktop"
PATH = "/org/freedesktop/portal/desktop"
IFACE = "org.freedesktop.portal.Screenshot"
RESPONSES = {1: "the person declined, or the desktop's policy forbids screenshots for Mirador",
             2: "the portal failed to take it"}


class PortalGrabber:
    """grab(region) takes one screenshot through the portal and crops it.

    outputs: the layout's outputs in window coordinates (from the window probe) when known; the
    screenshot is scaled to them, so a HiDPI screen's bigger image still crops the right window.
    """

    name = "xdg-desktop-portal (Screenshot)"

    def __init__(self, conn=None, outputs: Callable[[], list[dict]] | None = None, timeout: float = 30.0) -> None:
        from jeepney import DBusAddress, MatchRule
        from jeepney.bus_messages import message_bus

        try:
            self._conn = conn or session_bus()
            self.version = call(self._conn, DBusAddress(PATH, DESKTOP, "org.freedesktop.DBus.Properties"), "Get",
                                "ss", (IFACE, "version"))[0][1]
        except OSError as e:
            raise GrabUnavailable(f"the desktop portal offers no Screenshot ({e}); install xdg-desktop-portal with "
                                  "your desktop's backend (xdg-desktop-portal-gnome, -kde or -wlr) and log in "
                                  "again") from e
        self._portal = DBusAddress(PATH, DESKTOP, IFACE)
        self._outputs = outputs
        self.timeout = timeout
        self._monitors: list[dict] | None = None
        sender = self._conn.unique_name[1:].replace(".", "_")
        self._request_ns = f"/org/freedesktop/portal/desktop/request/{sender}"
        self._rule = lambda path: MatchRule(type="signal", interface="org.freedesktop.portal.Request",
                                            member="Response", path=path)
        # One bus-side match for all of this connection's requests, added once (a match per grab would pile up).
        call(self._conn, message_bus, "AddMatch", "s", (MatchRule(
            type="signal", interface="org.freedesktop.portal.Request", member="Response",
            path_namespace=self._request_ns).serialise(),))

    @property
    def monitors(self) -> list[dict]:
        """[whole layout, each output]: from the outputs callable, else one output the size of a screenshot."""
        if self._monitors is None:
            outs = self._outputs() if self._outputs else None
            if not outs:
                h, w = self._screenshot().shape[:2]
                outs = [{"left": 0, "top": 0, "width": w, "height": h}]
            from capture.wayland.grim import bounding_box

            self._monitors = [bounding_box(outs), *outs]
        return self._monitors

    def grab(self, region: dict) -> Shot:
        """Screenshot the whole desktop, keep `region` of it."""
        img = self._screenshot()
        box = self.monitors[0]
        sx, sy = img.shape[1] / box["width"], img.shape[0] / box["height"]
        x0, y0 = round((region["left"] - box["left"]) * sx), round((region["top"] - box["top"]) * sy)
        x1, y1 = round(x0 + region["width"] * sx), round(y0 + region["height"] * sy)
        crop = img[max(0, y0):min(img.shape[0], y1), max(0, x0):min(img.shape[1], x1)]
        if crop.size == 0:
            raise GrabError(f"region {region} lies outside the {img.shape[1]}x{img.shape[0]} screenshot")
        return Shot.from_rgb(np.ascontiguousarray(crop))

    def _screenshot(self) -> np.ndarray:
        token = "mirador" + secrets.token_hex(8)
        path = f"{self._request_ns}/{token}"
        with self._conn.filter(self._rule(path)) as queue:
            call(self._conn, self._portal, "Screenshot", "sa{sv}",
                 ("", {"handle_token": ("s", token), "interactive": ("b", False), "modal": ("b", False)}))
            try:
                signal = self._conn.recv_until_filtered(queue, timeout=self.timeout)
            except TimeoutError as e:
                raise GrabError(f"the Screenshot portal did not answer within {self.timeout:.0f}s; if the desktop "
                                "shows a permission dialog, allow Mirador there") from e
        code, results = signal.body
        if code != 0:
            raise GrabError(f"the Screenshot portal refused ({RESPONSES.get(code, f'response {code}')}); allow "
                            "screenshots for Mirador in your desktop's privacy settings")
        return _read_and_delete(results.get("uri", ("s", ""))[1])

    def close(self) -> None:
        """Close the bus connection."""
        self._conn.close()


def _read_and_delete(uri: str) -> np.ndarray:
    """The screenshot's pixels; its file is deleted whatever happens (it is the screen, unsealed)."""
    from PIL import Image

    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise GrabError(f"the Screenshot portal answered {uri!r}, not a local file")
    path = Path(unquote(parsed.path))
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB"))
    except OSError as e:
        raise GrabError(f"cannot read the portal's screenshot {path}: {e}") from e
    finally:
        path.unlink(missing_ok=True)
