"""The app process: tray + windows (Qt) over one store, with capture, scheduler and MCP server.

Composition root. `run_app()` starts the tray at once, then opens the store and starts the
services in a worker (loading the embedder takes seconds; the GUI thread never waits for it).
Without a display it runs the headless service instead.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Importing PySide6 needs no display; this module is imported only by `mirador app` (desktop/cli/app.py).
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from desktop.cli.app import has_display
from desktop.runtime.live_config import Applied, restart_needed

log = logging.getLogger(__name__)


@dataclass
class Services:
    """What runs beside the GUI in the one process. No Qt here: built and stopped in workers."""

    store: Any
    capture: Any = None  # a desktop.runtime.ports.CaptureControl
    scheduler: Any = None
    mcp: Any = None
    problems: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, home: Path | None = None, capture: bool = True, scheduler: bool = True, mcp: bool = True) -> Services:
        """Open the store, then start capture, the scheduler and the MCP server as configured (worker thread)."""
        from memory.store.core import Store

        svc = cls(store=Store(home))
        cfg = svc.store.config
        if capture:
            svc.capture = _build_capture(svc)
        if scheduler and getattr(getattr(cfg, "scheduler", None), "enabled", True):
            svc.scheduler = _try(svc, "scheduler", lambda: __import__("memory.consolidation.scheduler", fromlist=["x"])
                                 .start_scheduler(svc.store, cfg))
        if mcp and getattr(getattr(cfg, "mcp", None), "enabled", False):
            from memory.mcp.server import HttpServer

            svc.mcp = _try(svc, "MCP server", lambda: HttpServer(svc.store.home, cfg.mcp.port, open_store=lambda: svc.store,
                                                                 extra_origins=cfg.mcp.allowed_origins).start())
        return svc

    def apply_config(self, config) -> Applied:
        """Use a saved config now where the parts allow it (worker thread); says what waits for a restart."""
        old, self.store.config = self.store.config, config  # extraction, dream, recall read it on every use
        out = Applied(restart=restart_needed(old, config))
        if hasattr(self.store.embedder, "batch_size"):
            self.store.embedder.batch_size = config.models.embedder_batch_size
        if self.capture is not None:
            from desktop.runtime.service import _has_display, _has_microphone

            c = config.capture  # the same device checks as at start, so a missing microphone stays off quietly
            out.problems += self.capture.apply_config(config, screen=c.screen and _has_display(),
                                                      audio=c.audio and _has_microphone(c.input_device))
        elif (config.capture, config.privacy) != (old.capture, old.privacy):
            out.restart.append("capture (it was off when Mirador started)")
        if self.scheduler is not None:
            out.rescheduled = self.scheduler.apply_config(config)
        elif config.scheduler.enabled and not old.scheduler.enabled:
            from memory.consolidation.scheduler import start_scheduler

            self.scheduler = _try(self, "scheduler", lambda: start_scheduler(self.store, config))
        return out

    def stop(self) -> dict[str, float]:
        """Stop capture, scheduler (and its LLM worker) and MCP server side by side, each bounded.

        Runs off the GUI thread at quit. Returns seconds per step; a step that overruns its budget
        is logged and left behind (its threads are daemons), so quitting always finishes.
        """
        steps = []
        if self.capture is not None:
            steps.append(("capture", lambda: self.capture.stop(CAPTURE_DRAIN_S)))
        if self.scheduler is not None:
            steps.append(("scheduler", lambda: self.scheduler.stop(wait=True, timeout=STOP_BUDGET_S["scheduler"])))
        if self.mcp is not None:
            steps.append(("MCP server", lambda: _stop_mcp(self.mcp, STOP_BUDGET_S["MCP server"])))
        return _run_bounded(steps)


# Seconds each stop step should take (steps run side by side); a step over budget is logged.
# Capture: CAPTURE_DRAIN_S for sources and queued OCR, then capture.runner.WRITER_GRACE_S (15 s)
# for the writer to commit what was already recognised.
CAPTURE_DRAIN_S = 20.0
STOP_BUDGET_S = {"capture": 35.0, "scheduler": 15.0, "MCP server": 5.0}
STOP_HARD_LIMIT_S = 45.0  # past this a step is abandoned whatever it is doing


def _run_bounded(steps: list[tuple[str, Any]]) -> dict[str, float]:
    """Run (name, fn) pairs in daemon threads at once; wait at most STOP_HARD_LIMIT_S; log per-step seconds."""
    t0 = time.monotonic()
    times: dict[str, float] = {}
    details: dict[str, Any] = {}

    def run(name, fn):
        start = time.monotonic()
        try:
            details[name] = fn()
        except Exception:  # keep stopping the rest
            log.exception("stopping %s failed", name)
        times[name] = round(time.monotonic() - start, 3)

    threads = [threading.Thread(target=run, args=step, name=f"stop-{step[0]}", daemon=True) for step in steps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, STOP_HARD_LIMIT_S - (time.monotonic() - t0)))
    for name, _fn in steps:
        if name not in times:
            log.warning("stop: %s still busy after %.0fs; quitting without it", name, STOP_HARD_LIMIT_S)
            times[name] = round(time.monotonic() - t0, 3)
        elif times[name] > STOP_BUDGET_S.get(name, STOP_HARD_LIMIT_S):
            log.warning("stop: %s overran its %.0fs budget (%.1fs)", name, STOP_BUDGET_S[name], times[name])
    times["total"] = round(time.monotonic() - t0, 3)
    sub = details.get("capture") if isinstance(details.get("capture"), dict) else {}
    log.info("stop took %s%s", ", ".join(f"{k} {v:.2f}s" for k, v in times.items()),
             f" (capture: {', '.join(f'{k} {v:.2f}s' for k, v in sub.items())})" if sub else "")
    return times


def _stop_mcp(mcp, timeout: float) -> None:
    # uvicorn otherwise waits for every open connection to close, and an MCP client's event
    # stream stays open until the client hangs up.
    server = getattr(mcp, "server", None)
    if server is not None:
        server.config.timeout_graceful_shutdown = max(1, int(timeout / 2))
    mcp.stop()


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
    from desktop.runtime.ports import CaptureAdapter
    from desktop.runtime.service import _has_display, _has_microphone  # the service's device checks, shared on purpose

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
    """Run the tray app until Quit, then end the process; without a display run the headless service (exit code)."""
    if not has_display():
        from desktop.runtime.service import run_service

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
    code = qapp.exec()
    # Everything is stopped and committed by now (MiradorShell.quit). Tearing down the interpreter's
    # modules (torch, transformers, Qt, lancedb) measured 8-40 s on a loaded 2-core machine and
    # protects nothing, so the process ends here. Log handlers and stdio are flushed first.
    log.info("exiting with code %d", code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class MiradorShell(QObject):
    """Owns the tray, the windows and the worker pool; talks to Services only through workers."""

    started = Signal(object)  # Services, once running
    stopped = Signal()
    settings_applied = Signal(object)  # desktop.runtime.live_config.Applied, after a save reached the services
    _services_stopped = Signal()  # from the stop thread; queued to the GUI thread

    def __init__(self, services_factory, poll_ms: int = 5000, parent=None) -> None:
        from desktop.ui.tray import Tray
        from desktop.ui.workers import Jobs, MainThreadGC

        super().__init__(parent)
        self.gc = MainThreadGC(self)  # before any worker runs: see MainThreadGC for the deadlock it avoids
        self.factory = services_factory
        self.services: Services | None = None
        self.jobs = Jobs(self, max_threads=3)
        self.tray = Tray(self.jobs, None, None, poll_ms=poll_ms, parent=self)
        self.windows: dict[str, Any] = {}
        self._quitting = False
        self._stopping = False
        self.stop_times: dict[str, float] = {}
        self._services_stopped.connect(self._finish)
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
        from desktop.ui.browser_data import pending_count

        self.services = services
        if self._quitting:  # Quit came while the services were starting: stop them now
            self.quit()
            return
        log.info("Mirador started: capture %s, scheduler %s, MCP %s", "on" if services.capture else "off",
                 "on" if services.scheduler else "off", services.mcp.url if services.mcp else "off")
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
        from desktop.runtime.ports import HealthView

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
        from desktop.ui.browser import MemoryBrowser
        from desktop.ui.review import ReviewQueue
        from desktop.ui.settings_dialog import SettingsDialog
        from desktop.ui.settings_tokens import TokensPanel
        from desktop.ui.timeline import EvidenceTimeline

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

        def done(applied: Applied):
            if applied.restart or applied.problems:
                self.tray.icon.showMessage("Mirador settings saved", applied.message(),
                                           QSystemTrayIcon.MessageIcon.Warning if applied.problems
                                           else QSystemTrayIcon.MessageIcon.Information, 15_000)
            self.tray.refresh()
            self.settings_applied.emit(applied)

        self.jobs.submit(self.services.apply_config, config, on_done=done)

    def quit(self) -> None:
        """Close windows, show "Stopping…", stop services on a thread of their own, then leave the event loop."""
        if self._stopping:
            return
        log.info("quitting: stopping capture, scheduler and MCP server")
        for w in self.windows.values():
            w.close()
        self.tray.show_stopping()
        if self.services is None:
            self._quitting = True  # _on_started stops them as soon as they are up
            return
        self._stopping = True
        # Not the worker pool: its threads may be busy with searches, and quitting must not queue behind them.
        threading.Thread(target=self._stop_services, name="mirador-stop", daemon=True).start()

    def _stop_services(self) -> None:  # stop thread
        try:
            self.stop_times = self.services.stop()
        except Exception:  # quit anyway
            log.exception("stopping the services failed")
        self._services_stopped.emit()

    def _finish(self) -> None:
        self.tray.icon.hide()
        self.jobs.pool.clear()
        if not self.jobs.pool.waitForDone(5000):  # a search still running; Qt waits for it at exit
            log.warning("a background job was still running at quit")
        log.info("stopped")
        self.gc.stop()
        self.stopped.emit()
        QApplication.instance().quit()
