"""Stand-ins for the desktop tests: things production code never needs."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone


class RecordingCapture:
    """A CaptureControl (desktop/runtime/ports.py) with no devices: records calls and keeps state."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.state = "stopped"
        self.paused_until: datetime | None = None
        self.last_write: datetime | None = None
        self.error: str | None = None
        self._lock = threading.Lock()

    def _set(self, call: str, state: str, until: datetime | None = None) -> None:
        with self._lock:
            self.calls.append(call)
            self.state, self.paused_until = state, until

    def start(self) -> None:
        """Begin capturing."""
        self._set("start", "capturing")

    def pause(self) -> None:
        """Stop grabbing until resumed."""
        self._set("pause", "paused")

    def resume(self) -> None:
        """Capture again after a pause."""
        self._set("resume", "capturing")

    def pause_for(self, minutes: float) -> None:
        """Pause and resume by itself after `minutes`."""
        until = datetime.now(timezone.utc).replace(tzinfo=None) + timedelta(minutes=minutes)
        self._set(f"pause_for:{minutes:g}", "paused", until)

    def stop(self) -> None:
        """Stop for good (app quit)."""
        self._set("stop", "stopped")

    def health(self) -> dict:
        """Current state as a dict (the same keys the real controller reports)."""
        with self._lock:
            if self.state == "paused" and self.paused_until and datetime.now(timezone.utc).replace(tzinfo=None) >= self.paused_until:
                self.state, self.paused_until = "capturing", None
            return {"state": "problem" if self.error else self.state, "last_write": self.last_write,
                    "paused_until": self.paused_until, "last_error": self.error}
