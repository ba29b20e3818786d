"""The focused window on KDE Plasma (Wayland): a small KWin script reports it to Mirador over D-Bus.

KWin tells no outside program which window is active, but it runs scripts, and a script may call
D-Bus. At start Mirador loads the script below through org.kde.KWin /Scripting; it reports the
active window (class, caption, pid, frame) to Mirador's own bus connection at once, whenever another
window is activated, and whenever the active one changes its caption or moves; on close Mirador
unloads it. Only reports sent by KWin's own connection are believed. Until the first report arrives,
once the listener stops, or once KWin leaves the bus, the window is unknown and nothing is grabbed. Works with KWin 5 (clientActivated/activeClient) and 6 (windowActivated/activeWindow).

Tested against a stand-in KWin on a real D-Bus bus (tests/capture/test_wayland_probes.py), which runs
the calls this script makes; the script itself has not run in a real KWin here.
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from pathlib import Path

from capture.wayland.dbus import call, name_owner, session_bus
from capture.window_info import Rect, WindowInfo, WindowProbe, proc_name

log = logging.getLogger(__name__)

KWIN = "org.kde.KWin"
PLUGIN = "mirador-active-window"
OBJECT = "/org/mirador/ActiveWindow"
IFACE = "org.mirador.ActiveWindow"

# Every value goes as a string: KWin 6 geometry is real-valued, KWin 5's integral, and callDBus
# picks D-Bus types from the JavaScript values; strings arrive the same from both.
SCRIPT = """// Mirador: report the active window to the capture process (capture/wayland/kwin.py).
var MIRADOR = ["%(service)s", "%(object)s", "%(iface)s", "Active"];
var current = null;
function report() {
    var w = current;
    if (!w) {
        callDBus(MIRADOR[0], MIRADOR[1], MIRADOR[2], MIRADOR[3], "", "", "", "0", "", "", "", "");
        return;
    }
    var g = w.frameGeometry;
    callDBus(MIRADOR[0], MIRADOR[1], MIRADOR[2], MIRADOR[3], "" + w.resourceClass, "" + w.resourceName,
             "" + w.caption, "" + w.pid, "" + g.x, "" + g.y, "" + g.width, "" + g.height);
}
function activated(w) {
    if (current) {
        current.captionChanged.disconnect(report);
        current.frameGeometryChanged.disconnect(report);
    }
    current = w;
    if (w) {
        w.captionChanged.connect(report);
        w.frameGeometryChanged.connect(report);
    }
    report();
}
if (workspace.windowActivated) {
    workspace.windowActivated.connect(activated);
    activated(workspace.activeWindow);
} else {
    workspace.clientActivated.connect(activated);
    activated(workspace.activeClient);
}
"""


def _int(v: str) -> int | None:
    try:
        return int(round(float(v)))
    except ValueError:
        return None


def window_info(args: tuple[str, ...]) -> WindowInfo | None:
    """WindowInfo from the script's Active(class, name, caption, pid, x, y, w, h); None for no window."""
    klass, name, caption, pid, *geo = args
    if not (klass or name or caption):
        return None
    nums = [_int(g) for g in geo]
    rect: Rect = {}
    if None not in nums:
        left, top, width, height = nums  # four numbers, or ValueError
        rect = {"left": left, "top": top, "width": width, "height": height}
    p = _int(pid) or 0
    return WindowInfo(app=klass, title=caption, wm_class=name or klass, process=proc_name(p) if p > 0 else "",
                      **rect)


class KWinProbe(WindowProbe):
    """The active window as the KWin script last reported it; unknown until the first report."""

    name = "kde (KWin script)"

    def __init__(self, load_timeout: float = 5.0) -> None:
        from jeepney import DBusAddress, MatchRule
        from jeepney.bus_messages import message_bus

        self._lock = threading.Lock()
        self._latest: tuple[WindowInfo | None] | None = None  # None: no report yet
        self._stopped = threading.Event()
        self._reported = threading.Event()
        self._kwin_gone = ""  # why KWin's reports cannot be had any more
        self._impostors = 0  # reports refused because KWin did not send them
        self._listen = session_bus()  # the script calls this connection; only the listener thread reads it
        self._conn = session_bus()  # loads and unloads the script, from the capture thread
        self._scripting = DBusAddress("/Scripting", KWIN, "org.kde.kwin.Scripting")
        self._thread = threading.Thread(target=self._serve, name="kwin-active-window", daemon=True)
        try:
            # Reports are believed only from the connection that owns org.kde.KWin now: any program on the
            # session bus can call Mirador's connection, and one claiming an ordinary window has focus while
            # a password manager does would get that window grabbed. When KWin leaves the bus (a restart
            # or a crash; the script goes with it), the window is unknown from then on.
            self._kwin = name_owner(self._conn, KWIN)
            owner_changed = MatchRule(type="signal", sender="org.freedesktop.DBus", interface="org.freedesktop.DBus",
                                      member="NameOwnerChanged")
            owner_changed.add_arg_condition(0, KWIN)
            call(self._listen, message_bus, "AddMatch", "s", (owner_changed.serialise(),), load_timeout)
        except OSError as e:
            for c in (self._conn, self._listen):
                c.close()
            raise OSError(f"KWin did not run Mirador's active-window script (it is not on the session bus: {e}); "
                          "is this a KDE Plasma session?") from e
        self._thread.start()
        try:
            self._load(load_timeout)
        except OSError as e:
            self.close()
            raise OSError(f"KWin did not run Mirador's active-window script ({e}); is this a KDE Plasma session?") from e
        # The script reports as soon as it runs; waiting for that spares the first cycles a needless "unknown".
        if not self._reported.wait(load_timeout):
            log.warning("KWin ran Mirador's script but it has not reported the active window within %.0fs", load_timeout)

    def _load(self, timeout: float) -> None:
        from jeepney import DBusAddress

        if call(self._conn, self._scripting, "isScriptLoaded", "s", (PLUGIN,), timeout)[0]:
            call(self._conn, self._scripting, "unloadScript", "s", (PLUGIN,), timeout)  # left by a crashed run
        fd, path = tempfile.mkstemp(prefix="mirador-kwin-", suffix=".js", dir=os.environ.get("XDG_RUNTIME_DIR"))
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(SCRIPT % {"service": self._listen.unique_name, "object": OBJECT, "iface": IFACE})
            sid = call(self._conn, self._scripting, "loadScript", "ss", (path, PLUGIN), timeout)[0]
            if sid < 0:
                raise OSError(f"loadScript answered {sid}")
            # KWin 5.23+ exports each script at /Scripting/Script<id>; older ones at /<id>.
            for obj in (f"/Scripting/Script{sid}", f"/{sid}"):
                try:
                    call(self._conn, DBusAddress(obj, KWIN, "org.kde.kwin.Script"), "run", timeout=timeout)
                    return
                except OSError as e:
                    last = e
            raise last
        finally:
            Path(path).unlink(missing_ok=True)

    def _serve(self) -> None:
        from jeepney import HeaderFields, MessageType, new_error, new_method_return

        conn = self._listen
        while not self._stopped.is_set():
            try:
                msg = conn.receive(timeout=0.5)
            except TimeoutError:
                continue
            except OSError as e:  # bus gone: from now on the window is unknown (fail closed)
                if not self._stopped.is_set():
                    log.warning("KWin active-window listener stopped: %s", e)
                self._stopped.set()
                return
            h = msg.header
            sender = h.fields.get(HeaderFields.sender)
            if h.message_type == MessageType.signal:
                if (sender == "org.freedesktop.DBus" and h.fields.get(HeaderFields.member) == "NameOwnerChanged"
                        and msg.body[0] == KWIN and msg.body[2] != self._kwin):
                    with self._lock:  # the KWin that ran the script is gone: unknown from now on (fail closed)
                        self._kwin_gone = "KWin left the session bus (it quit or restarted, and Mirador's script " \
                                          "with it); restart capture"
                        self._latest = None
                continue
            if h.message_type != MessageType.method_call:
                continue
            if sender != self._kwin:
                self._impostors += 1
                if self._impostors == 1 or self._impostors % 100 == 0:
                    log.warning("ignored %d active-window report(s) not sent by KWin (last from %s)",
                                self._impostors, sender)
                conn.send(new_error(msg, "org.freedesktop.DBus.Error.AccessDenied", "s",
                                    ("Mirador takes active-window reports from KWin only",)))
                continue
            if h.fields.get(HeaderFields.path) != OBJECT or h.fields.get(HeaderFields.member) != "Active":
                conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s", ("Mirador knows only Active",)))
                continue
            try:
                info = window_info(tuple(str(a) for a in msg.body))
            except ValueError as e:
                conn.send(new_error(msg, "org.freedesktop.DBus.Error.InvalidArgs", "s", (str(e),)))
                continue
            with self._lock:
                if not self._kwin_gone:
                    self._latest = (info,)
            self._reported.set()
            conn.send(new_method_return(msg))

    def _active(self) -> WindowInfo | None:
        if self._stopped.is_set():
            raise OSError("the KWin listener has stopped (the session bus went away); restart capture")
        with self._lock:
            latest, gone = self._latest, self._kwin_gone
        if gone:
            raise OSError(gone)
        if latest is None:
            raise OSError("KWin has not reported the active window yet")
        return latest[0]

    def close(self) -> None:
        """Unload the script and stop listening."""
        if not self._stopped.is_set():
            try:
                call(self._conn, self._scripting, "unloadScript", "s", (PLUGIN,), 2.0)
            except OSError as e:
                log.info("could not unload the KWin script: %s", e)
        self._stopped.set()
        self._thread.join(2.0)
        for c in (self._conn, self._listen):
            c.close()
