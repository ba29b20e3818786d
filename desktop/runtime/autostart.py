"""Start Mirador at login: XDG autostart on Linux, a LaunchAgent on macOS, the Run key on Windows."""

from __future__ import annotations

import logging
import os
import plistlib
import shlex
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

APP_ID = "mirador"
MAC_LABEL = "io.mirador.app"
WIN_RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"


def default_command() -> list[str]:
    """How to start the tray app: the installed `mirador` script, else this Python with -m."""
    if getattr(sys, "frozen", False):  # an installer build: argv[0] may be a bare name found on PATH
        return [sys.executable, "app"]
    exe = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else None
    if exe and exe.name.startswith("mirador") and exe.exists():
        return [str(exe), "app"]
    return [sys.executable, "-m", "desktop.cli.main", "app"]


def _platform(platform: str | None) -> str:
    p = platform or sys.platform
    return "darwin" if p == "darwin" else "win32" if p.startswith("win") else "linux"


def xdg_autostart_path() -> Path:
    """$XDG_CONFIG_HOME/autostart/mirador.desktop (XDG_CONFIG_HOME defaults to ~/.config)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "autostart" / f"{APP_ID}.desktop"


def launch_agent_path() -> Path:
    """~/Library/LaunchAgents/io.mirador.app.plist."""
    return Path.home() / "Library" / "LaunchAgents" / f"{MAC_LABEL}.plist"


def desktop_entry(command: list[str]) -> str:
    """The XDG .desktop file text that starts Mirador at login."""
    return "\n".join([
        "[Desktop Entry]",
        "Type=Application",
        "Name=Mirador",
        "Comment=Local memory for you and your AI assistants",
        f"Exec={' '.join(shlex.quote(c) for c in command)}",
        "Icon=mirador",
        "Terminal=false",
        "X-GNOME-Autostart-enabled=true",
        "",
    ])


def launch_agent(command: list[str]) -> bytes:
    """The macOS LaunchAgent plist that starts Mirador at login."""
    return plistlib.dumps({"Label": MAC_LABEL, "ProgramArguments": command, "RunAtLoad": True,
                           "ProcessType": "Interactive"})


def is_enabled(platform: str | None = None, winreg: Any = None) -> bool:
    """True if Mirador is set to start at login (winreg: a winreg-like module; None = the real one)."""
    plat = _platform(platform)
    if plat == "linux":
        return xdg_autostart_path().is_file()
    if plat == "darwin":
        return launch_agent_path().is_file()
    return RunKey(winreg).get() is not None


def set_enabled(on: bool, command: list[str] | None = None, platform: str | None = None, winreg: Any = None) -> None:
    """Turn starting at login on or off (idempotent); winreg as in is_enabled."""
    plat = _platform(platform)
    command = command or default_command()
    if plat in ("linux", "darwin"):
        path = xdg_autostart_path() if plat == "linux" else launch_agent_path()
        if on:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = desktop_entry(command).encode() if plat == "linux" else launch_agent(command)
            path.write_bytes(data)
            log.info("autostart on: %s", path)
        else:
            path.unlink(missing_ok=True)
            log.info("autostart off: removed %s", path)
        return
    key = RunKey(winreg)
    key.set(subprocess_line(command)) if on else key.remove()


def subprocess_line(command: list[str]) -> str:
    """A Windows command line for the Run key."""
    import subprocess

    return subprocess.list2cmdline(command)


class RunKey:
    """The "Mirador" value under HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run.

    reg: a module with winreg's interface; None imports the real `winreg` (Windows only). Tests pass
    a stand-in here because the registry does not exist elsewhere; the code path is the same.
    """

    NAME = "Mirador"

    def __init__(self, reg: Any = None) -> None:  # a winreg-like module
        if reg is None:
            import winreg as reg  # Windows only
        self.reg = reg

    def get(self) -> str | None:
        """The command line Windows runs at login, or None when the value (or the key) is absent."""
        try:
            with self.reg.OpenKey(self.reg.HKEY_CURRENT_USER, WIN_RUN_KEY) as key:
                return self.reg.QueryValueEx(key, self.NAME)[0]
        except FileNotFoundError:
            return None

    def set(self, command_line: str) -> None:
        """Write (or overwrite) the value as a REG_SZ string."""
        with self.reg.CreateKey(self.reg.HKEY_CURRENT_USER, WIN_RUN_KEY) as key:
            self.reg.SetValueEx(key, self.NAME, 0, self.reg.REG_SZ, command_line)
        log.info("autostart on: HKCU\\%s\\%s", WIN_RUN_KEY, self.NAME)

    def remove(self) -> None:
        """Delete the value; absent already is fine."""
        try:
            with self.reg.OpenKey(self.reg.HKEY_CURRENT_USER, WIN_RUN_KEY, 0, self.reg.KEY_SET_VALUE) as key:
                self.reg.DeleteValue(key, self.NAME)
        except FileNotFoundError:
            return
        log.info("autostart off: removed HKCU\\%s\\%s", WIN_RUN_KEY, self.NAME)
