"""Edit races on shared memories between real processes: a worker process, and the check that no edit is gone.

    python -m tests.memory.race_worker HOME IDS_JSON OUT_JSON TAG ROUNDS START_AT TICK

The worker opens the Mirador home HOME (its binding's credentials come from the environment), then edits every
memory of IDS_JSON in turn, ROUNDS times, as a person, each edit with a text of its own. Edit n starts at the
wall-clock time START_AT + n * TICK, so two workers edit the same memory within a few milliseconds of each
other every time (a tight race: both read the same version), whatever drift one edit's duration would cause. It records what each edit
started from and what it wrote (the shared version its store read, and the new version) by watching the
store's routing of the edit (Remotes.put), flushes until nothing waits, and writes the records to OUT_JSON.

`lost_edits` then reads the bucket and decides, for every recorded edit, whether it left a trace: it is the
current version, or it is kept as a superseded version of the memory, or a version in the bucket's edit log
was made on top of it (its base). An edit that is none of these is gone without a trace — the failure issue
41 describes. tests/memory/test_remote_races.py and bench/shared_scope.py use both.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    home, ids_path, out_path, tag, rounds, start_at, tick = argv
    from memory.store.core import Store

    store = Store(Path(home))
    ids = json.loads(Path(ids_path).read_text())
    records: list[dict[str, Any]] = []
    routed = store.remotes.put

    def watch(row, actor="person", old=None):
        records.append({"id": row["id"], "text": row["text"], "version": row["updated_at"].isoformat(),
                        "base": old["updated_at"].isoformat() if old and old.get("updated_at") else None,
                        "tag": tag, "pid": os.getpid()})
        return routed(row, actor=actor, old=old)

    store.remotes.put = watch
    errors: list[str] = []
    late = 0
    for n in range(int(rounds) * len(ids)):
        r, k = divmod(n, len(ids))
        at = float(start_at) + n * float(tick)
        if time.time() > at:
            late += 1  # the previous edit overran its tick: this one may not race
        while time.time() < at:
            time.sleep(0.002)  # the agreed instant: every worker edits this memory now
        try:
            store.update_memory(ids[k], text=f"Race memory {k}: edited by {tag} in round {r}", actor="person")
        except Exception as e:  # reported, and the test fails on it
            errors.append(f"{ids[k]}: {type(e).__name__}: {e}")
    for _ in range(20):  # whatever waits in the outbox (a flush that lost every try) goes now
        if store.remotes.flush()["pending"] == 0:
            break
        time.sleep(0.5)
    Path(out_path).write_text(json.dumps({"records": records, "errors": errors, "late": late,
                                          "pending": sum(store.remotes.pending().values())}))
    return 0


def run_workers(jobs: list[tuple[Path, str]], ids: list[str], work: Path, rounds: int, env: dict[str, str],
                tick: float = 1.0, lead: float = 25.0) -> list[dict[str, Any]]:
    """Start one worker per (home, tag), all editing `ids` in step, one memory every `tick` seconds from the same
    instant (`lead` seconds from now, time enough to open a store); wait for them; return their outputs."""
    ids_path = work / "race-ids.json"
    ids_path.write_text(json.dumps(ids))
    start_at = time.time() + lead
    procs = []
    for home, tag in jobs:
        out = work / f"race-{tag}.json"
        procs.append((out, subprocess.Popen(
            [sys.executable, "-m", "tests.memory.race_worker", str(home), str(ids_path), str(out), tag, str(rounds),
             str(start_at), str(tick)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    outs = []
    for out, p in procs:
        log, _ = p.communicate(timeout=900)
        if p.returncode != 0:
            raise AssertionError(f"race worker failed ({p.returncode}):\n{log[-4000:]}")
        outs.append(json.loads(out.read_text()))
    return outs


def lost_edits(shared: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every recorded edit checked against the bucket (module docstring): {"tried", "raced", "lost": [...],
    "kept_versions", "current", "duplicates"}. `raced`: edits that started from a version another recorded
    edit also started from (a real race)."""
    from memory.store.filters import id_in
    from memory.store.remote import fresh

    ids = sorted({r["id"] for r in records})
    t = fresh(shared.memories(create=False))
    cols = ["id", "text", "updated_at", "status", "superseded_by"]
    current = t.search().where(id_in(ids)).select(cols).limit(None).to_arrow().to_pylist()
    kept = t.search().where(id_in(ids, "superseded_by")).select(cols).limit(None).to_arrow().to_pylist()
    log = fresh(shared.edits(create=False)).search().where(id_in(ids)).select(
        ["id", "updated_at"]).limit(None).to_arrow().to_pylist()
    now = {r["id"]: r for r in current}
    kept_texts = {(r["superseded_by"], r["text"]) for r in kept}
    applied = {(r["id"], r["updated_at"].isoformat()) for r in log}
    built_on = {(r["id"], r["base"]) for r in records if (r["id"], r["version"]) in applied}
    starts: dict[tuple[str, str | None], int] = {}
    for r in records:
        starts[(r["id"], r["base"])] = starts.get((r["id"], r["base"]), 0) + 1
    lost = []
    for r in records:
        cur = now.get(r["id"])
        if cur is not None and cur["updated_at"].isoformat() == r["version"]:
            continue
        if (r["id"], r["text"]) in kept_texts or (r["id"], r["version"]) in built_on:
            continue
        lost.append(r)
    all_ids = [r["id"] for r in current + kept]
    return {"tried": len(records), "raced": sum(1 for r in records if starts[(r["id"], r["base"])] > 1),
            "lost": lost, "kept_versions": len(kept), "current": len(current),
            "duplicates": len(all_ids) - len(set(all_ids))}


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
