"""Reinforcement: use raises salience and ranking, decay is a pure function of time, scopes hold."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import anyio
import pytest

from memory.config import Config, ReinforcementConfig
from memory.errors import InputError
from memory.graph.reinforcement import effective_salience, reinforce, strength_at, usage_of, usage_rows
from memory.mcp.auth import Principal, TokenStore, make_principal
from memory.mcp.server import build_server
from memory.retrieval.recall import recall
from memory.retrieval.search import search_memories
from memory.store import filters as F
from tests.memory.mcp_support import connected, free_port, http_session, start_server, stop_server

T0 = datetime(2026, 3, 1, 12, 0, 0)
ALPHA = "The staging server for project Alpha is alpha-stg-1 in the Frankfurt region."
BETA = "The staging server for project Beta is beta-stg-2 in the Frankfurt region."
QUERY = "staging server in the Frankfurt region"


def _order(ids: list[str], *wanted: str) -> list[str]:
    return [i for i in ids if i in wanted]


def _audit(store, action: str) -> list[dict]:
    return store.rows("audit", F.equals("action", action), ["actor", "entity_id", "scope", "after"])


def test_reinforced_memory_ranks_above_an_equal_unreinforced_one(store):
    a = store.add_memory(ALPHA, scope="work")["id"]
    b = store.add_memory(BETA, scope="work")["id"]
    before = recall(store, QUERY, 400, scopes=["work"], include_evidence=False)
    first, second = _order([i.id for i in before.items], a, b)
    scores = {i.id: i.score for i in before.items}
    assert scores[second] <= scores[first] and scores[second] > 0.8 * scores[first]  # equally relevant

    res = reinforce(store, [second], actor="person")
    assert [r["id"] for r in res["reinforced"]] == [second] and res["not_found"] == []

    after = recall(store, QUERY, 400, scopes=["work"], include_evidence=False)
    assert _order([i.id for i in after.items], a, b) == [second, first]
    hits = search_memories(store, QUERY, scopes=["work"], limit=5)
    assert _order([h.id for h in hits], a, b) == [second, first]
    # What must not happen: the memory nobody used gains nothing, and its row is untouched.
    assert usage_rows(store, [first]) == {}
    assert store.get(first)["salience"] == store.get(second)["salience"] == pytest.approx(0.5)
    rows = _audit(store, "reinforce")
    assert len(rows) == 1 and rows[0]["actor"] == "person" and rows[0]["entity_id"] == second


def test_decay_is_deterministic_under_a_fixed_clock(store):
    cfg = store.config.reinforcement
    sem = store.add_memory("Deploys go out on Tuesdays", scope="work")["id"]
    epi = store.add_memory("Sam demoed the new billing page in standup", type="episodic", scope="work")["id"]
    reinforce(store, [sem, epi], now=T0)
    hl_sem, hl_epi = cfg.half_life_days.semantic, cfg.half_life_days.episodic

    def strength(id_, at):
        return {r["id"]: r for r in usage_of(store, [id_], now=at)}[id_]["strength"]

    assert strength(sem, T0) == pytest.approx(1.0)
    assert strength(sem, T0 + timedelta(days=hl_sem)) == pytest.approx(0.5)
    assert strength(sem, T0 + timedelta(days=2 * hl_sem)) == pytest.approx(0.25)
    assert strength(epi, T0 + timedelta(days=hl_epi)) == pytest.approx(0.5)  # per-type half-life
    assert strength(epi, T0 + timedelta(days=hl_sem)) < strength(sem, T0 + timedelta(days=hl_sem))
    # Same inputs, same answer, however often it is asked: nothing is stored by reading.
    later = T0 + timedelta(days=17, hours=5)
    assert usage_of(store, [sem, epi], now=later) == usage_of(store, [sem, epi], now=later)
    assert strength(sem, T0 - timedelta(days=1)) == pytest.approx(1.0)  # a clock behind never increases it

    # A second use adds a step to what is left: 0.5 + 1 after one half-life.
    res = reinforce(store, [sem], now=T0 + timedelta(days=hl_sem))
    row = res["reinforced"][0]
    assert row["uses"] == 2 and row["strength"] == pytest.approx(1.5)
    assert row["effective_salience"] == pytest.approx(0.5 + 0.5 * 1.5 / (1.5 + cfg.saturation))
    assert strength_at(1.5, T0, "semantic", T0 + timedelta(days=3 * hl_sem), cfg) == pytest.approx(1.5 / 8)
    assert effective_salience(0.5, 0.0, cfg) == 0.5  # unused: exactly the base salience


def test_unknown_evidence_and_out_of_scope_ids_are_reported(store):
    work = store.add_memory("Work fact about the billing queue", scope="work")["id"]
    personal = store.add_memory("Personal fact about the garden", scope="personal")["id"]
    evd = store.add_evidence("screen text", scope="work")["id"]
    res = reinforce(store, [work, personal, evd, "mem_doesnotexist", "nonsense"], scopes=["work"])
    assert [r["id"] for r in res["reinforced"]] == [work]
    assert {n["id"] for n in res["not_found"]} == {personal, evd, "mem_doesnotexist", "nonsense"}
    assert usage_rows(store, [personal]) == {}
    with pytest.raises(InputError):
        reinforce(store, [f"mem_{i:024d}" for i in range(201)])


def _seed_scopes(store) -> dict:
    return {"work": store.add_memory("The billing service retries webhooks three times", scope="work")["id"],
            "acme": store.add_memory("Acme's staging database is pg-staging-3", scope="work/acme")["id"],
            "personal": store.add_memory("My passport number is in the drawer", scope="personal")["id"]}


def test_memory_reinforce_over_http_with_a_real_client_session(tmp_path):
    from memory.store.core import Store

    home = tmp_path / "srv"
    store = Store(home)
    ids = _seed_scopes(store)
    token, _ = TokenStore(home).add("assistant", ["work"], "work")  # reinforcing is a write: it needs a write scope
    port = free_port()
    proc = start_server(home, port, home / "serve.log")

    async def steps():
        async with http_session(f"http://127.0.0.1:{port}/mcp", token) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            ok = await s.call_tool("memory_reinforce", {"ids": [ids["work"], ids["acme"]]})
            mixed = await s.call_tool("memory_reinforce", {"ids": [ids["work"], ids["personal"]]})
            refused = await s.call_tool("memory_reinforce", {"ids": [ids["personal"]]})
            return names, ok, mixed, refused

    try:
        names, ok, mixed, refused = anyio.run(steps)
    finally:
        stop_server(proc)
    assert "memory_reinforce" in names
    assert not ok.is_error
    got = json.loads(ok.content[0].text)
    assert sorted(r["id"] for r in got["reinforced"]) == sorted([ids["work"], ids["acme"]])
    assert got["actor"] == "mcp:assistant"
    mixed_doc = json.loads(mixed.content[0].text)
    assert [r["id"] for r in mixed_doc["reinforced"]] == [ids["work"]]
    assert [n["id"] for n in mixed_doc["not_found"]] == [ids["personal"]]
    assert refused.is_error and ids["personal"] in refused.content[0].text
    assert "passport" not in refused.content[0].text + mixed.content[0].text  # no content of what it may not see
    store = Store(home)  # the server wrote; read what it left
    usage = usage_rows(store, ids.values())
    assert usage[ids["work"]]["uses"] == 2 and usage[ids["acme"]]["uses"] == 1
    assert ids["personal"] not in usage
    rows = _audit(store, "reinforce")
    assert len(rows) == 2 and {r["actor"] for r in rows} == {"mcp:assistant"}
    assert all(ids["personal"] not in (r["after"] or "") for r in rows)


def test_a_read_only_token_cannot_reinforce_and_changes_nothing(tmp_path):
    from memory.store.core import Store

    store = Store(tmp_path / "h")
    ids = _seed_scopes(store)
    reader = Principal("reader", ("work",), None)
    acme_writer = Principal("acme", ("work",), "work/acme")

    async def steps(client):
        return await client.call_tool("memory_reinforce", {"ids": [ids["work"]]})

    read_only = _call(store, reader, steps)
    assert read_only.is_error and "read-only" in read_only.content[0].text
    assert not usage_rows(store, ids.values())  # no use recorded, so ranking is unchanged
    assert not _audit(store, "reinforce")

    async def readable_not_writable(client):
        return await client.call_tool("memory_reinforce", {"ids": [ids["work"], ids["acme"]]})

    res = _call(store, acme_writer, readable_not_writable)
    doc = json.loads(res.content[0].text)
    assert [r["id"] for r in doc["reinforced"]] == [ids["acme"]]  # work is readable, not writable: not touched
    assert [n["id"] for n in doc["not_found"]] == [ids["work"]]
    assert set(usage_rows(store, ids.values())) == {ids["acme"]}


def _call(store, principal, steps):
    server = build_server(lambda: store, principal)

    async def main():
        async with connected(server) as client:
            return await steps(client)

    return anyio.run(main)


@pytest.mark.parametrize("count", [False, True])
def test_appearing_in_search_or_recall_counts_only_when_configured(mirador_home, count):
    from memory.store.core import Store

    cfg = Config(reinforcement=ReinforcementConfig(count_search_as_use=count))
    store = Store(mirador_home, config=cfg)
    ids = _seed_scopes(store)
    p = make_principal("tester", ["work"], "work")

    async def steps(c):
        await c.call_tool("memory_search", {"query": "billing webhooks retries"})
        await c.call_tool("memory_recall", {"query": "billing webhooks retries", "budget_tokens": 300})

    _call(store, p, steps)
    usage = usage_rows(store, ids.values())
    if not count:
        assert usage == {} and _audit(store, "appeared") == []
    else:
        assert usage[ids["work"]]["uses"] == 2
        assert usage[ids["work"]]["strength"] == pytest.approx(2 * cfg.reinforcement.search_step)
        assert ids["personal"] not in usage  # never outside the client's scopes
        assert {r["actor"] for r in _audit(store, "appeared")} == {"mcp:tester"}


def test_cli_reinforce_and_show(store, capsys):
    from desktop.cli.main import main

    mid = store.add_memory("The on-call rota is in the ops wiki", scope="work")["id"]
    assert main(["reinforce", mid, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["reinforced"][0]["uses"] == 1
    assert main(["reinforce", "--show", mid]) == 0
    assert "uses 1" in capsys.readouterr().out
    assert main(["reinforce", mid, "mem_unknown000000000000000"]) == 2
    assert "mem_unknown000000000000000" in capsys.readouterr().err
    assert usage_of(store, [mid])[0]["uses"] == 2  # the valid id was still recorded, the other reported


def test_forgetting_a_memory_drops_its_use_counts(store):
    from memory.store.erasure import forget

    keep = store.add_memory("Keep this fact about the deploy queue", scope="work")["id"]
    gone = store.add_memory("Forget this fact about the coffee machine", scope="work")["id"]
    reinforce(store, [keep, gone])
    forget(store, [gone])
    assert set(usage_rows(store, [keep, gone])) == {keep}
    res = reinforce(store, [gone])
    assert res["reinforced"] == [] and res["not_found"][0]["id"] == gone
