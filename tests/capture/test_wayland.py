"""Screen capture on a real Wayland compositor: headless sway, real foot windows, grim or the portal,
real tesseract, real store. What must not happen is checked by running grim through a wrapper that logs
every call: an excluded or unknown window must not cause a single grab.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from capture.runner import Capture
from tests.capture.test_screen import SECRET_WORDS, norm, sentence
from tests.capture.wayland_session import PortalBus, SwaySession, missing_portal, missing_tools
from tests.capture.xdisplay import frame_files, wait_for
from tests.conftest import files_containing

pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=str(missing_tools()))

SESSION_VARS = ("WAYLAND_DISPLAY", "SWAYSOCK", "XDG_RUNTIME_DIR", "XDG_CURRENT_DESKTOP", "XDG_SESSION_TYPE")


@pytest.fixture(scope="module")
def sway():
    s = SwaySession()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def sway2():
    s = SwaySession(outputs=2)
    yield s
    s.stop()


@pytest.fixture
def wayland(sway, monkeypatch, tmp_path):
    """This test runs inside the sway session (no DISPLAY: nothing may fall back to X11), with grim logged."""
    yield from enter(sway, monkeypatch, tmp_path)


@pytest.fixture
def wayland2(sway2, monkeypatch, tmp_path):
    """As `wayland`, in the sway with two outputs side by side (HEADLESS-1 left, HEADLESS-2 right)."""
    yield from enter(sway2, monkeypatch, tmp_path)


def enter(sway, monkeypatch, tmp_path):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("HYPRLAND_INSTANCE_SIGNATURE", raising=False)
    for k in SESSION_VARS:
        monkeypatch.setenv(k, sway.env[k])
    bin_dir, log = tmp_path / "bin", tmp_path / "grim-calls.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "grim"
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("grim")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    sway.grim_log = log
    yield sway
    sway.close_windows()
    sway.command("focus output HEADLESS-1")


def grim_calls(sway) -> list[str]:
    log: Path = sway.grim_log
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def capture(store, ocr, wayland):
    cap = Capture(store, audio=False, ocr=ocr)
    yield cap
    cap.stop()


def evidence(store) -> list[dict]:
    return store.list("evidence", limit=1000)


def test_sway_window_becomes_evidence_with_app_and_title(capture, store, wayland, mirador_home):
    text = sentence()
    wayland.window("Quarterly notes - draft.txt", text, app_id="scribbler")
    capture.run_cycles(3)
    rows = [r for r in evidence(store) if norm(text) in norm(r["text"])]
    assert len(rows) == 1, [r["text"] for r in evidence(store)]
    row = rows[0]
    assert (row["source"], row["app"], row["window"]) == ("screen", "scribbler", "Quarterly notes - draft.txt")
    assert row["frame_path"] and (mirador_home / row["frame_path"]).is_file()
    h = capture.health.snapshot()
    assert h["session"] == "wayland (sway)"
    assert h["screen_backend"] == "grim (wlroots screencopy)" and h["window_probe"] == "sway (IPC)"
    assert h["errors"] == 0, h["recent_errors"]
    # Only the focused window's rectangle is read, one grim call per cycle.
    assert grim_calls(wayland) == ["-t ppm -g 0,0 1280x800 -"] * 3


def test_status_and_doctor_name_the_session_grabber_and_probe(capture, wayland, mirador_home, capsys):
    from types import SimpleNamespace

    from desktop.cli.capture import cmd_status
    from desktop.cli.doctor import check_screen

    wayland.window("Doctor check", sentence())
    capture.run_cycles(1)
    capture.health.save(mirador_home)
    cmd_status(SimpleNamespace(json=False))
    assert "screen on (wayland (sway), pixels by grim (wlroots screencopy)) · audio off · window probe sway (IPC)" in (
        capsys.readouterr().out)
    status, detail, _ = check_screen()
    assert status == "ok", detail
    assert detail == ("wayland (sway): pixels by grim (wlroots screencopy) (1 output(s)); focused window by sway (IPC) "
                      "(now: scribbler — 'Doctor check')")


def test_doctor_warns_where_no_probe_can_tell_the_window(wayland, monkeypatch):
    from desktop.cli.doctor import check_screen

    monkeypatch.delenv("SWAYSOCK")
    monkeypatch.setenv("XDG_CURRENT_DESKTOP", "river")
    status, detail, fix = check_screen()
    assert status == "WARN" and "tells no program which window has focus" in detail and "nothing is grabbed" in detail
    assert "docs/capture-and-privacy.md" in fix
    monkeypatch.setenv("PATH", "/nonexistent")  # and without grim
    status, detail, _ = check_screen()
    assert status == "WARN" and "apt-get install grim" in detail


@pytest.mark.parametrize("title,app_id", [
    ("Vault", "bitwarden"),  # excluded by its Wayland app_id
    ("Passwords", "org.keepassxc.KeePassXC"),  # by a part of a reverse-DNS app_id
    ("KeePassXC - Passwords.kdbx", "scribbler"),  # by the title pattern
    ("New Private Browsing - Mozilla Firefox", "firefox"),
])
def test_excluded_window_on_sway_is_never_grabbed(capture, store, wayland, mirador_home, title, app_id):
    wayland.window("Ordinary editor", sentence())
    capture.run_cycles(2)
    frames_before, calls_before = frame_files(mirador_home), len(grim_calls(wayland))
    assert frames_before and calls_before == 2

    secret = sentence(words=SECRET_WORDS)
    wayland.window(title, secret, app_id=app_id)
    assert capture.run_cycles(5) == ["excluded"] * 5

    assert len(grim_calls(wayland)) == calls_before, "grim ran while an excluded window had focus"
    assert capture.health.snapshot()["frames_excluded"] == 5
    assert frame_files(mirador_home) == frames_before
    assert not any(norm(secret) in norm(r["text"]) for r in evidence(store))
    for word in SECRET_WORDS:
        assert not files_containing(mirador_home, word), f"{word!r} from the excluded window is in a file"


KEEPASS_TITLE, KEEPASS_APP = "Passwords.kdbx - KeePassXC", "org.keepassxc.KeePassXC"


def open_keepass(sway) -> str:
    """A KeePassXC stand-in (its Wayland app id) showing secret words, on the focused output; returns the words."""
    secret = sentence(words=SECRET_WORDS)
    sway.window(KEEPASS_TITLE, secret, app_id=KEEPASS_APP)
    return secret


def assert_never_stored(store, mirador_home, secret: str) -> None:
    assert not any(norm(secret) in norm(r["text"]) for r in evidence(store))
    for word in secret.split():
        assert not files_containing(mirador_home, word), f"{word!r} from the excluded window is in a file"


def focus(sway, title: str | None) -> None:
    """Wait until sway's focus is on the window titled `title` (None: on no window)."""
    def there() -> bool:
        w = sway.focused()
        return w is None if title is None else (w is not None and w.title == title)

    wait_for(there, 10, what=f"focus on {title or 'no window'}")


def test_no_focused_window_grabs_nothing_though_another_output_shows_an_excluded_one(store, ocr, wayland2,
                                                                                     mirador_home):
    # KeePassXC shows on HEADLESS-1; focus moves to the empty HEADLESS-2. "No window" used to read as "allowed",
    # and every monitor was grabbed: KeePassXC's text was stored.
    secret = open_keepass(wayland2)
    wayland2.command("focus output HEADLESS-2")
    focus(wayland2, None)
    assert [w.app for w in wayland2.visible()] == [KEEPASS_APP]
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        assert cap.run_cycles(3) == ["excluded"] * 3
    finally:
        cap.stop()
    h = cap.health.snapshot()
    assert (h["excluded_reason"], h["frames_excluded"], h["frames_grabbed"]) == ("no focused window", 3, 0)
    assert grim_calls(wayland2) == [] and evidence(store) == []
    assert_never_stored(store, mirador_home, secret)


def test_monitors_are_grabbed_only_where_no_excluded_window_shows(store, ocr, wayland2, mirador_home):
    secret = open_keepass(wayland2)  # on HEADLESS-1
    wayland2.command("focus output HEADLESS-2")
    text = sentence(3)
    wayland2.window("Field notes", text)  # on HEADLESS-2, focused
    store.config.capture.prefer_active_window = False  # each monitor, not the focused window's rectangle
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        assert cap.run_cycles(2) == ["queued", "unchanged"]
    finally:
        cap.stop()
    # HEADLESS-1, where KeePassXC shows, is never read; HEADLESS-2 is.
    assert grim_calls(wayland2) == ["-t ppm -g 1280,0 1280x800 -"] * 2
    rows = evidence(store)
    assert len(rows) == 1 and norm(text) in norm(rows[0]["text"]) and rows[0]["app"] == "scribbler"
    assert_never_stored(store, mirador_home, secret)


def test_excluded_window_floating_over_the_focused_one_stops_the_grab(capture, store, wayland, mirador_home):
    wayland.window("Ordinary editor", sentence())
    capture.run_cycles(1)
    calls = len(grim_calls(wayland))
    secret = open_keepass(wayland)
    wayland.command(f'[app_id="{KEEPASS_APP}"] floating enable, resize set 700 400, move position center')
    wayland.command("focus tiling")  # the editor has focus; KeePassXC floats over the middle of it
    focus(wayland, "Ordinary editor")
    wayland.wait_painted()
    assert capture.run_cycles(3) == ["excluded"] * 3
    h = capture.health.snapshot()
    assert h["excluded_reason"] == "an excluded window is showing where the grab would read"
    assert len(grim_calls(wayland)) == calls
    assert_never_stored(store, mirador_home, secret)


def test_excluded_window_beside_the_focused_one(store, ocr, wayland, mirador_home):
    text = sentence(3)
    wayland.window("Ordinary editor", text)
    secret = open_keepass(wayland)  # tiled beside the editor: each has half the output
    wayland.command("focus left")
    focus(wayland, "Ordinary editor")
    wayland.wait_painted()
    r = wayland.focused().region
    assert r["width"] < 1280
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        # The editor's own rectangle holds nothing of KeePassXC: it is read.
        assert cap.run_cycles(2) == ["queued", "unchanged"]
        assert grim_calls(wayland) == [f"-t ppm -g {r['left']},{r['top']} {r['width']}x{r['height']} -"] * 2
        # The whole monitor would take KeePassXC in: not read.
        store.config.capture.prefer_active_window = False
        assert cap.run_cycles(2) == ["excluded"] * 2
        assert len(grim_calls(wayland)) == 2
    finally:
        cap.stop()
    rows = evidence(store)
    assert len(rows) == 1 and norm(text) in norm(rows[0]["text"])
    assert_never_stored(store, mirador_home, secret)


QT_WINDOW = """
import sys
from PySide6.QtWidgets import QLabel
from desktop.ui.app import new_qapp
app = new_qapp()
w = QLabel(sys.argv[1])
w.setWindowTitle("Edit memory")  # one of Mirador's windows whose title does not say Mirador
w.show()
app.exec()
"""


def test_miradors_own_qt_window_on_wayland_is_never_grabbed(capture, store, wayland, mirador_home):
    import subprocess
    import sys

    wayland.window("Ordinary editor", sentence())
    capture.run_cycles(1)
    calls_before = len(grim_calls(wayland))
    secret = sentence(words=SECRET_WORDS)
    env = dict(wayland.env, QT_QPA_PLATFORM="wayland", PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    qt = subprocess.Popen([sys.executable, "-c", QT_WINDOW, secret], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    wayland.windows.append(qt)
    w = wait_for(lambda: (w := wayland.focused()) is not None and w.title == "Edit memory" and w, 60,
                 what="the Qt window to take focus")
    assert w.app == "mirador"  # the Wayland app id Qt took from new_qapp()'s desktop file name
    assert capture.run_cycles(3) == ["excluded"] * 3
    assert len(grim_calls(wayland)) == calls_before
    assert not any(norm(secret) in norm(r["text"]) for r in evidence(store))


def test_unreachable_sway_ipc_means_nothing_is_grabbed(store, ocr, wayland, monkeypatch, tmp_path):
    wayland.window("Plain notes", sentence())
    monkeypatch.setenv("SWAYSOCK", str(tmp_path / "gone.sock"))  # the probe cannot ask sway: window unknown
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        assert cap.run_cycles(3) == ["excluded"] * 3
    finally:
        cap.stop()
    h = cap.health.snapshot()
    assert grim_calls(wayland) == [] and h["frames_grabbed"] == 0 and evidence(store) == []
    assert h["window_probe_failures"] == 3
    assert any("cannot reach sway" in e for e in h["recent_errors"]), h["recent_errors"]


def test_wayland_desktop_without_a_window_probe_grabs_nothing_and_says_why(store, ocr, wayland, monkeypatch):
    # river, Wayfire, labwc...: grim can read their pixels, but nothing tells which window has focus.
    monkeypatch.delenv("SWAYSOCK")
    monkeypatch.setenv("XDG_CURRENT_DESKTOP", "river")
    wayland.window("Plain notes", sentence())
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        assert cap.run_cycles(4) == ["excluded"] * 4
    finally:
        cap.stop()
    h = cap.health.snapshot()
    assert grim_calls(wayland) == [] and evidence(store) == []
    assert h["session"] == "wayland (wlroots)" and h["screen_backend"] == "grim (wlroots screencopy)"
    assert h["window_probe"].startswith("none: this Wayland desktop (wlroots) tells no program")
    assert h["errors"] == 1 and "nothing is grabbed" in h["recent_errors"][0]  # said once, not every cycle


@pytest.fixture
def portal(wayland, monkeypatch):
    why = missing_portal()
    if why:
        pytest.skip(why)
    bus = PortalBus(wayland)
    try:
        wait_for(bus.ready, 60, interval=0.5, what="the Screenshot portal on the test bus")
        monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.env["DBUS_SESSION_BUS_ADDRESS"])
        yield bus
    finally:
        bus.stop()


def test_portal_screenshot_on_sway_becomes_evidence_and_leaves_no_file(store, ocr, wayland, portal):
    from memory.config import Config

    text = sentence()
    wayland.window("Portal notes.txt", text, app_id="scribbler")
    store.config.capture.screen_backend = "portal"  # what GNOME and KDE get by default
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        cap.run_cycles(3)
    finally:
        cap.stop()
    rows = [r for r in evidence(store) if norm(text) in norm(r["text"])]
    assert len(rows) == 1, [r["text"] for r in evidence(store)]
    assert (rows[0]["app"], rows[0]["window"]) == ("scribbler", "Portal notes.txt")
    h = cap.health.snapshot()
    assert h["screen_backend"] == "xdg-desktop-portal (Screenshot)" and h["errors"] == 0, h["recent_errors"]
    assert grim_calls(wayland) == []  # the pixels came through the portal
    # The wlr backend writes each screenshot to /tmp/out.png, readable by others: Mirador deletes it at once.
    assert not Path("/tmp/out.png").exists()
    assert Config().capture.screen_backend == "auto"


def test_portal_reads_nothing_while_an_excluded_window_shows_anywhere(store, ocr, wayland, portal, mirador_home):
    # Whatever region is wanted, the portal writes the whole screen to a file (here /tmp/out.png, mode 0644):
    # with KeePassXC showing beside the focused window, no screenshot may be asked for.
    text = sentence(3)
    wayland.window("Portal notes.txt", text)
    secret = open_keepass(wayland)
    keepass = wayland.windows[-1]
    wayland.command("focus left")
    focus(wayland, "Portal notes.txt")
    store.config.capture.screen_backend = "portal"
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        assert cap.run_cycles(2) == ["excluded"] * 2
        h = cap.health.snapshot()
        assert h["excluded_reason"] == "an excluded window is showing where the grab would read"
        assert h["frames_grabbed"] == 0 and h["errors"] == 0, h["recent_errors"]
        keepass.terminate()
        keepass.wait(10)
        wait_for(lambda: [w.app for w in wayland.visible()] == ["scribbler"], 10, what="KeePassXC to close")
        focus(wayland, "Portal notes.txt")
        wayland.wait_painted()
        assert cap.run_cycles(2)[0] == "queued"
        # The screenshot's layout is sway's outputs (the probe's), not learned from a screenshot of its own.
        assert cap.screen._grab.monitors[1:] == wayland.ipc.outputs()
    finally:
        cap.stop()
    rows = [r for r in evidence(store) if norm(text) in norm(r["text"])]
    assert len(rows) == 1, [r["text"] for r in evidence(store)]
    assert_never_stored(store, mirador_home, secret)
    assert not Path("/tmp/out.png").exists()


def test_portal_screenshot_is_cropped_right_on_a_scaled_output(store, ocr, wayland, portal):
    # At scale 2 the layout is 640x400 and the portal's screenshot 1280x800 pixels: the window's rectangle
    # (layout coordinates) is scaled to the screenshot through the outputs sway reports. Unscaled, the crop
    # would be the screenshot's top-left quarter, cutting each line of the window below in half.
    lines = [sentence(4), sentence(4)]
    wayland.command("output HEADLESS-1 scale 2")
    try:
        wait_for(lambda: wayland.ipc.outputs()[0]["width"] == 640, 10, what="sway to scale the output")
        wayland.window("Scaled notes", "\n".join(lines))
        assert wayland.focused().region == {"left": 0, "top": 0, "width": 640, "height": 400}
        store.config.capture.screen_backend = "portal"
        cap = Capture(store, audio=False, ocr=ocr)
        try:
            assert cap.run_cycles(1) == ["queued"]
        finally:
            cap.stop()
    finally:
        wayland.command("output HEADLESS-1 scale 1")
        wait_for(lambda: wayland.ipc.outputs()[0]["width"] == 1280, 10, what="sway to unscale the output")
    text = norm(" ".join(r["text"] for r in evidence(store)))
    for line in lines:
        assert norm(line) in text, (line, text)
