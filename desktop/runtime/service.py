"""The headless service: what `make run` starts where there is no display.

It opens the store, prints a status screen, starts capture (screen when a display is reachable,
voice when an input device exists) and the scheduler (extraction, dream, retention), and runs
maintenance (index optimisation) until stopped. SIGTERM/SIGINT stop capture cleanly: queued frames are OCR'd and the writer flushes.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading

from desktop.cli.output import print_record

log = logging.getLogger(__name__)


def _has_display() -> bool:
    if sys.platform.startswith("win") or sys.platform == "darwin":
        return True
    return bool(os.environ.get("DISPLAY"))  # mss reads X11; a Wayland-only session has no grabber here


def _has_microphone(device) -> bool:
    try:
        import sounddevice as sd

        sd.check_input_settings(device=device, samplerate=16000, channels=1)
        return True
    except Exception:  # no PortAudio, no device, or unsupported rate: voice capture stays off
        return False


def start_capture(store):
    """Start capture as configured; returns the running Capture, or None (with the reason printed)."""
    cfg = store.config.capture
    if not cfg.enabled:
        print("capture: off (capture.enabled = false in config.toml)", flush=True)
        return None
    screen = cfg.screen and _has_display()
    audio = cfg.audio and _has_microphone(cfg.input_device)
    if not screen and not audio:
        print("capture: off — no display and no microphone here; `mirador doctor` says how to fix that", flush=True)
        return None
    try:
        from capture.runner import Capture

        cap = Capture(store, screen=screen, audio=audio)
        cap.start()
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
        if sched is not None:
            sched.stop()
        if cap is not None:
            cap.stop()


def start_jobs(store):
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
