"""The headless service: what `make run` starts where there is no display.

It opens the store, prints a status screen, starts capture (screen where it can be grabbed,
voice when an input device exists; desktop/runtime/platform.py decides) and the scheduler (extraction, dream, retention), and runs
maintenance (index optimisation) until stopped. SIGTERM/SIGINT stop capture cleanly: queued frames are OCR'd and the writer flushes.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import TYPE_CHECKING

from desktop.runtime.console import print_record
from desktop.runtime.local_endpoint import start_endpoint
from desktop.runtime.services import NoCaptureSource, capture_sources, open_capture

if TYPE_CHECKING:
    from desktop.runtime.ports import CaptureAdapter
    from memory.consolidation.scheduler import MiradorScheduler
    from memory.store.core import Store

log = logging.getLogger(__name__)


def start_capture(store: Store) -> CaptureAdapter | None:
    """Start capture as configured (desktop/runtime/services.py puts it together, as for the tray app).

    Returns the running capture (a desktop.runtime.ports.CaptureAdapter), or None with the reason printed.
    """
    cfg = store.config.capture
    if not cfg.enabled:
        print("capture: off (capture.enabled = false in config.toml)", flush=True)
        return None
    screen, audio = capture_sources(cfg)
    try:
        cap = open_capture(store, (screen, audio))
        cap.start()
    except NoCaptureSource:
        print("capture: off — no display and no microphone here; `mirador doctor` says how to fix that", flush=True)
        return None
    except Exception as e:  # the service still runs maintenance; `mirador status` shows capture is down
        log.exception("capture did not start")
        print(f"capture: could not start ({e}) — run `mirador doctor`", flush=True)
        return None
    print(f"capture: screen {'on' if screen else 'off'}, audio {'on' if audio else 'off'} — "
          "`mirador status` shows its health, `mirador pause` pauses it", flush=True)
    return cap


def run_service(once: bool = False, interval: float = 600.0) -> int:
    """Run until SIGINT/SIGTERM (or one pass with once=True); returns the exit code."""
    from capture.runner import open_store_for_capture

    store = open_store_for_capture()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("Mirador headless service")
    print_record(store.stats())
    cap = None if once else start_capture(store)
    sched = None if once else start_jobs(store)
    endpoint = None if once else start_endpoint(store)  # `mirador search` & co. then use this warm store
    if not once:
        print(f"service running; maintenance every {interval:.0f}s — Ctrl+C to stop", flush=True)
    try:
        while True:
            if sched is None:  # the scheduler's optimise job does this when it runs; no need twice
                store.optimize(stop=stop)
                log.info("maintenance pass done")
            if once:
                return 0
            if stop.wait(interval):
                print("stopping")
                return 0
    finally:
        if endpoint is not None:
            endpoint.stop()
        if sched is not None:
            sched.stop()
        if cap is not None:
            cap.stop()


def start_jobs(store: Store) -> MiradorScheduler | None:
    """Start the scheduler (extraction, dream, retention, index optimisation); None if it cannot run."""
    try:
        from memory.consolidation.scheduler import start_scheduler

        sched = start_scheduler(store, store.config)
    except Exception as e:  # capture and maintenance still run; say why extraction will not
        log.exception("scheduler did not start")
        print(f"scheduler: could not start ({e}) — extraction and dream will not run; `mirador extract` runs it by hand",
              flush=True)
        return None
    print("scheduler: extraction, dream, retention and index optimisation scheduled", flush=True)
    return sched
