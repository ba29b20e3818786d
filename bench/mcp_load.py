"""MCP load: N concurrent HTTP clients × M mixed tool calls against `mirador serve`, while evidence ingest runs.

Starts the server the way `mirador serve` does (and a separate ingest process writing evidence into the
same store) on a free loopback port in a fresh data dir seeded with --memories / --evidence rows, runs
the clients (the official MCP SDK client over streamable HTTP, one session each), stops everything it
started, and prints one JSON object: errors (must be 0), p50/p95/max latency per tool, throughput, rows
ingested meanwhile, the load average before and after.

    .venv/bin/python bench/mcp_load.py [--clients 20] [--calls 50] [--memories 2000] [--evidence 20000]
                                       [--ingest capture|burst|off]

--ingest capture writes one row every 2 s (a screen capture's pace); burst writes 20 rows every 0.2 s.
memory_forget is not in the mix: it purges old table versions, a maintenance-grade operation that
is exercised by the tests, not something an assistant calls in a loop.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

MIX = [("memory_search", 26), ("memory_recall", 14), ("evidence_search", 16), ("memory_get", 10),
       ("memory_add", 6), ("memory_update", 4), ("evidence_get", 6), ("timeline", 5), ("status", 8),
       ("memory_list", 5)]
INGEST_MODES = {"capture": (1, 2.0), "burst": (20, 0.2)}  # rows per write, seconds between writes
TOPICS = ["billing webhooks", "postgres migration", "deploy pipeline", "code review", "retry logic", "oncall",
          "kubernetes ingress", "feature flags", "latency budget", "customer escalation", "release notes", "ci cache"]
APPS = ["kitty", "firefox", "slack", "code", "zoom"]

INGEST = """
import json, sys, time
from pathlib import Path
from memory.store.core import Store, EvidenceSpec

store = Store()
stop = Path(sys.argv[1])
per_write, pause = int(sys.argv[2]), float(sys.argv[3])
topics = {topics!r}
apps = {apps!r}
rows = batches = 0
print("ready", flush=True)
while not stop.exists():
    n = batches
    specs = [EvidenceSpec(text=f"ingest {{n}}-{{j}}: {{topics[(n + j) % len(topics)]}} seen on screen",
                          source="screen", app=apps[(n + j) % len(apps)], window=f"w{{j}}", scope="work")
             for j in range(per_write)]
    store.add_evidence_batch(specs)
    rows += len(specs)
    batches += 1
    time.sleep(pause)
print(json.dumps({{"rows": rows, "batches": batches}}), flush=True)
""".format(topics=TOPICS, apps=APPS)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, proc: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server did not listen on {port} within {timeout}s")


def seed(home: Path, memories: int, evidence: int) -> tuple[str, list[str], list[str]]:
    """Fill a fresh store; returns (token, memory ids, evidence ids)."""
    from memory.mcp.auth import TokenStore
    from memory.store.core import EvidenceSpec, MemorySpec, Store

    store = Store(home)
    rnd = random.Random(7)
    specs = [MemorySpec(text=f"Note {i}: {rnd.choice(TOPICS)} — decision {rnd.randint(1, 999)} by {rnd.choice('ABCDE')}",
                        scope=rnd.choice(["work", "work/acme"])) for i in range(memories)]
    mem_ids = [m["id"] for start in range(0, len(specs), 100) for m in store.add_memories(specs[start:start + 100])]
    ev = [EvidenceSpec(text=f"screen {i}: {rnd.choice(TOPICS)} {rnd.randint(1, 99999)}", source="screen",
                       app=rnd.choice(APPS), scope="work") for i in range(evidence)]
    ev_ids = [e["id"] for start in range(0, len(ev), 200) for e in store.add_evidence_batch(ev[start:start + 200])]
    store.optimize()
    token, _ = TokenStore(home).add("bench", ["work"], "work")
    return token, mem_ids, ev_ids


def args_for(tool: str, rnd: random.Random, mem_ids: list[str], ev_ids: list[str], mine: list[str]) -> dict:
    topic = rnd.choice(TOPICS)
    if tool in ("memory_search", "evidence_search"):
        return {"query": topic, "limit": 10}
    if tool == "memory_recall":
        return {"query": f"what do I know about {topic}", "budget_tokens": 800}
    if tool == "memory_get":
        return {"id": rnd.choice(mem_ids)}
    if tool == "evidence_get":
        return {"id": rnd.choice(ev_ids)}
    if tool == "memory_add":
        return {"text": f"bench fact {rnd.randint(0, 10**9)} about {topic}"}
    if tool == "memory_update":
        return {"id": rnd.choice(mine), "confidence": round(rnd.uniform(0.5, 1.0), 2)}
    if tool == "timeline":
        return {"samples_per_app": 3}  # the last 24 hours: the whole seeded store
    if tool == "memory_list":
        return {"limit": 20}
    return {}


async def client(n: int, url: str, token: str, calls: int, mem_ids, ev_ids, lat: dict, errors: list,
                 think: float = 0.0, only: str | None = None) -> None:
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    rnd = random.Random(n)
    mix = [(only, 1)] if only else MIX
    names = [t for t, _ in mix]
    weights = [w for _, w in mix]
    mine: list[str] = []
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(120, read=600)) as http:
        async with streamable_http_client(url, http_client=http) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            for _ in range(calls):
                if think:  # an assistant between tool calls (its model generating): uniform in [0, 2 × think]
                    await anyio.sleep(rnd.uniform(0, 2 * think))
                tool = rnd.choices(names, weights)[0]
                if tool == "memory_update" and not mine:
                    tool = "memory_add"
                args = args_for(tool, rnd, mem_ids, ev_ids, mine)
                t0 = time.perf_counter()
                try:
                    r = await s.call_tool(tool, args)
                except Exception as e:  # a transport failure is an error too
                    errors.append(f"{tool}: {type(e).__name__}: {e}")
                    continue
                lat.setdefault(tool, []).append((time.perf_counter() - t0) * 1000)
                if r.is_error:
                    errors.append(f"{tool}: {r.content[0].text[:200]}")
                elif tool == "memory_add":
                    mine.append(json.loads(r.content[0].text)["created"]["id"])


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used so far, all its threads (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return round(s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))], 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--calls", type=int, default=50, help="calls per client")
    ap.add_argument("--memories", type=int, default=2000, help="memories seeded before the run")
    ap.add_argument("--evidence", type=int, default=20000, help="evidence rows seeded before the run")
    ap.add_argument("--ingest", choices=[*INGEST_MODES, "off"], default="capture",
                    help="evidence written meanwhile: capture (1 row / 2 s), burst (20 rows / 0.2 s) or off")
    ap.add_argument("--think", type=float, default=0.0, help="mean seconds a client waits between its calls "
                    "(0: back to back, a stress test: the 20 clients keep the server saturated)")
    ap.add_argument("--only", choices=[t for t, _ in MIX if t not in ("memory_update",)],
                    help="call only this tool (e.g. status with --clients 1: one call's cost over HTTP)")
    ap.add_argument("--seed-cache", type=Path, help="a folder to keep the seeded store in and copy it from on later "
                    "runs (seeding 20,000 rows takes minutes); it must hold a store seeded with the same sizes")
    ap.add_argument("--keep", action="store_true", help="keep the temporary data dir (and serve.log) afterwards")
    a = ap.parse_args()

    import anyio

    load_before = [round(x, 2) for x in os.getloadavg()]
    home = Path(tempfile.mkdtemp(prefix="mirador-mcp-load-"))
    os.environ["MIRADOR_HOME"] = str(home)
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    t_seed = time.perf_counter()
    if a.seed_cache and (a.seed_cache / "seed.json").exists():  # a store seeded earlier with the same sizes
        shutil.copytree(a.seed_cache, home, dirs_exist_ok=True)
        token, mem_ids, ev_ids = json.loads((home / "seed.json").read_text())
    else:
        token, mem_ids, ev_ids = seed(home, a.memories, a.evidence)
        if a.seed_cache:
            (home / "seed.json").write_text(json.dumps([token, mem_ids, ev_ids]))
            shutil.copytree(home, a.seed_cache)
    seed_s = time.perf_counter() - t_seed
    port = free_port()
    log = open(home / "serve.log", "wb")  # noqa: SIM115
    server = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "serve", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    stop = home / "stop-ingest"
    per_write, pause = INGEST_MODES.get(a.ingest, (0, 1.0))
    ingest = subprocess.Popen([sys.executable, "-c", INGEST, str(stop), str(per_write), str(pause)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, text=True)
    lat: dict[str, list[float]] = {}
    errors: list[str] = []
    try:
        wait_port(port, server)
        assert ingest.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}/mcp"

        async def run_all():
            async with anyio.create_task_group() as tg:
                for n in range(a.clients):
                    tg.start_soon(client, n, url, token, a.calls, mem_ids, ev_ids, lat, errors, a.think, a.only)

        cpu0 = {"server": cpu_s(server.pid), "ingest": cpu_s(ingest.pid), "clients": time.process_time()}
        t0 = time.perf_counter()
        anyio.run(run_all)
        wall = time.perf_counter() - t0
        cpu1 = {"server": cpu_s(server.pid), "ingest": cpu_s(ingest.pid), "clients": time.process_time()}
        stop.touch()
        ingested = json.loads(ingest.stdout.readline() or "{}")
        ingest.wait(timeout=120)
    finally:
        stop.touch()
        for proc in (ingest, server):
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
        log.close()
        if not a.keep:
            shutil.rmtree(home, ignore_errors=True)
    total = sum(len(v) for v in lat.values())
    print(json.dumps({
        "bench": "mcp_load", "clients": a.clients, "calls_per_client": a.calls, "think_s": a.think, "calls": total, "only": a.only,
        "errors": len(errors), "error_samples": errors[:5], "wall_s": round(wall, 1),
        "calls_per_s": round(total / wall, 1), "seeded": {"memories": a.memories, "evidence": a.evidence},
        "seed_s": round(seed_s, 1), "ingest": a.ingest, "ingested_during_run": ingested,
        "latency_ms": {t: {"n": len(v), "p50": pct(v, 50), "p95": pct(v, 95), "max": round(max(v), 1),
                           "mean": round(statistics.fmean(v), 1)} for t, v in sorted(lat.items())},
        # CPU each process spent during the calls, per call: what the 2 cores are shared out by
        "cpu_ms_per_call": {k: round((cpu1[k] - cpu0[k]) * 1000 / max(total, 1), 1) for k in cpu0},
        "cpu_cores": os.cpu_count(), "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }))
    return 0 if not errors else 1


if __name__ == "__main__":
    sys.exit(main())
