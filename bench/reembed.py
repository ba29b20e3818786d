"""How long `mirador reembed` takes: a synthetic store (bench/scale.py's rows, vectors as an untuned
store would hold them) re-embedded by the tuned embedder, every row through the real model.

    .venv/bin/python bench/reembed.py [--memories 5000] [--evidence 20000]

Prints one JSON object: rows, seconds to stage the new vectors (per table), seconds searches ran
on mixed vectors while the staged ones replaced the old (switch_s), the index retrain, rows/s.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=5000)
    ap.add_argument("--evidence", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=1000, help="ingest batch of the synthetic build")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)

    from memory.config import Config
    from memory.store.reembed import reembed, target_embedder
    from models.embedder import shared_embedder

    untuned = shared_embedder()
    home = Path(tempfile.mkdtemp(prefix="mirador-reembed-"))
    try:
        corpus = scale.Corpus(untuned, 400, seed=7)
        built = scale.build(home, args.memories, corpus, scale.BulkEmbedder(untuned),
                            args.evidence / max(args.memories, 1), args.batch)
        store = built["store"]
        target = target_embedder(Config().models)
        target.embed(["warm up"])
        target.wait_ready(120)
        steps: dict[str, float] = {}
        t0 = time.perf_counter()

        def progress(step: str, done: int, total: int) -> None:
            if done == total and step != "switch":
                steps[step] = round(time.perf_counter() - t0 - sum(steps.values()), 1)

        report = reembed(store, progress=progress, settle=0)
        rows = report["memories"] + report["evidence"]
        vectors_s = sum(steps.values())
        print(json.dumps({
            "memories": report["memories"], "evidence": report["evidence"], "skipped": report["skipped"],
            "embedder": report["embedder"], "backend": target.backend, "seconds": report["seconds"],
            "vectors_s": round(vectors_s, 1), "per_table_s": steps, "switch_s": report["switch_seconds"],
            "retrain_and_compact_s": round(report["seconds"] - vectors_s - report["switch_seconds"], 1),
            "rows_per_s": round(rows / max(vectors_s, 1e-9)), "indexes_retrained": report["indexes"],
        }))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
