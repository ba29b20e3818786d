"""Strict MCP input (issue 40): booleans are JSON booleans, numbers JSON numbers in range, and a message too
deep, too long or not UTF-8 gets a clear error, never HTTP 500 or silence. Real server processes on a temp
store: `mirador serve` (streamable HTTP, bearer token) and `mirador mcp` (stdio), reached with the SDK's
client sessions and with raw messages (a client that can be made to send anything)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from contextlib import asynccontextmanager

import anyio
import httpx
import pytest

from memory.mcp.auth import TokenStore
from memory.mcp.limits import ARGUMENT_DEPTH, MAX_DEPTH, MAX_DIGITS, MAX_MESSAGE_BYTES, screen
from memory.mcp.tools import MAX_DETAILS_DEPTH
from memory.store import filters as F
from tests.memory.mcp_support import INIT, ROOT, env_for, free_port, http_session, snapshot, start_server, stop_server

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
# What a lax parser took for true/false or a number; each must be refused where a boolean or number is asked.
WRONG = {"boolean": ["yes", "true", "false", 1, 0], "integer": ["5", 5.0, True], "number": ["0.5", True]}
HUGE = "1" * 5000  # a 5,000-digit number: past what Python's int() and pydantic's parser read
DEEP = 50_000


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A store with one slack evidence row and one memory, a read+write token, and `mirador serve` on it."""
    from memory.store.core import Store

    home = tmp_path_factory.mktemp("strict")
    store = Store(home)
    ids = {"slack": store.add_evidence("slack chat about the billing outage", app="slack", scope="work")["id"],
           "memory": store.add_memory("The billing service retries webhooks three times", scope="work")["id"]}
    token = TokenStore(home).add("tester", ["work"], "work")[0]
    port = free_port()
    proc = start_server(home, port, home / "serve.log")
    try:
        yield {"home": home, "store": store, "ids": ids, "token": token, "url": f"http://127.0.0.1:{port}/mcp",
               "log": home / "serve.log"}
    finally:
        stop_server(proc)
    log = (home / "serve.log").read_text(errors="replace")
    assert "Traceback" not in log and "Error handling POST request" not in log, log[-3000:]


@asynccontextmanager
async def client(served, transport: str):
    """An initialized SDK client session over HTTP or stdio, as the same token's client."""
    if transport == "http":
        async with http_session(served["url"], served["token"]) as s:
            yield s
        return
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "desktop.cli.main", "mcp", "--token",
                                                                 served["token"]],
                                   env=env_for(served["home"]), cwd=str(ROOT))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


class Raw:
    """One MCP session that sends messages exactly as given (bytes or text) and returns the replies."""

    def __init__(self, served, transport: str) -> None:
        self.served, self.transport = served, transport

    def __enter__(self) -> Raw:
        if self.transport == "http":
            self.http = httpx.Client(timeout=120)
            self.headers = {**HEADERS, "Authorization": f"Bearer {self.served['token']}"}
            init = self.http.post(self.served["url"], json=INIT, headers=self.headers)
            self.headers |= {"mcp-session-id": init.headers["mcp-session-id"],
                             "mcp-protocol-version": init.json()["result"]["protocolVersion"]}
            self.http.post(self.served["url"], json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                           headers=self.headers)
        else:
            self.proc = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "mcp", "--token",
                                          self.served["token"]], cwd=ROOT, env=env_for(self.served["home"]),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.lines: queue.Queue = queue.Queue()
            threading.Thread(target=self._pump, daemon=True).start()
            assert self.send(json.dumps(INIT), 1)[1]["result"]["serverInfo"]["name"] == "mirador"
            self.proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        return self

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, body: str | bytes, want_id, headers: dict | None = None) -> tuple[int, dict]:
        """(HTTP status, reply); over stdio the status is 200 and the reply is the line with id `want_id`."""
        data = body.encode() if isinstance(body, str) else body
        if self.transport == "http":
            r = self.http.post(self.served["url"], content=data, headers=headers or self.headers)
            assert r.headers["content-type"].startswith("application/json"), (r.status_code, r.text[:300])
            return r.status_code, r.json()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()
        while True:
            line = self.lines.get(timeout=120)
            assert line is not None, "the stdio server closed stdout: " + self.proc.stderr.read().decode()[-2000:]
            reply = json.loads(line)  # stdout carries only protocol messages
            if reply.get("id") == want_id and ("result" in reply or "error" in reply):
                return 200, reply

    def __exit__(self, *exc) -> None:
        if self.transport == "http":
            self.http.close()
        else:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
            err = self.proc.stderr.read().decode(errors="replace")
            self.proc.stderr.close()
            self.proc.stdout.close()
            assert "Traceback" not in err, err[-3000:]


def tool_call(id_, tool: str, arguments: str, id_last: bool = False) -> str:
    """A tools/call message with `arguments` as raw JSON text; id_last as the Python SDK's client orders it."""
    params = f'"params":{{"name":"{tool}","arguments":{arguments}}}'
    if id_last:
        return f'{{"method":"tools/call",{params},"jsonrpc":"2.0","id":{id_}}}'
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call",{params}}}'


def tool_text(reply: dict) -> str:
    """The text of a tool error; fails on a JSON-RPC error or a success."""
    assert "result" in reply, reply
    assert reply["result"]["isError"] is True, reply
    return reply["result"]["content"][0]["text"]


def kinds(prop: dict) -> set[str]:
    return {p.get("type") for p in (prop, *prop.get("anyOf", []))} - {None, "null"}


def valid(prop: dict):
    """A value the schema accepts (for the arguments a call needs besides the one under test)."""
    branch = next((p for p in prop.get("anyOf", []) if p.get("type") != "null"), prop)
    if "enum" in branch:
        return branch["enum"][0]
    kind = branch["type"]
    if kind == "string":
        return "x" * max(branch.get("minLength", 1), 1)
    if kind in ("integer", "number"):
        return branch.get("minimum", 1)
    if kind == "array":
        return [valid(branch["items"])] * branch.get("minItems", 0)
    return {"boolean": False, "object": {}}[kind]


# ---- every boolean and number argument of every tool, through the SDK's client ------------------------------


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_every_boolean_and_number_argument_takes_only_its_json_type(served, transport):
    store = served["store"]
    before = snapshot(store)

    async def main():
        async with client(served, transport) as s:
            tools = (await s.list_tools()).tools
            out = []
            for tool in tools:
                props, required = tool.input_schema["properties"], tool.input_schema.get("required", [])
                base = {n: valid(props[n]) for n in required}
                if tool.name == "evidence_forget":
                    base["app"] = "slack"  # the tester's call: it would erase the slack row if "yes" were true
                for name, prop in props.items():
                    for kind in kinds(prop) & set(WRONG):
                        for bad in WRONG[kind]:
                            out.append((tool.name, name, kind, bad, await s.call_tool(tool.name, {**base, name: bad})))
            ok = await s.call_tool("status", {})
            return out, ok

    out, ok = anyio.run(main)
    tried = {(tool, name, kind) for tool, name, kind, _, _ in out}
    # Not vacuous: the arguments the tester used, and one of each kind, are among those walked.
    assert {("evidence_forget", "confirm", "boolean"), ("consolidate", "dry_run", "boolean"),
            ("memory_recall", "include_evidence", "boolean"), ("memory_search", "include_inactive", "boolean"),
            ("memory_search", "limit", "integer"), ("memory_add", "confidence", "number")} <= tried
    for tool, name, kind, bad, r in out:
        text = r.content[0].text
        assert r.is_error, f"{tool}({name}={bad!r}) was accepted: {text[:200]}"
        assert f"argument '{name}' is wrong" in text and "internal error" not in text, (tool, name, bad, text)
        assert "\n" not in text and "pydantic" not in text, text
        if kind == "boolean":
            assert "send true or false" in text, text
        elif kind == "integer":
            assert "send an integer from" in text, text
    assert not ok.is_error  # the session is still good after 60-odd refusals
    assert snapshot(store) == before, "a refused call changed a table"
    assert store.count("evidence", F.id_is(served['ids']['slack']), local=True) == 1  # "yes" did not erase it


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_details_nested_a_little_too_deep_is_refused_by_the_tool(served, transport):
    store = served["store"]
    before = snapshot(store)
    deep: dict = {"fact": "bottom"}
    for _ in range(MAX_DETAILS_DEPTH):
        deep = {"more": deep}

    async def main():
        async with client(served, transport) as s:
            return await s.call_tool("memory_add", {"text": "Too deep to keep", "details": deep})

    r = anyio.run(main)
    assert r.is_error and f"details is nested deeper than {MAX_DETAILS_DEPTH} levels; flatten it" in r.content[0].text
    assert snapshot(store) == before


def test_every_argument_is_bounded_in_its_schema(store):
    from memory.mcp.auth import make_principal
    from tests.memory.mcp_support import call

    async def steps(c):
        return (await c.list_tools()).tools

    bounds = {"string": ("maxLength",), "array": ("maxItems",), "object": ("maxProperties",),
              "integer": ("minimum", "maximum"), "number": ("minimum", "maximum"), "boolean": ()}
    for tool in call(store, make_principal("t", ["work"], "work"), steps):
        for name, prop in tool.input_schema["properties"].items():
            for branch in (prop, *prop.get("anyOf", [])):
                kind = branch.get("type")
                if kind in (None, "null") or "enum" in branch:
                    continue
                missing = [b for b in bounds[kind] if b not in branch]
                item = branch.get("items", {})
                if item.get("type") == "string" and "enum" not in item and "maxLength" not in item:
                    missing.append("items.maxLength")
                assert not missing, f"{tool.name}.{name} ({kind}) has no {missing}: a client could send any amount"


# ---- raw messages: what the security tester sent ---------------------------------------------------------------


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_confirm_yes_erases_nothing(served, transport):
    store = served["store"]
    before = snapshot(store)
    with Raw(served, transport) as raw:
        replies = {v: raw.send(tool_call(i, "evidence_forget", json.dumps({"app": "slack", "confirm": v})), i)
                   for i, v in enumerate(["yes", "true", 1], start=10)}
    for value, (status, reply) in replies.items():
        assert status == 200
        text = tool_text(reply)
        assert "argument 'confirm' is wrong" in text and "send true or false" in text, (value, text)
        assert '"dry_run": false' not in json.dumps(reply)  # no erasure ran
    assert snapshot(store) == before
    assert store.count("evidence", F.id_is(served['ids']['slack']), local=True) == 1


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_a_5000_digit_limit_is_a_tool_error_naming_limit_and_its_range(served, transport):
    with Raw(served, transport) as raw:
        status, reply = raw.send(tool_call(20, "memory_search", f'{{"query":"billing","limit":{HUGE}}}'), 20)
        status_last, reply_last = raw.send(tool_call(21, "memory_search", f'{{"query":"billing","limit":-{HUGE}}}',
                                                     id_last=True), 21)
        as_string = raw.send(tool_call(22, "memory_search", f'{{"query":"billing","limit":"{HUGE}"}}'), 22)[1]
        _, after = raw.send(tool_call(23, "memory_search", '{"query":"billing","limit":5}'), 23)
    assert status == status_last == 200  # never 500
    for r in (reply, reply_last):
        text = tool_text(r)
        assert "argument 'limit'" in text and "5,000 digits" in text and "an integer from 1 to 50" in text, text
    text = tool_text(as_string)  # the digits as a string: refused by type, not by int()'s digit limit
    assert "argument 'limit' is wrong" in text and "from 1 to 50" in text, text
    assert "4300" not in text and "set_int_max_str_digits" not in text
    assert after["result"]["isError"] is False  # the next call is answered


@pytest.mark.parametrize("transport", ["http", "stdio"])
def test_50000_deep_details_is_refused_and_the_server_answers_the_next_call(served, transport):
    store = served["store"]
    before = snapshot(store)
    deep = '{"a":' * DEEP + "1" + "}" * DEEP
    with Raw(served, transport) as raw:
        arguments = f'{{"text":"deep","details":{deep}}}'
        status, first = raw.send(tool_call(30, "memory_add", arguments), 30)
        status_last, last = raw.send(tool_call(31, "memory_add", arguments, id_last=True), 31)
        # the same depth inside a JSON string: the SDK's pre-parse of string arguments must not recurse either
        quoted = raw.send(tool_call(32, "memory_add", json.dumps({"text": "deep", "details": deep})), 32)[1]
        _, after = raw.send(tool_call(33, "status", "{}"), 33)
    assert status == status_last == 200
    for r in (first, last):
        text = tool_text(r)
        assert f"argument 'details' is nested deeper than {ARGUMENT_DEPTH} levels; flatten it" in text, text
    text = tool_text(quoted)
    assert "argument 'details' is wrong" in text and "an object" in text and "recursion" not in text, text
    assert after["result"]["isError"] is False
    assert snapshot(store) == before


def test_raw_http_bodies_past_a_limit_get_a_4xx_json_error(served):
    with Raw(served, "http") as raw:
        deep_meta = '{"jsonrpc":"2.0","id":40,"method":"ping","params":{"_meta":' + "[" * DEEP + "]" * DEEP + "}}"
        checks = {
            "deep": (raw.send(deep_meta, 40), 400, "nested deeper than 64 levels (at params._meta"),
            "deep_top": (raw.send("[" * DEEP + "]" * DEEP, None), 400, "nested deeper than 64 levels"),
            "digits": (raw.send('{"jsonrpc":"2.0","id":41,"method":"ping","params":{"n":' + HUGE + "}}", 41), 400,
                       "params.n is a number of 5,000 digits"),
            "utf8": (raw.send(tool_call(42, "status", "{}").encode()[:-1] + b"\xff}", 42), 400, "not UTF-8"),
            "huge": (raw.send(tool_call(43, "evidence_add", json.dumps({"text": "x" * MAX_MESSAGE_BYTES})), 43),
                     413, "send less per call"),
        }
        no_token = httpx.post(served["url"], content=deep_meta, headers=HEADERS, timeout=60)
        _, after = raw.send(tool_call(44, "status", "{}"), 44)
    for name, ((status, reply), want_status, want_text) in checks.items():
        assert status == want_status, (name, status, reply)
        assert want_text in reply["error"]["message"], (name, reply)
        assert reply["error"]["code"] in (-32600, -32700) and "Traceback" not in json.dumps(reply)
    assert checks["deep"][0][1]["id"] == 40 and checks["deep_top"][0][1]["id"] is None
    assert no_token.status_code == 401  # a stranger learns nothing, and nothing of the body is parsed for them
    assert after["result"]["isError"] is False


def test_stdio_answers_a_line_it_cannot_read(served):
    with Raw(served, "stdio") as raw:
        _, garbage = raw.send('{"jsonrpc":"2.0","id":50,"method":', 50)
        _, deep = raw.send('{"jsonrpc":"2.0","id":51,"method":"ping","params":{"_meta":' + "[" * DEEP + "]" * DEEP
                           + "}}", 51)
        # too large to read whole: still answered with its id (the SDK's client puts the id last), so the client
        # hears of it at once rather than at its timeout
        huge = json.dumps({"text": "x" * MAX_MESSAGE_BYTES})
        _, too_big = raw.send(tool_call(53, "evidence_add", huge, id_last=True), 53)
        _, after = raw.send(tool_call(52, "status", "{}"), 52)
    assert garbage["error"]["code"] == -32700 and "not JSON" in garbage["error"]["message"]
    assert "nested deeper than 64 levels" in deep["error"]["message"]
    assert too_big["id"] == 53 and "send less per call" in too_big["error"]["message"]
    assert after["result"]["isError"] is False


# ---- the check itself ------------------------------------------------------------------------------------------


def expect(tool: str, argument: str) -> str | None:
    return "an integer from 1 to 50" if (tool, argument) == ("memory_search", "limit") else None


def test_screen_passes_ordinary_messages_untouched():
    ordinary = tool_call(1, "memory_add", json.dumps({"text": "{[" * 200 + " 9" * 5000, "details": {"steps": ["a"]},
                                                      "note": "1" * (MAX_DIGITS + 10)}))
    assert screen(ordinary, expect) is None  # brackets and digits inside strings are text
    assert screen(tool_call(1, "memory_search", '{"query":"x","limit":' + "1" * MAX_DIGITS + "}"), expect) is None
    nested = "[" * (MAX_DEPTH - 3) + "]" * (MAX_DEPTH - 3)
    at_the_limit = '{"text":"{{{{{{{{","details":{"a":' + nested[1:-1] + "}}"  # brackets in text too: scanned
    assert screen(tool_call(1, "memory_add", at_the_limit), expect) is None


def test_screen_names_where_and_keeps_the_id():
    too_deep = "[" * (MAX_DEPTH - 2) + "]" * (MAX_DEPTH - 2)
    r = screen(tool_call('"req-7"', "memory_add", '{"text":"x","details":' + too_deep + "}", id_last=True), expect)
    assert r is not None and r.status == 400 and r.reply["id"] == "req-7"  # memory_add.details is unknown to expect
    assert "params.arguments.details" in r.reply["error"]["message"]
    r = screen(tool_call(8, "memory_search", '{"query":"x","limit":' + HUGE + "}"), expect)
    assert r is not None and r.status == 200 and r.reply["id"] == 8 and r.reply["result"]["isError"]
    assert "an integer from 1 to 50" in r.reply["result"]["content"][0]["text"]
    assert screen(b"\xff", expect).status == 400
    assert screen(" " * (MAX_MESSAGE_BYTES + 1), expect).status == 413
    huge = json.dumps({"text": "x" * MAX_MESSAGE_BYTES})
    for id_ in (9, '"req-10"'):
        for id_last in (False, True):
            for raw in (tool_call(id_, "evidence_add", huge, id_last), tool_call(id_, "evidence_add", huge, id_last).encode()):
                r = screen(raw, expect)
                assert r is not None and r.status == 413 and r.reply["id"] == json.loads(str(id_)), (id_, id_last)
    nested_id_last = '{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"text":"' + "x" * MAX_MESSAGE_BYTES \
        + '","id":5}}}'
    assert screen(nested_id_last, expect).reply["id"] is None  # an id inside the arguments is not the message's


def test_a_refused_argument_of_a_2026_request_says_its_result_type():
    # A request in the per-request envelope of protocol 2026-07-28 (what mcp 2.x clients send by default) gets a
    # result with resultType, as the SDK's own results; without it such a client refuses the reply.
    envelope = '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"_meta":{' \
               '"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"name":"memory_search",' \
               '"arguments":{"query":"x","limit":' + HUGE + "}}}"
    modern = screen(envelope, expect)
    assert modern is not None and modern.reply["result"]["isError"] and modern.reply["result"]["resultType"] == "complete"
    legacy = screen(tool_call(9, "memory_search", '{"query":"x","limit":' + HUGE + "}"), expect)
    assert legacy is not None and legacy.reply["result"]["isError"] and "resultType" not in legacy.reply["result"]
