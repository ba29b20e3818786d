"""Wayland capture cost on a headless sway: prints one JSON object.

Starts its own headless sway (tests/capture/wayland_session.py) with a foot window showing text, then
times, over --runs repetitions each:
  - the sway window probe (IPC get_tree) — what every capture cycle asks first;
  - a grim grab of the focused 1280x800 window, and of a 640x400 region (PPM through a pipe, to BGRA);
  - the same window through the Screenshot portal (xdg-desktop-portal-wlr, on a private session bus),
    when the portal is installed;
  - one whole idle capture cycle (probe, privacy check, grab, change detection) on an unchanged screen;
with CPU seconds of this process and its children per grab. Headless sway renders with pixman, so a
real GPU session's screencopy may differ; the machine note says what this one is.

    PYTHONPATH=. .venv/bin/python bench/wayland_grab.py [--runs 40]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def timed(fn, runs: int) -> dict:
    """p50 / p95 / max wall ms and CPU ms per call."""
    fn()  # warm-up (first connection, first process start)
    walls, cpu0 = [], _cpu()
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        walls.append((time.perf_counter() - t) * 1000)
    walls.sort()
    return {"p50_ms": round(statistics.median(walls), 2), "p95_ms": round(walls[int(0.95 * (len(walls) - 1))], 2),
            "max_ms": round(walls[-1], 2), "cpu_ms_per_call": round((_cpu() - cpu0) * 1000 / runs, 2),
            "per_second_at_p50": round(1000 / statistics.median(walls), 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args(argv)

    from tests.capture.wayland_session import PortalBus, SwaySession, missing_portal, missing_tools

    why = missing_tools()
    if why:
        print(json.dumps({"bench": "wayland_grab", "skipped": why}))
        return 1
    os.environ["MIRADOR_HOME"] = tempfile.mkdtemp(prefix="mirador-bench-")
    sway = SwaySession()
    out: dict = {"bench": "wayland_grab", "runs": args.runs, "compositor": "sway 1.7 headless (pixman)",
                 "output": "1280x800"}
    try:
        sway.window("Bench notes", "violet harbor lantern meadow copper falcon\n" * 8)
        os.environ.pop("DISPLAY", None)
        os.environ.update({k: sway.env[k] for k in ("WAYLAND_DISPLAY", "SWAYSOCK", "XDG_RUNTIME_DIR",
                                                     "XDG_CURRENT_DESKTOP", "XDG_SESSION_TYPE")})
        from capture.wayland.grim import GrimGrabber
        from capture.wayland.sway import SwayProbe

        probe = SwayProbe()
        grim = GrimGrabber(outputs=probe.outputs)
        win = probe.active()
        out["sway_probe"] = timed(probe.active, args.runs)
        out["grim_window_1280x800"] = timed(lambda: grim.grab(win.region), args.runs)
        out["grim_region_640x400"] = timed(lambda: grim.grab({"left": 0, "top": 0, "width": 640, "height": 400}),
                                           args.runs)
        out["idle_cycle_grim"] = _idle_cycle(args.runs)
        if missing_portal() is None:
            bus = PortalBus(sway)
            try:
                from tests.capture.xdisplay import wait_for

                wait_for(bus.ready, 60, interval=0.5, what="the Screenshot portal")
                os.environ["DBUS_SESSION_BUS_ADDRESS"] = bus.env["DBUS_SESSION_BUS_ADDRESS"]
                from capture.wayland.portal import PortalGrabber

                portal = PortalGrabber(outputs=probe.outputs)
                out["portal_window_1280x800"] = timed(lambda: portal.grab(win.region), args.runs)
                portal.close()
            finally:
                bus.stop()
        else:
            out["portal_window_1280x800"] = {"skipped": missing_portal()}
        probe.close()
    finally:
        sway.stop()
    print(json.dumps(out, indent=2))
    return 0


def _idle_cycle(runs: int) -> dict:
    """Capture.step() on an unchanged screen: probe + privacy + grim grab + change detection, no OCR."""
    from capture.runner import Capture
    from memory.store.core import Store

    class NoOcr:
        language = "eng"

        def read(self, *a, **k):
            raise AssertionError("an unchanged screen must not be read")

    cap = Capture(Store(), audio=False, ocr=NoOcr())
    cap.step()  # the first frame is new: queued (and dropped here, never read)
    cap.screen.queue.get(timeout=0)
    result = timed(cap.step, runs)
    h = cap.health.snapshot()
    result["outcomes"] = {"grabbed": h["frames_grabbed"], "unchanged": h["frames_skipped"]}
    cap.screen.close()
    return result


if __name__ == "__main__":
    raise SystemExit(main())
