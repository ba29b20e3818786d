"""Smoke test of a built bundle on any OS (the Windows twin of installer/smoke_test.sh).

    python installer/smoke_test.py dist/mirador/mirador.exe

The bundle runs with a near-empty environment: a temp HOME (and the Windows profile variables
pointing into it), and a PATH without any Python. Checks `--version`, `doctor` (no FAIL) and
`selftest --models` (add/search/recall in a temp home, plus the bundled LLM and whisper models).
This script's own Python only drives the test; the bundle never sees it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def clean_env(home: Path) -> dict:
    """An environment with nothing but a temp home and a PATH that has no Python on it."""
    bindir = home / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "PATH": str(bindir)}
    tess = shutil.which("tesseract")
    if os.name == "nt":
        # Windows cannot start processes without SYSTEMROOT; the profile folders go to the temp home
        # so platformdirs never resolves the real user's AppData.
        env.update(SYSTEMROOT=os.environ.get("SYSTEMROOT", r"C:\Windows"), USERPROFILE=str(home),
                   APPDATA=str(home / "AppData" / "Roaming"), LOCALAPPDATA=str(home / "AppData" / "Local"),
                   TEMP=str(home / "tmp"), TMP=str(home / "tmp"))
        (home / "tmp").mkdir(exist_ok=True)
        if tess:
            env["PATH"] += os.pathsep + str(Path(tess).parent)  # its folder has no python.exe
    elif tess:
        (bindir / "tesseract").symlink_to(tess)
    return env


def run(binary: Path, args: list[str], env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the bundle, echoing its output."""
    print(f"== {binary.name} {' '.join(args)}", file=sys.stderr, flush=True)
    out = subprocess.run([str(binary), *args], env=env, capture_output=True, text=True, timeout=timeout)
    sys.stdout.write(out.stdout)
    sys.stderr.write(out.stderr[-4000:])
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the three checks; exit 1 if any fails."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: smoke_test.py path/to/mirador[.exe]", file=sys.stderr)
        return 2
    binary = Path(argv[0]).resolve()
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    failures = []
    with tempfile.TemporaryDirectory(prefix="mirador-smoke-") as tmp:
        env = clean_env(Path(tmp))
        if any(shutil.which(p, path=env["PATH"]) for p in ("python", "python3")):
            failures.append("a Python is on the test PATH")
        out = run(binary, ["--version"], env)
        if out.stdout.strip() != f"mirador {want}":
            failures.append(f"--version printed {out.stdout.strip()!r}, want 'mirador {want}'")
        if run(binary, ["doctor"], env).returncode != 0:
            failures.append("doctor reported a FAIL")
        t0 = time.monotonic()
        out = run(binary, ["selftest", "--models"], env)
        print(f"selftest took {time.monotonic() - t0:.0f}s", file=sys.stderr)
        try:
            report = json.loads(out.stdout)
        except json.JSONDecodeError:
            report = {}
        if out.returncode != 0 or not report.get("ok") or not report.get("frozen"):
            failures.append(f"selftest failed (exit {out.returncode})")
    for f in failures:
        print(f"smoke: FAIL {f}", file=sys.stderr)
    print("smoke: PASS" if not failures else "smoke: FAILED", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
