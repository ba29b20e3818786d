"""The app process: tray + windows (Qt) over one store, with capture, scheduler and MCP server.

Composition root. `run_app()` starts the tray at once, then opens the store and starts the
services in a worker (loading the embedder takes seconds; the GUI thread never waits for it).
Without a display it runs the headless service instead.
"""

from __future__ import annotations

import logging
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Importing PySide6 needs no display; this module is imported only by `mirador app` (desktop/cmd_app.py).
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from desktop.cmd_app import has_display

log = logging.getLogger(__name__)


@dataclass
class Services:
    """What runs beside the GUI in the one process. No Qt here: built and stopped in workers."""

    store: Any
    capture: Any = None  # a desktop.ports.CaptureControl
    scheduler: Any = None
    mcp: Any = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, home: Path | None = None, capture: bool = True, scheduler: bool = True, mcp: bool = True) -> Services:
        """Open the store, then start capture, the scheduler and the MCP server as configured (worker thread)."""
        from memory.store import Store

        svc = cls(store=Store(home))
        cfg = svc.store.config
        if capture:
            svc.capture = _build_capture(svc)
        if scheduler and getattr(getattr(cfg, "scheduler", None), "enabled", True):
            svc.scheduler = _try(svc, "scheduler", lambda: __import__("memory.scheduler", fromlist=["x"])
                                 .start_scheduler(svc.store, cfg))
        if mcp and getattr(getattr(cfg, "mcp", None), "enabled", False):
            from memory.mcp_server import HttpServer

            svc.mcp = _try(svc, "MCP server", lambda: HttpServer(svc.store.home, cfg.mcp.port, open_store=lambda: svc.store,
                                                                 extra_origins=cfg.mcp.allowed_origins).start())
        return svc

    def apply_config(self, config) -> list[str]:
        """Use a saved config now where the parts allow it; returns what needs a restart."""
        self.store.config = config
        later = []
        if self.capture is not None and not getattr(self.capture, "apply_config", lambda c: False)(config):
            later.append("capture settings")
        if self.scheduler is not None and hasattr(self.scheduler, "apply_config"):
            self.scheduler.apply_config(config)
        elif self.scheduler is not None:
            later.append("schedules")
        return later

    def stop(self) -> None:
        """Stop everything, capture first so its last batch is written (worker thread, at quit)."""
        for name, fn in (("capture", getattr(self.capture, "stop", None)),
                         ("scheduler", getattr(self.scheduler, "shutdown", None) or getattr(self.scheduler, "stop", None)),
                         ("MCP server", getattr(self.mcp, "stop", None))):
            if fn:
                try:
                    fn()
                except Exception:  # keep stopping the rest
                    log.exception("stopping %s failed", name)


def _try(svc: Services, what: str, fn):
    try:
        return fn()
    except ImportError as e:
        svc.problems.append(f"{what} is not available in this build ({e.name})")
    except Exception as e:  # the app still runs; the tray says what is missing
        log.exception("%s did not start", what)
        svc.problems.append(f"{what} did not start: {e}")
    return None


def _build_capture(svc: Services):
    from desktop.ports import CaptureAdapter
    from desktop.service import _has_display, _has_microphone  # the service's device checks, shared on purpose

    cfg = svc.store.config.capture
    screen, audio = cfg.screen and _has_display(), cfg.audio and _has_microphone(cfg.input_device)
    if not screen and not audio:
        svc.problems.append("capture is off: no display to grab and no microphone")
        return None

    def build():
        from capture.runner import Capture

        adapter = CaptureAdapter(Capture(svc.store, screen=screen, audio=audio))
        if cfg.enabled:
            adapter.start()
        return adapter

    return _try(svc, "capture", build)


def run_app(home: Path | None = None) -> int:
    """Run the tray app until Quit (or the headless service where there is no display); exit code."""
    if not has_display():
        from desktop.service import run_service

        log.warning("no display (DISPLAY/WAYLAND_DISPLAY unset): running the headless service")
        return run_service()
    from PySide6.QtCore import QTimer

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    qapp.setApplicationName("Mirador")
    qapp.setQuitOnLastWindowClosed(False)  # the tray keeps running with every window closed
    shell = MiradorShell(lambda: Services.start(home))
    shell.start()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: shell.quit())
    # Python only runs signal handlers between bytecodes; a timer lets Ctrl+C reach them during exec().
    tick = QTimer()
    tick.start(500)
    tick.timeout.connect(lambda: None)
    return qapp.exec()


class MiradorShell(QObject):
    """Owns the tray, the windows and the worker pool; talks to Services only through workers."""

    started = Signal(object)  # Services, once running
    stopped = Signal()

    def __init__(self, services_factory, poll_ms: int = 5000, parent=None) -> None:
        from desktop.tray import Tray
        from desktop.workers import Jobs, MainThreadGC

        super().__init__(parent)
        self.gc = MainThreadGC(self)  # before any worker runs: see MainThreadGC for the deadlock it avoids
        self.factory = services_factory
        self.services: Services | None = None
        self.jobs = Jobs(self, max_threads=3)
        self.tray = Tray(self.jobs, None, None, poll_ms=poll_ms, parent=self)
        self.windows: dict[str, Any] = {}
        self._quitting = False
        self.tray.open_browser.connect(lambda: self.open("browser"))
        self.tray.open_review.connect(lambda: self.open("review"))
        self.tray.open_timeline.connect(lambda: self.open("timeline"))
        self.tray.open_settings.connect(lambda: self.open("settings"))
        self.tray.quit_requested.connect(self.quit)
        self.jobs.error.connect(lambda msg: log.warning("background job: %s", msg))

    def start(self) -> None:
        """Show the tray now; open the store and start services in a worker."""
        if QSystemTrayIcon.isSystemTrayAvailable():
            self.tray.show()
        else:  # no tray host (e.g. a bare window manager): the browser is the app's face
            log.warning("no system tray here; opening the memory browser instead")
        self.jobs.submit(self.factory, on_done=self._on_started, on_error=self._on_failed)

    def _on_started(self, services: Services) -> None:
        from desktop.browser_data import pending_count

        self.services = services
        if self._quitting:  # Quit came while the services were starting: stop them now
            self.quit()
            return
        self.tray.set_sources(services.capture, lambda: pending_count(services.store))
        for p in services.problems:
            self.tray.icon.showMessage("Mirador", p, QSystemTrayIcon.MessageIcon.Warning, 10_000)
        if not QSystemTrayIcon.isSystemTrayAvailable():
            self.open("browser")
        self.started.emit(services)

    def _on_failed(self, message: str) -> None:
        log.error("Mirador could not start: %s", message)
        if self._quitting:
            self._finish()
            return
        from desktop.ports import HealthView

        self.tray.apply_state(HealthView(state="problem", problem=message), 0)
        self.tray.icon.showMessage("Mirador could not start", message, QSystemTrayIcon.MessageIcon.Critical, 30_000)

    def open(self, name: str):
        """Show (creating on first use) the browser, review, timeline or settings window."""
        if self.services is None:
            self.tray.icon.showMessage("Mirador", "Still starting — opening the store…")
            return None
        win = self.windows.get(name)
        if win is None or name == "settings":
            win = self._make(name)
            self.windows[name] = win
        win.show()
        win.raise_()
        win.activateWindow()
        return win

    def _make(self, name: str):
        from desktop.browser import MemoryBrowser
        from desktop.review import ReviewQueue
        from desktop.settings_dialog import SettingsDialog
        from desktop.settings_tokens import TokensPanel
        from desktop.timeline import EvidenceTimeline

        store = self.services.store
        if name == "settings":
            dlg = SettingsDialog(home=store.home, config=store.config,
                                 extra_tabs=[("MCP tokens", TokensPanel(self.jobs, store.home))])
            dlg.saved.connect(self.apply_config)
            return dlg
        cls = {"browser": MemoryBrowser, "review": ReviewQueue, "timeline": EvidenceTimeline}[name]
        win = cls(self.jobs, store)
        win.changed.connect(self.tray.refresh)  # the pending count follows approvals and deletes
        return win

    def apply_config(self, config) -> None:
        """Hand a saved config to the running services (worker); say what waits for a restart."""
        dlg = self.windows.get("settings")
        restart = list(getattr(dlg, "restart_needed", []) or [])

        def done(later: list[str]):
            todo = restart + later
            if todo:
                self.tray.icon.showMessage("Mirador settings saved",
                                           "Takes effect after a restart: " + ", ".join(todo))

        self.jobs.submit(self.services.apply_config, config, on_done=done)

    def quit(self) -> None:
        """Close windows, stop services in a worker, then leave the event loop."""
        log.info("quitting: stopping capture, scheduler and MCP server")
        for w in self.windows.values():
            w.close()
        self.tray.timer.stop()
        self.tray.icon.hide()
        if self.services is None:
            self._quitting = True  # _on_started stops them as soon as they are up
            return
        self.jobs.submit(self.services.stop, on_done=lambda _r: self._finish(), on_error=lambda _m: self._finish())

    def _finish(self) -> None:
        log.info("stopped")
        self.gc.stop()
        self.stopped.emit()
        QApplication.instance().quit()
