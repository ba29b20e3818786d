"""`mirador app`: the tray app with capture, scheduler and MCP server in one process.

Qt-free on purpose: without a display it runs the headless service without importing PySide6
(whose widget libraries need libGL, absent on many servers).
"""

from __future__ import annotations

import logging
import os
import sys

log = logging.getLogger(__name__)


def has_display() -> bool:
    """True where a tray app can show: Windows, macOS, or an X11/Wayland session."""
    if sys.platform.startswith("win") or sys.platform == "darwin":
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def register(cmd, as_json, scope) -> None:
    """Add the `app` command to the `mirador` parser."""
    cmd("app", cmd_app, "start the tray app (capture, review, settings, MCP server); headless service without a display")


def cmd_app(a) -> int:
    """Run the tray app until Quit; the headless service when there is no display."""
    if not has_display():
        from desktop.runtime.service import run_service

        log.warning("no display (DISPLAY/WAYLAND_DISPLAY unset): running the headless service instead")
        return run_service()
    from desktop.ui.app import run_app

    return run_app()
