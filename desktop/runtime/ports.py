"""What the desktop needs from capture, as a Protocol, the adapter over the real controller, and health reading.

The tray and app talk to capture only through `CaptureControl`, so they work with the real
controller (capture/, wrapped by `CaptureAdapter`) and with stand-ins in tests of the views
(tests/desktop/fakes.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class CaptureControl(Protocol):
    """The controls the tray offers; the capture controller provides them."""

    def start(self) -> Any: ...
    def pause(self) -> Any: ...
    def resume(self) -> Any: ...
    def pause_for(self, minutes: float) -> Any: ...
    def health(self) -> Any: ...
    def stop(self) -> Any: ...


@dataclass
class HealthView:
    """Capture health as the tray shows it, whatever shape the controller reports."""

    state: str = "stopped"  # capturing | paused | stopped | problem | starting
    last_write: datetime | None = None  # naive UTC
    paused_until: datetime | None = None
    problem: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def capturing(self) -> bool:
        return self.state == "capturing"


def _get(obj: Any, *names: str) -> Any:
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if not isinstance(obj, dict) and hasattr(obj, n):
            v = getattr(obj, n)
            return v() if callable(v) and n in ("to_dict",) else v
    return None


def _as_dt(v: Any) -> datetime | None:
    if v is None or v == "":
        return None
    if isinstance(v, datetime):
        return v.astimezone(timezone.utc).replace(tzinfo=None) if v.tzinfo else v
    if isinstance(v, int | float):
        return datetime.fromtimestamp(v, timezone.utc).replace(tzinfo=None)
    try:
        d = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return d.astimezone(timezone.utc).replace(tzinfo=None) if d.tzinfo else d


def read_health(raw: Any) -> HealthView:
    """Normalise a controller's health (dict, dataclass or object) into a HealthView."""
    if raw is None:
        return HealthView()
    if hasattr(raw, "to_dict") and callable(raw.to_dict):
        raw = raw.to_dict()
    details = dict(raw) if isinstance(raw, dict) else dict(getattr(raw, "__dict__", {}))
    state = str(_get(raw, "state", "status") or "").lower()
    if not state:
        running = _get(raw, "running")
        paused = _get(raw, "paused")
        state = "paused" if paused else "capturing" if running else "stopped"
    stalled = bool(_get(raw, "stalled"))
    errors = _get(raw, "last_error", "recent_errors", "error")
    if isinstance(errors, list):
        errors = errors[-1] if errors else None
    failed = state in ("error", "problem", "stalled")
    problem = None
    held = _get(raw, "held")  # capture paused by itself: the disk refuses rows (capture/writer.py)
    if held and state not in ("stopped", "not running"):
        problem = str(held)
    elif stalled:
        problem = str(_get(raw, "stall_reason") or "capture stalled: nothing written for too long")
    elif failed or _get(raw, "last_error"):
        problem = str(errors or "capture stopped with an error")
    if problem:
        state = "problem"
    if state == "not running":
        state = "stopped"
    return HealthView(state=state, last_write=_as_dt(_get(raw, "last_write", "last_write_at")),
                      paused_until=_as_dt(_get(raw, "paused_until")), problem=problem, details=details)


class CaptureAdapter:
    """Wraps capture.runner.Capture (start/pause(minutes)/resume/stop, health.snapshot()) as a CaptureControl."""

    def __init__(self, capture: Any) -> None:
        self.capture = capture
        self._started = False
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the capture threads the first time; later, resume from a pause."""
        with self._lock:
            if not self._started:
                self._started = True
                self.capture.start()
                return
        self.capture.resume()

    def pause(self) -> None:
        """Pause until resumed."""
        self.capture.pause()

    def resume(self) -> None:
        """Resume (starting the threads if capture never ran)."""
        if not self._started:
            self.start()
        else:
            self.capture.resume()

    def pause_for(self, minutes: float) -> None:
        """Pause; capture resumes by itself after `minutes`."""
        self.capture.pause(minutes)

    def health(self) -> dict:
        """The capture Health snapshot (state, last_write_at, stalled, stall_reason, recent_errors, ...)."""
        h = self.capture.health
        return h.snapshot() if hasattr(h, "snapshot") else h

    def stop(self, timeout: float = 60.0) -> dict:
        """Stop capture and commit what is queued, within about timeout s; seconds per step."""
        if self._started:
            return self.capture.stop(timeout) or {}
        return {}

    def apply_config(self, config: Any, screen: bool | None = None, audio: bool | None = None) -> list[str]:
        """Hand saved settings to the running capture; returns problems that kept one from applying."""
        return self.capture.apply_config(config, screen=screen, audio=audio)
