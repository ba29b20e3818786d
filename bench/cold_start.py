"""Cold start of a CLI recall (what a Claude Code hook pays when the app is not running): prints JSON.

Runs `mirador recall` in a new process, several times, on a temp data directory holding one memory:
wall time and peak RSS (of the child), median and max. Twice: with the query encoder's onnxruntime
export cached (the normal case after the first start: no torch import), and with
`models.embedder_onnx = false` (torch and sentence-transformers load, as every process did before).

    .venv/bin/python bench/cold_start.py [--runs 5] [--command recall|search]

--command search times `mirador search QUERY --json` instead (the Claude Code hooks' other call).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MIRADOR = [sys.executable, "-m", "desktop.cli.main"]


COMMANDS = {"recall": ["recall", "why did we pick postgres?", "--budget", "200"],
            "search": ["search", "why did we pick postgres?", "--json"]}


def one_run(env: dict, command: str = "recall") -> tuple[float, float]:
    """(seconds, peak RSS in MB) of one `mirador recall` (or search) child."""
    t = time.perf_counter()
    # A fresh child per run: RUSAGE_CHILDREN's max RSS covers every child reaped so far, so each run
    # goes through its own short-lived parent to read its own peak.
    code = ("import resource, subprocess, sys, json\n"
            f"subprocess.run({MIRADOR + COMMANDS[command]!r}, check=True,"
            " stdout=subprocess.DEVNULL)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return time.perf_counter() - t, int(out.stdout.strip()) / 1024


def measure(env: dict, runs: int, command: str = "recall") -> dict:
    got = [one_run(env, command) for _ in range(runs)]
    secs, rss = [g[0] for g in got], [g[1] for g in got]
    return {"wall_s_median": round(statistics.median(secs), 2), "wall_s_max": round(max(secs), 2),
            "peak_rss_mb_median": round(statistics.median(rss)), "runs": runs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--command", choices=sorted(COMMANDS), default="recall")
    ap.add_argument("--cached-only", action="store_true", help="only the normal case (the export cached), not torch")
    a = ap.parse_args()
    load_before = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "MIRADOR_HOME": str(home), "PYTHONPATH": str(ROOT)}
        subprocess.run(MIRADOR + ["add", "We picked PostgreSQL for billing because we need transactional DDL."],
                       env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
        # The first start makes the export if this machine has none; not part of either figure.
        subprocess.run(MIRADOR + ["recall", "warm up", "--budget", "100"], env=env, cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        cached = measure(env, a.runs, a.command)
        torch_path = None
        if not a.cached_only:
            (home / "config.toml").write_text("[models]\nembedder_onnx = false\n", encoding="utf-8")
            torch_path = measure(env, a.runs, a.command)
    print(json.dumps({"benchmark": "cold_start", "command": " ".join(["mirador", *COMMANDS[a.command]]),
                      "export_cached": cached, "torch_loaded": torch_path, "cpus": os.cpu_count(),
                      "load_before": load_before, "load_after": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
