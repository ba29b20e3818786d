"""The headless service: what `make run` starts where there is no display.

It opens the store, prints a status screen, and runs maintenance (index optimisation) on a
schedule until stopped. Capture, extraction and the MCP server join it as they land.
"""

from __future__ import annotations

import logging
import signal
import threading

from desktop.output import print_record

log = logging.getLogger(__name__)


def run_service(once: bool = False, interval: float = 600.0) -> int:
    """Run until SIGINT/SIGTERM (or one pass with once=True); returns the exit code."""
    from memory.store import Store

    store = Store()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print("Mirador headless service")
    print_record(store.stats())
    while True:
        store.optimize()
        log.info("maintenance pass done")
        if once:
            return 0
        print(f"service running; maintenance every {interval:.0f}s — Ctrl+C to stop", flush=True)
        if stop.wait(interval):
            print("stopping")
            return 0
