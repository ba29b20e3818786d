"""Sealed at rest against in the clear, side by side: bench/scale.py run on the code before sealing and on this
tree, alternating, on the same machine in one run (issue 40: hybrid search and recall p50 at 100k memories no
more than 1.25x before).

    .venv/bin/python bench/sealed_scale.py --before 5e2dd1c --rounds 2 > bench/results/sealed_scale.json

The code before is checked out from git into a temporary worktree; both sides run this tree's bench/scale.py
(the same corpus, seed, queries and method), each in its own process with its own code on the path, each on
its own stores (built once, reused by the later rounds). Rounds alternate A, B, A, B so that a machine busier
in one half of the run weighs on both. Prints one JSON object: every round's figures and the ratios of the
medians.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["hybrid_p50_ms", "hybrid_full_rows_p50_ms", "hybrid_evidence_p50_ms", "recall_p50_ms", "recall_cached_p50_ms",
        "hybrid_p95_ms", "recall_p95_ms"]


def run_scale(code: Path, store_dir: Path, size: int, queries: int) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=str(code),
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    env.setdefault("MIRADOR_PASSPHRASE", "the bench's passphrase")
    # The bench script of this tree, run from the code under test (its own `sys.path` insert points there).
    script = code / "bench" / "_scale_this.py"
    shutil.copy(ROOT / "bench" / "scale.py", script)
    out = subprocess.run([sys.executable, str(script), "--sizes", str(size), "--queries", str(queries), "--no-ingest",
                          "--dir", str(store_dir)], cwd=code, env=env, capture_output=True, text=True, check=False)
    script.unlink(missing_ok=True)
    if out.returncode:
        raise SystemExit(f"bench/scale.py failed in {code}:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="git ref of the code before sealing")
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", help="where the stores are built (kept); default a temp dir, removed after")
    a = ap.parse_args()
    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="mirador-sealed-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    before = work / "code-before"
    if not before.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), a.before], check=True,
                       capture_output=True)
    sides = {"before": before, "sealed": ROOT}
    runs: dict[str, list[dict]] = {"before": [], "sealed": []}
    try:
        for _ in range(a.rounds):
            for name, code in sides.items():
                r = run_scale(code, work / f"stores-{name}", a.size, a.queries)
                tag = f"{a.size // 1000}k"
                runs[name].append({k: r.get(f"{k}_{tag}") for k in KEYS})
                print(f"{name}: {runs[name][-1]}", file=sys.stderr, flush=True)
    finally:
        if not a.dir:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)], check=False)
            shutil.rmtree(work, ignore_errors=True)
    med = {name: {k: round(statistics.median(r[k] for r in rs), 2) for k in KEYS} for name, rs in runs.items()}
    ratio = {k: round(med["sealed"][k] / med["before"][k], 2) for k in KEYS if med["before"][k]}
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    print(json.dumps({"bench": "sealed_scale", "date": date.today().isoformat(), "commit": commit,
                      "before": a.before, "size": a.size, "queries": a.queries, "rounds": a.rounds,
                      "command": f".venv/bin/python bench/sealed_scale.py --before {a.before} --rounds {a.rounds}",
                      "median": med, "ratio_sealed_to_before": ratio, "runs": runs}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
