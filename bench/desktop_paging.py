"""How the memory browser's lazy table behaves over a big store: id-list load and page fetch latency.

Builds N memories with a stand-in embedder (vectors do not matter for paging), then times
`memory_keys` (the id list the table pages through) and `fetch_rows` for pages at the start,
middle and end, the way the browser's workers call them. Prints one JSON object.
Usage: .venv/bin/python bench/desktop_paging.py --rows 100000
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

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from desktop.ui.browser_data import MemoryFilter, fetch_rows, memory_keys  # noqa: E402
from memory.store.core import MemorySpec, Store  # noqa: E402

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")


class _Vectors:
    dim = 384
    model_dir = "stand-in"

    def embed(self, texts):
        rng = np.random.default_rng(len(texts))
        v = rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]

    def embed_queries(self, texts):
        return [self.embed_query(t) for t in texts]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--page", type=int, default=200)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp), embedder=_Vectors())
        store.config.store.optimize_after_writes = 10_000
        t0 = time.perf_counter()
        for start in range(0, a.rows, 10_000):
            n = min(10_000, a.rows - start)
            store.add_memories([MemorySpec(text=f"memory {start + i} about the ledger and standups",
                                           scope="work" if i % 3 else "personal") for i in range(n)])
        build_s = time.perf_counter() - t0
        keys_ms, page_ms = [], {}
        for _ in range(3):
            t = time.perf_counter()
            keys = memory_keys(store, MemoryFilter())
            keys_ms.append((time.perf_counter() - t) * 1000)
        work_t = time.perf_counter()
        work = memory_keys(store, MemoryFilter(scopes=["work"]))
        work_ms = (time.perf_counter() - work_t) * 1000
        for name, off in (("first", 0), ("middle", len(keys.ids) // 2), ("last", len(keys.ids) - a.page)):
            times = []
            for _ in range(5):
                t = time.perf_counter()
                rows = fetch_rows(store, "memory", keys.ids[off: off + a.page])
                times.append((time.perf_counter() - t) * 1000)
            assert len(rows) == a.page
            page_ms[name] = round(statistics.median(times), 1)
    print(json.dumps({
        "rows": a.rows, "page_size": a.page, "build_seconds": round(build_s, 1),
        "id_list_ms_median": round(statistics.median(keys_ms), 1), "id_list_ids": len(keys.ids),
        "id_list_scoped_ms": round(work_ms, 1), "scoped_ids": len(work.ids),
        "page_fetch_ms_median": page_ms,
    }))


if __name__ == "__main__":
    main()
