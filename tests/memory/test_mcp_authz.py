"""Least privilege over MCP: every tool × {no scope, read-only, read+write, other scope}, through a real
in-process client session. Reads see only the caller's scopes; writes need write on the scope they touch,
and a refused write leaves every table exactly as it was (rows, audit, usage, relations)."""

from __future__ import annotations

import json

import pytest

from memory.mcp.auth import Principal, make_principal
from memory.store import filters as F
from tests.memory.mcp_support import call, snapshot

MARK = "zanzibarquokka"  # only in personal rows

PRINCIPALS = {
    "none": Principal("nobody", (), None),
    "read_only": make_principal("reader", ["work"], None),
    "read_write": make_principal("writer", ["work"], "work"),
    "other": make_principal("outsider", ["personal"], "personal"),
}
READ_TOOLS = {"memory_search", "memory_recall", "memory_get", "evidence_search", "evidence_get", "timeline", "status",
              "memory_related", "memory_chain", "memory_list"}
WRITE_TOOLS = {"memory_add", "memory_update", "memory_forget", "memory_relate", "memory_reinforce", "evidence_add",
               "relation_remove", "consolidate", "evidence_forget"}
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def seeded(store):
    from memory.graph.relations import add_relation

    store.config.extraction.engine = "rules"  # consolidate runs extraction; no LLM in tests

    ids = {
        "a": store.add_memory("The billing service retries webhooks three times", scope="work")["id"],
        "b": store.add_memory("Webhook retries were added because Stripe drops events", scope="work")["id"],
        "c": store.add_memory("Webhook retries used to be disabled on Fridays", scope="work")["id"],
        "evd": store.add_evidence("billing webhooks failing with 502", app="kitty", window="logs", scope="work")["id"],
        "vault": store.add_memory("billing api key", type="vault", scope="work", value="sk-very-secret")["id"],
        "personal": store.add_memory(f"My {MARK} passport is in the drawer", scope="personal")["id"],
        "pev": store.add_evidence(f"{MARK} chat about holidays", app="signal-desktop", scope="personal")["id"],
    }
    ids["rel"] = add_relation(store, ids["a"], "BECAUSE", ids["b"], actor="person")["id"]
    return ids


def read_calls(ids: dict) -> dict:
    return {
        "memory_search": {"query": "billing webhooks retries"},
        "memory_recall": {"query": "billing webhooks retries", "budget_tokens": 1000},
        "memory_get": {"id": ids["a"]},
        "evidence_search": {"query": "billing webhooks failing"},
        "evidence_get": {"id": ids["evd"]},
        "timeline": {"since": "2000-01-01T00:00:00Z"},
        "status": {},
        "memory_related": {"id": ids["a"]},
        "memory_chain": {"id": ids["a"]},
        "memory_list": {"types": ["semantic"]},
    }


def write_calls(ids: dict) -> dict:
    return {
        "memory_add": {"text": "Billing alerts go to #billing-oncall", "scope": "work"},
        "memory_update": {"id": ids["a"], "text": "The billing service retries webhooks five times"},
        "memory_forget": {"ids": [ids["c"]]},
        "memory_relate": {"src": ids["b"], "relation": "TRIGGERED", "dst": ids["a"]},
        "memory_reinforce": {"ids": [ids["a"]]},
        # before evidence_add: it erases the seeded kitty row only (scope named, so "other" is refused)
        "evidence_forget": {"app": "kitty", "scope": "work", "confirm": True},
        "evidence_add": {"text": f"billing deploy key {AWS_KEY}", "app": "kitty", "scope": "work"},
        "relation_remove": {"id": ids["rel"]},
        "consolidate": {"dry_run": False, "scope": "work"},
    }


def run_all(store, principal, calls: dict) -> dict:
    async def steps(c):
        return {name: await c.call_tool(name, args) for name, args in calls.items()}

    return call(store, principal, steps)


def body(result) -> str:
    return json.dumps(result.model_dump(mode="json"))


def test_every_tool_is_in_the_matrix(store, seeded):
    async def steps(c):
        return {t.name: t.annotations.read_only_hint for t in (await c.list_tools()).tools}

    listed = call(store, PRINCIPALS["read_write"], steps)
    assert set(listed) == READ_TOOLS | WRITE_TOOLS, "a new tool must be added to this matrix"
    assert {n for n, ro in listed.items() if ro} == READ_TOOLS  # annotations agree with what the tools do


@pytest.mark.parametrize("who", ["read_only", "read_write"])
def test_readers_read_their_scope_and_nothing_else(store, seeded, who):
    out = run_all(store, PRINCIPALS[who], read_calls(seeded))
    for name, r in out.items():
        assert not r.is_error, f"{name}: {r.content[0].text}"
        text = body(r)
        for secret in (MARK, seeded["personal"], seeded["pev"], "signal-desktop", "sk-very-secret"):
            assert secret not in text, f"{name} leaked {secret!r}"
    assert seeded["a"] in body(out["memory_search"]) and seeded["evd"] in body(out["evidence_search"])
    listed = [r["id"] for r in json.loads(out["memory_list"].content[0].text)["results"]]
    assert set(listed) == {seeded["a"], seeded["b"], seeded["c"]}
    assert seeded["b"] in body(out["memory_related"])
    st = json.loads(out["status"].content[0].text)
    assert st["visible"] == {"memories": 3, "evidence": 1, "vault_entries": 1}
    assert st["can_write"] is (who == "read_write")


@pytest.mark.parametrize("who", ["none", "other"])
def test_outsiders_see_nothing_of_work(store, seeded, who):
    calls = read_calls(seeded)
    out = run_all(store, PRINCIPALS[who], calls)
    work_secrets = (seeded["a"], seeded["b"], seeded["c"], seeded["evd"], seeded["vault"], "billing", "kitty")
    for name, r in out.items():
        text = body(r)
        for sent in sorted((v for v in calls[name].values() if isinstance(v, str)), key=len, reverse=True):
            text = text.replace(sent, "")  # what the client sent may be echoed back; that is not a leak
        for secret in work_secrets:
            assert secret not in text, f"{name} leaked {secret!r}: {text[:300]}"
    for name in ("memory_get", "evidence_get", "memory_related", "memory_chain"):
        assert out[name].is_error, name
    st = json.loads(out["status"].content[0].text)
    if who == "none":
        assert st["visible"] == {"memories": 0, "evidence": 0, "vault_entries": 0}
    else:
        assert st["visible"] == {"memories": 1, "evidence": 1, "vault_entries": 0}


@pytest.mark.parametrize("who", ["none", "read_only", "other"])
def test_writes_are_refused_and_change_nothing(store, seeded, who):
    before = snapshot(store)
    out = run_all(store, PRINCIPALS[who], write_calls(seeded))
    assert set(out) == WRITE_TOOLS
    for name, r in out.items():
        assert r.is_error, f"{name} succeeded for a {who} token: {r.content[0].text}"
        msg = r.content[0].text
        assert "read-only" in msg or "scope" in msg or "visible" in msg, f"{name}: {msg}"
    assert snapshot(store) == before
    assert store.get(seeded["a"])["text"] == "The billing service retries webhooks three times"


def test_read_write_token_changes_its_own_scope(store, seeded):
    out = run_all(store, PRINCIPALS["read_write"], write_calls(seeded))
    for name, r in out.items():
        assert not r.is_error, f"{name}: {r.content[0].text}"
    assert store.get(seeded["a"])["text"] == "The billing service retries webhooks five times"
    assert store.count("memory", F.id_is(seeded['c']), local=True) == 0
    assert [r["text"] for r in store.rows("memory", F.equals("scope", "work"), ["text"])].count(
        "Billing alerts go to #billing-oncall") == 1
    actors = {r["actor"] for r in store.rows("audit", F.starts_with("actor", "mcp:"), ["actor"])}
    assert actors == {"mcp:writer"}
    assert store.count("evidence", F.id_is(seeded['evd']), local=True) == 0  # evidence_forget app=kitty
    assert store.count("evidence", F.id_is(seeded['pev']), local=True) == 1
    added = store.rows("evidence", F.equals("source", "mcp"), ["text", "scope"])
    assert added == [{"text": "billing deploy key [REDACTED:aws_key]", "scope": "work"}]
    assert store.count("relations", F.id_is(seeded['rel']), local=True) == 0
    assert store.count("evidence", F.and_(F.is_null("extracted_at"), F.equals("scope", "personal")), local=True) == 1  # only its own scope
    assert store.count("evidence", F.and_(F.is_null("extracted_at"), F.equals("scope", "work")), local=True) == 0


@pytest.mark.parametrize("who", ["none", "read_only", "read_write", "other"])
def test_consolidate_dry_run_is_a_read_for_any_token(store, seeded, who):
    before = snapshot(store)
    out = run_all(store, PRINCIPALS[who], {"consolidate": {}})["consolidate"]
    assert not out.is_error, out.content[0].text
    plan = json.loads(out.content[0].text)
    assert plan["dry_run"] is True and plan["scopes"] == list(PRINCIPALS[who].read)
    assert plan["pending_evidence"] == {"none": 0, "read_only": 1, "read_write": 1, "other": 1}[who]
    assert snapshot(store) == before
