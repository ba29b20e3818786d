"""Pixels through the xdg-desktop-portal Screenshot portal: how GNOME and KDE let a program read the screen.

Each grab asks the portal for a non-interactive screenshot of the whole screen, which the portal writes
to a file outside Mirador's control, unsealed (the wlr backend to /tmp/out.png, readable by every user;
GNOME to the Pictures folder), and names in its answer. Mirador opens that file, deletes it, then reads
it and crops the requested region: the file exists from the moment the portal writes it until Mirador
gets the answer, a few milliseconds when the portal answers at once. Everything showing then is in it,
so the screen source grabs through the portal only when no excluded window shows, where the window probe
can tell (capture/screen.py). An answer that comes after Mirador stopped waiting has its file deleted too,
when it arrives (checked at every grab and at close); no new request is sent while one is unanswered, so
a permission dialog is not asked twice. Only answers from the portal itself are believed: any program on
the session bus could send a Response naming a file Mirador would then delete. The desktop may ask the
person whether Mirador may take screenshots; a refusal is reported, not retried silently. 106-179 ms a
grab (p50) at 1280x800 on headless sway with xdg-desktop-portal-wlr (bench/wayland_grab.py): slower than
grim, which wlroots compositors use instead.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
from jeepney import HeaderFields

from capture.shot import GrabError, GrabUnavailable, Shot
from capture.wayland.dbus import call, name_owner, session_bus

log = logging.getLogger(__name__)

DESKTOP = "org.freedesktop.portal.Desktop"
PATH = "/org/freedesktop/portal/desktop"
IFACE = "org.freedesktop.portal.Screenshot"
REQUEST = "org.freedesktop.portal.Request"
RESPONSES = {1: "the person declined, or the desktop's policy forbids screenshots for Mirador",
             2: "the portal failed to take it"}
OUTPUTS_TTL = 10.0  # seconds a list of outputs is trusted, as for grim
HELD_FOR = 1.0  # seconds the screenshot taken to learn the screen's size serves the grab that follows
GIVE_UP_AFTER = 600.0  # seconds an unanswered request blocks new ones; then it is closed and forgotten
class PortalGrabber:
    """grab(region) takes one screenshot of the whole screen through the portal and crops it.

    outputs: the layout's outputs in window coordinates (the sway or Hyprland probe's), re-read every
    OUTPUTS_TTL seconds; the screenshot is scaled to them, so a HiDPI screen's bigger image still crops
    the right window. None (GNOME, KDE: the probe lists no outputs): the layout is the screenshot's size,
    at a scale of 1, learned from the first screenshot, which is also that first grab's image.
    """

    name = "xdg-desktop-portal (Screenshot)"
    reads_whole_screen = True  # every grab writes the whole screen to the portal's file

    def __init__(self, conn=None, outputs: Callable[[], list[dict]] | None = None, timeout: float = 30.0) -> None:
        from jeepney import DBusAddress, MatchRule
        from jeepney.bus_messages import message_bus

        try:
            self._conn = conn or session_bus()
            self.version = call(self._conn, DBusAddress(PATH, DESKTOP, "org.freedesktop.DBus.Properties"), "Get",
                                "ss", (IFACE, "version"))[0][1]
            self._owner = name_owner(self._conn, DESKTOP)
        except OSError as e:
            raise GrabUnavailable(f"the desktop portal offers no Screenshot ({e}); install xdg-desktop-portal with "
                                  "your desktop's backend (xdg-desktop-portal-gnome, -kde or -wlr) and log in "
                                  "again") from e
        self._portal = DBusAddress(PATH, DESKTOP, IFACE)
        self._outputs = outputs
        self.timeout = timeout
        self._monitors: list[dict] | None = None
        self._monitors_at = 0.0
        self._size: tuple[int, int] | None = None  # (height, width) of the last screenshot, when no outputs
        self._held: tuple[np.ndarray, float] | None = None
        self._unanswered: dict[str, float] = {}  # request path -> when it was sent, for requests given up on
        sender = self._conn.unique_name[1:].replace(".", "_")
        self._request_ns = f"/org/freedesktop/portal/desktop/request/{sender}"
        rule = MatchRule(type="signal", interface=REQUEST, member="Response", path_namespace=self._request_ns)
        # One bus-side match for all of this connection's requests, added once (a match per grab would pile up),
        # and one filter kept for the connection's life: a late answer is caught whenever it comes.
        call(self._conn, message_bus, "AddMatch", "s", (rule.serialise(),))
        self._answers = self._conn.filter(rule, bufsize=256)

    @property
    def monitors(self) -> list[dict]:
        """[whole layout, each output]: from the outputs callable, else one output the size of a screenshot."""
        now = time.monotonic()
        if self._outputs and (self._monitors is None or now - self._monitors_at > OUTPUTS_TTL):
            outs = self._outputs()
            if outs:
                from capture.wayland.grim import bounding_box

                self._monitors, self._monitors_at = [bounding_box(outs), *outs], now
        if self._monitors is not None:
            return self._monitors
        if self._size is None:
            # The screen's size is learned from a screenshot, kept for the grab that follows at once, so that
            # learning it costs no screenshot (no flash, no dialog) of its own.
            img = self._screenshot()
            self._held = (img, now)
        assert self._size is not None
        h, w = self._size
        box = {"left": 0, "top": 0, "width": w, "height": h}
        return [box, dict(box)]

    def grab(self, region: dict) -> Shot:
        """Screenshot the whole desktop, keep `region` of it."""
        held, self._held = self._held, None
        img = held[0] if held and time.monotonic() - held[1] < HELD_FOR else self._screenshot()
        box = self.monitors[0]
        sx, sy = img.shape[1] / box["width"], img.shape[0] / box["height"]
        x0, y0 = round((region["left"] - box["left"]) * sx), round((region["top"] - box["top"]) * sy)
        x1, y1 = round(x0 + region["width"] * sx), round(y0 + region["height"] * sy)
        crop = img[max(0, y0):min(img.shape[0], y1), max(0, x0):min(img.shape[1], x1)]
        if crop.size == 0:
            raise GrabError(f"region {region} lies outside the {img.shape[1]}x{img.shape[0]} screenshot")
        return Shot.from_rgb(np.ascontiguousarray(crop))

    def _screenshot(self) -> np.ndarray:
        self._wait_unanswered()
        token = "mirador" + secrets.token_hex(8)
        path = f"{self._request_ns}/{token}"
        handle = call(self._conn, self._portal, "Screenshot", "sa{sv}",
                      ("", {"handle_token": ("s", token), "interactive": ("b", False), "modal": ("b", False)}))[0]
        path = handle if handle.startswith(self._request_ns + "/") else path
        self._unanswered[path] = time.monotonic()  # until its answer comes, however late
        answer = self._collect(self.timeout, want=path)
        if answer is None:
            raise GrabError(f"the Screenshot portal did not answer within {self.timeout:.0f}s; if the desktop "
                            "shows a permission dialog, allow Mirador there")
        code, results = answer
        uri = results.get("uri", ("s", ""))[1]
        if code != 0:
            _delete_uri(uri)
            raise GrabError(f"the Screenshot portal refused ({RESPONSES.get(code, f'response {code}')}); allow "
                            "screenshots for Mirador in your desktop's privacy settings")
        img = _read_and_delete(uri)
        if not self._outputs:
            self._size = img.shape[:2]
        return img

    def _wait_unanswered(self) -> None:
        """Delete the files of late answers come in; while a request is still unanswered, wait for it, not
        send another (its permission dialog may be up), and fail when it stays unanswered."""
        self._collect(0)
        now = time.monotonic()
        for path, sent in list(self._unanswered.items()):
            if now - sent > GIVE_UP_AFTER:
                self._close_request(path)
        if not self._unanswered:
            return
        self._collect(self.timeout, until_answered=True)
        if self._unanswered:
            age = time.monotonic() - min(self._unanswered.values())
            raise GrabError(f"the Screenshot portal has not answered a request sent {age:.0f}s ago, and no new one "
                            "is sent until it does; if the desktop shows a permission dialog, answer it")

    def _collect(self, timeout: float, want: str | None = None, until_answered: bool = False):
        """Read the portal's answers for up to `timeout` s: return the body of the one for `want` (None if it
        did not come), or stop when no request is unanswered. Every other answer is a late one: its file
        is deleted unread."""
        deadline = time.monotonic() + timeout
        while True:
            while self._answers.queue:
                msg = self._answers.queue.popleft()
                path = msg.header.fields.get(HeaderFields.path)
                if not self._from_portal(msg):
                    continue
                self._unanswered.pop(path, None)
                if path == want:
                    return msg.body
                code, results = msg.body
                _delete_uri(results.get("uri", ("s", ""))[1])
                log.info("deleted the file of a Screenshot portal answer that came too late")
            if until_answered and not self._unanswered:
                return None
            left = deadline - time.monotonic()
            if timeout > 0 and left <= 0:
                return None
            try:
                self._conn.recv_messages(timeout=max(left, 0.0))
            except TimeoutError:
                return None

    def _from_portal(self, msg) -> bool:
        """True when the portal sent this answer; anyone else's is ignored (it could name any file)."""
        sender = msg.header.fields.get(HeaderFields.sender)
        if sender != self._owner:
            try:  # the portal may have been restarted since (D-Bus activation)
                self._owner = name_owner(self._conn, DESKTOP)
            except OSError:
                pass
        if sender == self._owner:
            return True
        log.warning("ignored a Screenshot portal answer from %s, which is not the portal (%s)", sender, self._owner)
        return False

    def _close_request(self, path: str) -> None:
        """Ask the portal to drop a request given up on (it then sends no answer and writes no file)."""
        from jeepney import DBusAddress

        self._unanswered.pop(path, None)
        try:
            call(self._conn, DBusAddress(path, DESKTOP, REQUEST), "Close", timeout=2.0)
        except OSError as e:
            log.info("could not close the unanswered Screenshot request %s: %s", path, e)

    def close(self) -> None:
        """Wait briefly for unanswered requests (deleting their files), close the rest, close the connection."""
        try:
            if self._unanswered:
                self._collect(min(self.timeout, 2.0), until_answered=True)
            for path in list(self._unanswered):
                self._close_request(path)
        except OSError as e:
            log.info("Screenshot portal: %s", e)
        finally:
            self._answers.close()
            self._conn.close()


def _delete_uri(uri: str) -> None:
    """Delete the local file an answer names (a late or refused screenshot's), if any."""
    parsed = urlparse(uri)
    if uri and parsed.scheme == "file":
        try:
            Path(unquote(parsed.path)).unlink(missing_ok=True)
        except OSError as e:
            log.warning("could not delete the Screenshot portal's file %s: %s", unquote(parsed.path), e)


def _read_and_delete(uri: str) -> np.ndarray:
    """The screenshot's pixels. Its file (the screen, unsealed) is opened and deleted before it is read,
    and deleted whatever happens."""
    from PIL import Image

    parsed = urlparse(uri)
    if parsed.scheme != "file":
        raise GrabError(f"the Screenshot portal answered {uri!r}, not a local file")
    path = Path(unquote(parsed.path))
    try:
        f = open(path, "rb")  # noqa: SIM115 - closed below, after the name is gone
    except OSError as e:
        path.unlink(missing_ok=True)
        raise GrabError(f"cannot read the portal's screenshot {path}: {e}") from e
    try:
        os.unlink(path)
        with Image.open(f) as im:
            return np.asarray(im.convert("RGB"))
    except OSError as e:
        raise GrabError(f"cannot read the portal's screenshot {path}: {e}") from e
    finally:
        f.close()
        path.unlink(missing_ok=True)
