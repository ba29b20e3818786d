"""How the evidence timeline scrubs through a big day (issue 30: p95 <= 100 ms on a 10,000-frame day).

Builds one local day of N evidence rows, each with a small frame file, with a stand-in embedder; starts
its own Xvfb (like the desktop tests) and opens the real EvidenceTimeline on it. Then times, from the key
press (or slider move, or scroll) to what the person waits for:
- frame_switch: → on the list until the next frame's header, text and image are in the preview;
- hour_jump: PgDn / PgUp until the frame an hour away is in the preview and the list lines around it are
  painted (time, app, window title, text);
- slider_scrub: the slider moved to a random place until that frame is in the preview (header, full text,
  image), the list lines around it painted and the strip's slot highlighted;
- slider_thumbs: the same jump until every visible list line and strip slot also has its thumbnail;
- strip_click: a click on a thumbnail of the filmstrip until that frame is in the preview;
- scroll_page: the list scrolled one screen until every visible line is painted (its time, app, title, text);
- scroll_thumbs: the same until every visible line also has its thumbnail (decoded off the GUI thread).
gui_thread_cpu: for some of these, the GUI thread's CPU time from input to repaint (time.thread_time): the
work itself, which a machine shared with other jobs stretches into the wall times above.
Prints one JSON object.
Usage: .venv/bin/python bench/timeline_scrub.py --rows 10000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.desktop_paging import _Vectors  # noqa: E402

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")


def _xvfb() -> subprocess.Popen:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
                            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        number = fh.readline().strip()
    if not number:
        proc.kill()
        sys.exit("Xvfb started but reported no display number (is xvfb installed? scripts/bootstrap.sh)")
    os.environ["DISPLAY"] = f":{number}"
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    os.environ.pop("WAYLAND_DISPLAY", None)
    return proc


def _stats(ms: list[float]) -> dict:
    ms = sorted(ms)
    return {"p50_ms": round(statistics.median(ms), 1), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1),
            "max_ms": round(ms[-1], 1), "runs": len(ms)}


def _build(store, home: Path, rows: int) -> None:
    from PySide6.QtGui import QColor, QImage

    from memory.store.specs import EvidenceSpec

    frames = home / "frames"
    frames.mkdir(parents=True)
    local = (datetime.now().astimezone() - timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    start = local.astimezone(timezone.utc).replace(tzinfo=None)
    gap = timedelta(seconds=86_000 / rows)
    apps = [("xterm", "~/src/ledger — make test"), ("Firefox", "LanceDB docs — merge_insert"),
            ("Slack", "#ledger-team — Slack"), ("Code", "timeline.py — mirador")]
    for base in range(0, rows, 1000):
        specs = []
        for i in range(base, min(base + 1000, rows)):
            path = frames / f"{i:05d}.png"
            img = QImage(320, 200, QImage.Format.Format_RGB32)
            img.fill(QColor.fromHsv(i % 360, 120, 220))
            img.save(str(path))
            app, window = apps[i % len(apps)]
            specs.append(EvidenceSpec(text=f"frame {i}: {app} showing the ledger migration step {i % 97}",
                                      source="screen", app=app, window=window, captured_at=start + gap * i,
                                      frame_path=str(path)))
        store.add_evidence_batch(specs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=60)
    a = ap.parse_args()
    load_before = os.getloadavg()[0]
    xvfb = _xvfb()
    try:
        from PySide6.QtCore import QEventLoop, Qt, QTimer
        from PySide6.QtTest import QTest
        from PySide6.QtWidgets import QApplication

        from desktop.ui.timeline import EvidenceTimeline
        from desktop.ui.workers import Jobs
        from memory.store.core import Store

        app = QApplication(["timeline-bench"])
        gc.disable()  # as the app does (desktop.ui.workers.MainThreadGC): collect on the GUI thread only
        with tempfile.TemporaryDirectory() as tmp:
            home = Path(tmp)
            store = Store(home, embedder=_Vectors())
            store.config.store.optimize_after_writes = 100_000
            t0 = time.perf_counter()
            _build(store, home, a.rows)
            build_s = time.perf_counter() - t0
            jobs = Jobs()
            tl = EvidenceTimeline(jobs, store)

            # Waiting sleeps in the event loop as the app does (a tick wakes it at least every 2 ms), rather than
            # spinning: a spinning GUI thread takes one of the two cores from the workers it waits for.
            tick = QTimer()
            tick.start(2)

            def until(cond, timeout=30.0) -> None:
                deadline = time.perf_counter() + timeout
                while not cond():
                    if time.perf_counter() > deadline:
                        raise SystemExit("timed out waiting for the timeline")
                    app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents
                                      | QEventLoop.ProcessEventsFlag.WaitForMoreEvents)

            def shown(line: int) -> bool:
                p = tl.preview
                return (tl.line == line and p.row is not None and p.row["id"] == tl.model.id_at(line)
                        and p.frame.pixmap() is not None and not p.frame.pixmap().isNull())

            def visible_lines() -> range:
                view = tl.table
                top = view.rowAt(0)
                bottom = view.rowAt(view.viewport().height() - 1)
                bottom = tl.model.total - 1 if bottom < 0 else bottom
                return range(max(top, 0), bottom + 1)

            def visible_loaded() -> bool:  # what a line shows, but its thumbnail
                m = tl.model
                return all(m.data(m.index(i, m.COL_WINDOW)) and m.data(m.index(i, m.COL_TEXT))
                           for i in visible_lines())

            def visible_slots() -> list[int]:
                vp = tl.strip.viewport().rect()
                sm = tl.strip.strip
                return [s for s in range(sm.rowCount()) if tl.strip.visualRect(sm.index(s)).intersects(vp)]

            def thumbs_in() -> bool:
                m, sm = tl.model, tl.strip.strip
                return (all(m.thumbs.has(m.id_at(i)) for i in visible_lines())
                        and all(m.thumbs.has(m.id_at(sm.line_of(s))) for s in visible_slots()))

            def strip_follows(line: int) -> bool:
                return tl.strip.currentIndex().row() == tl.strip.strip.slot_of(line)

            t = time.perf_counter()
            tl.resize(1280, 860)
            tl.show()
            QTest.qWaitForWindowExposed(tl)
            until(lambda: tl.model.total == a.rows and shown(a.rows - 1))
            open_ms = (time.perf_counter() - t) * 1000
            gc.collect()
            rng = random.Random(7)
            tl.table.setFocus()

            gui_cpu: dict[str, list[float]] = {}

            def timed(action, cond, what: str = "") -> float:
                c = time.thread_time()
                t = time.perf_counter()
                action()
                until(cond)
                app.processEvents()  # the repaint that follows
                wall = (time.perf_counter() - t) * 1000
                if what:  # the GUI thread's own work for it: what a busy machine multiplies into waiting
                    gui_cpu.setdefault(what, []).append((time.thread_time() - c) * 1000)
                return wall

            switch, hour, scrub, scrub_thumbs, strip, scroll, scroll_thumbs = [], [], [], [], [], [], []
            for _ in range(a.runs):
                tl.go(rng.randrange(a.rows - 10))
                until(lambda: shown(tl.line) and visible_loaded())
                for _ in range(3):
                    target = tl.line + 1
                    switch.append(timed(lambda: QTest.keyClick(tl.table, Qt.Key.Key_Right),
                                        lambda target=target: shown(target), "frame_switch"))
            for n in range(a.runs):
                key = Qt.Key.Key_PageDown if n % 2 == 0 or tl.line < a.rows // 10 else Qt.Key.Key_PageUp
                if tl.line > a.rows - a.rows // 10:
                    key = Qt.Key.Key_PageUp
                before = tl.line
                hour.append(timed(lambda key=key: QTest.keyClick(tl.table, key),
                                  lambda before=before: tl.line != before and shown(tl.line) and visible_loaded(),
                                  "hour_jump"))
                gc.collect()
            for _ in range(a.runs):
                v = rng.randrange(a.rows)
                scrub.append(timed(lambda v=v: tl.slider.setValue(v),
                                   lambda v=v: shown(v) and visible_loaded() and strip_follows(v), "slider_scrub"))
                until(thumbs_in)
                gc.collect()
            for _ in range(a.runs):
                v = rng.randrange(a.rows)
                scrub_thumbs.append(timed(lambda v=v: tl.slider.setValue(v), lambda v=v: shown(v) and thumbs_in()))
                gc.collect()
            sm = tl.strip.strip
            for _ in range(a.runs):
                slot = rng.randrange(sm.rowCount())
                idx = sm.index(slot)
                tl.strip.scrollTo(idx)
                until(lambda: shown(tl.line) and thumbs_in())
                pos = tl.strip.visualRect(idx).center()
                line = sm.line_of(slot)
                strip.append(timed(lambda pos=pos: QTest.mouseClick(tl.strip.viewport(), Qt.MouseButton.LeftButton,
                                                                    pos=pos),
                                   lambda line=line: shown(line) and strip_follows(line), "strip_click"))
                gc.collect()
            bar = tl.table.verticalScrollBar()
            bar.setValue(0)
            until(lambda: visible_loaded() and thumbs_in())
            for _ in range(a.runs):
                step = bar.pageStep()
                scroll.append(timed(lambda step=step: bar.setValue(min(bar.value() + step, bar.maximum())),
                                    visible_loaded, "scroll_page"))
                until(thumbs_in)
            bar.setValue(bar.maximum() // 3)
            until(lambda: visible_loaded() and thumbs_in())
            for _ in range(a.runs):
                step = bar.pageStep()
                scroll_thumbs.append(timed(lambda step=step: bar.setValue(min(bar.value() + step, bar.maximum())),
                                           lambda: visible_loaded() and thumbs_in()))
            jobs.shutdown()
            tl.close()
        print(json.dumps({
            "bench": "timeline_scrub", "rows": a.rows, "build_seconds": round(build_s, 1),
            "open_day_ms": round(open_ms, 1),
            "frame_switch": _stats(switch), "hour_jump": _stats(hour), "slider_scrub": _stats(scrub),
            "slider_thumbs": _stats(scrub_thumbs), "strip_click": _stats(strip), "scroll_page": _stats(scroll),
            "scroll_thumbs": _stats(scroll_thumbs), "strip_slots": sm.rowCount(), "strip_minutes": sm.minutes,
            "gui_thread_cpu": {k: _stats(v) for k, v in gui_cpu.items()}, "target_p95_ms": 100, "load_avg_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        }))
    finally:
        xvfb.terminate()
        xvfb.wait(timeout=10)


if __name__ == "__main__":
    main()
