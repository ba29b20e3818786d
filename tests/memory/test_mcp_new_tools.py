"""The tools peers' memory servers have too: evidence_add, memory_list, relation_remove, consolidate — through a
real in-process client session, with their output schemas, audit rows and least-privilege refusals."""

from __future__ import annotations

import json

import pytest

from memory.mcp.auth import make_principal
from memory.store import filters as F
from tests.memory.mcp_support import call

WORK = make_principal("tester", ["work"], "work")
READER = make_principal("reader", ["work"], None)
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


def text(result) -> str:
    return result.content[0].text


def data(result) -> dict:
    assert not result.is_error, text(result)
    return json.loads(text(result))


def run(store, principal, *calls):
    async def steps(c):
        return [await c.call_tool(name, args) for name, args in calls]

    return call(store, principal, steps)


def test_new_tools_declare_output_schemas_and_describe_every_input(store):
    async def steps(c):
        return {t.name: t for t in (await c.list_tools()).tools}

    tools = call(store, WORK, steps)
    for name in ("evidence_add", "memory_list", "relation_remove", "consolidate"):
        t = tools[name]
        assert t.output_schema and t.output_schema["properties"], name
        assert all(p.get("description") for p in t.input_schema["properties"].values()), name
        assert len(t.description) > 80, name
    assert "write scope" in tools["consolidate"].description and "dry_run" in tools["consolidate"].description
    assert tools["relation_remove"].annotations.destructive_hint


# ---- evidence_add ----------------------------------------------------------------------------------------


def test_evidence_add_redacts_secrets_before_they_reach_the_store(store):
    secret_text = f"deploy notes: export AWS_ACCESS_KEY_ID={AWS_KEY} then password: hunter2hunter2 and run it"
    added, = run(store, WORK, ("evidence_add", {"text": secret_text, "app": "slack", "window": f"key {AWS_KEY}",
                                                "captured_at": "2024-05-08T13:56:00Z"}))
    out = data(added)
    assert out["redactions"] == {"aws_key": 1, "password": 1}  # in the text; the window is redacted too
    assert out["created"]["source"] == "mcp" and out["created"]["scope"] == "work"
    assert out["created"]["captured_at"].startswith("2024-05-08T13:56")
    assert added.structured_content["created"]["id"] == out["created"]["id"]
    rows = store.rows("evidence", None, ["text", "window", "app", "source", "redactions"])
    assert len(rows) == 1
    assert AWS_KEY not in json.dumps(rows) and "hunter2hunter2" not in json.dumps(rows)
    assert "[REDACTED:aws_key]" in rows[0]["text"] and rows[0]["source"] == "mcp" and rows[0]["redactions"] == 2
    assert AWS_KEY not in json.dumps(store.rows("audit"), default=str)
    audit = store.rows("audit", F.equals("entity_kind", "evidence"), ["actor", "action"])
    assert audit == [{"actor": "mcp:tester", "action": "create"}]


def test_evidence_add_scopes_defaults_and_refusals(store):
    below, default, outside, future, blank = run(
        store, WORK,
        ("evidence_add", {"text": "Acme kickoff notes", "scope": "work/acme"}),
        ("evidence_add", {"text": "Standup notes"}),
        ("evidence_add", {"text": "Holiday plans", "scope": "personal"}),
        ("evidence_add", {"text": "later", "captured_at": "2999-01-01T00:00:00Z"}),
        ("evidence_add", {"text": "   "}))
    assert data(below)["created"]["scope"] == "work/acme"
    assert data(default)["created"]["app"] == "tester"  # the client's name when no app is given
    assert outside.is_error and "may write only to scope 'work'" in text(outside)
    assert future.is_error and "future" in text(future)
    assert blank.is_error and "text is empty" in text(blank)
    assert store.count("evidence", local=True) == 2
    found = data(run(store, WORK, ("evidence_search", {"query": "kickoff notes"}))[0])
    assert found["results"][0]["id"] == data(below)["created"]["id"]


# ---- memory_list -------------------------------------------------------------------------------------------


def test_memory_list_pages_in_a_stable_order_without_repeats(store):
    ids = [store.add_memory(f"Fact number {i} about the work project", scope="work")["id"] for i in range(7)]
    store.add_memory("A personal fact", scope="personal")
    store.add_memory("A procedure for work", type="procedural", scope="work/acme")

    async def steps(c):
        pages, cursor = [], None
        while True:
            args = {"limit": 3, "types": ["semantic"]} | ({"cursor": cursor} if cursor else {})
            page = data(await c.call_tool("memory_list", args))
            pages.append(page)
            cursor = page["next_cursor"]
            if not cursor:
                return pages

    pages = call(store, WORK, steps)
    assert [len(p["results"]) for p in pages] == [3, 3, 1]
    listed = [r["id"] for p in pages for r in p["results"]]
    assert sorted(listed) == sorted(ids)  # every work memory once, nothing from personal
    changed = {r["id"]: r["updated_at"] for r in store.rows("memory", None, ["id", "updated_at"])}
    assert listed == sorted(listed, key=lambda i: (changed[i], i), reverse=True)
    assert pages[-1]["hint"] == "that is all of them"


def test_memory_list_filters_and_cursor_errors(store):
    a = store.add_memory("Old fact", scope="work")["id"]
    b = store.add_memory("Procedure in acme", type="procedural", scope="work/acme")["id"]
    store.set_status(a, "rejected", actor="person")
    default, rejected, narrow, first, other_filters, garbage, outside = run(
        store, WORK,
        ("memory_list", {}),
        ("memory_list", {"status": ["rejected"]}),
        ("memory_list", {"scope": "work/acme", "types": ["procedural"]}),
        ("memory_list", {"limit": 1, "status": ["active", "rejected"]}),
        ("memory_list", {"cursor": "x"}),
        ("memory_list", {"cursor": "bm90IGEgY3Vyc29y"}),
        ("memory_list", {"scope": "personal"}))
    assert [r["id"] for r in data(default)["results"]] == [b]
    assert [r["id"] for r in data(rejected)["results"]] == [a]
    assert [r["id"] for r in data(narrow)["results"]] == [b]
    cursor = data(first)["next_cursor"]
    assert cursor
    reused, = run(store, WORK, ("memory_list", {"cursor": cursor}))  # same cursor, other filters
    assert reused.is_error and "other filters" in text(reused)
    for bad in (other_filters, garbage):
        assert bad.is_error and "cursor is not one memory_list returned" in text(bad)
    assert outside.is_error and "outside what this client may read" in text(outside)


# ---- relation_remove ---------------------------------------------------------------------------------------


def test_relation_remove_removes_the_edge_and_audits_it(store):
    from memory.graph.relations import add_relation

    a = store.add_memory("We moved to Postgres 16", scope="work")["id"]
    b = store.add_memory("Postgres 16 has faster vacuum", scope="work")["id"]
    edge = add_relation(store, a, "BECAUSE", b, actor="person")
    removed, again, memory_id, forget_rel = run(
        store, WORK,
        ("relation_remove", {"id": edge["id"]}),
        ("relation_remove", {"id": edge["id"]}),
        ("relation_remove", {"id": a}),
        ("memory_forget", {"ids": [edge["id"]]}))
    out = data(removed)
    assert out["removed"]["id"] == edge["id"] and out["removed"]["relation"] == "BECAUSE"
    assert store.count("relations", local=True) == 0 and store.count("memory", local=True) == 2
    assert again.is_error and "no relation" in text(again) and "memory_related" in text(again)
    assert memory_id.is_error and "not a relation id" in text(memory_id)
    assert forget_rel.is_error and "relation_remove" in text(forget_rel)
    audit = store.rows("audit", F.and_(F.equals("entity_kind", "relation"), F.equals("action", "delete")), ["actor"])
    assert audit == [{"actor": "mcp:tester"}]


def test_relation_remove_needs_write_on_the_src_scope(store):
    from memory.graph.relations import add_relation

    acme = make_principal("acme", ["work"], "work/acme")
    a = store.add_memory("Release freeze this week", scope="work")["id"]
    b = store.add_memory("Acme launch on Friday", scope="work/acme")["id"]
    edge = add_relation(store, a, "BECAUSE", b, actor="person")
    refused, = run(store, acme, ("relation_remove", {"id": edge["id"]}))
    assert refused.is_error and "src is in scope 'work/acme'" in text(refused)
    assert store.count("relations", local=True) == 1


# ---- consolidate -------------------------------------------------------------------------------------------


@pytest.fixture
def rules_only(store):
    store.config.extraction.engine = "rules"  # no LLM in tests: the rules extractor is the fallback anyway
    return store


def test_consolidate_dry_run_plans_and_writes_nothing_even_for_readers(rules_only):
    store = rules_only
    store.add_evidence("I prefer dark mode in every editor", app="kitty", scope="work")
    store.add_evidence("personal note about a trip", app="notes", scope="personal")
    versions = {n: v for n, (_, v) in store.tables_state().items()}
    res, = run(store, READER, ("consolidate", {}))
    out = data(res)
    assert out["dry_run"] is True and out["pending_evidence"] == 1 and out["scopes"] == ["work"]
    assert res.structured_content["dry_run"] is True
    assert {n: v for n, (_, v) in store.tables_state().items()} == versions


def test_consolidate_runs_extraction_in_the_write_scope_only(rules_only):
    store = rules_only
    for i in range(3):
        store.add_evidence(f"Note {i}: the staging server is https://staging{i}.example.com", app="kitty",
                           scope="work")
    store.add_evidence("The passport renewal form is https://gov.example.org/passport", app="notes",
                       scope="personal")
    first, second = run(store, WORK, ("consolidate", {"dry_run": False, "limit": 2}),
                        ("consolidate", {"dry_run": False, "limit": 2}))
    one, two = data(first), data(second)
    assert one["extraction"]["evidence"] == 2 and one["pending_evidence"] == 1 and "call consolidate again" in one["hint"]
    assert two["extraction"]["evidence"] == 1 and two["pending_evidence"] == 0
    assert store.count("evidence", F.and_(F.is_null("extracted_at"), F.equals("scope", "personal")), local=True) == 1
    assert store.count("memory", F.equals("scope", "personal"), local=True) == 0
    assert store.count("memory", F.equals("scope", "work"), local=True) >= 1
    audit = store.rows("audit", F.equals("action", "consolidate"), ["actor", "scope"])
    assert audit == [{"actor": "mcp:tester", "scope": "work"}] * 2


def test_consolidate_run_is_refused_for_a_read_only_token(rules_only):
    store = rules_only
    store.add_evidence("The wiki is https://wiki.example.com", app="kitty", scope="work")
    res, = run(store, READER, ("consolidate", {"dry_run": False}))
    assert res.is_error and "read-only" in text(res)
    assert store.count("evidence", F.is_null("extracted_at"), local=True) == 1
