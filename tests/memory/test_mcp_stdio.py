"""`mirador mcp` over stdio: protocol-only stdout, explicit scopes, and safe sharing of one store with the app."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import textwrap
import threading

import anyio

from memory.store import filters as F
from tests.memory.mcp_support import INIT, ROOT, env_for

N_EACH = 20


def _lines(proc: subprocess.Popen) -> queue.Queue:
    q: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _send(proc, msg: dict) -> None:
    proc.stdin.write((json.dumps(msg) + "\n").encode())
    proc.stdin.flush()


def _reply(q: queue.Queue, want_id: int, seen: list, timeout: float = 240) -> dict:
    while True:
        line = q.get(timeout=timeout)
        assert line is not None, "server closed stdout early"
        msg = json.loads(line)  # every stdout line must be a JSON-RPC message
        seen.append(msg)
        if msg.get("id") == want_id:
            return msg


def test_stdout_carries_only_protocol_messages(mirador_home):
    proc = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "-v", "mcp", "--scope", "work", "--name", "t",
                             "--create"],
                            cwd=ROOT, env=env_for(mirador_home), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    q, seen = _lines(proc), []
    try:
        _send(proc, INIT)
        assert _reply(q, 1, seen)["result"]["serverInfo"]["name"] == "mirador"
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                     "params": {"name": "memory_add", "arguments": {"text": "stdio clients can write"}}})
        added = json.loads(_reply(q, 2, seen)["result"]["content"][0]["text"])
        _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "status", "arguments": {}}})
        status = json.loads(_reply(q, 3, seen)["result"]["content"][0]["text"])
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    rest = [line for line in iter(lambda: q.get(timeout=30), None)]
    for line in rest:
        json.loads(line)
    assert all(m.get("jsonrpc") == "2.0" for m in seen)
    assert added["created"]["scope"] == "work" and added["actor"] == "mcp:t"
    assert status["read_scopes"] == ["work"] and status["write_scope"] == "work"
    assert proc.stderr.read(), "-v logs must go to stderr"


def test_scopes_must_be_chosen_and_tokens_must_exist(mirador_home):
    for args, expect in ((["mcp"], "--token TOKEN"), (["mcp", "--token", "mir_bogus"], "unknown or revoked token"),
                         (["mcp", "--scope", "Not A Scope"], "invalid scope")):
        p = subprocess.run([sys.executable, "-m", "desktop.cli.main"] + args, cwd=ROOT, env=env_for(mirador_home),
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert p.returncode == 2 and p.stdout == "" and expect in p.stderr, (args, p.stderr)


APP = textwrap.dedent(f"""
    import sys
    from memory.store.core import Store, EvidenceSpec
    store = Store()
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range({N_EACH}):
        store.add_memory(f"app memory number {{i}}", scope="work")
        if i % 5 == 0:
            store.add_evidence_batch([EvidenceSpec(text=f"app screen {{i}} {{j}}", app="kitty", scope="work")
                                      for j in range(5)])
    print("done", flush=True)
""")


def test_stdio_server_and_app_process_write_concurrently_without_loss(mirador_home):
    """Two real processes commit to one store at once: every row from both survives."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    from memory.store.core import Store

    Store(mirador_home)  # create + migrate once, so neither process races the table creation
    env = env_for(mirador_home)
    app = subprocess.Popen([sys.executable, "-c", APP], cwd=ROOT, env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    params = StdioServerParameters(command=sys.executable, args=["-m", "desktop.cli.main", "mcp", "--scope", "work",
                                                                 "--name", "stdio"], env=env, cwd=str(ROOT))

    async def main():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            await s.call_tool("status", {})  # the server's store is open and its embedder loaded
            assert app.stdout.readline().strip() == "ready"
            app.stdin.write("go\n")
            app.stdin.flush()
            errors = []

            async def add(i):
                r = await s.call_tool("memory_add", {"text": f"stdio memory number {i}"})
                if r.is_error:
                    errors.append(r.content[0].text)

            async with anyio.create_task_group() as tg:
                for i in range(N_EACH):
                    tg.start_soon(add, i)
            return errors

    try:
        errors = anyio.run(main)
        assert app.stdout.readline().strip() == "done"
        assert app.wait(timeout=120) == 0
    finally:
        if app.poll() is None:
            app.kill()
    assert errors == []
    store = Store(mirador_home)
    texts = {r["text"] for r in store.rows("memory", None, ["text"])}
    assert texts == {f"app memory number {i}" for i in range(N_EACH)} | {f"stdio memory number {i}" for i in range(N_EACH)}
    assert store.count("evidence", local=True) == 5 * len(range(0, N_EACH, 5))
    creates = store.rows("audit", F.and_(F.equals("action", "create"), F.equals("entity_kind", "memory")), ["actor"])
    assert sorted(r["actor"] for r in creates) == ["mcp:stdio"] * N_EACH + ["person"] * N_EACH
