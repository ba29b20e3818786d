"""The Qt-free runtime: platform checks, and capture put together once for the tray app and the service."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from desktop.runtime import platform, service, services
from memory.config import Config

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("env, windows, screen", [
    ({"DISPLAY": ":0"}, True, True),  # X11 (or XWayland): both
    ({"WAYLAND_DISPLAY": "wayland-0"}, True, True),  # Wayland only: grim or the portal (capture/grab.py)
    ({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"}, True, True),
    ({}, False, False),  # a server: headless service, no screen capture
])
def test_linux_display_checks(monkeypatch, env, windows, screen):
    monkeypatch.setattr(sys, "platform", "linux")
    for var in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert (platform.can_show_windows(), platform.can_grab_screen()) == (windows, screen)


@pytest.mark.parametrize("os_name", ["win32", "darwin"])
def test_desktop_systems_always_have_a_screen(monkeypatch, os_name):
    monkeypatch.setattr(sys, "platform", os_name)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    assert platform.can_show_windows() and platform.can_grab_screen()


def _store(**capture):
    cfg = Config()
    for k, v in capture.items():
        setattr(cfg.capture, k, v)
    return SimpleNamespace(config=cfg)


def _no_devices(monkeypatch, screen=False, mic=False):
    monkeypatch.setattr(services, "can_grab_screen", lambda: screen)
    monkeypatch.setattr(services, "has_microphone", lambda device=None: mic)


def test_capture_sources_follow_config_and_devices(monkeypatch):
    _no_devices(monkeypatch, screen=True, mic=False)
    assert services.capture_sources(_store().config.capture) == (True, False)
    assert services.capture_sources(_store(screen=False).config.capture) == (False, False)


def test_service_and_app_agree_when_nothing_can_be_captured(monkeypatch, capsys):
    _no_devices(monkeypatch)
    store = _store(enabled=True)
    assert service.start_capture(store) is None
    assert "capture: off — no display and no microphone here" in capsys.readouterr().out
    svc = services.Services(store=store)
    assert services._build_capture(svc) is None
    assert svc.problems == ["capture is off: no display to grab and no microphone"]


def test_service_leaves_capture_off_when_disabled(monkeypatch, capsys):
    _no_devices(monkeypatch, screen=True, mic=True)
    assert service.start_capture(_store(enabled=False)) is None
    assert "capture: off (capture.enabled = false in config.toml)" in capsys.readouterr().out


def test_runtime_and_cli_load_without_qt():
    # The headless service runs where PySide6's widget libraries cannot load; only desktop.ui imports Qt.
    code = ("import sys, importlib\n"
            "for m in ('desktop.runtime.services', 'desktop.runtime.service', 'desktop.runtime.platform',\n"
            "          'desktop.runtime.ports', 'desktop.runtime.live_config', 'desktop.runtime.autostart',\n"
            "          'desktop.cli.main', 'desktop.cli.app'):\n"
            "    importlib.import_module(m)\n"
            "from desktop.cli.main import build_parser; build_parser()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'desktop.ui'))))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
