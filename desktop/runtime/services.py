"""The composition root: what runs beside the GUI (or without one) over one store.

`Services` opens the store and starts capture, the scheduler and the MCP server as configured;
the tray app builds it in a worker thread (desktop/ui/app.py). `open_capture` is the one place
capture is put together — sources chosen by the platform checks (desktop/runtime/platform.py) —
for both the tray app and the headless service (desktop/runtime/service.py). No Qt here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from desktop.runtime.live_config import Applied, restart_needed
from desktop.runtime.platform import can_grab_screen, has_microphone
from desktop.runtime.ports import CaptureAdapter

if TYPE_CHECKING:
    from memory.config import CaptureConfig, Config
    from memory.store.core import Store

T = TypeVar("T")

log = logging.getLogger(__name__)


class NoCaptureSource(Exception):
    """Neither the screen nor a microphone can be captured on this machine."""


def capture_sources(capture_config: CaptureConfig) -> tuple[bool, bool]:
    """(screen, audio): each on when configured and this machine can provide it."""
    c = capture_config
    return c.screen and can_grab_screen(), c.audio and has_microphone(c.input_device)


def open_capture(store: Store, sources: tuple[bool, bool] | None = None) -> CaptureAdapter:
    """Capture over the store with `sources` (default: capture_sources of its config), not started yet.

    Raises NoCaptureSource when neither can run; the capture controller's own errors propagate.
    """
    screen, audio = sources if sources is not None else capture_sources(store.config.capture)
    if not screen and not audio:
        raise NoCaptureSource("no display to grab and no microphone")
    from capture.runner import Capture

    return CaptureAdapter(Capture(store, screen=screen, audio=audio))


@dataclass
class Services:
    """What runs beside the GUI in the one process. No Qt here: built and stopped in workers."""

    store: Store
    capture: Any = None  # a desktop.runtime.ports.CaptureControl
    scheduler: Any = None
    mcp: Any = None
    endpoint: Any = None  # desktop.runtime.local_endpoint.LocalEndpoint
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
        from desktop.runtime.local_endpoint import start_endpoint

        svc.endpoint = start_endpoint(svc.store)  # the CLI's door to this warm store (local_endpoint.py)
        return svc

    def apply_config(self, config: Config) -> Applied:
        """Use a saved config now where the parts allow it (worker thread); says what waits for a restart."""
        old, self.store.config = self.store.config, config  # extraction, dream, recall read it on every use
        out = Applied(restart=restart_needed(old, config))
        if hasattr(self.store.embedder, "batch_size"):
            self.store.embedder.batch_size = config.models.embedder_batch_size
        if self.capture is not None:
            # the same device checks as at start, so a missing microphone stays off quietly
            screen, audio = capture_sources(config.capture)
            out.problems += self.capture.apply_config(config, screen=screen, audio=audio)
            if config.capture.enabled != old.capture.enabled:  # Settings → General "Pause capture", applied now
                if not config.capture.enabled:
                    self.capture.pause()
                elif self.capture.health.state == "stopped":
                    self.capture.start()
                else:
                    self.capture.resume()
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
        if self.endpoint is not None:  # first: new CLI calls go in-process while the rest stops
            self.endpoint.stop()
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

    def run(name: str, fn: Callable[[], Any]) -> None:
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


def _stop_mcp(mcp: Any, timeout: float) -> None:  # a memory.mcp.server handle (started in a thread)
    # uvicorn otherwise waits for every open connection to close, and an MCP client's event
    # stream stays open until the client hangs up.
    server = getattr(mcp, "server", None)
    if server is not None:
        server.config.timeout_graceful_shutdown = max(1, int(timeout / 2))
    mcp.stop()


def _try(svc: Services, what: str, fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except ImportError as e:
        svc.problems.append(f"{what} is not available in this build ({e.name})")
    except Exception as e:  # the app still runs; the tray says what is missing
        log.exception("%s did not start", what)
        svc.problems.append(f"{what} did not start: {e}")
    return None


def _build_capture(svc: Services) -> CaptureAdapter | None:
    # Built even when capture.enabled is off, so the tray's "Start capture" can start it later.
    def build() -> CaptureAdapter | None:
        try:
            adapter = open_capture(svc.store)
        except NoCaptureSource:
            svc.problems.append("capture is off: no display to grab and no microphone")
            return None
        if svc.store.config.capture.enabled:
            adapter.start()
        return adapter

    return _try(svc, "capture", build)
