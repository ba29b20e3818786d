"""The HTTP endpoint as a client sees it: a `mirador serve` child process, real sockets, real tokens."""

from __future__ import annotations

import json
import shutil
import subprocess

import anyio
import httpx
import pytest

from memory.mcp.auth import TokenStore
from memory.mcp.server import PROFILE_URI
from memory.store import filters as F
from tests.conftest import memory_texts
from tests.memory.mcp_support import INIT, free_port, http_session, start_server, stop_server

MARK = "zanzibarquokka"  # appears only in personal rows: any response containing it is a leak
# The newest Inspector needs node >= 22; 0.17.2 is the newest whose CLI runs on this machine's node 20
# and it has --header (0.15, what a bare `npx @modelcontextprotocol/inspector` resolves to here, does not).
INSPECTOR = "@modelcontextprotocol/inspector@0.17.2"
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from memory.store.core import Store

    home = tmp_path_factory.mktemp("mcp_http")
    store = Store(home)
    ids = {
        "work": store.add_memory("The billing service retries webhooks three times", scope="work")["id"],
        "personal": store.add_memory(f"My {MARK} passport number is in the drawer", scope="personal")["id"],
        "pcore": store.add_memory(f"I secretly love {MARK} karaoke", type="core", scope="personal")["id"],
        "wcore": store.add_memory("I write Go at work", type="core", scope="work")["id"],
        "pev": store.add_evidence(f"{MARK} chat with family about holidays", app="signal-desktop",
                                  window="Family", scope="personal")["id"],
        "wev": store.add_evidence("billing webhooks failing with 502", app="kitty", window="logs", scope="work")["id"],
        "wvault": store.add_memory("billing api key", type="vault", scope="work", value="sk-very-secret")["id"],
    }
    tokens = TokenStore(home)
    toks = {name: tokens.add(name, read, write)[0] for name, read, write in (
        ("worker", ["work"], "work"), ("reader", ["work"], None), ("doomed", ["work"], "work"))}
    port = free_port()
    proc = start_server(home, port, home / "serve.log")
    try:
        yield {"url": f"http://127.0.0.1:{port}/mcp", "port": port, "home": home, "ids": ids, "tokens": toks,
               "store": store}
    finally:
        stop_server(proc)


def post(server, headers: dict) -> httpx.Response:
    return httpx.post(server["url"], json=INIT, headers={**HEADERS, **headers}, timeout=60)


def test_no_token_and_wrong_token_get_401(server):
    assert post(server, {}).status_code == 401
    assert post(server, {"Authorization": "Bearer mir_not-a-real-token"}).status_code == 401
    assert post(server, {"Authorization": "Basic d29yazp3b3Jr"}).status_code == 401
    ok = post(server, {"Authorization": f"Bearer {server['tokens']['worker']}"})
    assert ok.status_code == 200 and "mirador" in ok.text


def test_revoked_token_gets_401_without_restart(server):
    tok = server["tokens"]["doomed"]
    assert post(server, {"Authorization": f"Bearer {tok}"}).status_code == 200
    TokenStore(server["home"]).revoke("doomed")
    assert post(server, {"Authorization": f"Bearer {tok}"}).status_code == 401


def test_host_and_origin_are_checked(server):
    auth = {"Authorization": f"Bearer {server['tokens']['worker']}"}
    assert post(server, {**auth, "Host": f"evil.example:{server['port']}"}).status_code == 421
    assert post(server, {**auth, "Host": "127.0.0.1:1"}).status_code == 421
    assert post(server, {**auth, "Origin": "http://evil.example"}).status_code == 403
    assert post(server, {"Origin": "http://evil.example"}).status_code == 403  # refused before auth is consulted
    assert post(server, {**auth, "Origin": f"http://localhost:{server['port']}"}).status_code == 200


def test_calls_are_answered_as_plain_json(server):
    # One JSON-RPC response per POST (the transport's JSON mode), not an event stream to parse.
    auth = {**HEADERS, "Authorization": f"Bearer {server['tokens']['worker']}"}
    with httpx.Client(timeout=60) as http:
        init = http.post(server["url"], json=INIT, headers=auth)
        assert init.status_code == 200 and init.headers["content-type"].startswith("application/json")
        session = {**auth, "mcp-session-id": init.headers["mcp-session-id"],
                   "mcp-protocol-version": init.json()["result"]["protocolVersion"]}
        http.post(server["url"], json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        r = http.post(server["url"], json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                           "params": {"name": "status", "arguments": {}}}, headers=session)
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    assert "text/event-stream" not in r.headers["content-type"]
    result = r.json()["result"]
    assert result["structuredContent"]["client"] == "worker" and not result.get("isError")


def test_read_only_token_cannot_write(server):
    async def main():
        async with http_session(server["url"], server["tokens"]["reader"]) as s:
            add = await s.call_tool("memory_add", {"text": "reader was here"})
            upd = await s.call_tool("memory_update", {"id": server["ids"]["work"], "text": "changed"})
            forget = await s.call_tool("memory_forget", {"ids": [server["ids"]["work"]]})
            search = await s.call_tool("memory_search", {"query": "billing webhooks"})
            return add, upd, forget, search

    add, upd, forget, search = anyio.run(main)
    for r in (add, upd, forget):
        assert r.is_error and "read-only" in r.content[0].text
    assert not search.is_error and server["ids"]["work"] in search.content[0].text
    store = server["store"]
    assert memory_texts(store).count("reader was here") == 0
    assert store.get(server["ids"]["work"])["text"].startswith("The billing service")


def test_writes_carry_the_client_name(server):
    async def main():
        async with http_session(server["url"], server["tokens"]["worker"]) as s:
            return json.loads((await s.call_tool("memory_add", {"text": "Billing owner is Dana"})).content[0].text)

    created = anyio.run(main)["created"]
    row = server["store"].get(created["id"])
    assert row["origin"] == "mcp:worker" and row["scope"] == "work"
    audit = server["store"].rows("audit", F.id_is(row['id'], "entity_id"), ["actor"])
    assert audit == [{"actor": "mcp:worker"}]


def test_work_token_never_sees_personal(server):
    ids = server["ids"]

    async def main():
        async with http_session(server["url"], server["tokens"]["worker"]) as s:
            calls = {
                "memory_search": ("memory_search", {"query": f"{MARK} passport drawer"}),
                "memory_search_all": ("memory_search", {"query": f"{MARK}", "include_inactive": True, "limit": 50}),
                "memory_search_scope": ("memory_search", {"query": MARK, "scope": "personal"}),
                "memory_recall": ("memory_recall", {"query": f"{MARK} passport karaoke", "budget_tokens": 2000}),
                "memory_get": ("memory_get", {"id": ids["personal"]}),
                "memory_get_core": ("memory_get", {"id": ids["pcore"]}),
                "memory_update": ("memory_update", {"id": ids["personal"], "text": "overwritten"}),
                "memory_forget": ("memory_forget", {"ids": [ids["personal"]]}),
                "memory_add": ("memory_add", {"text": "sneaky", "scope": "personal"}),
                "evidence_search": ("evidence_search", {"query": f"{MARK} family holidays", "limit": 50}),
                "evidence_get": ("evidence_get", {"id": ids["pev"]}),
                "timeline": ("timeline", {"since": "2000-01-01T00:00:00Z"}),
                "status": ("status", {}),
                "vault": ("memory_get", {"id": ids["wvault"]}),
            }
            out = {k: await s.call_tool(name, args) for k, (name, args) in calls.items()}
            profile = (await s.read_resource(PROFILE_URI)).contents[0].text
            return calls, out, profile

    calls, out, profile = anyio.run(main)
    for key, r in out.items():
        body = json.dumps(r.model_dump(mode="json"))
        for sent in _strings(calls[key][1]):  # what the client sent may be echoed back; that is not a leak
            body = body.replace(json.dumps(sent)[1:-1], "")
        for secret in (MARK, ids["personal"], ids["pcore"], ids["pev"], "signal-desktop", "sk-very-secret"):
            assert secret not in body, f"{key} leaked {secret!r}: {body[:300]}"
    for key in ("memory_get", "memory_get_core", "memory_update", "memory_forget", "memory_add", "evidence_get",
                "memory_search_scope"):
        assert out[key].is_error, key
    status = json.loads(out["status"].content[0].text)
    assert status["visible"]["evidence"] == 1 and status["read_scopes"] == ["work"]
    assert MARK not in profile and "I write Go at work" in profile
    store = server["store"]
    assert store.get(ids["personal"])["text"].startswith(f"My {MARK}")  # untouched by the refused writes
    assert memory_texts(store).count("sneaky") == 0


def test_mcp_inspector_cli_lists_tools_and_searches(server):
    if not shutil.which("npx") or not shutil.which("node"):
        pytest.skip("node/npx not installed: the MCP Inspector CLI cannot run here")
    base = ["npx", "-y", INSPECTOR, "--cli", server["url"], "--transport", "http",
            "--header", f"Authorization: Bearer {server['tokens']['worker']}"]

    def run(*args):
        p = subprocess.run(base + list(args), capture_output=True, text=True, timeout=400)
        assert p.returncode == 0, p.stdout + p.stderr
        return json.loads(p.stdout)

    listed = run("--method", "tools/list")
    assert {t["name"] for t in listed["tools"]} >= {"memory_search", "memory_recall", "timeline", "status"}
    found = run("--method", "tools/call", "--tool-name", "memory_search", "--tool-arg", "query=billing webhooks")
    assert not found.get("isError") and server["ids"]["work"] in found["content"][0]["text"]
    denied = subprocess.run(base[:-2] + ["--method", "tools/list"], capture_output=True, text=True, timeout=400)
    assert denied.returncode != 0
    assert "invalid_token" in denied.stdout + denied.stderr


CLIENT = """
import sys, anyio
from tests.memory.mcp_support import http_session
async def main():
    async with http_session(sys.argv[1], sys.argv[2]) as s:
        await s.call_tool("status", {})
        print("ready", flush=True)
        if sys.argv[3] == "hang":
            await anyio.sleep(600)
anyio.run(main)
"""


def test_client_disconnects_log_no_errors(server):
    import sys
    import time

    from tests.memory.mcp_support import ROOT, env_for

    log_path = server["home"] / "serve.log"
    start = log_path.stat().st_size
    args = [sys.executable, "-c", CLIENT, server["url"], server["tokens"]["worker"]]
    for _ in range(2):  # killed mid-session: its sockets close under the server's open streams
        c = subprocess.Popen([*args, "hang"], cwd=ROOT, env=env_for(server["home"]), stdout=subprocess.PIPE)
        try:
            assert c.stdout.readline().strip() == b"ready"
        finally:
            c.kill()
            c.wait(timeout=30)
            c.stdout.close()
    for _ in range(2):  # an orderly close (DELETE) while the standalone SSE stream is open
        subprocess.run([*args, "close"], cwd=ROOT, env=env_for(server["home"]), check=True, timeout=240,
                       capture_output=True)
    time.sleep(2)  # the server tears a gone session's streams down after the client has left; nothing to poll
    tail = log_path.read_bytes()[start:].decode(errors="replace")
    assert "ERROR" not in tail and "Traceback" not in tail, tail


def _strings(args: dict) -> list[str]:
    out = []
    for v in args.values():
        out.extend(v if isinstance(v, list) else [v] if isinstance(v, str) else [])
    return sorted(out, key=len, reverse=True)
