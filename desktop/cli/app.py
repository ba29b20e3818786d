"""`mirador app` (the tray app with capture, scheduler and MCP server in one process) and `mirador service`
(the same without a GUI, maintenance on a schedule).

Qt-free on purpose: without a display `app` runs the headless service without importing PySide6
(whose widget libraries need libGL, absent on many servers). Everything Qt is behind desktop.ui.app.run_app,
imported only once the display check has passed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope

log = logging.getLogger(__name__)


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `app` and `service` to the `mirador` parser."""
    cmd("app", cmd_app, "start the tray app (capture, review, settings, MCP server); headless service without a display")
    sp = cmd("service", cmd_service, "run the headless service (maintenance on a schedule) until stopped")
    sp.add_argument("--once", action="store_true", help="print the status screen, run maintenance once, exit")
    sp.add_argument("--interval", type=float, default=600.0, help="seconds between maintenance passes")


def cmd_app(a: argparse.Namespace) -> int:
    """Run the tray app until Quit; the headless service when there is no display."""
    from desktop.cli.via_service import install
    from desktop.runtime.platform import can_show_windows

    install()  # the services answer `mirador search` & co. from their warm store

    if not can_show_windows():
        from desktop.runtime.service import run_service

        log.warning("no display (DISPLAY/WAYLAND_DISPLAY unset): running the headless service instead")
        return run_service()
    from desktop.ui.app import run_app

    return run_app()


def cmd_service(a: argparse.Namespace) -> int:
    """Run the headless service until stopped (or one pass with --once)."""
    from desktop.cli.via_service import install
    from desktop.runtime.service import run_service

    install()

    return run_service(once=a.once, interval=a.interval)
