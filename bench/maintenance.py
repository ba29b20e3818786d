"""Query latency under live writes: LanceDB's own optimize() vs Mirador's maintenance pass.

    .venv/bin/python bench/maintenance.py --from /tmp/scale/100k

--from is a store bench/scale.py built (its evidence table, ~110k rows with trained indexes). Its
evidence table is copied twice into a temp dir; on each copy, every pass appends --writes batches of
--rows rows (copies of existing rows under new ids, as live capture appends small batches) and then
runs one maintenance pass: LanceDB's table.optimize() on one copy, memory.store.indexes.optimize_table()
on the other. At checkpoints it times a vector leg and a full-text leg as searches run them (scope
filter, 50 candidates, scores and row addresses only) and a take of 40 rows by address, and reports
the fragments and vector index segments. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

QUERIES = ["what did Luis say about the pricing page", "why did we pick Rust for Orion",
           "who is blocked on the on-call rotation", "notes on incident 4821 and the release date"]


class _Direct:
    """What optimize_table needs of a Store: run each commit (one writer here, so no retries)."""

    @staticmethod
    def commit(fn):
        return fn()


async def _latencies(path: str, vectors: list, n: int, rnd: random.Random) -> dict:
    import lancedb

    from memory.store import filters as F

    db = await lancedb.connect_async(path, read_consistency_interval=timedelta(0))
    t = await db.open_table("evidence")
    addrs = (await t.query().with_row_id().select(["id"]).to_arrow())["_rowid"].to_pylist()
    where = F.equals("scope", "work")
    runs = {
        "vector_leg": lambda i: t.vector_search(vectors[i % len(vectors)]).column("vector").distance_type("cosine")
        .nprobes(40).where(where).with_row_id().select(["_distance"]).limit(50),
        "fts_leg": lambda i: t.query().nearest_to_text(QUERIES[i % len(QUERIES)], columns="search_text")
        .where(where).with_row_id().select(["_score"]).limit(50),
        "take_40": lambda i: t.take_row_ids(sorted(rnd.sample(addrs, 40))).select(["id", "text", "speaker"]),
    }
    out = {}
    for name, q in runs.items():
        times = []
        for i in range(n + 5):
            t0 = time.perf_counter()
            await q(i).to_arrow()
            times.append((time.perf_counter() - t0) * 1000)
        out[f"{name}_p50_ms"] = round(statistics.median(times[5:]), 2)
    return out


def _state(table) -> dict:
    from memory.store.indexes import vector_index_segments

    return {"fragments": len(table.to_lance().get_fragments()), "vector_segments": vector_index_segments(table),
            "rows": table.count_rows()}


def run(src: Path, strategy: str, passes: int, writes: int, rows: int, checkpoints: set[int], queries: int,
        seed: int) -> dict:
    import lancedb
    import pyarrow as pa

    from memory.store.indexes import optimize_table

    with tempfile.TemporaryDirectory(prefix="mirador-maint-") as tmp:
        shutil.copytree(src / "lancedb" / "evidence.lance", Path(tmp) / "evidence.lance")
        table = lancedb.connect(tmp, read_consistency_interval=timedelta(0)).open_table("evidence")
        sample = table.to_lance().head(2_000)
        vectors = [v.as_py() for v in sample["vector"][:200]]
        rnd = random.Random(seed)
        points, pass_s = [], []
        for p in range(passes + 1):
            if p:
                for _ in range(writes):
                    batch = sample.slice(rnd.randrange(0, sample.num_rows - rows), rows)
                    ids = pa.array([f"ev_{uuid.UUID(int=rnd.getrandbits(128)).hex}" for _ in range(rows)])
                    table.add(batch.set_column(batch.schema.get_field_index("id"), "id", ids))
                t0 = time.perf_counter()
                table.optimize() if strategy == "lancedb_optimize" else optimize_table(_Direct, table)
                pass_s.append(time.perf_counter() - t0)
            if p in checkpoints:
                point = {"passes": p, **_state(table), **asyncio.run(_latencies(tmp, vectors, queries, rnd))}
                if pass_s:
                    point["pass_s_median"] = round(statistics.median(pass_s), 2)
                points.append(point)
                print(json.dumps({strategy: point}), file=sys.stderr, flush=True)
        return {"checkpoints": points}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", required=True, type=Path, help="a store built by bench/scale.py")
    ap.add_argument("--passes", type=int, default=40)
    ap.add_argument("--writes", type=int, default=5, help="write batches per pass")
    ap.add_argument("--rows", type=int, default=6, help="rows per write batch")
    ap.add_argument("--queries", type=int, default=60, help="timed queries per kind at each checkpoint")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args(argv)
    if not (a.src / "lancedb" / "evidence.lance").is_dir():
        ap.error(f"{a.src} holds no lancedb/evidence.lance: bench/scale.py --dir DIR builds DIR/100k")
    checkpoints = {0, 1, 5, 10, 20, a.passes} & set(range(a.passes + 1))
    out = {"method": __doc__.split("\n\n")[2].replace("\n", " "), "source": str(a.src),
           "passes": a.passes, "rows_per_pass": a.writes * a.rows}
    for strategy in ("lancedb_optimize", "maintenance"):
        out[strategy] = run(a.src, strategy, a.passes, a.writes, a.rows, checkpoints, a.queries, a.seed)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
