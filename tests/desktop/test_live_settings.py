"""Settings saved in the app reach the running capture and scheduler without a restart."""

from __future__ import annotations

from datetime import timedelta

from PySide6.QtCore import Qt

from capture.window import WindowInfo
from desktop.runtime.services import Services
from desktop.ui.app import MiradorShell
from memory.config import Config, load_config, save_config
from tests.desktop.conftest import wait_idle


def _set(dlg, key, text):
    w = dlg.fields[key].widget
    w.setPlainText(text) if hasattr(w, "setPlainText") else w.setText(text)


def test_saved_settings_apply_to_running_capture_and_scheduler(qtbot, mirador_home, monkeypatch):
    cfg = Config()
    cfg.capture.audio = False  # no microphone under Xvfb; the screen is real
    cfg.capture.interval_seconds = 1.0
    cfg.mcp.enabled = False
    save_config(cfg, mirador_home)
    shell = MiradorShell(lambda: Services.start(mirador_home), poll_ms=500)
    started, applied = [], []
    shell.started.connect(started.append)
    shell.settings_applied.connect(applied.append)
    shell.start()
    qtbot.waitUntil(lambda: bool(started), timeout=90_000)
    svc = started[0]
    capture, sched = svc.capture.capture, svc.scheduler
    loop = next(t for t in capture._threads if t.name == "screen-loop")
    payroll = WindowInfo(app="Scribbler", title="Quarterly Payroll - sheet.ods")
    assert capture.screen.privacy.excluded(payroll) is None
    purge_before = str(sched.scheduler.get_job("purge").trigger)

    dlg = shell.open("settings")
    qtbot.addWidget(dlg)
    _set(dlg, "capture.interval_seconds", "7")
    patterns = dlg.fields["privacy.excluded_title_patterns"].widget
    patterns.setPlainText(patterns.toPlainText() + "\n(?i)quarterly payroll")
    _set(dlg, "scheduler.extract_interval_minutes", "11")
    _set(dlg, "scheduler.dream_cron", "15 2 * * *")
    _set(dlg, "mcp.port", "9123")
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(applied), timeout=30_000)

    assert load_config(mirador_home).capture.interval_seconds == 7.0  # saved to the file too
    # the same running capture object (no restart) uses the new values
    assert svc.capture.capture is capture and loop.is_alive()
    assert capture.cfg.interval_seconds == 7.0 and capture.screen.cfg.interval_seconds == 7.0
    assert capture.screen.privacy.excluded(payroll) == "title matches (?i)quarterly payroll"
    assert capture.screen.privacy.excluded(WindowInfo(app="Scribbler", title="Notes")) is None
    # changed schedules were rescheduled; an unchanged one kept its trigger
    assert sched.scheduler.get_job("extract").trigger.interval == timedelta(minutes=11)
    dream = {f.name: str(f) for f in sched.scheduler.get_job("dream").trigger.fields}
    assert (dream["hour"], dream["minute"]) == ("2", "15")
    assert str(sched.scheduler.get_job("purge").trigger) == purge_before
    # only the restart-only setting is named as waiting for a restart
    assert applied[0].restart == ["mcp.port"] and applied[0].problems == []
    assert applied[0].rescheduled == ["extract", "dream"]
    assert "mcp.port" in applied[0].message() and "interval" not in applied[0].message()

    stopped = []
    monkeypatch.setattr(type(shell), "_finish", lambda self: self.stopped.emit())  # keep the test's event loop
    shell.stopped.connect(lambda: stopped.append(True))
    shell.quit()
    qtbot.waitUntil(lambda: bool(stopped), timeout=90_000)
    wait_idle(qtbot, shell.jobs)
    assert set(shell.stop_times) == {"capture", "scheduler", "total"}
    assert not loop.is_alive() and not sched.scheduler.running
