"""What keeping the windows live costs (desktop/ui/store_watch.py): the once-a-second probe of the
store's table versions, and the re-read an open browser and Review do after a change.

Builds N memories (a share of them candidates) with a stand-in embedder, then times `table_versions`
(the probe, run in a worker every second); the browser's refresh after another process changed one of
the rows it shows (the id listing with change times, then reading again only the shown rows whose time
moved, as LazyRowModel.refresh does: `browser_refresh`, and the count of rows it read again); the full
re-read the refresh did before (listing + every shown row: `browser_reread_all`); and the candidates' id
list (Review's refresh). Prints one JSON object.
Usage: .venv/bin/python bench/live_windows.py --rows 100000 [--indexes]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.desktop_paging import _Vectors  # noqa: E402
from desktop.ui.browser_data import MemoryFilter, fetch_rows, memory_keys, rows_to_refetch  # noqa: E402
from desktop.ui.store_watch import table_versions  # noqa: E402
from memory.store.core import MemorySpec, Store  # noqa: E402

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")


def _times(fn, n: int) -> dict:
    ms = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "max_ms": round(ms[-1], 2), "runs": n}


def _timed(fn, n: int) -> dict:
    """Like _times, for a fn that returns the seconds of its own timed part (its set-up is not counted)."""
    ms = sorted(fn() * 1000 for _ in range(n))
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "max_ms": round(ms[-1], 2), "runs": n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--candidates", type=float, default=0.05, help="share of memories that are candidates")
    ap.add_argument("--shown", type=int, default=200, help="rows the open browser has loaded")
    ap.add_argument("--indexes", action="store_true",
                    help="build the scalar indexes maintenance gives a store this size (id, scope, status, type)")
    a = ap.parse_args()
    every = max(1, round(1 / a.candidates)) if a.candidates else 0
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp), embedder=_Vectors())
        store.config.store.optimize_after_writes = 10_000
        for start in range(0, a.rows, 10_000):
            n = min(10_000, a.rows - start)
            store.add_memories([MemorySpec(text=f"memory {start + i} about the ledger and standups", scope="work",
                                           status="candidate" if every and (start + i) % every == 0 else "active")
                                for i in range(n)])

        if a.indexes:
            from memory.store import tables as T
            from memory.store.indexes import maintain

            maintain(store, force_vector=True, tables=[T.MEMORIES])  # the scalar indexes too, whatever the size
        keys = memory_keys(store, MemoryFilter())
        shown = {r["id"]: r for r in fetch_rows(store, "memory", keys.ids[:a.shown])}
        reread: list[int] = []

        def browser_refresh():
            # another process edits one shown memory (not timed), then the open browser refreshes
            victim = keys.ids[len(reread) % a.shown]
            store.update_memory(victim, actor="person", confidence=0.5 + (len(reread) % 40) / 100)
            t = time.perf_counter()
            fresh = memory_keys(store, MemoryFilter())
            window = fresh.ids[:a.shown]
            again = rows_to_refetch(fresh, window, shown, keep=set())
            shown.update((r["id"], r) for r in fetch_rows(store, "memory", again))
            reread.append(len(again))
            return time.perf_counter() - t

        def browser_reread_all():
            fresh = memory_keys(store, MemoryFilter())
            fetch_rows(store, "memory", fresh.ids[:a.shown])

        out = {
            "bench": "live_windows", "rows": a.rows, "shown": a.shown, "scalar_indexes": a.indexes,
            "probe": _times(lambda: table_versions(store), 200),
            "browser_refresh": _timed(browser_refresh, 20),
            "browser_refresh_rows_reread_max": max(reread),
            "browser_reread_all": _times(browser_reread_all, 10),
            "browser_listing_only": _times(lambda: memory_keys(store, MemoryFilter()), 10),
            "review_refresh": _times(lambda: memory_keys(store, MemoryFilter(statuses=["candidate"])), 10),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
