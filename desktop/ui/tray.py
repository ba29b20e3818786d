"""The tray icon: capture state at a glance, a menu rebuilt from live state each time it opens."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from desktop.runtime import autostart
from desktop.runtime.ports import CaptureControl, HealthView, read_health
from desktop.ui.icons import icon

if TYPE_CHECKING:
    from memory.store.keys import DataKeys
from desktop.ui.workers import Jobs
from memory.types import utcnow

log = logging.getLogger(__name__)

PAUSE_MINUTES = 30
MIC_CHECK_S = 60.0  # how often the tray asks the sound system again whether a microphone is there


def _local_hhmm(dt: datetime) -> str:
    return f"{dt.replace(tzinfo=timezone.utc).astimezone():%H:%M}"


def audio_label(health: HealthView, microphone: bool | None) -> str:
    """What the menu says about voice capture: on only while the capture reports a running voice source."""
    audio = str(health.details.get("audio") or "off")
    if audio.startswith("unavailable"):
        return "Audio: unavailable (" + (audio.split(":", 1)[1].strip() or "no microphone") + ")"
    if audio != "off" and health.state in ("capturing", "paused", "problem"):
        return "Audio: on" + (" (paused)" if health.state == "paused" else "")
    if microphone is False:
        return "Audio: unavailable (no microphone)"
    return "Audio: off"


def _ago(dt: datetime | None) -> str:
    if dt is None:
        return "no write yet"
    local = dt.replace(tzinfo=timezone.utc).astimezone()
    secs = max(0, int((utcnow() - dt).total_seconds()))
    rel = f"{secs} s ago" if secs < 90 else f"{secs // 60} min ago" if secs < 5400 else f"{secs // 3600} h ago"
    return f"last write {local:%H:%M:%S} ({rel})"


class Tray(QObject):
    """Owns the QSystemTrayIcon; asks workers for capture health and the review count."""

    open_browser = Signal()
    open_review = Signal()
    open_timeline = Signal()
    open_settings = Signal()
    quit_requested = Signal()
    state_changed = Signal(str)

    def __init__(self, jobs: Jobs, capture: CaptureControl | None, pending_fn: Callable[[], int] | None,
                 poll_ms: int = 5000, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs, self.capture, self.pending_fn = jobs, capture, pending_fn
        self.health = HealthView(state="starting")
        self.pending = 0
        self.microphone: bool | None = None  # desktop.runtime.platform.has_microphone, asked in a worker
        # Shared scopes' health (memory.store.remote.Remotes.check), asked in a worker when set.
        self.sharing_fn: Callable[[], list[dict]] | None = None
        self.sharing: list[dict] = []
        # The data key (memory.store.keys.DataKeys), set by the app once the store is open: Lock / Unlock.
        self.keys: DataKeys | None = None
        self._paused_by_lock = False
        self._mic_checked = 0.0
        self.stopping = False
        self._notified_problem: str | None = None
        self.icon = QSystemTrayIcon(icon("starting"), self)
        self.icon.setToolTip("Mirador — starting")
        self.menu = QMenu()
        self.menu.aboutToShow.connect(self.build_menu)  # rebuilt from live state every time it opens
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._activated)
        self.timer = QTimer(self)
        self.timer.setInterval(poll_ms)
        self.timer.timeout.connect(self.refresh)

    def show(self) -> None:
        """Show the icon and start polling state."""
        self.icon.show()
        self.timer.start()
        self.refresh()

    def set_sources(self, capture: CaptureControl | None, pending_fn: Callable[[], int] | None) -> None:
        """Attach capture and the store once the app has started them."""
        self.capture, self.pending_fn = capture, pending_fn
        self.refresh()

    # ---- state --------------------------------------------------------------------------------

    def _poll(self) -> tuple[HealthView, int]:  # worker thread
        import time

        health = read_health(self.capture.health()) if self.capture else HealthView(state="starting")
        pending = self.pending_fn() if self.pending_fn else 0
        if self.sharing_fn is not None:
            try:
                self.sharing = self.sharing_fn()
            except Exception as e:  # the tray must keep polling capture whatever the network does
                self.sharing = [{"scope": "shared scopes", "pending": 0, "last_error": str(e)[:200]}]
        if time.monotonic() - self._mic_checked >= MIC_CHECK_S:
            from desktop.runtime.platform import has_microphone

            self._mic_checked = time.monotonic()
            self.microphone = has_microphone()
        return health, pending

    def refresh(self) -> None:
        """Ask a worker for capture health and the pending count; the icon updates when it answers."""
        self.jobs.submit(self._poll, on_done=lambda r: self.apply_state(*r))

    def show_stopping(self) -> None:
        """Say that Mirador is stopping: no more polling, a tooltip and a menu with nothing to choose."""
        self.stopping = True
        self.timer.stop()
        self.icon.setIcon(icon("stopped"))
        self.icon.setToolTip("Mirador — stopping…")
        self.state_changed.emit("stopping")
        if self.menu.isVisible():
            self.menu.hide()

    def apply_state(self, health: HealthView, pending: int) -> None:
        """Update icon, tooltip and notification from a fresh state (GUI thread)."""
        if self.stopping:  # a poll that was in flight when Quit came
            return
        changed = health.state != self.health.state
        self.health, self.pending = health, pending
        if changed:
            self.icon.setIcon(icon(health.state))
            self.state_changed.emit(health.state)
        label = {"capturing": "capturing", "paused": "paused", "stopped": "capture off",
                 "problem": "capture problem", "starting": "starting",
                 "locked": "locked (capture paused until unlocked)"}.get(health.state, health.state)
        if health.state == "paused" and health.paused_until:
            label += f" until {_local_hhmm(health.paused_until)}"
        tip = f"Mirador — {label}\n{_ago(health.last_write)}"
        if pending:
            tip += f"\n{pending} to review"
        for line in self.offline_lines():
            tip += "\n" + line
        self.icon.setToolTip(tip)
        if health.state == "problem" and health.problem != self._notified_problem:
            # once per distinct problem, so a lasting stall does not nag every poll
            self.icon.showMessage("Mirador: capture problem", health.problem or "capture stopped writing",
                                  QSystemTrayIcon.MessageIcon.Warning, 15_000)
        self._notified_problem = health.problem if health.state == "problem" else None

    # ---- menu ---------------------------------------------------------------------------------

    def build_menu(self) -> None:
        """Rebuild the menu from the latest state (called on aboutToShow)."""
        m = self.menu
        m.clear()
        if self.stopping:
            m.addAction("Stopping…").setEnabled(False)
            return
        h = self.health
        paused = "❚❚ Paused" + (f" until {_local_hhmm(h.paused_until)}" if h.paused_until else "")
        status = m.addAction({"capturing": "● Capturing", "paused": paused, "problem": "⚠ Capture problem"}
                             .get(h.state, "Capture off" if h.state == "stopped" else "Starting…"))
        status.setEnabled(False)
        m.addAction(audio_label(h, self.microphone)).setEnabled(False)
        for line in self.offline_lines():
            m.addAction("⚠ " + line).setEnabled(False)
        has_capture = self.capture is not None
        if h.state in ("capturing", "problem"):
            self._add(m, "Pause capture", self.pause, has_capture)
        else:
            self._add(m, "Start capture", self.start, has_capture)
        self._add(m, f"Pause for {PAUSE_MINUTES} minutes", self.pause_for, has_capture and h.state != "paused")
        m.addSeparator()
        self._add(m, "Open memory browser", self.open_browser.emit)
        self._add(m, f"Review ({self.pending} pending)", self.open_review.emit)
        self._add(m, "Evidence timeline", self.open_timeline.emit)
        self._add(m, "Settings…", self.open_settings.emit)
        if self.keys is not None:
            if self.keys.locked:
                self._add(m, "Unlock Mirador…", self.unlock)
            else:
                self._add(m, "Lock Mirador", self.lock)
        auto = self._add(m, "Start at login", self._toggle_autostart)
        auto.setCheckable(True)
        auto.setChecked(autostart.is_enabled())
        m.addSeparator()
        self._add(m, "Quit Mirador", self.quit_requested.emit)

    def offline_lines(self) -> list[str]:
        """One line per shared scope that did not work when last asked: "Shared scope work/acme offline (3
        waiting)", or, when the store answered and refused its settings, what it refused: "Shared scope
        work/acme: credentials refused (3 waiting)" — those writes will not go until the binding is fixed."""
        return [f"Shared scope {h['scope']}" + (f": {h['headline']}" if h.get("settings") else " offline")
                + (f" ({h['pending']} waiting)" if h.get("pending") else "")
                for h in self.sharing if h.get("last_error")]

    def _add(self, menu: QMenu, text: str, slot, enabled: bool = True) -> QAction:
        a = menu.addAction(text)
        a.triggered.connect(lambda _checked=False: slot())
        a.setEnabled(enabled)
        return a

    def action(self, text_prefix: str) -> QAction | None:
        """The menu action whose text starts with text_prefix (after the menu was built)."""
        return next((a for a in self.menu.actions() if a.text().startswith(text_prefix)), None)

    # ---- commands -----------------------------------------------------------------------------

    def _capture_call(self, fn: Callable, *args) -> None:
        self.jobs.submit(fn, *args, on_done=lambda _r: self.refresh(),
                         on_error=lambda msg: self.icon.showMessage("Mirador", msg, QSystemTrayIcon.MessageIcon.Warning))

    def pause(self) -> None:
        """Pause capture (in a worker)."""
        if self.capture:
            self._capture_call(self.capture.pause)

    def start(self) -> None:
        """Start capture, or resume it when paused."""
        if self.capture:
            self._capture_call(self.capture.resume if self.health.state == "paused" else self.capture.start)

    def pause_for(self) -> None:
        """Pause capture for PAUSE_MINUTES; it resumes by itself."""
        if self.capture:
            self._capture_call(self.capture.pause_for, PAUSE_MINUTES)

    def lock(self) -> None:
        """Drop the data key from every process of this data dir and pause capture until unlocked."""
        if self.keys is None:  # the store is not open yet
            return
        self.keys.lock()
        if self.capture and self.health.state == "capturing":
            self._paused_by_lock = True
            self._capture_call(self.capture.pause)
        self.icon.showMessage("Mirador", "Locked: assistants get a 'locked' error and capture is paused until "
                              "you unlock Mirador.", QSystemTrayIcon.MessageIcon.Information)

    def unlock(self) -> None:
        """Take the key back (the keyring, or the passphrase asked here) and resume what the lock paused."""
        from PySide6.QtWidgets import QInputDialog, QLineEdit

        from memory.errors import MiradorError

        if self.keys is None:  # the store is not open yet
            return
        phrase = None
        if self.keys.method() == "passphrase":
            phrase, ok = QInputDialog.getText(None, "Unlock Mirador", "Mirador passphrase:", QLineEdit.EchoMode.Password)
            if not ok:
                return
        try:
            self.keys.unlock(phrase or None)
        except MiradorError as e:
            self.icon.showMessage("Mirador", str(e), QSystemTrayIcon.MessageIcon.Warning)
            return
        if self._paused_by_lock and self.capture:
            self._paused_by_lock = False
            self._capture_call(self.capture.resume)

    def _toggle_autostart(self) -> None:
        on = not autostart.is_enabled()
        try:
            autostart.set_enabled(on)
        except OSError as e:
            self.icon.showMessage("Mirador", f"could not change start at login: {e}", QSystemTrayIcon.MessageIcon.Warning)

    def _activated(self, reason) -> None:
        if reason in (QSystemTrayIcon.ActivationReason.Trigger, QSystemTrayIcon.ActivationReason.DoubleClick):
            self.open_browser.emit()
