"""Capture on a real KDE Plasma compositor: headless KWin (kwin_wayland --virtual), real Qt windows, Mirador's
production KWin probe (capture/wayland/kwin.py, a KWin script reporting over D-Bus) and the Screenshot portal
through KDE's own backend (xdg-desktop-portal-kde), which asks KWin's screenshot effect for the pixels.

Everything runs on a private dbus-daemon, in a temp folder that is its XDG_RUNTIME_DIR and HOME:

- Debian's /usr/bin/kwin_wayland carries a file capability (cap_sys_resource=ep), so running it from a
  process without that capability fails with "Operation not permitted"; a plain copy has none and starts.
  KWIN_COMPOSE=O2 makes it composite with OpenGL on Mesa's llvmpipe (no GPU): KWin's screenshot effect,
  which the KDE portal reads, only runs on an OpenGL compositor.
- foot crashes on KWin's virtual backend, so the windows are small PySide6 programs (QLabel) with a known
  Wayland app id (the desktop file name), title and text; a line on their stdin changes the title.
- xdg-desktop-portal-kde builds its screenshot dialog from QML even for a non-interactive screenshot, and
  that QML imports Plasma's org.kde.plasma.workspace.dialogs, which only the plasma-workspace package
  ships (236 packages, 550 MB). The test puts a stand-in for that one module on QML2_IMPORT_PATH: a hidden
  window with the dialog's properties that never shows itself. Everything else (the portal, its KDE
  backend, the dialog's own QML, KWin and its screenshot effect) is the real thing.

Which pixels were read is checked on the bus: a D-Bus monitor logs every Screenshot call to the portal and
to KWin, so an excluded window must leave that log unchanged.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.capture.test_screen import SECRET_WORDS, norm, sentence
from tests.capture.xdisplay import frame_files, wait_for
from tests.conftest import files_containing

SOCKET = "wayland-mirador"
WIDTH, HEIGHT = 1280, 800
PORTAL = "/usr/libexec/xdg-desktop-portal"
KDE_PORTAL_SERVICE = Path("/usr/share/dbus-1/services/org.freedesktop.impl.portal.desktop.kde.service")
SESSION_VARS = ("WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "XDG_CURRENT_DESKTOP", "XDG_SESSION_TYPE",
                "DBUS_SESSION_BUS_ADDRESS")


def missing_kwin() -> str | None:
    """Why headless KWin cannot run here, or None."""
    if not sys.platform.startswith("linux"):
        return "KWin runs on Linux only"
    for tool, pkg in (("kwin_wayland", "kwin-wayland"), ("dbus-daemon", "dbus-daemon")):
        if not shutil.which(tool):
            return f"{tool} is not installed (sudo apt-get install {pkg}; scripts/bootstrap.sh)"
    try:
        import PySide6.QtWidgets  # noqa: F401
    except ImportError as e:
        return f"PySide6 is needed for the test windows ({e})"
    return None


def _qt5_dir() -> Path | None:
    return next((p for p in sorted(Path("/usr/lib").glob("*/qt5")) if (p / "qml").is_dir()), None)


def kde_portal_exe() -> str:
    """The KDE portal backend's path, as its D-Bus service file names it ('' when not installed)."""
    if not KDE_PORTAL_SERVICE.exists():
        return ""
    for line in KDE_PORTAL_SERVICE.read_text().splitlines():
        if line.startswith("Exec="):
            exe = line.split("=", 1)[1].split()[0]
            return exe if Path(exe).exists() else ""
    return ""


def missing_portal() -> str | None:
    """Why the KDE Screenshot portal cannot run here, or None."""
    if not Path(PORTAL).exists():
        return f"{PORTAL} is missing (sudo apt-get install xdg-desktop-portal; scripts/bootstrap.sh)"
    if not kde_portal_exe():
        return "xdg-desktop-portal-kde is not installed (sudo apt-get install xdg-desktop-portal-kde)"
    qt5 = _qt5_dir()
    if qt5 is None:
        return "Qt 5's QML folder is missing (sudo apt-get install qml-module-qtquick-controls2)"
    for rel, pkg in (("plugins/platforms/libqwayland-generic.so", "qtwayland5"),
                     ("qml/org/kde/kirigami.2", "qml-module-org-kde-kirigami2"),
                     ("qml/QtQuick/Controls.2", "qml-module-qtquick-controls2"),
                     ("qml/QtQuick/Layouts", "qml-module-qtquick-layouts")):
        if not (qt5 / rel).exists():
            return f"{qt5 / rel} is missing, which xdg-desktop-portal-kde needs (sudo apt-get install {pkg})"
    if not shutil.which("tesseract"):
        return "tesseract is not installed (sudo apt-get install tesseract-ocr)"
    return None


pytestmark = pytest.mark.skipif(missing_kwin() is not None, reason=str(missing_kwin()))

# Stand-in for Plasma's org.kde.plasma.workspace.dialogs (plasma-workspace), which the KDE portal's
# ScreenshotDialog.qml builds on: the properties and signals that dialog and the portal use, and no window
# that ever shows (a non-interactive screenshot needs none).
SYSTEM_DIALOG = """import QtQuick 2.15
import QtQuick.Controls 2.15
import QtQuick.Window 2.15
Window {
    id: root
    property string iconName: ""
    property bool acceptable: true
    property var standardButtons
    property list<QtObject> actions
    default property Item mainItem
    readonly property DialogButtonBox dialogButtonBox: box
    DialogButtonBox { id: box; standardButtons: root.standardButtons }
    visible: false
    signal accept()
    signal reject()
    function present() {}
}
"""

# A window showing `text` with a Wayland app id (the desktop file name); "title X" on stdin retitles it,
# end of stdin closes it (so a window never outlives the test that opened it).
QT_WINDOW = """
import sys
from PySide6.QtCore import QSocketNotifier, Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QLabel
title, app_id, text = sys.argv[1:4]
app = QApplication(sys.argv[:1])
app.setDesktopFileName(app_id)
w = QLabel(text)
w.setWindowTitle(title)
w.setFont(QFont("DejaVu Sans", 24))
w.setAlignment(Qt.AlignTop | Qt.AlignLeft)  # away from the pointer, which the screenshot shows mid-screen
w.setWordWrap(True)
w.setMargin(16)
w.resize(1100, 600)  # big enough that KWin cannot place its first lines under the mid-screen pointer
w.show()
def command():
    line = sys.stdin.readline()
    if not line:
        app.quit()
        return
    what, _, arg = line.rstrip("\\n").partition(" ")
    if what == "title":
        w.setWindowTitle(arg)
notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
notifier.activated.connect(command)
app.exec()
"""


SYNC = "org.mirador.test.BusLog"


class BusLog:
    """A D-Bus monitor on the session bus: every method call whose interface is one of `interfaces`."""

    def __init__(self, address: str, interfaces: tuple[str, ...]) -> None:
        from jeepney import DBusAddress
        from jeepney.io.blocking import open_dbus_connection

        from capture.wayland.dbus import call

        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        # With fds: the bus does not show a monitor the calls that pass one (KWin's screenshot calls do).
        self._conn = open_dbus_connection(address, enable_fds=True)
        self._address = address
        rules = [f"type='method_call',interface='{i}'" for i in (*interfaces, SYNC)]
        call(self._conn, DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus.Monitoring"),
             "BecomeMonitor", "asu", (rules, 0))
        self._thread = threading.Thread(target=self._run, name="bus-log", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from jeepney import HeaderFields, MessageType
        from jeepney.fds import FileDescriptor

        while not self._stop.is_set():
            try:
                msg = self._conn.receive(timeout=0.2)
            except TimeoutError:
                continue
            except OSError:
                return
            for arg in msg.body:  # our copy of a pipe's end at once: KWin's reader waits until every copy closes
                if isinstance(arg, FileDescriptor):
                    arg.close()
            h = msg.header
            if h.message_type == MessageType.method_call:
                with self._lock:
                    self.calls.append((h.fields.get(HeaderFields.interface, ""), h.fields.get(HeaderFields.member, "")))

    def count(self, interface: str) -> int:
        """How many calls to `interface` went over the bus until now."""
        self._sync()
        with self._lock:
            return sum(1 for i, _ in self.calls if i == interface)

    def _sync(self) -> None:
        """Wait until this log has seen every call the bus routed before now: the bus shows a monitor the
        calls in the order it routed them, so once a marker call sent now is in the log, all earlier ones are."""
        from jeepney import DBusAddress, new_method_call
        from jeepney.io.blocking import open_dbus_connection

        token = f"Sync{time.monotonic_ns()}"
        with contextlib.closing(open_dbus_connection(self._address)) as conn:
            # Addressed to the bus itself, which answers with an error; only the monitor's copy matters.
            conn.send_and_get_reply(new_method_call(DBusAddress("/", "org.freedesktop.DBus", SYNC), token), timeout=5)
        wait_for(lambda: (SYNC, token) in self.calls, 10, interval=0.02, what="the bus monitor to catch up")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self._conn.close()


class KWinSession:
    """dbus-daemon + a copy of kwin_wayland (virtual backend, 1280x800) in a temp folder, in one process
    group of their own; `env` is what a client of this session gets, `window()` opens a Qt window."""

    def __init__(self, portal: bool) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mirador-kwin-"))
        self.runtime, home = self.dir / "runtime", self.dir / "home"
        self.runtime.mkdir(mode=0o700)
        (home / "Pictures").mkdir(parents=True)  # the KDE portal saves each screenshot there
        self.pictures = home / "Pictures"
        qml = self.dir / "qml" / "org" / "kde" / "plasma" / "workspace" / "dialogs"
        qml.mkdir(parents=True)
        (qml / "qmldir").write_text("module org.kde.plasma.workspace.dialogs\nSystemDialog 1.0 SystemDialog.qml\n")
        (qml / "SystemDialog.qml").write_text(SYSTEM_DIALOG)
        kwin = self.dir / "kwin_wayland"
        shutil.copyfile(shutil.which("kwin_wayland"), kwin)  # the copy carries no file capability
        kwin.chmod(0o755)
        drop = ("DISPLAY", "WAYLAND_DISPLAY", "SWAYSOCK", "I3SOCK", "HYPRLAND_INSTANCE_SIGNATURE", "QT_QPA_PLATFORM",
                "DBUS_SESSION_BUS_ADDRESS", "QML2_IMPORT_PATH", "XDG_DATA_HOME", "XDG_CACHE_HOME")
        base = {k: v for k, v in os.environ.items() if k not in drop}
        base.update(XDG_RUNTIME_DIR=str(self.runtime), HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
                    XDG_CURRENT_DESKTOP="KDE", XDG_SESSION_TYPE="wayland")
        self.procs: list[subprocess.Popen] = []
        self.windows: list[subprocess.Popen] = []
        # The bus's environment is what the services it starts get (the KDE portal backend among them).
        bus_env = dict(base, WAYLAND_DISPLAY=SOCKET, QT_QPA_PLATFORM="wayland", QML2_IMPORT_PATH=str(self.dir / "qml"))
        self.bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"], env=bus_env,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                    process_group=0)
        self.pgid = self.bus.pid
        try:
            address = self.bus.stdout.readline().strip()
            if not address:
                raise AssertionError(f"dbus-daemon printed no address (exit {self.bus.poll()})")
            self.env = dict(base, DBUS_SESSION_BUS_ADDRESS=address)
            self._start("kwin", [str(kwin), "--virtual", "--no-lockscreen", "--width", str(WIDTH), "--height",
                                 str(HEIGHT), "--socket", SOCKET], dict(self.env, KWIN_COMPOSE="O2"))
            wait_for(self._kwin_ready, 60, interval=0.2, what="KWin to open its socket and take org.kde.KWin")
            self.env["WAYLAND_DISPLAY"] = SOCKET
            if portal:
                self._start("portal", [PORTAL, "--replace"], dict(self.env, QT_QPA_PLATFORM="wayland"))
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, cmd: list[str], env: dict) -> subprocess.Popen:
        log = open(self.dir / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             process_group=self.pgid)
        log.close()
        self.procs.append(p)
        return p

    def _kwin_ready(self) -> bool:
        from jeepney.bus_messages import message_bus
        from jeepney.io.blocking import open_dbus_connection

        from capture.wayland.dbus import call

        kwin = self.procs[0]
        if kwin.poll() is not None:
            raise AssertionError(f"kwin_wayland exited ({kwin.returncode}): {self.tail('kwin')}")
        if not (self.runtime / SOCKET).exists():
            return False
        with contextlib.closing(open_dbus_connection(self.env["DBUS_SESSION_BUS_ADDRESS"])) as conn:
            return call(conn, message_bus, "NameHasOwner", "s", ("org.kde.KWin",))[0]

    def tail(self, name: str) -> str:
        """The end of a process's log, for failure messages."""
        p = self.dir / f"{name}.log"
        return p.read_text(errors="replace")[-2000:] if p.exists() else ""

    def window(self, title: str, text: str, app_id: str = "scribbler") -> subprocess.Popen:
        """A Qt window (Wayland) titled `title` showing `text`; returns at once (wait with a probe)."""
        env = dict(self.env, QT_QPA_PLATFORM="wayland")
        p = subprocess.Popen([sys.executable, "-c", QT_WINDOW, title, app_id, text], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, process_group=self.pgid)
        self.windows.append(p)
        return p

    @staticmethod
    def retitle(win: subprocess.Popen, title: str) -> None:
        win.stdin.write(f"title {title}\n")
        win.stdin.flush()

    def close(self, win: subprocess.Popen) -> None:
        """Close one window: end of its stdin, then a signal if it lingers."""
        with contextlib.suppress(OSError):
            win.stdin.close()
        try:
            win.wait(10)
        except subprocess.TimeoutExpired:
            win.kill()
            win.wait(5)
        self.windows.remove(win)

    def close_windows(self) -> None:
        for w in list(self.windows):
            self.close(w)

    def stop(self) -> None:
        """Close the windows, then end the whole process group (bus, KWin, portals, what the bus started)."""
        self.close_windows()
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            for p in [*self.procs, self.bus]:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(max(0.1, deadline - time.monotonic()))
            # Services the bus started are not our children: wait until the group is empty.
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.pgid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                continue
            break
        if self.bus.stdout:
            self.bus.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def kwin():
    s = KWinSession(portal=missing_portal() is None)
    yield s
    s.stop()


@pytest.fixture
def kde(kwin, monkeypatch):
    """This test runs inside the KDE session (no DISPLAY, no sway: nothing may fall back elsewhere)."""
    for k in ("DISPLAY", "SWAYSOCK", "HYPRLAND_INSTANCE_SIGNATURE"):
        monkeypatch.delenv(k, raising=False)
    for k in SESSION_VARS:
        monkeypatch.setenv(k, kwin.env[k])
    yield kwin
    kwin.close_windows()


@pytest.fixture
def probe(kde):
    """Mirador's production KWin probe, on this session's bus (the kde fixture set the environment)."""
    from capture.window import default_probe

    p = default_probe()
    assert p.name == "kde (KWin script)", getattr(p, "reason", p.name)
    yield p
    p.close()


def focused(probe, title: str, timeout: float = 30.0):
    """Wait until the probe reports the window titled `title` as active; return what it reports."""
    return wait_for(lambda: (w := probe.active()) is not None and w.title == title and w, timeout, interval=0.1,
                    what=f"KWin to report {title!r} as the active window")


def test_kwin_probe_reports_the_active_windows_app_title_and_frame(kde, probe):
    kde.window("KWin notes - draft.txt", "plain words", app_id="scribbler")
    w = focused(probe, "KWin notes - draft.txt")
    assert (w.app, w.title) == ("scribbler", "KWin notes - draft.txt")
    assert probe.failures == 0, probe.last_error
    # KWin places the 1100x600 window inside the 1280x800 output; the probe reports its frame there.
    assert w.width >= 1100 and w.height >= 600, w.region
    assert 0 <= w.left and w.left + w.width <= WIDTH and 0 <= w.top and w.top + w.height <= HEIGHT, w.region
    assert w.process.startswith("python")  # from the pid the script reports


def test_kwin_probe_follows_focus_and_title_changes(kde, probe):
    first = kde.window("First notes", "one")
    focused(probe, "First notes")
    second = kde.window("Second notes", "two", app_id="org.example.Writer")
    assert focused(probe, "Second notes").app == "org.example.Writer"  # a new window takes focus
    kde.retitle(second, "Second notes - edited")
    focused(probe, "Second notes - edited")  # the caption changed on the active window
    kde.close(second)
    assert focused(probe, "First notes").app == "scribbler"  # focus goes back to the window below
    kde.retitle(first, "First notes - renamed")
    focused(probe, "First notes - renamed")
    kde.window("Passwords.kdbx - KeePassXC", "hidden", app_id="org.keepassxc.KeePassXC")
    w = focused(probe, "Passwords.kdbx - KeePassXC")
    from capture.privacy import PrivacyFilter
    from memory.config import DEFAULT_EXCLUDED_APPS, DEFAULT_EXCLUDED_TITLES

    assert PrivacyFilter(DEFAULT_EXCLUDED_APPS, DEFAULT_EXCLUDED_TITLES).excluded(w) == "app keepassxc"
    assert probe.failures == 0, probe.last_error


# ---- a real capture cycle: pixels through the Screenshot portal (xdg-desktop-portal-kde, KWin's effect) ----

SCREENSHOT_CALLS = ("org.freedesktop.portal.Screenshot", "org.kde.kwin.Screenshot", "org.kde.KWin.ScreenShot2")


@pytest.fixture
def portal(kde):
    why = missing_portal()
    if why:
        pytest.skip(why)

    def ready() -> bool:
        from jeepney.io.blocking import open_dbus_connection

        from capture.grab import GrabUnavailable
        from capture.wayland.portal import PortalGrabber

        portal = kde.procs[-1]
        if portal.poll() is not None:
            raise AssertionError(f"xdg-desktop-portal exited ({portal.returncode}): {kde.tail('portal')}")
        try:
            PortalGrabber(conn=open_dbus_connection(kde.env["DBUS_SESSION_BUS_ADDRESS"])).close()
            return True
        except GrabUnavailable:
            return False

    wait_for(ready, 60, interval=0.5, what="the Screenshot portal on the KWin session's bus")
    log = BusLog(kde.env["DBUS_SESSION_BUS_ADDRESS"], SCREENSHOT_CALLS)
    yield log
    log.close()


def screenshots(log: BusLog) -> tuple[int, int]:
    """(Screenshot requests to the portal, screenshots KWin was asked for) so far."""
    return log.count(SCREENSHOT_CALLS[0]), log.count(SCREENSHOT_CALLS[1]) + log.count(SCREENSHOT_CALLS[2])


@pytest.fixture
def capture(store, ocr, kde, portal):
    from capture.runner import Capture

    cap = Capture(store, audio=False, ocr=ocr)
    yield cap
    cap.stop()


def capture_probe(capture):
    """The window probe capture itself chose for this session (one KWin script at a time: a second probe
    loading Mirador's script would unload this one's)."""
    return capture.screen._window_probe()


def evidence(store) -> list[dict]:
    return store.list("evidence", limit=1000)


def test_kde_window_becomes_evidence_through_the_kde_portal(capture, store, kde, portal, mirador_home):
    text = sentence()
    kde.window("Quarterly notes - draft.txt", text, app_id="scribbler")
    focused(capture_probe(capture), "Quarterly notes - draft.txt")
    capture.run_cycles(3)
    rows = [r for r in evidence(store) if norm(text) in norm(r["text"])]
    assert len(rows) == 1, [r["text"] for r in evidence(store)]
    assert (rows[0]["source"], rows[0]["app"], rows[0]["window"]) == ("screen", "scribbler",
                                                                      "Quarterly notes - draft.txt")
    h = capture.health.snapshot()
    assert h["session"] == "wayland (kde)"  # the automatic choice for KDE: the portal, and the KWin script
    assert h["screen_backend"] == "xdg-desktop-portal (Screenshot)" and h["window_probe"] == "kde (KWin script)"
    assert h["errors"] == 0, h["recent_errors"]
    # A portal request per cycle (and maybe one more to learn the screen's size), each answered by the KDE
    # backend through KWin's screenshot effect.
    requests, kwin_shots = screenshots(portal)
    assert requests >= 3 and kwin_shots == requests, portal.calls
    # The portal saved each screenshot in ~/Pictures; Mirador deleted it at once.
    assert list(kde.pictures.iterdir()) == []


@pytest.mark.parametrize("title,app_id", [
    ("Passwords", "org.keepassxc.KeePassXC"),  # by a part of its reverse-DNS Wayland app id
    ("KeePassXC - Passwords.kdbx", "scribbler"),  # by the title pattern
])
def test_excluded_window_on_kde_is_never_grabbed(capture, store, kde, portal, mirador_home, title, app_id):
    kde.window("Ordinary editor", sentence())
    focused(capture_probe(capture), "Ordinary editor")
    capture.run_cycles(2)
    before = screenshots(portal)
    frames_before = frame_files(mirador_home)
    assert before[0] >= 2 and before[1] == before[0] and frames_before, portal.calls

    secret = sentence(words=SECRET_WORDS)
    kde.window(title, secret, app_id=app_id)
    focused(capture_probe(capture), title)
    assert capture.run_cycles(5) == ["excluded"] * 5

    assert screenshots(portal) == before, "a screenshot was taken while an excluded window had focus"
    assert capture.health.snapshot()["frames_excluded"] == 5
    assert frame_files(mirador_home) == frames_before
    assert not any(norm(secret) in norm(r["text"]) for r in evidence(store))
    for word in SECRET_WORDS:
        assert not files_containing(mirador_home, word), f"{word!r} from the excluded window is in a file"
    assert list(kde.pictures.iterdir()) == []
