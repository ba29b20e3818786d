"""The app process: tray + windows (Qt) over one store, with capture, scheduler and MCP server.

`run_app()` starts the tray at once, then builds the services (desktop/runtime/services.py, the
composition root, shared with the headless service) in a worker: loading the embedder takes
seconds and the GUI thread never waits for it. Without a display it runs the headless service instead.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Importing PySide6 needs no display; this module is imported only by `mirador app` (desktop/cli/app.py).
from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

from desktop.runtime.live_config import Applied
from desktop.runtime.platform import can_show_windows
from desktop.runtime.services import Services

if TYPE_CHECKING:
    from desktop.ui.store_watch import LiveViews, StoreWatch
    from memory.store.core import Store

log = logging.getLogger(__name__)


def new_qapp() -> QApplication:
    """The QApplication, named so that capture knows Mirador's own windows from any session.

    On Wayland a window's app id is the desktop file name; unset, Qt uses the program's name, which is
    `python3` in a source checkout, so "Edit memory" would not be excluded as Mirador's. "mirador" is
    an excluded app by default (and the X11 class follows the application name).
    """
    running = QApplication.instance()
    qapp = running if isinstance(running, QApplication) else QApplication(sys.argv[:1])
    qapp.setApplicationName("Mirador")
    qapp.setDesktopFileName("mirador")
    return qapp


def run_app(home: Path | None = None) -> int:
    """Run the tray app until Quit, then end the process; without a display run the headless service (exit code)."""
    if not can_show_windows():
        from desktop.runtime.service import run_service

        log.warning("no display (DISPLAY/WAYLAND_DISPLAY unset): running the headless service")
        return run_service()
    from PySide6.QtCore import QTimer

    qapp = new_qapp()
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
    # modules (torch, transformers, Qt, lancedb) took many seconds on a loaded machine and
    # protects nothing, so the process ends here. Log handlers and stdio are flushed first.
    log.info("exiting with code %d", code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _live_tables(name: str, win) -> set[str]:
    """The tables whose changes a window shows (desktop/ui/store_watch.py LiveViews)."""
    from memory.store import tables as T

    if name == "browser":
        return {T.MEMORIES, T.VAULT} | ({T.EVIDENCE} if getattr(win, "evidence_mode", False) else set())
    if name == "review":
        return {T.MEMORIES, T.PROPOSALS}
    return {T.EVIDENCE}  # the timeline


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
        self.watch: StoreWatch | None = None  # once the store is open
        self.live: LiveViews | None = None  # the windows that follow the store
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
        self.services = services
        if self._quitting:  # Quit came while the services were starting: stop them now
            self.quit()
            return
        log.info("Mirador started: capture %s, scheduler %s, MCP %s", "on" if services.capture else "off",
                 "on" if services.scheduler else "off", services.mcp.url if services.mcp else "off")
        from desktop.ui.review_proposals import review_pending

        # counted the way the Review window counts, so the two numbers always agree
        self.tray.sharing_fn = services.store.remotes.check if services.store.remotes.shared else None
        self.tray.keys = services.store.keys
        self.tray.set_sources(services.capture, lambda: review_pending(services.store))
        self._watch_store(services.store)
        for p in services.problems:
            self.tray.icon.showMessage("Mirador", p, QSystemTrayIcon.MessageIcon.Warning, 10_000)
        if not QSystemTrayIcon.isSystemTrayAvailable():
            self.open("browser")
        self.started.emit(services)

    def _watch_store(self, store: Store) -> None:
        """Live windows: one probe of the store's table versions per second (any process's writes) tells
        the tray and the open windows to re-read what they show."""
        from desktop.ui.store_watch import LiveViews, StoreWatch

        self.watch = StoreWatch(self.jobs, store, parent=self)
        self.live = LiveViews(self.watch, self)
        self.watch.store_changed.connect(self._store_changed)
        self.watch.start()

    def _store_changed(self, changed: frozenset) -> None:
        from memory.store import tables as T

        if changed & {T.MEMORIES, T.PROPOSALS}:  # the pending count in the tray follows the store
            self.tray.refresh()

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
        from PySide6.QtCore import Qt

        win = self.windows.get(name)
        if win is None or name == "settings":
            win = self._make(self.services, name)
            self.windows[name] = win
        if win.isMinimized():  # opened from the tray again: bring a minimised window back
            win.setWindowState(win.windowState() & ~Qt.WindowState.WindowMinimized)
        win.show()
        win.raise_()
        win.activateWindow()
        if self.live is not None:
            self.live.shown(win)  # it may have missed changes while hidden
        return win

    def _make(self, services: Services, name: str):
        from desktop.ui.browser import MemoryBrowser
        from desktop.ui.review import ReviewQueue
        from desktop.ui.settings_dialog import SettingsDialog
        from desktop.ui.settings_sharing import SharingPanel
        from desktop.ui.settings_tokens import TokensPanel
        from desktop.ui.timeline import EvidenceTimeline

        store = services.store
        if name == "settings":
            dlg = SettingsDialog(home=store.home, config=store.config,
                                 extra_tabs=[("MCP tokens", TokensPanel(self.jobs, store.home)),
                                             ("Sharing", SharingPanel(self.jobs, store))])
            dlg.saved.connect(self.apply_config)
            dlg.scopes.attach(self.jobs, store)  # "Apply rules to past captures" moves rows in this store
            return dlg
        classes: dict[str, type[MemoryBrowser] | type[ReviewQueue] | type[EvidenceTimeline]] = {
            "browser": MemoryBrowser, "review": ReviewQueue, "timeline": EvidenceTimeline}
        cls = classes[name]
        win = cls(self.jobs, store)
        win.changed.connect(self.tray.refresh)  # the pending count follows approvals and deletes
        if self.live is not None:
            self.live.add(win, partial(_live_tables, name, win))
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

        if self.services is None:  # the settings window opens only once they are up
            return
        self.jobs.submit(self.services.apply_config, config, on_done=done)

    def quit(self) -> None:
        """Close windows, show "Stopping…", stop services on a thread of their own, then leave the event loop."""
        if self._stopping:
            return
        if self.watch is not None:
            self.watch.stop()
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
            if self.services is not None:  # quit() starts this thread only once they are up
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
        app = QApplication.instance()
        if app is not None:
            app.quit()
