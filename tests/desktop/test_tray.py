"""The tray docks in a real system tray (trayer under Xvfb) and drives capture from its menu."""

from __future__ import annotations

import plistlib

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QSystemTrayIcon

from desktop.runtime import autostart
from desktop.runtime.ports import read_health
from desktop.ui.browser_data import pending_count
from desktop.ui.tray import Tray
from tests.desktop.conftest import wait_idle
from tests.desktop.fakes import RecordingCapture


def _choose(qtbot, tray, text):
    """Open the tray menu like a click would, and click the entry starting with text."""
    tray.menu.popup(QPoint(200, 200))
    qtbot.waitUntil(tray.menu.isVisible)
    action = tray.action(text)
    assert action is not None, [a.text() for a in tray.menu.actions()]
    assert action.isEnabled()
    qtbot.mouseClick(tray.menu, Qt.MouseButton.LeftButton, pos=tray.menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: not tray.menu.isVisible())


def test_tray_visible_and_menu_pauses_and_starts_capture(qtbot, jobs, store, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    capture = RecordingCapture()
    capture.start()
    store.add_memory("Maybe switch the ledger to SQLite", status="candidate")
    tray = Tray(jobs, capture, lambda: pending_count(store), poll_ms=100)
    tray.show()
    qtbot.waitUntil(lambda: tray.health.state == "capturing" and tray.pending == 1, timeout=20_000)
    assert QSystemTrayIcon.isSystemTrayAvailable()
    assert tray.icon.isVisible()
    qtbot.waitUntil(lambda: tray.icon.geometry().width() > 0)  # docked: the tray host gave it a place

    _choose(qtbot, tray, "Pause capture")
    qtbot.waitUntil(lambda: capture.state == "paused" and tray.health.state == "paused")
    assert "paused" in tray.icon.toolTip()

    tray.menu.popup(QPoint(200, 200))
    qtbot.waitUntil(tray.menu.isVisible)
    assert tray.action("Pause capture") is None, "menu must be rebuilt from the paused state"
    assert tray.action("Review (1 pending)") is not None
    tray.menu.hide()

    _choose(qtbot, tray, "Start capture")
    qtbot.waitUntil(lambda: capture.state == "capturing" and tray.health.state == "capturing")

    _choose(qtbot, tray, "Pause for 30 minutes")
    qtbot.waitUntil(lambda: tray.health.state == "paused")
    assert capture.calls == ["start", "pause", "resume", "pause_for:30"]
    assert "until" in tray.icon.toolTip()
    tray.timer.stop()
    wait_idle(qtbot, jobs)


def test_lock_and_unlock_from_the_tray(qtbot, jobs, store, monkeypatch):
    import os

    import pytest
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QInputDialog

    from memory.store.keys import LockedError

    row = store.add_memory("Deploy key", type="vault", value="tray-secret-5e1f")
    capture = RecordingCapture()
    capture.start()
    tray = Tray(jobs, capture, lambda: 0, poll_ms=100)
    tray.keys = store.keys
    tray.show()
    qtbot.waitUntil(lambda: tray.health.state == "capturing", timeout=20_000)

    _choose(qtbot, tray, "Lock Mirador")
    assert store.keys.locked
    qtbot.waitUntil(lambda: capture.state == "paused")
    with pytest.raises(LockedError):
        store.reveal(row["id"])

    def answer(text):
        dialog = next(w for w in QApplication.topLevelWidgets() if isinstance(w, QInputDialog) and w.isVisible())
        dialog.setTextValue(text)
        dialog.accept()

    QTimer.singleShot(300, lambda: answer("not the passphrase"))
    _choose(qtbot, tray, "Unlock Mirador…")
    assert store.keys.locked and capture.state == "paused"  # a wrong passphrase unlocks nothing

    QTimer.singleShot(300, lambda: answer(os.environ["MIRADOR_PASSPHRASE"]))
    _choose(qtbot, tray, "Unlock Mirador…")
    assert not store.keys.locked
    qtbot.waitUntil(lambda: capture.state == "capturing")
    assert store.reveal(row["id"]) == "tray-secret-5e1f"
    assert capture.calls == ["start", "pause", "resume"]
    tray.timer.stop()
    wait_idle(qtbot, jobs)


def test_problem_raises_one_notification(qtbot, jobs):
    capture = RecordingCapture()
    capture.start()
    tray = Tray(jobs, capture, None, poll_ms=50)
    shown = []
    tray.icon.showMessage = lambda title, msg, *a: shown.append((title, msg))
    tray.show()
    qtbot.waitUntil(lambda: tray.health.state == "capturing")
    capture.error = "OCR worker crashed: tesseract not found"
    qtbot.waitUntil(lambda: tray.health.state == "problem")
    n_polls = 3
    for _ in range(n_polls):  # later polls with the same problem do not notify again
        tray.refresh()
    wait_idle(qtbot, jobs)
    assert shown == [("Mirador: capture problem", "OCR worker crashed: tesseract not found")]
    capture.error = None
    qtbot.waitUntil(lambda: tray.health.state == "capturing")
    tray.timer.stop()
    wait_idle(qtbot, jobs)


def test_health_from_real_capture_snapshot_shape():
    stalled = read_health({"state": "capturing", "stalled": True, "stall_reason": "no write for 90s",
                           "last_write_at": 1_700_000_000.0, "recent_errors": [], "errors": 0})
    assert stalled.state == "problem" and stalled.problem == "no write for 90s"
    assert stalled.last_write.year == 2023
    ok = read_health({"state": "paused", "stalled": False, "errors": 2, "recent_errors": ["x"], "paused_until": None})
    assert ok.state == "paused" and ok.problem is None


def test_autostart_xdg_toggle(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    path = tmp_path / "cfg" / "autostart" / "mirador.desktop"
    assert not autostart.is_enabled("linux")
    autostart.set_enabled(True, ["/opt/mirador/bin/mirador", "app"], platform="linux")
    assert autostart.xdg_autostart_path() == path and autostart.is_enabled("linux")
    text = path.read_text()
    assert "Exec=/opt/mirador/bin/mirador app" in text and text.startswith("[Desktop Entry]")
    autostart.set_enabled(True, ["/opt/mirador/bin/mirador", "app"], platform="linux")  # idempotent
    autostart.set_enabled(False, platform="linux")
    assert not path.exists() and not autostart.is_enabled("linux")
    assert not (tmp_path / "home-not-touched").exists()


def test_autostart_macos_plist(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    autostart.set_enabled(True, ["/Applications/Mirador.app/Contents/MacOS/mirador", "app"], platform="darwin")
    plist = plistlib.loads(autostart.launch_agent_path().read_bytes())
    assert plist["RunAtLoad"] is True and plist["ProgramArguments"][-1] == "app"
    autostart.set_enabled(False, platform="darwin")
    assert not autostart.is_enabled("darwin")
