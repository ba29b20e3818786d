"""recall() with the onnxruntime query encoder vs torch, interleaved on one store in one process.

Machine noise on this 2-core box moves whole bench runs by 10-40%; alternating the two embedders
query by query measures their difference under the same conditions. Each query is fresh for both.

    .venv/bin/python bench/recall_embedder_ab.py --store /tmp/mirador-scale/100k --queries 160

--store: a store built by `bench/scale.py --dir D` (D/100k). Prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", type=Path, required=True, help="a data dir built by bench/scale.py --dir")
    ap.add_argument("--queries", type=int, default=160)
    ap.add_argument("--budget", type=int, default=1000)
    a = ap.parse_args(argv)
    if not (a.store / "lancedb").is_dir():
        ap.error(f"{a.store} holds no store — build one with `bench/scale.py --dir D` and pass D/100k")
    import scale

    from memory.retrieval.recall import recall
    from memory.store.core import Store
    from models.embedder import Embedder

    emb = {"onnxruntime": Embedder(threads=1), "torch": Embedder(threads=1, use_onnx=False)}
    for e in emb.values():
        e.wait_ready(300)
    stores = {k: Store(a.store, embedder=e) for k, e in emb.items()}
    for q in scale.queries(6, 1):  # warm index caches for both
        for st in stores.values():
            recall(st, q, a.budget, scopes=scale.QUERY_SCOPES)
    times: dict[str, list[float]] = {k: [] for k in stores}
    for i, q in enumerate(scale.queries(a.queries, 99)):
        order = list(stores.items()) if i % 2 else list(reversed(stores.items()))
        for name, st in order:
            t = time.perf_counter()
            recall(st, q, a.budget, scopes=scale.QUERY_SCOPES)
            times[name].append((time.perf_counter() - t) * 1000)
    out = {f"recall_p50_ms_{k}": round(statistics.median(v), 1) for k, v in times.items()}
    out.update({"queries": a.queries, "backend_check": emb["onnxruntime"].backend, "store": str(a.store)})
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
