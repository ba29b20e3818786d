"""What keeping the windows live costs (desktop/ui/store_watch.py): the once-a-second probe of the
store's table versions, and the re-read an open browser and Review do after a change.

Builds N memories (a share of them candidates) with a stand-in embedder, then times `table_versions`
(the probe, run in a worker every second), `memory_keys` + the first page (the browser's refresh on
a change) and the candidates' id list (Review's refresh). Prints one JSON object.
Usage: .venv/bin/python bench/live_windows.py --rows 100000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.desktop_paging import _Vectors  # noqa: E402
from desktop.ui.browser_data import MemoryFilter, fetch_rows, memory_keys  # noqa: E402
from desktop.ui.store_watch import table_versions  # noqa: E402
from memory.store.core import MemorySpec, Store  # noqa: E402


def _times(fn, n: int) -> dict:
    ms = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 2),
            "max_ms": round(ms[-1], 2), "runs": n}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--candidates", type=float, default=0.05, help="share of memories that are candidates")
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

        def browser_refresh():
            keys = memory_keys(store, MemoryFilter())
            fetch_rows(store, "memory", keys.ids[:200])

        out = {
            "bench": "live_windows", "rows": a.rows,
            "probe": _times(lambda: table_versions(store), 200),
            "browser_refresh": _times(browser_refresh, 10),
            "review_refresh": _times(lambda: memory_keys(store, MemoryFilter(statuses=["candidate"])), 10),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
