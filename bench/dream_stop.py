"""How long a dream pass over many changed memories takes, and how soon it ends when Mirador quits.

Builds a temp store of N memories (as after an import: all changed since the last pass), then runs
a dry-run pass to the end, and another that the scheduler's stop event ends after --stop-after s.
Dry runs, so both passes plan the same work and neither writes. Prints one JSON object.

    .venv/bin/python bench/dream_stop.py [--memories 2000] [--stop-after 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

TEAMS = ["billing", "search", "auth", "mobile", "platform", "design"]


def timed_pass(store, stop_after: float | None) -> dict:
    from memory.consolidation.dream import run_dream

    stop, out = threading.Event(), {}
    worker = threading.Thread(target=lambda: out.setdefault("plan", run_dream(store, dry_run=True, stop=stop)))
    t0 = time.monotonic()
    worker.start()
    asked = None
    if stop_after is not None:
        worker.join(stop_after)
        asked = time.monotonic()
        stop.set()
    worker.join()
    done = time.monotonic()
    plan = out["plan"]
    return {"pass_s": round(done - t0, 2), "stop_to_end_ms": round((done - asked) * 1000, 1) if asked else None,
            "stopped": plan.stopped, "steps_planned": len(plan.steps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=2000)
    ap.add_argument("--stop-after", type=float, default=2.0, help="seconds into the second pass")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mirador-dream-stop-") as home:
        os.environ["MIRADOR_HOME"] = home
        from memory.store.core import MemorySpec, Store

        store = Store(Path(home))
        specs = [MemorySpec(text=f"Note {i}: the {TEAMS[i % len(TEAMS)]} team decided item {i * 7} about topic {i % 97}",
                            type="episodic" if i % 3 else "semantic", scope="work") for i in range(a.memories)]
        for i in range(0, len(specs), 500):
            store.add_memories(specs[i:i + 500], actor="import")
        result = {"memories": a.memories, "full_pass": timed_pass(store, None),
                  "quit_during_pass": timed_pass(store, a.stop_after)}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
