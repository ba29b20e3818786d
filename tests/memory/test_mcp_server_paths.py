"""The MCP server's per-call machinery: results checked against their models (what their output schemas
say) before they are sent, tool bodies sharing a bounded set of worker threads with cheap tools not queued
behind them, and timeline's column-wise grouping giving what grouping row by row gives."""

from __future__ import annotations

import json
import threading
from collections import Counter

import anyio
import jsonschema

from memory.mcp import tools as T
from memory.mcp.auth import make_principal
from memory.mcp.server import TOOL_THREADS, build_server
from tests.memory.mcp_support import connected


def test_results_are_checked_against_their_models_before_they_are_sent(monkeypatch, tmp_path):
    from memory.store.core import Store

    store = Store(tmp_path / "home")
    server = build_server(lambda: store, make_principal("t", ["work"], "work"))

    async def main():
        async with connected(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            good = await client.call_tool("status", {})
            monkeypatch.setattr(T, "status", lambda store, p: {"server": "mirador"})  # most fields missing
            bad = await client.call_tool("status", {})
            return tools, good, bad

    tools, good, bad = anyio.run(main)
    assert len(tools) == 19 and all(t.output_schema for t in tools.values())  # every tool declares its result
    for t in tools.values():
        jsonschema.Draft202012Validator.check_schema(t.output_schema)
    # What is sent matches the schema the client was given (the SDK's client checks it too), as text and data.
    jsonschema.validate(good.structured_content, tools["status"].output_schema)
    assert json.loads(good.content[0].text) == good.structured_content
    # A result that does not match its model is never sent: the client hears of an internal error instead.
    assert bad.is_error and "internal error in status (ValidationError)" in bad.content[0].text
    assert bad.structured_content is None


def test_tool_threads_are_bounded_and_status_is_not_queued(monkeypatch, tmp_path):
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
        async with connected(server) as client:
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
    assert not status.is_error and json.loads(status.content[0].text)["client"] == "t"
    assert not got.is_error and mem in got.content[0].text
    assert len(results) == n_searches and not any(r.is_error for r in results)
    assert running["most"] == TOOL_THREADS  # never more at once, and all of them used


def _timeline_row_by_row(store, p, samples_per_app):
    """timeline's groups computed the plain way (a dict per row), to compare with the tool's."""
    import pyarrow.compute as pc

    table = store.scan("evidence", None, ["id", "captured_at", "app", "window", "source"])
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
        got = T.timeline(store, p, since="2000-01-01T00:00:00Z", samples_per_app=k).model_dump()
        want = _timeline_row_by_row(store, p, k)
        assert got["evidence_rows"] == 240
        assert [{key: g[key] for key in ("app", "count", "windows", "sources")} for g in got["apps"]] == \
            [{key: w[key] for key in ("app", "count", "windows", "sources")} for w in want]
        assert [[s["id"] for s in g["samples"]] for g in got["apps"]] == [w["samples"] for w in want]
    assert "(unknown app)" in [g["app"] for g in got["apps"]]  # null and "" apps are one group
    assert all("" not in g["windows"] for g in got["apps"])  # empty windows are not named
    only = T.timeline(store, p, since="2000-01-01T00:00:00Z", apps=["zed"]).model_dump()
    assert [g["app"] for g in only["apps"]] == ["zed"]
    empty = T.timeline(store, p, since="2000-01-01T00:00:00Z", until="2000-01-02T00:00:00Z").model_dump()
    assert empty["apps"] == [] and empty["evidence_rows"] == 0
