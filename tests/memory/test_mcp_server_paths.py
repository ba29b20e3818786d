"""The MCP server's per-call machinery: results still validated against their output schemas (each
schema checked once), tool bodies sharing a bounded set of worker threads with cheap tools not queued
behind them, and timeline's column-wise grouping giving what grouping row by row gives."""

from __future__ import annotations

import json
import threading
from collections import Counter

import anyio
import jsonschema
import pytest

from memory.mcp import tools as T
from memory.mcp.auth import make_principal
from memory.mcp.server import TOOL_THREADS, _SchemaCheckedOnce, build_server


def test_results_are_validated_and_each_schema_checked_once(monkeypatch):
    from mcp.server.lowlevel import server as lowlevel

    build_server(lambda: None)
    assert isinstance(lowlevel.jsonschema, _SchemaCheckedOnce)  # what the SDK validates results with
    checks = Counter()
    real_check = jsonschema.Draft202012Validator.check_schema.__func__

    def counting(cls, schema, *a, **kw):
        checks[json.dumps(schema, sort_keys=True)] += 1
        return real_check(cls, schema, *a, **kw)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", classmethod(counting))
    shim = _SchemaCheckedOnce(jsonschema)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "$schema": "https://json-schema.org/draft/2020-12/schema"}
    for _ in range(5):
        shim.validate(instance={"n": 1}, schema=dict(schema))  # an equal schema, a new dict each call
    assert list(checks.values()) == [1]
    # A result that does not match is refused every time, with the error jsonschema itself raises.
    for bad in ({"n": "one"}, {}, {"n": 1.5}):
        with pytest.raises(jsonschema.ValidationError) as mine:
            shim.validate(instance=bad, schema=schema)
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(instance=bad, schema=schema)
        assert mine.value.message == theirs.value.message
    with pytest.raises(jsonschema.SchemaError):  # a broken schema is still caught
        shim.validate(instance={}, schema={"type": "no-such-type"})
    assert shim.ValidationError is jsonschema.ValidationError  # the rest of the module passes through


def test_tool_threads_are_bounded_and_status_is_not_queued(monkeypatch, tmp_path):
    from mcp.shared.memory import create_connected_server_and_client_session

    from memory.store.core import Store

    store = Store(tmp_path / "home")
    mem = store.add_memory("The deploy runs on Fridays", scope="work")["id"]
    release = threading.Event()
    lock = threading.Lock()
    running = {"now": 0, "most": 0, "entered": 0}

    def blocking_search(store, p, **kw):
        with lock:
            running["now"] += 1
            running["entered"] += 1
            running["most"] = max(running["most"], running["now"])
        try:
            assert release.wait(60), "the test never released the searches"
            return {"query": kw["query"], "scopes": list(p.read), "results": [], "hint": "held"}
        finally:
            with lock:
                running["now"] -= 1

    monkeypatch.setattr(T, "memory_search", blocking_search)
    server = build_server(lambda: store, make_principal("t", ["work"], "work"))
    n_searches = TOOL_THREADS + 3

    async def main():
        async with create_connected_server_and_client_session(server) as client:
            results = []

            async def search(i):
                results.append(await client.call_tool("memory_search", {"query": f"q{i}"}))

            async with anyio.create_task_group() as tg:
                for i in range(n_searches):
                    tg.start_soon(search, i)
                with anyio.fail_after(60):
                    while running["entered"] < TOOL_THREADS:
                        await anyio.sleep(0.02)
                # Every queued thread is busy and more searches wait; status and a get still answer.
                with anyio.fail_after(60):
                    status = await client.call_tool("status", {})
                    got = await client.call_tool("memory_get", {"id": mem})
                assert running["entered"] == TOOL_THREADS and not results
                release.set()
            return status, got, results

    status, got, results = anyio.run(main)
    assert not status.isError and json.loads(status.content[0].text)["client"] == "t"
    assert not got.isError and mem in got.content[0].text
    assert len(results) == n_searches and not any(r.isError for r in results)
    assert running["most"] == TOOL_THREADS  # never more at once, and all of them used


def _timeline_row_by_row(store, p, samples_per_app):
    """timeline's groups computed the plain way (a dict per row), to compare with the tool's."""
    import pyarrow.compute as pc

    table = store.scan(store.evidence, None, ["id", "captured_at", "app", "window", "source"], None)
    table = table.take(pc.sort_indices(table, [("captured_at", "ascending")]))
    rows = table.to_pylist()
    by_app: dict[str, list[dict]] = {}
    for r in rows:
        by_app.setdefault(r["app"] or "(unknown app)", []).append(r)
    out = []
    for app, group in sorted(by_app.items(), key=lambda kv: -len(kv[1])):
        windows = Counter(r["window"] for r in group if r["window"]).most_common(5)
        out.append({"app": app, "count": len(group), "windows": [w for w, _ in windows],
                    "sources": sorted({r["source"] for r in group}),
                    "samples": [group[i]["id"] for i in T._spread(list(range(len(group))), samples_per_app)]})
    return out


def test_timeline_groups_match_row_by_row_grouping(tmp_path):
    import random

    from memory.store.core import EvidenceSpec, Store

    store = Store(tmp_path / "home")
    rnd = random.Random(11)
    apps = [None, "", "kitty", "zed", "firefox"]
    windows = [None, "", "logs", "PR #12", "inbox", "docs", "chat", "build", "tests"]
    for _ in range(4):  # several fragments
        store.add_evidence_batch([EvidenceSpec(text=f"row {rnd.random()}", source=rnd.choice(["screen", "audio"]),
                                               app=rnd.choice(apps), window=rnd.choice(windows), scope="work")
                                  for _ in range(60)])
    p = make_principal("t", ["work"], None)
    for k in (1, 3, 5):
        got = T.timeline(store, p, since="2000-01-01T00:00:00Z", samples_per_app=k)
        want = _timeline_row_by_row(store, p, k)
        assert got["evidence_rows"] == 240
        assert [{key: g[key] for key in ("app", "count", "windows", "sources")} for g in got["apps"]] == \
            [{key: w[key] for key in ("app", "count", "windows", "sources")} for w in want]
        assert [[s["id"] for s in g["samples"]] for g in got["apps"]] == [w["samples"] for w in want]
    assert "(unknown app)" in [g["app"] for g in got["apps"]]  # null and "" apps are one group
    assert all("" not in g["windows"] for g in got["apps"])  # empty windows are not named
    only = T.timeline(store, p, since="2000-01-01T00:00:00Z", apps=["zed"])
    assert [g["app"] for g in only["apps"]] == ["zed"]
    empty = T.timeline(store, p, since="2000-01-01T00:00:00Z", until="2000-01-02T00:00:00Z")
    assert empty["apps"] == [] and empty["evidence_rows"] == 0
