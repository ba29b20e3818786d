"""Start at login on Windows (the Run key) and macOS (a LaunchAgent), through the production code paths.

The registry does not exist here, so the Windows test hands `autostart` a stand-in with winreg's
interface (including its access rights: a value can only be written or deleted through a key opened
for writing). Linux's XDG entry is covered in test_tray.py.
"""

from __future__ import annotations

import plistlib
import subprocess

import pytest

from desktop.runtime import autostart

RUN = r"Software\Microsoft\Windows\CurrentVersion\Run"
EXE = [r"C:\Program Files\Mirador\mirador.exe", "app"]


class FakeWinreg:
    """The part of winreg autostart uses, over a dict of keys; enforces KEY_SET_VALUE like Windows does."""

    HKEY_CURRENT_USER = "HKCU"
    REG_SZ = 1
    KEY_READ = 0x20019
    KEY_SET_VALUE = 0x0002
    KEY_ALL_ACCESS = 0xF003F

    def __init__(self) -> None:
        self.keys: dict[tuple[str, str], dict[str, tuple[object, int]]] = {}

    class _Key:
        def __init__(self, values: dict, access: int) -> None:
            self.values, self.access = values, access

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            return None

    def OpenKey(self, hive, sub_key, reserved=0, access=KEY_READ):  # noqa: N802 - winreg's name
        if (hive, sub_key) not in self.keys:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        return self._Key(self.keys[(hive, sub_key)], access)

    def CreateKey(self, hive, sub_key):  # noqa: N802
        return self._Key(self.keys.setdefault((hive, sub_key), {}), self.KEY_ALL_ACCESS)

    def QueryValueEx(self, key, name):  # noqa: N802
        if name not in key.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        value, type_ = key.values[name]
        return value, type_

    def SetValueEx(self, key, name, reserved, type_, value):  # noqa: N802
        self._writable(key)
        key.values[name] = (value, type_)

    def DeleteValue(self, key, name):  # noqa: N802
        self._writable(key)
        if name not in key.values:
            raise FileNotFoundError(2, "The system cannot find the file specified")
        del key.values[name]

    def _writable(self, key) -> None:
        if not key.access & self.KEY_SET_VALUE:
            raise PermissionError(5, "Access is denied")


def test_windows_run_key_set_read_remove():
    reg = FakeWinreg()
    assert not autostart.is_enabled("win32", winreg=reg), "no Run key yet"
    reg.CreateKey(reg.HKEY_CURRENT_USER, RUN).values["OneDrive"] = ("onedrive.exe /background", reg.REG_SZ)

    autostart.set_enabled(True, EXE, platform="win32", winreg=reg)
    values = reg.keys[("HKCU", RUN)]
    assert values["Mirador"] == (r'"C:\Program Files\Mirador\mirador.exe" app', reg.REG_SZ)
    assert autostart.is_enabled("win32", winreg=reg)
    assert autostart.RunKey(reg).get() == subprocess.list2cmdline(EXE)
    autostart.set_enabled(True, EXE, platform="win32", winreg=reg)  # idempotent: still one value
    assert sorted(values) == ["Mirador", "OneDrive"]

    autostart.set_enabled(False, platform="win32", winreg=reg)
    assert "Mirador" not in values and not autostart.is_enabled("win32", winreg=reg)
    assert values["OneDrive"] == ("onedrive.exe /background", reg.REG_SZ), "other programs' entries are untouched"
    autostart.set_enabled(False, platform="win32", winreg=reg)  # already off: no error


def test_windows_without_winreg_fails_loudly_not_silently(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "winreg", None)  # what a non-Windows Python has
    with pytest.raises(ImportError):
        autostart.is_enabled("win32")


def test_macos_launch_agent_written_under_home_and_removed(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    cmd = ["/Applications/Mirador.app/Contents/MacOS/mirador", "app"]
    assert not autostart.is_enabled("darwin")
    autostart.set_enabled(True, cmd, platform="darwin")
    path = tmp_path / "Library" / "LaunchAgents" / "io.mirador.app.plist"
    assert autostart.launch_agent_path() == path and autostart.is_enabled("darwin")
    plist = plistlib.loads(path.read_bytes())
    assert plist == {"Label": "io.mirador.app", "ProgramArguments": cmd, "RunAtLoad": True,
                     "ProcessType": "Interactive"}
    autostart.set_enabled(True, cmd, platform="darwin")  # idempotent
    assert [p.name for p in path.parent.iterdir()] == ["io.mirador.app.plist"]
    autostart.set_enabled(False, platform="darwin")
    assert not path.exists() and not autostart.is_enabled("darwin")
    autostart.set_enabled(False, platform="darwin")  # already off: no error


def test_an_installer_build_starts_its_own_executable_at_login(monkeypatch):
    """A frozen app started as a bare `mirador` from PATH (the .deb's /usr/bin link): the entry runs the
    executable itself, never `<exe> -m desktop.cli.main`, which a frozen app cannot take."""
    import sys

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "executable", "/opt/mirador/mirador")
    monkeypatch.setattr(sys, "argv", ["mirador", "app"])
    assert autostart.default_command() == ["/opt/mirador/mirador", "app"]
    assert "Exec=/opt/mirador/mirador app" in autostart.desktop_entry(autostart.default_command())
