"""Cold start: what a CLI call pays with no Mirador running (a Claude Code hook), and the idle tray app's memory.

Prints one JSON object. Each CLI figure is a new process per run, several runs, on a temp data directory
(one memory, a few evidence rows), with no service running: wall time, CPU time (user + system, less
sensitive to other jobs on a shared machine than wall time) and peak RSS of the child, median and max.
One more run of each says what the RSS is made of when the command ends (`rss_at_exit`): private memory
(RssAnon: Python's objects, onnxruntime's buffers) and pages of mapped files (RssFile: the libraries'
code, the model's weights), which the page cache shares with every other process mapping the same files,
their sum (`rss_mb`, below the peak where the command let go of pages it was done with, e.g. a one-shot
call's embedder weights: models/pages.py) and that run's peak (`peak_mb`).
The kernel maps a file's pages in whole page-cache folios, so RssFile grows with the folio size the
machine's readahead produced, not only with the code and weights a command touches.

- `mirador search QUERY --json`, `mirador recall QUERY`, `mirador evidence add TEXT`
- first start: one `mirador search` with an empty embedder cache (the graph is built from the weights)
- the same CLI calls while a service runs (`mirador serve` on the same data dir): the CLI hands them to the
  service over its local endpoint (desktop/runtime/local_endpoint.py) instead of loading the store and model
- the tray app (`mirador app`) under its own Xvfb + openbox + trayer, capture running (screen; no
  microphone here), on a fresh data directory with nothing to extract: RSS of the app and all its
  child processes, sampled after it settles

    .venv/bin/python bench/cold_start.py [--runs 5] [--tray-settle 60] [--no-tray] [--no-service] [--torch]
        [--repo DIR]

--repo runs another checkout's code (e.g. a `git worktree` of an earlier commit) with this venv.

--torch also times search with `models.embedder_onnx = false` (the torch path; needs the dev extra).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

ROOT = Path(__file__).resolve().parents[1]
MIRADOR = [sys.executable, "-m", "desktop.cli.main"]
QUERY = "why did we pick postgres?"
COMMANDS = {
    "search": ["search", QUERY, "--json"],
    "recall": ["recall", QUERY, "--budget", "200"],
    "evidence_add": ["evidence", "add", "Sam: the billing migration to PostgreSQL 16 is done.", "--json"],
}
TARGETS = {"search": "≤ 1.5 s, ≤ 250 MB", "evidence_add": "≤ 1.5 s", "tray": "≤ 600 MB",
           "search_via_service": "≤ 300 ms"}
ANSWERED = "answered by the running Mirador service"  # what `-v` logs when the service answered


def one_run(env: dict, argv: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MB) of one child running `mirador argv`."""
    # A fresh parent per run: RUSAGE_CHILDREN covers every child reaped so far, so each run goes through
    # its own short-lived parent to read its own peak. The wall time is taken around the child alone.
    code = ("import resource, subprocess, time, json\n"
            "t = time.perf_counter()\n"
            f"subprocess.run({MIRADOR + argv!r}, check=True, stdout=subprocess.DEVNULL)\n"
            "w = time.perf_counter() - t\n"
            "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(json.dumps([w, r.ru_utime + r.ru_stime, r.ru_maxrss / 1024]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=env["PYTHONPATH"], capture_output=True, text=True,
                         check=True)
    wall, cpu, rss = json.loads(out.stdout)
    return wall, cpu, rss


# The CLI as its entry point runs it, with a note of the process's memory written at exit: main() runs the
# atexit handlers itself before it ends the process (desktop/cli/main.py _leave).
SPLIT = ("import atexit, json, os, runpy\n"
         "def _split():\n"
         "    f = {ln.split(':')[0]: int(ln.split()[1]) // 1024 for ln in open('/proc/self/status')\n"
         "         if ln.startswith(('VmHWM:', 'VmRSS:', 'RssAnon:', 'RssFile:'))}\n"
         "    with open(os.environ['COLD_START_SPLIT'], 'w') as out:\n"
         "        json.dump(f, out)\n"
         "atexit.register(_split)\n"
         "runpy.run_module('desktop.cli.main', run_name='__main__', alter_sys=True)\n")


def rss_at_exit(env: dict, argv: list[str]) -> dict:
    """What the command's memory is made of when it ends: private (anon) and mapped files (file), in MB."""
    with tempfile.TemporaryDirectory() as tmp:
        note = Path(tmp) / "split.json"
        subprocess.run([sys.executable, "-c", SPLIT, *argv], env={**env, "COLD_START_SPLIT": str(note)},
                       cwd=env["PYTHONPATH"], check=True, stdout=subprocess.DEVNULL)
        f = json.loads(note.read_text())
    return {"anon_mb": f["RssAnon"], "file_mb": f["RssFile"], "rss_mb": f["VmRSS"], "peak_mb": f["VmHWM"]}


def measure(env: dict, runs: int, argv: list[str], split: bool = True) -> dict:
    got = [one_run(env, argv) for _ in range(runs)]
    wall, cpu, rss = ([g[i] for g in got] for i in range(3))
    out = {"wall_s_median": round(statistics.median(wall), 2), "wall_s_max": round(max(wall), 2),
           "cpu_s_median": round(statistics.median(cpu), 2),
           "peak_rss_mb_median": round(statistics.median(rss)), "peak_rss_mb_max": round(max(rss)), "runs": runs}
    if split:
        out["rss_at_exit"] = rss_at_exit(env, argv)
    return out


def seed(env: dict) -> None:
    run = {"env": env, "cwd": env["PYTHONPATH"], "check": True, "stdout": subprocess.DEVNULL}
    subprocess.run(MIRADOR + ["add", "We picked PostgreSQL for billing because we need transactional DDL."], **run)
    for text in ("Ana: the staging kafka volume is full again", "Sam: let's move billing to PostgreSQL",
                 "Standup moved to 9:30 from Monday"):
        subprocess.run(MIRADOR + ["evidence", "add", text], **run)
    # The first start on a machine builds the embedder graph (and merges the tuning) into the per-user
    # cache; measured on its own below, not part of the cold figures.
    subprocess.run(MIRADOR + ["search", "warm up", "--json"], **run)


def first_start(env: dict, home: Path) -> dict:
    """One search with an empty embedder graph cache: the graph is built from the weights first."""
    cfg = home / "config.toml"
    before = cfg.read_text() if cfg.exists() else None
    with tempfile.TemporaryDirectory() as graphs:
        cfg.write_text((before or "") + f"\n[models]\nonnx_dir = '{graphs}'\n", encoding="utf-8")
        try:
            wall, cpu, rss = one_run(env, COMMANDS["search"])
        finally:
            if before is None:
                cfg.unlink()
            else:
                cfg.write_text(before, encoding="utf-8")
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "peak_rss_mb": round(rss)}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def via_service(env: dict, home: Path, runs: int) -> dict:
    """The CLI figures again while `mirador serve` runs on the same data dir (warm store and model)."""
    log = open(home / "serve.log", "w")  # noqa: SIM115 (closed below)
    srv = subprocess.Popen(MIRADOR + ["serve", "--port", str(_free_port())], env=env, cwd=env["PYTHONPATH"],
                           stdout=log, stderr=subprocess.STDOUT)
    out: dict = {}
    try:
        deadline = time.monotonic() + 300
        while not (home / "service-endpoint.json").exists():
            if srv.poll() is not None or time.monotonic() > deadline:
                return {"skipped": f"`mirador serve` did not start: {(home / 'serve.log').read_text()[-500:]}"}
            time.sleep(0.2)
        check = subprocess.run(MIRADOR + ["-v", *COMMANDS["search"]], env=env, cwd=env["PYTHONPATH"],
                               capture_output=True, text=True)
        out["answered_by_service"] = ANSWERED in check.stderr  # else the figures below are in-process ones
        for name, argv in COMMANDS.items():
            out[name] = {"command": " ".join(["mirador", *argv]) + "   (with `mirador serve` running)",
                         **measure(env, runs, argv, split=False)}
    finally:
        srv.send_signal(signal.SIGINT)
        try:
            srv.wait(60)
        except subprocess.TimeoutExpired:
            srv.kill()
        log.close()
    out["endpoint_file_left"] = (home / "service-endpoint.json").exists()
    return out


def _tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    parent: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parent[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [c for c, pp in parent.items() if pp == p]
    return out


def _rss_mb(pid: int) -> tuple[float, str]:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:80]
    except OSError:
        return 0.0, ""
    kb = next((int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("VmRSS:")), 0)
    return kb / 1024, cmd.strip()


def _start(cmd: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tray(settle: float, repo: Path) -> dict:
    """RSS of the idle tray app (and every process it started) with capture running, under Xvfb."""
    if not all(shutil.which(t) for t in ("Xvfb", "openbox", "trayer")):
        return {"skipped": "Xvfb, openbox or trayer missing (scripts/bootstrap.sh installs them)"}
    r, w = os.pipe()
    xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
                            pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        display = ":" + f.readline().strip()
    home = Path(tempfile.mkdtemp(prefix="mirador-tray-"))
    env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", "MIRADOR_HOME": str(home),
           "PYTHONPATH": str(repo)}
    env.pop("WAYLAND_DISPLAY", None)
    helpers = [_start(["openbox", "--sm-disable"], env),
               _start(["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel", "--width", "240",
                       "--height", "28", "--SetDockType", "true", "--transparent", "false"], env)]
    port = 18000 + os.getpid() % 1000
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(f"[mcp]\nport = {port}\n", encoding="utf-8")
    log = open(home / "app.log", "w")  # noqa: SIM115 (closed below)
    app = subprocess.Popen(MIRADOR + ["app", "-v"], cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=log)
    samples: list[dict] = []
    try:
        time.sleep(settle)
        for _ in range(5):
            procs = [_rss_mb(p) for p in _tree(app.pid)]
            samples.append({"total_mb": round(sum(m for m, _ in procs)),
                            "processes": [{"rss_mb": round(m), "cmd": c} for m, c in procs if m]})
            time.sleep(3)
        alive = app.poll() is None
    finally:
        app.send_signal(signal.SIGTERM)
        try:
            app.wait(120)
        except subprocess.TimeoutExpired:
            app.kill()
        log.close()
        for p in helpers + [xvfb]:
            p.terminate()
        for p in helpers + [xvfb]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
    text = (home / "app.log").read_text(errors="replace")
    captured = text.count("evidence") > 0
    shutil.rmtree(home, ignore_errors=True)
    totals = [s["total_mb"] for s in samples]
    return {"settle_s": settle, "alive_when_sampled": alive, "total_rss_mb_max": max(totals),
            "total_rss_mb_median": round(statistics.median(totals)), "log_mentions_evidence": captured,
            "traceback_in_log": "Traceback" in text, "last_sample": samples[-1]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--tray-settle", type=float, default=60.0, help="seconds after start before sampling")
    ap.add_argument("--no-tray", action="store_true")
    ap.add_argument("--no-service", action="store_true", help="skip the figures with `mirador serve` running")
    ap.add_argument("--torch", action="store_true", help="also time search on the torch path (dev extra)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose code runs")
    a = ap.parse_args()
    repo = a.repo.resolve()
    load_before = [round(x, 2) for x in os.getloadavg()]
    out: dict = {"benchmark": "cold_start", "repo": str(repo), "cpus": os.cpu_count(), "load_before": load_before}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        env = {**os.environ, "MIRADOR_HOME": str(home), "PYTHONPATH": str(repo), "HF_HUB_OFFLINE": "1"}
        seed(env)
        for name, argv in COMMANDS.items():
            out[name] = {"command": " ".join(["mirador", *argv]), **measure(env, a.runs, argv)}
        out["first_start_search"] = first_start(env, home)
        if not a.no_service:
            out["via_service"] = via_service(env, home, a.runs)
        if a.torch:
            (home / "config.toml").write_text("[models]\nembedder_onnx = false\n", encoding="utf-8")
            out["search_torch"] = measure(env, a.runs, COMMANDS["search"])
    if not a.no_tray:
        out["tray"] = tray(a.tray_settle, repo)
    out["targets"] = TARGETS
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
