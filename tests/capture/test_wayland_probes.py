"""Wayland pieces that cannot run on a real desktop here: Hyprland, KWin, GNOME Shell and a refusing portal.

Each talks to a stand-in over the real transport — a Unix socket serving Hyprland's JSON, a private
dbus-daemon with fake KWin / GNOME Shell / portal services — so the production code (socket and D-Bus
calls, parsing, the KWin script's callbacks, errors) runs for real. Plus the choices made from the
environment, and the screen source's behaviour when a desktop offers no way to grab or to know the window.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading

import numpy as np
import pytest

from capture.grab import GrabError, GrabUnavailable, Shot, choose
from capture.health import Health
from capture.privacy import PrivacyFilter
from capture.redact import Redactor
from capture.screen import ScreenSource
from capture.wayland.grim import bounding_box, parse_ppm
from capture.wayland.session import Session, detect
from capture.window import NoWindowProbe, WindowInfo, WindowProbe, default_probe
from memory.config import DEFAULT_EXCLUDED_APPS, DEFAULT_EXCLUDED_TITLES, CaptureConfig
from tests.capture.dbus_fakes import FakeService, PrivateBus, missing_dbus


def privacy() -> PrivacyFilter:
    return PrivacyFilter(DEFAULT_EXCLUDED_APPS, DEFAULT_EXCLUDED_TITLES)


# ---- which session, which grabber -------------------------------------------------------------------


@pytest.mark.parametrize("env,session", [
    ({"DISPLAY": ":0"}, Session("x11")),
    ({}, Session("none")),
    # XWayland's DISPLAY must not make a Wayland session look like X11.
    ({"WAYLAND_DISPLAY": "wayland-1", "DISPLAY": ":0", "SWAYSOCK": "/run/user/1000/sway-ipc.sock"},
     Session("wayland", "sway")),
    ({"WAYLAND_DISPLAY": "wayland-1", "HYPRLAND_INSTANCE_SIGNATURE": "abc", "XDG_CURRENT_DESKTOP": "Hyprland"},
     Session("wayland", "hyprland")),
    ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "KDE"}, Session("wayland", "kde")),
    ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "ubuntu:GNOME"}, Session("wayland", "gnome")),
    ({"XDG_SESSION_TYPE": "wayland", "XDG_CURRENT_DESKTOP": "river"}, Session("wayland", "wlroots")),
    ({"WAYLAND_DISPLAY": "wayland-0", "XDG_CURRENT_DESKTOP": "COSMIC"}, Session("wayland", "other")),
])
def test_session_detection(env, session):
    assert detect(env, platform="linux") == session


def test_grabber_choice(monkeypatch, tmp_path):
    assert choose("auto", Session("x11")) == "x11"
    assert choose("auto", Session("windows")) == "x11"
    assert choose("auto", Session("wayland", "kde")) == "portal"
    assert choose("auto", Session("wayland", "gnome")) == "portal"
    assert choose("auto", Session("wayland", "other")) == "portal"
    assert choose("portal", Session("wayland", "sway")) == "portal"
    monkeypatch.setenv("PATH", str(tmp_path))  # no grim
    with pytest.raises(GrabUnavailable, match="needs `grim`.*apt-get install grim"):
        choose("auto", Session("wayland", "sway"))
    with pytest.raises(GrabUnavailable, match="no display"):
        choose("auto", Session("none"))
    with pytest.raises(GrabUnavailable, match="not one of auto, x11, grim, portal"):
        choose("wayland", Session("x11"))


def test_ppm_parsing_and_bgra_shots():
    pixels = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert (parse_ppm(b"P6\n3 2\n255\n" + pixels.tobytes()) == pixels).all()
    assert (parse_ppm(b"P6 # grim\n3 2 255\n" + pixels.tobytes()) == pixels).all()
    with pytest.raises(GrabError, match="cut short"):
        parse_ppm(b"P6\n3 2\n255\n" + pixels.tobytes()[:-1])
    with pytest.raises(GrabError, match="not a PPM"):
        parse_ppm(b"\x89PNG....")
    shot = Shot.from_rgb(pixels)
    bgra = np.frombuffer(shot.raw, np.uint8).reshape(2, 3, 4)
    assert shot.size == (3, 2) and (bgra[..., 2] == pixels[..., 0]).all() and (bgra[..., 3] == 255).all()
    assert bounding_box([{"left": 0, "top": 0, "width": 1920, "height": 1080},
                         {"left": 1920, "top": -200, "width": 1280, "height": 1024}]) == {
        "left": 0, "top": -200, "width": 3200, "height": 1280}


@pytest.mark.parametrize("app", ["org.keepassxc.KeePassXC", "com.bitwarden.desktop", "com.1password.1Password"])
def test_reverse_dns_app_ids_of_password_managers_are_excluded(app):
    assert privacy().excluded(WindowInfo(app=app, title="Vault"))


# ---- the screen source when a desktop offers no way ---------------------------------------------------


class CountingGrabber:
    monitors = [{"left": 0, "top": 0, "width": 64, "height": 48}] * 2

    def __init__(self) -> None:
        self.grabs = 0

    def grab(self, region):
        self.grabs += 1
        return Shot.from_rgb(np.full((region["height"], region["width"], 3), 255, np.uint8))

    def close(self) -> None:
        pass


def source(store, probe, session, health=None) -> ScreenSource:
    return ScreenSource(store.home, CaptureConfig(), privacy(), Redactor(), None, health or Health(), ocr=None,
                        probe=probe, session=session)


def test_no_grabber_is_reported_once_and_nothing_runs(store, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # sway without grim
    health = Health()
    src = source(store, NoWindowProbe("unused"), Session("wayland", "sway"), health)
    assert [src.step() for _ in range(3)] == ["unavailable"] * 3
    h = health.snapshot()
    assert h["screen"].startswith("unavailable: sway needs `grim`") and h["screen_backend"] == "none"
    assert h["errors"] == 1 and "apt-get install grim" in h["recent_errors"][0]


def test_no_window_probe_means_no_grab(store):
    health, grabber = Health(), CountingGrabber()
    src = source(store, default_probe(Session("wayland", "wlroots")), Session("wayland", "wlroots"), health)
    src._grab = grabber
    assert [src.step() for _ in range(3)] == ["excluded"] * 3
    assert grabber.grabs == 0
    assert health.snapshot()["errors"] == 1


# ---- what the screen source grabs: never a window it did not check ---------------------------------------


LEFT = {"left": 0, "top": 0, "width": 64, "height": 48}
RIGHT = {"left": 64, "top": 0, "width": 64, "height": 48}


class TwoOutputGrabber:
    """Two 64x48 outputs side by side; records each region grabbed."""

    monitors = [bounding_box([LEFT, RIGHT]), LEFT, RIGHT]
    reads_whole_screen = False

    def __init__(self) -> None:
        self.regions: list[dict] = []

    def grab(self, region):
        self.regions.append(region)
        return Shot.from_rgb(np.full((region["height"], region["width"], 3), 255, np.uint8))

    def close(self) -> None:
        pass


class FakeProbe(WindowProbe):
    """The focused window, and the windows showing (None: this desktop cannot list them; OSError: the call fails)."""

    name = "fake"

    def __init__(self, win: WindowInfo | None, shown=None) -> None:
        self.win, self.shown = win, shown

    def _active(self):
        return self.win

    def _visible(self):
        if isinstance(self.shown, Exception):
            raise self.shown
        return self.shown


def editor(rect: dict | None = RIGHT, wid: int = 1) -> WindowInfo:
    return WindowInfo(app="scribbler", title="notes", id=wid, **(rect or {}))


def keepass(rect: dict | None = LEFT) -> WindowInfo:
    return WindowInfo(app="org.keepassxc.KeePassXC", title="Passwords.kdbx", id=9, **(rect or {}))


def run(store, probe, prefer: bool = True, whole: bool = False):
    """One cycle: (outcome, regions grabbed, health's excluded_reason)."""
    health, grabber = Health(), TwoOutputGrabber()
    grabber.reads_whole_screen = whole
    src = ScreenSource(store.home, CaptureConfig(prefer_active_window=prefer), privacy(), Redactor(), None, health,
                       ocr=None, probe=probe, session=Session("wayland", "sway"))
    src._grab = grabber
    out = src.step()
    return out, grabber.regions, health.snapshot()["excluded_reason"]


def test_no_focused_window_grabs_nothing(store):
    # An empty workspace or output, GNOME's overview: every monitor would be grabbed, whatever shows there.
    for shown in (None, [keepass()], []):
        assert run(store, FakeProbe(None, shown)) == ("excluded", [], "no focused window")


def test_where_windows_cannot_be_listed_only_the_focused_windows_monitor_is_grabbed(store):
    assert run(store, FakeProbe(editor()), prefer=True)[:2] == ("queued", [RIGHT])
    assert run(store, FakeProbe(editor()), prefer=False)[:2] == ("queued", [RIGHT])  # not LEFT: never checked
    straddling = {"left": 32, "top": 0, "width": 64, "height": 48}
    assert run(store, FakeProbe(editor(straddling)), prefer=False)[:2] == ("queued", [LEFT, RIGHT])
    assert run(store, FakeProbe(editor(None)), prefer=True)[:2] == ("queued", [LEFT, RIGHT])  # rectangle unknown


def test_where_windows_are_listed_no_grab_takes_in_an_excluded_one(store):
    # KeePassXC shows on the left output, the editor has focus on the right one.
    assert run(store, FakeProbe(editor(), [editor(), keepass()]), prefer=False)[:2] == ("queued", [RIGHT])
    assert run(store, FakeProbe(editor(), [editor(), keepass()]), prefer=True)[:2] == ("queued", [RIGHT])
    # ... floating over the editor: nothing.
    over = {"left": 70, "top": 10, "width": 30, "height": 20}
    assert run(store, FakeProbe(editor(), [editor(), keepass(over)])) == (
        "excluded", [], "an excluded window is showing where the grab would read")
    # ... where the desktop does not say: anywhere.
    assert run(store, FakeProbe(editor(), [editor(), keepass(None)]))[:2] == ("excluded", [])
    # A private browser window is excluded by its title, wherever it shows.
    private = WindowInfo(app="firefox", title="New Private Browsing - Mozilla Firefox", **RIGHT)
    assert run(store, FakeProbe(editor(LEFT), [editor(LEFT), private]), prefer=False)[:2] == ("queued", [LEFT])
    # The portal writes the whole screen to a file whatever region is wanted: any excluded window stops it.
    assert run(store, FakeProbe(editor(), [editor(), keepass()]), whole=True)[:2] == ("excluded", [])
    assert run(store, FakeProbe(editor(), [editor()]), whole=True)[:2] == ("queued", [RIGHT])


def test_failed_window_listing_grabs_nothing(store):
    out, regions, reason = run(store, FakeProbe(editor(), OSError("sway went away")))
    assert (out, regions, reason) == ("excluded", [], "active window unknown (probe failed)")


# ---- Hyprland: its JSON from a real socket --------------------------------------------------------------


class FakeHyprland:
    """Answers Hyprland's `j/<command>` requests, one per connection, like Hyprland's .socket.sock."""

    def __init__(self, runtime, signature: str, replies: dict[str, object]) -> None:
        d = runtime / "hypr" / signature
        d.mkdir(parents=True)
        self.replies, self.requests, self.path = replies, [], d / ".socket.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        self.sock.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                req = c.recv(1024).decode()
                self.requests.append(req)
                c.sendall(json.dumps(self.replies[req.removeprefix("j/")]).encode())

    def close(self) -> None:
        """Hyprland gone: the socket stops listening and its file goes away."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in the serving thread
        except OSError:
            pass
        self.sock.close()
        self.path.unlink(missing_ok=True)


KEEPASS_WINDOW = {"address": "0x55d0c3a1b2c0", "mapped": True, "at": [1930, 40], "size": [1200, 800],
                  "class": "org.keepassxc.KeePassXC", "title": "Passwords.kdbx - KeePassXC",
                  "initialClass": "org.keepassxc.KeePassXC", "pid": 0, "xwayland": False}


EDITOR_WINDOW = {"address": "0x1", "mapped": True, "hidden": False, "at": [10, 10], "size": [600, 400],
                 "class": "scribbler", "title": "notes", "initialClass": "scribbler", "pid": 0}


@pytest.fixture
def hyprland(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.setenv("HYPRLAND_INSTANCE_SIGNATURE", "v0.41_1717000000_abcd")
    fake = FakeHyprland(tmp_path, "v0.41_1717000000_abcd", {
        "activewindow": KEEPASS_WINDOW,
        "monitors": [{"name": "eDP-1", "x": 0, "y": 0, "width": 2880, "height": 1800, "scale": 2.0, "transform": 0,
                      "activeWorkspace": {"id": 1, "name": "1"}, "specialWorkspace": {"id": 0, "name": ""}},
                     {"name": "DP-1", "x": 1440, "y": 0, "width": 1080, "height": 1920, "scale": 1.0,
                      "transform": 1, "disabled": False, "activeWorkspace": {"id": 2, "name": "2"},
                      "specialWorkspace": {"id": -98, "name": "special:magic"}}],
        "clients": [dict(KEEPASS_WINDOW, workspace={"id": 2, "name": "2"}),
                    dict(EDITOR_WINDOW, workspace={"id": 1, "name": "1"}),
                    dict(EDITOR_WINDOW, address="0x2", title="on workspace 3", workspace={"id": 3, "name": "3"}),
                    dict(EDITOR_WINDOW, address="0x3", title="scratchpad", workspace={"id": -98, "name": "special"}),
                    dict(EDITOR_WINDOW, address="0x4", title="hidden tab", hidden=True,
                         workspace={"id": 1, "name": "1"})]})
    yield fake
    fake.close()


def test_hyprland_active_window_and_outputs(hyprland):
    probe = default_probe(Session("wayland", "hyprland"))
    assert probe.name == "hyprland (IPC)"
    w = probe.active()
    assert (w.app, w.title, w.region) == ("org.keepassxc.KeePassXC", "Passwords.kdbx - KeePassXC",
                                          {"left": 1930, "top": 40, "width": 1200, "height": 800})
    assert privacy().excluded(w)
    # Pixels / scale, and a rotated monitor's sides swapped: the layout grim's -g takes.
    assert probe.outputs() == [{"left": 0, "top": 0, "width": 1440, "height": 900},
                               {"left": 1440, "top": 0, "width": 1920, "height": 1080}]
    assert hyprland.requests == ["j/activewindow", "j/monitors"]
    # The windows showing: those on a workspace a monitor shows (its active or special one), not hidden.
    assert [w.title for w in probe.visible()] == ["Passwords.kdbx - KeePassXC", "notes", "scratchpad"]
    hyprland.replies["activewindow"] = {}  # nothing focused (an empty workspace)
    assert probe.active() is None and probe.failures == 0


def test_hyprland_gone_is_a_counted_failure(hyprland):
    probe = default_probe(Session("wayland", "hyprland"))
    hyprland.close()
    assert probe.active() is None
    assert probe.failures == 1 and probe.last_error


def test_hyprland_without_its_socket_has_no_probe(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("HYPRLAND_INSTANCE_SIGNATURE", raising=False)
    probe = default_probe(Session("wayland", "hyprland"))
    assert not probe.available and "HYPRLAND_INSTANCE_SIGNATURE is not set" in probe.reason


# ---- KWin and GNOME Shell: stand-ins on a private D-Bus bus -----------------------------------------------


@pytest.fixture
def bus(monkeypatch):
    why = missing_dbus()
    if why:
        pytest.skip(why)
    b = PrivateBus()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", b.address)
    yield b
    b.stop()


class FakeKWin:
    """org.kde.KWin's /Scripting. `run` does what Mirador's script does in KWin: call Active(...) back.

    The callback's target is read from the script KWin was given, so a script naming the wrong
    service or method would make the probe never learn the window.
    """

    def __init__(self, address: str, window: tuple[str, ...] | None, script_object: str = "/Scripting/Script{}",
                 report: bool = True) -> None:
        self.window, self.report, self.scripts, self.loaded = window, report, {}, set()
        self.script_object = script_object
        handlers = {
            ("/Scripting", "isScriptLoaded"): lambda name: ("b", (name in self.loaded,)),
            ("/Scripting", "loadScript"): self._load,
            ("/Scripting", "unloadScript"): lambda name: (self.loaded.discard(name), ("b", (True,)))[1],
        }
        for i in range(3):
            handlers[(script_object.format(i), "run")] = lambda i=i: self._run(i)
        self.svc = FakeService(address, "org.kde.KWin", handlers)

    def _load(self, path: str, name: str):
        with open(path, encoding="utf-8") as f:
            self.scripts[name] = f.read()
        self.loaded.add(name)
        return "i", (len(self.loaded) - 1,)

    def _run(self, i: int):
        if self.report:
            self.activate(self.window, from_service_thread=True)

    def activate(self, window: tuple[str, ...] | None, from_service_thread: bool = False) -> None:
        """What the script's report() sends when `window` gets focus (None: no window)."""
        from jeepney import DBusAddress, new_method_call

        script = next(iter(self.scripts.values()))
        service, path, iface, member = re.search(r"var MIRADOR = \[(.*?)\];", script).group(1).replace('"', "").split(", ")
        args = window or ("", "", "", "0", "", "", "", "")
        msg = new_method_call(DBusAddress(path, service, iface), member, "s" * 8, args)
        if from_service_thread:
            self.svc.conn.send(msg)
        else:
            self.svc.do(lambda conn: conn.send(msg))


EDITOR = ("org.kde.kate", "kate", "notes.md — Kate", "0", "10.0", "20.0", "1200.0", "800.0")  # KWin 6: reals
KEEPASS = ("org.keepassxc.KeePassXC", "keepassxc", "Passwords.kdbx - KeePassXC", "0", "0", "0", "900", "700")


def wait_until(cond, timeout: float = 5.0):
    from tests.capture.xdisplay import wait_for

    return wait_for(cond, timeout, what="the probe to see the change")


@pytest.mark.parametrize("script_object", ["/Scripting/Script{}", "/{}"])  # KWin 5.23+ and older
def test_kwin_script_reports_the_active_window(bus, script_object, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    kwin = FakeKWin(bus.address, EDITOR, script_object)
    try:
        probe = default_probe(Session("wayland", "kde"))
        assert probe.name == "kde (KWin script)", getattr(probe, "reason", "")
        script = kwin.scripts["mirador-active-window"]
        for api in ("workspace.windowActivated", "workspace.clientActivated", "captionChanged", "callDBus"):
            assert api in script
        assert list(tmp_path.iterdir()) == [], "the script file is removed once KWin has it"
        w = wait_until(probe.active)
        assert (w.app, w.title, w.region) == ("org.kde.kate", "notes.md — Kate",
                                              {"left": 10, "top": 20, "width": 1200, "height": 800})
        kwin.activate(KEEPASS)
        assert privacy().excluded(wait_until(lambda: (w := probe.active()) and w.app != "org.kde.kate" and w))
        kwin.activate(None)
        wait_until(lambda: probe.active() is None)
        assert probe.failures == 0
        probe.close()
        assert kwin.loaded == set(), "the script is unloaded when capture stops"
    finally:
        kwin.svc.stop()


def test_kwin_unknown_until_the_script_reports(bus):
    kwin = FakeKWin(bus.address, EDITOR, report=False)
    try:
        probe = default_probe(Session("wayland", "kde"))
        assert probe.active() is None and probe.failures == 1  # unknown, counted: the screen source fails closed
        assert "not reported" in probe.last_error
        probe.close()
    finally:
        kwin.svc.stop()


IMPOSTOR = """
import sys
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
conn = open_dbus_connection(sys.argv[1])
where = DBusAddress("/org/mirador/ActiveWindow", sys.argv[2], "org.mirador.ActiveWindow")
reply = conn.send_and_get_reply(new_method_call(where, "Active", "s" * 8, tuple(sys.argv[3:])), timeout=5)
print(reply.header.fields.get(4) or "accepted")  # 4: the error name
"""


def test_kwin_reports_from_anyone_but_kwin_are_ignored(bus):
    import subprocess
    import sys

    kwin = FakeKWin(bus.address, KEEPASS)
    try:
        probe = default_probe(Session("wayland", "kde"))
        assert privacy().excluded(wait_until(probe.active))
        # Another program on the session bus claims an ordinary window has focus while KeePassXC does.
        out = subprocess.run([sys.executable, "-c", IMPOSTOR, bus.address, probe._listen.unique_name, *EDITOR],
                             capture_output=True, text=True, timeout=30)
        assert out.stdout.strip() == "org.freedesktop.DBus.Error.AccessDenied", out.stderr
        assert probe.active().app == "org.keepassxc.KeePassXC" and privacy().excluded(probe.active())
        kwin.activate(EDITOR)  # KWin itself is still believed
        wait_until(lambda: (w := probe.active()) and w.app == "org.kde.kate")
        probe.close()
    finally:
        kwin.svc.stop()


def test_kwin_leaving_the_bus_makes_the_window_unknown(bus):
    kwin = FakeKWin(bus.address, EDITOR)
    probe = default_probe(Session("wayland", "kde"))
    try:
        assert wait_until(probe.active).app == "org.kde.kate"
        kwin.svc.stop()  # KWin quits or restarts: the script it ran is gone, no report will come again
        wait_until(lambda: probe.active() is None and probe.failures > 0)
        assert "KWin left the session bus" in probe.last_error
    finally:
        probe.close()


def test_kwin_missing_means_no_probe(bus):
    probe = default_probe(Session("wayland", "kde"))
    assert not probe.available and "KWin did not run Mirador's active-window script" in probe.reason


WINDOWS = [
    {"in_current_workspace": True, "wm_class": "firefox", "wm_class_instance": "firefox", "pid": 0, "id": 11,
     "title": "Mozilla Firefox", "focus": False, "x": 0, "y": 0, "width": 800, "height": 600},
    {"in_current_workspace": True, "wm_class": "org.gnome.TextEditor", "wm_class_instance": "gnome-text-editor",
     "pid": 0, "id": 12, "title": "todo.txt", "focus": True, "x": 40, "y": 30, "width": 1000, "height": 700},
]


def gnome_shell(address: str, windows: list[dict]) -> FakeService:
    obj = "/org/gnome/Shell/Extensions/Windows"
    by_id = {w["id"]: w for w in WINDOWS}
    return FakeService(address, "org.gnome.Shell", {
        (obj, "List"): lambda: ("s", (json.dumps(windows),)),
        (obj, "GetTitle"): lambda wid: ("s", (by_id[wid]["title"],)),
        (obj, "GetFrameRect"): lambda wid: ("s", (json.dumps({k: by_id[wid][k] for k in ("x", "y", "width", "height")}),)),
    })


@pytest.mark.parametrize("trimmed", [False, True])  # releases whose List() leaves title and frame out
def test_gnome_window_calls_extension(bus, trimmed):
    windows = [{k: v for k, v in w.items() if not trimmed or k not in ("title", "x", "y", "width", "height")}
               for w in WINDOWS]
    shell = gnome_shell(bus.address, windows)
    try:
        probe = default_probe(Session("wayland", "gnome"))
        assert probe.name == "gnome (Window Calls extension)", getattr(probe, "reason", "")
        w = probe.active()
        assert (w.app, w.wm_class, w.title, w.region) == (
            "org.gnome.TextEditor", "gnome-text-editor", "todo.txt", {"left": 40, "top": 30, "width": 1000, "height": 700})
        windows[1]["focus"] = False  # the Shell's own overview or an empty workspace
        assert probe.active() is None
        probe.close()
    finally:
        shell.stop()


def test_gnome_without_the_extension_says_how_to_get_it(bus):
    shell = FakeService(bus.address, "org.gnome.Shell", {})  # GNOME Shell, no Window Calls
    try:
        probe = default_probe(Session("wayland", "gnome"))
        assert not probe.available
        assert "window-calls@domandoman.xyz" in probe.reason and "UnknownMethod" in probe.reason
    finally:
        shell.stop()


# ---- the Screenshot portal refusing ---------------------------------------------------------------------


def test_portal_refusal_and_missing_portal_say_what_to_do(bus, monkeypatch):
    from capture.wayland.portal import PortalGrabber

    with pytest.raises(GrabUnavailable, match="offers no Screenshot.*xdg-desktop-portal"):
        PortalGrabber()
    desktop = "/org/freedesktop/portal/desktop"
    svc = FakeService(bus.address, "org.freedesktop.portal.Desktop", {
        (desktop, "Get"): lambda iface, prop: ("v", (("u", 2),)),  # the Screenshot portal's version
    })
    try:
        grabber = PortalGrabber()
        # The Response comes on a request path named after the caller's connection.
        svc.handlers[(desktop, "Screenshot")] = _screenshot_for(svc, grabber, 1)
        with pytest.raises(GrabError, match="declined.*allow screenshots for Mirador"):
            grabber.grab({"left": 0, "top": 0, "width": 10, "height": 10})
        grabber.close()
    finally:
        svc.stop()


def _screenshot_for(svc: FakeService, grabber, response: int):
    from jeepney import DBusAddress, new_signal

    def screenshot(parent, options):
        assert options["interactive"] == ("b", False)
        path = f"{grabber._request_ns}/{options['handle_token'][1]}"
        svc.conn.send(new_signal(DBusAddress(path, interface="org.freedesktop.portal.Request"), "Response",
                                 "ua{sv}", (response, {})))
        return "o", (path,)

    return screenshot


def test_portal_screenshot_file_is_deleted_even_when_unreadable(tmp_path):
    from capture.wayland.portal import _read_and_delete

    bad = tmp_path / "Screenshot.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(GrabError, match="cannot read the portal's screenshot"):
        _read_and_delete(bad.as_uri())
    assert not bad.exists()
    with pytest.raises(GrabError, match="not a local file"):
        _read_and_delete("https://example.invalid/x.png")
    assert os.listdir(tmp_path) == []


class FakePortal:
    """org.freedesktop.portal.Desktop's Screenshot: each request gets a PNG file (a gradient, so crops can be
    checked) and a Response naming it, at once or when `answer_last()` is called."""

    DESKTOP = "/org/freedesktop/portal/desktop"

    def __init__(self, address: str, folder, size: tuple[int, int] = (160, 120)) -> None:
        self.folder, self.size, self.answer = folder, size, True
        self.requests: list[str] = []
        self.closed: list[str] = []
        self.ns = ""  # the grabber's request namespace, set once it is made
        self.svc = FakeService(address, "org.freedesktop.portal.Desktop", {
            (self.DESKTOP, "Get"): lambda iface, prop: ("v", (("u", 2),)),
            (self.DESKTOP, "Screenshot"): self._screenshot,
        })

    def png(self, name: str):
        from PIL import Image

        w, h = self.size
        x, y = np.meshgrid(np.arange(w), np.arange(h))
        path = self.folder / name
        Image.fromarray(np.dstack([x % 256, y % 256, np.zeros_like(x)]).astype(np.uint8)).save(path)
        return path

    def _screenshot(self, parent, options):
        path = f"{self.ns}/{options['handle_token'][1]}"
        self.requests.append(path)
        self.svc.handlers[(path, "Close")] = lambda: self.closed.append(path)
        if self.answer:
            self._respond(self.svc.conn, path)
        return "o", (path,)

    def _respond(self, conn, path: str):
        from jeepney import DBusAddress, new_signal

        f = self.png(f"Screenshot-{len(self.requests)}.png")
        conn.send(new_signal(DBusAddress(path, interface="org.freedesktop.portal.Request"), "Response", "ua{sv}",
                             (0, {"uri": ("s", f.as_uri())})))
        return f

    def answer_last(self):
        """Answer the last request now (late); returns the file it names."""
        out = []
        self.svc.do(lambda conn: out.append(self._respond(conn, self.requests[-1])))
        return out[0]


@pytest.fixture
def fake_portal(bus, tmp_path):
    folder = tmp_path / "Pictures"
    folder.mkdir()
    p = FakePortal(bus.address, folder)
    yield p
    p.svc.stop()


def portal_grabber(fake: FakePortal, **kw):
    from capture.wayland.portal import PortalGrabber

    g = PortalGrabber(**kw)
    fake.ns = g._request_ns
    return g


REGION = {"left": 40, "top": 30, "width": 40, "height": 30}


def pixel(shot, x: int, y: int) -> tuple[int, int]:
    """(red, green) of a shot's pixel: the fake screenshot's x and y where it came from."""
    bgra = np.frombuffer(shot.raw, np.uint8).reshape(shot.height, shot.width, 4)
    return int(bgra[y, x, 2]), int(bgra[y, x, 1])


def test_portal_scales_to_the_probes_outputs_and_takes_one_screenshot_a_grab(fake_portal):
    from capture.grab import open_grabber

    # A 2x screen: the layout (the probe's outputs) is 80x60, the screenshot 160x120 pixels.
    outs = [{"left": 0, "top": 0, "width": 80, "height": 60}]
    g = open_grabber("portal", Session("wayland", "sway"), outputs=lambda: outs)
    fake_portal.ns = g._request_ns
    try:
        assert g.monitors == [outs[0], outs[0]] and fake_portal.requests == []  # the layout costs no screenshot
        shot = g.grab(REGION)
        assert shot.size == (80, 60) and pixel(shot, 0, 0) == (80, 60) and len(fake_portal.requests) == 1
    finally:
        g.close()
    # Without outputs (GNOME, KDE): the first screenshot tells the size and is also the first grab's image.
    g = portal_grabber(fake_portal)
    try:
        assert g.monitors[0] == {"left": 0, "top": 0, "width": 160, "height": 120}
        assert len(fake_portal.requests) == 2
        shot = g.grab(REGION)
        assert shot.size == (40, 30) and pixel(shot, 0, 0) == (40, 30) and len(fake_portal.requests) == 2
        g.grab(REGION)
        assert len(fake_portal.requests) == 3
    finally:
        g.close()
    assert list(fake_portal.folder.iterdir()) == []  # every screenshot file deleted


def test_portal_answer_after_the_timeout_has_its_file_deleted(fake_portal):
    g = portal_grabber(fake_portal, outputs=lambda: [{"left": 0, "top": 0, "width": 160, "height": 120}],
                       timeout=0.5)
    try:
        fake_portal.answer = False
        with pytest.raises(GrabError, match="did not answer within"):
            g.grab(REGION)
        # While that request is unanswered (a permission dialog may be up) no other is sent.
        with pytest.raises(GrabError, match="has not answered a request sent"):
            g.grab(REGION)
        assert len(fake_portal.requests) == 1
        late = fake_portal.answer_last()  # the person allowed it at last: the portal writes the file
        fake_portal.answer = True
        assert pixel(g.grab(REGION), 0, 0) == (40, 30)  # deletes the late file, then asks again
        assert not late.exists() and len(fake_portal.requests) == 2
        # A late answer after capture stopped: close() waits for it a moment and deletes its file.
        fake_portal.answer = False
        with pytest.raises(GrabError, match="did not answer within"):
            g.grab(REGION)
        threading.Timer(0.2, fake_portal.answer_last).start()
    finally:
        g.close()
    assert list(fake_portal.folder.iterdir()) == []


def test_portal_request_unanswered_too_long_is_closed(fake_portal, monkeypatch):
    import capture.wayland.portal as portal

    g = portal_grabber(fake_portal, timeout=0.3)
    try:
        fake_portal.answer = False
        with pytest.raises(GrabError, match="did not answer within"):
            g.grab(REGION)
        first = fake_portal.requests[0]
        monkeypatch.setattr(portal, "GIVE_UP_AFTER", 0.0)
        fake_portal.answer = True
        g.grab(REGION)
        assert fake_portal.closed == [first] and len(fake_portal.requests) == 2
    finally:
        g.close()


def test_portal_answers_from_anyone_but_the_portal_are_ignored(fake_portal, tmp_path):
    from jeepney import DBusAddress, HeaderFields, new_signal
    from jeepney.io.blocking import open_dbus_connection

    victim = tmp_path / "thesis.odt"
    victim.write_text("years of work")
    g = portal_grabber(fake_portal, outputs=lambda: [{"left": 0, "top": 0, "width": 160, "height": 120}])
    impostor = open_dbus_connection(os.environ["DBUS_SESSION_BUS_ADDRESS"])
    try:
        def lie(path: str) -> None:
            msg = new_signal(DBusAddress(path, interface="org.freedesktop.portal.Request"), "Response", "ua{sv}",
                             (0, {"uri": ("s", victim.as_uri())}))
            msg.header.fields[HeaderFields.destination] = g._conn.unique_name
            impostor.send(msg)

        lie(f"{g._request_ns}/mirador0000")  # a "late answer" to a request never made
        # ... and to the request being made, before the portal's own answer and after it.
        real = fake_portal._screenshot

        def screenshot(parent, options):
            lie(f"{g._request_ns}/{options['handle_token'][1]}")
            out = real(parent, options)
            lie(f"{g._request_ns}/{options['handle_token'][1]}")
            return out

        fake_portal.svc.handlers[(FakePortal.DESKTOP, "Screenshot")] = screenshot
        assert pixel(g.grab(REGION), 0, 0) == (40, 30)  # the portal's screenshot, not the impostor's file
        g._collect(0.3)  # the lie sent after the portal's answer
        assert victim.read_text() == "years of work"
    finally:
        impostor.close()
        g.close()
