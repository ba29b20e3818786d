"""The composition root: tray + real capture controller + MCP server in one process, driven from the tray menu."""

from __future__ import annotations

import socket

from PySide6.QtCore import QPoint, Qt

from desktop.runtime.platform import can_show_windows
from desktop.runtime.services import Services
from desktop.ui.app import MiradorShell
from memory.config import Config, McpConfig, save_config
from tests.desktop.conftest import wait_idle


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _choose(qtbot, tray, text):
    tray.menu.popup(QPoint(200, 200))
    qtbot.waitUntil(tray.menu.isVisible)
    action = tray.action(text)
    assert action is not None and action.isEnabled(), [a.text() for a in tray.menu.actions()]
    qtbot.mouseClick(tray.menu, Qt.MouseButton.LeftButton, pos=tray.menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: not tray.menu.isVisible())


def test_app_runs_real_capture_and_mcp_and_tray_pauses_and_starts(qtbot, mirador_home, monkeypatch):
    assert can_show_windows()
    port = _free_port()
    cfg = Config()
    cfg.capture.audio = False  # no microphone under Xvfb; the screen is real
    cfg.capture.interval_seconds = 1.0
    cfg.mcp = McpConfig(port=port)
    save_config(cfg, mirador_home)
    shell = MiradorShell(lambda: Services.start(mirador_home), poll_ms=200)
    started = []
    shell.started.connect(started.append)
    shell.start()
    assert shell.tray.icon.isVisible()
    qtbot.waitUntil(lambda: bool(started), timeout=60_000)
    svc = started[0]
    capture = svc.capture.capture  # capture.runner.Capture behind the adapter
    assert type(capture).__name__ == "Capture" and svc.mcp is not None and svc.mcp.server.started
    assert type(svc.scheduler).__name__ == "MiradorScheduler" and svc.problems == []
    qtbot.waitUntil(lambda: shell.tray.health.state == "capturing", timeout=20_000)

    _choose(qtbot, shell.tray, "Pause capture")
    qtbot.waitUntil(lambda: capture.paused and shell.tray.health.state == "paused", timeout=20_000)
    assert capture.step() == "paused"  # the screen is not grabbed while paused

    _choose(qtbot, shell.tray, "Start capture")
    qtbot.waitUntil(lambda: not capture.paused and shell.tray.health.state == "capturing", timeout=20_000)
    assert capture.step() != "paused"

    _choose(qtbot, shell.tray, "Pause for 30 minutes")
    qtbot.waitUntil(lambda: capture.paused and shell.tray.health.paused_until is not None, timeout=20_000)

    browser = shell.open("browser")
    qtbot.addWidget(browser)
    qtbot.waitExposed(browser)
    assert shell.open("browser") is browser  # one window per kind

    stopped = []
    shell.stopped.connect(lambda: stopped.append(True))
    monkeypatch.setattr(type(shell), "_finish", lambda self: (self.stopped.emit()))  # keep the test's event loop
    _choose(qtbot, shell.tray, "Quit Mirador")
    qtbot.waitUntil(lambda: bool(stopped), timeout=90_000)
    wait_idle(qtbot, shell.jobs)
    assert capture.health.snapshot()["state"] == "stopped" and svc.mcp.server.should_exit
    assert shell.tray.stopping and shell.tray.icon.toolTip() == "Mirador — stopping…"
    shell.tray.build_menu()
    assert [(a.text(), a.isEnabled()) for a in shell.tray.menu.actions()] == [("Stopping…", False)]
    assert set(shell.stop_times) == {"capture", "scheduler", "MCP server", "total"}


def test_app_without_display_runs_headless_service(monkeypatch):
    import desktop.runtime.service
    from desktop.cli.main import main

    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    calls = []
    monkeypatch.setattr(desktop.runtime.service, "run_service", lambda **kw: calls.append(kw) or 0)
    assert not can_show_windows()
    assert main(["app"]) == 0 and calls == [{}]
