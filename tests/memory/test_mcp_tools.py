"""Every MCP tool through a real in-process client session (mcp.shared.memory), error paths included."""

from __future__ import annotations

import json

import anyio
import pytest

from memory.mcp.auth import make_principal
from memory.mcp.server import PROFILE_URI
from memory.store import filters as F
from memory.store.rows import iso
from tests.conftest import memory_texts
from tests.memory.mcp_support import call

TOOLS = {"memory_search", "memory_recall", "memory_get", "memory_add", "memory_update", "memory_forget",
         "evidence_search", "evidence_get", "timeline", "status"}
TOOLS |= {"memory_related", "memory_chain", "memory_relate"}  # relations between memories
TOOLS |= {"memory_reinforce"}  # reinforcement (memory/graph/reinforcement.py)
TOOLS |= {"evidence_add", "memory_list", "relation_remove", "consolidate"}  # tests/memory/test_mcp_new_tools.py
TOOLS |= {"evidence_forget"}  # evidence deletes by app or time range: tests/memory/test_evidence_forget.py


@pytest.fixture
def seeded(store):
    ids = {
        "tabs": store.add_memory("Alice prefers tabs over spaces in Go code", scope="work")["id"],
        "pinned": store.add_memory("Deploys happen on Tuesdays", scope="work", pinned=True)["id"],
        "acme": store.add_memory("Acme's staging database is pg-staging-3", scope="work/acme")["id"],
        "core": store.add_memory("I am a backend engineer who likes terse answers", type="core", scope="work")["id"],
        "personal": store.add_memory("My dentist appointment is on Friday", scope="personal")["id"],
        "vault": store.add_memory("staging db password", type="vault", scope="work", value="hunter2-secret")["id"],
        "evd": store.add_evidence("psql: connection refused on port 5432 " * 3, app="kitty", window="psql staging",
                                  scope="work")["id"],
        "evd2": store.add_evidence("Reviewing PR 42 about retry logic", app="firefox", window="GitHub", scope="work")["id"],
    }
    return ids


def text(result) -> str:
    return result.content[0].text


def data(result) -> dict:
    assert not result.is_error, text(result)
    return json.loads(text(result))


WORK = make_principal("tester", ["work"], "work")


def test_lists_every_tool_and_the_core_profile_resource(store, seeded):
    async def steps(c):
        tools = (await c.list_tools()).tools
        resources = (await c.list_resources()).resources
        return tools, resources

    tools, resources = call(store, WORK, steps)
    assert {t.name for t in tools} == TOOLS
    for t in tools:
        assert len(t.description) > 40 and not t.description.startswith(" ")
    assert [str(r.uri) for r in resources] == [PROFILE_URI]
    search = next(t for t in tools if t.name == "memory_search").input_schema["properties"]
    assert search["query"]["maxLength"] == 2000 and search["limit"]["maximum"] == 50


def test_search_get_and_filters(store, seeded):
    async def steps(c):
        hit = data(await c.call_tool("memory_search", {"query": "tabs or spaces"}))
        narrowed = data(await c.call_tool("memory_search", {"query": "staging database", "scope": "work/acme"}))
        typed = data(await c.call_tool("memory_search", {"query": "engineer", "types": ["core"]}))
        got = data(await c.call_tool("memory_get", {"id": seeded["tabs"]}))
        outside = await c.call_tool("memory_search", {"query": "x", "scope": "personal"})
        bad_time = await c.call_tool("memory_search", {"query": "x", "since": "yesterday-ish"})
        empty = await c.call_tool("memory_search", {"query": ""})
        huge = await c.call_tool("memory_search", {"query": "x" * 2001})
        return hit, narrowed, typed, got, outside, bad_time, empty, huge

    hit, narrowed, typed, got, outside, bad_time, empty, huge = call(store, WORK, steps)
    assert hit["results"][0]["id"] == seeded["tabs"]
    assert {r["scope"] for r in narrowed["results"]} == {"work/acme"}
    assert {r["type"] for r in typed["results"]} == {"core"}
    assert got["text"].startswith("Alice prefers tabs") and got["origin"] == "person"
    assert outside.is_error and "outside what this client may read" in text(outside)
    assert bad_time.is_error and "ISO 8601" in text(bad_time)
    assert empty.is_error and "query" in text(empty)
    assert huge.is_error and "2000" in text(huge)


def test_get_error_paths_tell_the_model_what_to_call(store, seeded):
    async def steps(c):
        return [await c.call_tool("memory_get", {"id": i})
                for i in ("mem_doesnotexist", "banana", seeded["evd"], seeded["personal"])]

    missing, garbage, evidence, personal = call(store, WORK, steps)
    assert all(r.is_error for r in (missing, garbage, evidence, personal))
    assert "call memory_search to find a valid id" in text(missing)
    assert "ids start with mem_, evd_ or vlt_" in text(garbage)
    assert "call evidence_get" in text(evidence)
    assert "call memory_search" in text(personal) and "dentist" not in text(personal)


def test_vault_value_only_for_tokens_that_allow_it(store, seeded):
    async def steps(c):
        return data(await c.call_tool("memory_get", {"id": seeded["vault"]}))

    plain = call(store, WORK, steps)
    assert plain["label"] == "staging db password" and plain["value"] is None
    assert "hunter2" not in json.dumps(plain)
    vault_ok = call(store, make_principal("ops", ["work"], "work", allow_vault=True), steps)
    assert vault_ok["value"] == "hunter2-secret"
    reveals = store.rows("audit", F.equals("action", "reveal"), ["actor"])
    assert [r["actor"] for r in reveals] == ["mcp:ops"]


def test_add_is_scoped_audited_and_bounded(store, seeded):
    async def steps(c):
        added = data(await c.call_tool("memory_add", {"text": "The CI runner is ci-7", "title": "CI runner"}))
        sub = data(await c.call_tool("memory_add", {"text": "Acme uses pnpm", "scope": "work/acme",
                                                    "type": "procedural", "details": {"steps": ["pnpm i"]}}))
        other = await c.call_tool("memory_add", {"text": "x", "scope": "personal"})
        vault = await c.call_tool("memory_add", {"text": "pw", "type": "vault"})
        long = await c.call_tool("memory_add", {"text": "y" * 10_001})
        return added, sub, other, vault, long

    added, sub, other, vault, long = call(store, WORK, steps)
    row = store.get(added["created"]["id"])
    assert row["scope"] == "work" and row["origin"] == "mcp:tester" and row["title"] == "CI runner"
    assert store.get(sub["created"]["id"])["scope"] == "work/acme"
    audit = store.rows("audit", F.id_is(row['id'], "entity_id"), ["actor", "action"])
    assert audit == [{"actor": "mcp:tester", "action": "create"}]
    assert other.is_error and "only to scope 'work'" in text(other)
    assert vault.is_error and long.is_error and "10000" in text(long)
    assert store.count("memory", F.equals("scope", "personal"), local=True) == 1  # nothing leaked into personal


def test_read_only_client_cannot_write(store, seeded):
    ro = make_principal("reader", ["work"], None)

    async def steps(c):
        return [await c.call_tool("memory_add", {"text": "nope"}),
                await c.call_tool("memory_update", {"id": seeded["tabs"], "text": "changed"}),
                await c.call_tool("memory_forget", {"ids": [seeded["tabs"]]}),
                await c.call_tool("memory_search", {"query": "tabs"})]

    *writes, search = call(store, ro, steps)
    for r in writes:
        assert r.is_error and "read-only" in text(r)
    assert not search.is_error
    assert store.get(seeded["tabs"])["text"].startswith("Alice prefers tabs")


def test_update_text_status_and_refusals(store, seeded):
    async def steps(c):
        upd = data(await c.call_tool("memory_update", {"id": seeded["tabs"], "text": "Alice prefers tabs, width 4"}))
        st = data(await c.call_tool("memory_update", {"id": seeded["tabs"], "status": "candidate"}))
        pinned = await c.call_tool("memory_update", {"id": seeded["pinned"], "text": "Deploys on Mondays"})
        nothing = await c.call_tool("memory_update", {"id": seeded["tabs"]})
        evid = await c.call_tool("memory_update", {"id": seeded["evd"], "text": "x"})
        bad_status = await c.call_tool("memory_update", {"id": seeded["tabs"], "status": "deleted"})
        return upd, st, pinned, nothing, evid, bad_status

    upd, st, pinned, nothing, evid, bad_status = call(store, WORK, steps)
    assert upd["updated"]["text"] == "Alice prefers tabs, width 4" and st["updated"]["status"] == "candidate"
    assert pinned.is_error and "pinned" in text(pinned)
    assert store.get(seeded["pinned"])["text"] == "Deploys happen on Tuesdays"
    assert nothing.is_error and "nothing to change" in text(nothing)
    assert evid.is_error and "evidence is never edited" in text(evid)
    assert bad_status.is_error
    actors = {r["actor"] for r in store.rows("audit", F.id_is(seeded['tabs'], "entity_id"), ["actor"])}
    assert actors == {"person", "mcp:tester"}


def test_forget_checks_every_id_then_erases(store, seeded):
    async def steps(c):
        partial = await c.call_tool("memory_forget", {"ids": [seeded["tabs"], "mem_unknown"]})
        ok = data(await c.call_tool("memory_forget", {"ids": [seeded["tabs"]]}))
        again = await c.call_tool("memory_get", {"id": seeded["tabs"]})
        vault = await c.call_tool("memory_forget", {"ids": [seeded["vault"]]})
        too_many = await c.call_tool("memory_forget", {"ids": [f"mem_{i:04d}" for i in range(51)]})
        return partial, ok, again, vault, too_many

    partial, ok, again, vault, too_many = call(store, WORK, steps)
    assert partial.is_error and "nothing was deleted" in text(partial)
    assert ok["deleted"] == 1 and again.is_error
    assert store.is_tombstoned(store.rows("tombstones", local=True)[0]["fingerprint"])
    assert vault.is_error and store.count("vault", local=True) == 1
    assert too_many.is_error


def test_forgotten_content_is_not_re_added(store, seeded):
    async def steps(c):
        await c.call_tool("memory_forget", {"ids": [seeded["tabs"]]})
        return await c.call_tool("memory_add", {"text": "Alice prefers tabs over spaces in Go code"})

    r = call(store, WORK, steps)
    assert r.is_error and "deleted" in text(r)
    assert memory_texts(store).count("Alice prefers tabs over spaces in Go code") == 0


def test_evidence_search_get_and_timeline(store, seeded):
    async def steps(c):
        hits = data(await c.call_tool("evidence_search", {"query": "connection refused", "apps": ["kitty"]}))
        none = data(await c.call_tool("evidence_search", {"query": "connection refused", "apps": ["slack"]}))
        full = data(await c.call_tool("evidence_get", {"id": seeded["evd"], "max_chars": 100}))
        wrong = await c.call_tool("evidence_get", {"id": seeded["tabs"]})
        missing = await c.call_tool("evidence_get", {"id": "evd_nothere"})
        tl = data(await c.call_tool("timeline", {"since": "2000-01-01T00:00:00Z"}))
        backwards = await c.call_tool("timeline", {"since": "2030-01-01", "until": "2020-01-01"})
        return hits, none, full, wrong, missing, tl, backwards

    hits, none, full, wrong, missing, tl, backwards = call(store, WORK, steps)
    assert hits["results"][0]["id"] == seeded["evd"] and none["results"] == []
    assert full["truncated"] and len(full["text"]) == 100 and full["app"] == "kitty"
    assert wrong.is_error and "memory_get" in text(wrong)
    assert missing.is_error and "evidence_search" in text(missing)
    assert {g["app"]: g["count"] for g in tl["apps"]} == {"kitty": 1, "firefox": 1}
    kitty = next(g for g in tl["apps"] if g["app"] == "kitty")
    assert kitty["windows"] == ["psql staging"] and kitty["samples"][0]["id"] == seeded["evd"]
    assert backwards.is_error and "before until" in text(backwards)


def test_status_profile_and_server_survives_errors(store, seeded):
    async def steps(c):
        await c.call_tool("memory_get", {"id": "mem_x"})
        unknown = await c.call_tool("no_such_tool", {})
        wrong_type = await c.call_tool("memory_search", {"query": "x", "limit": "many"})
        st = data(await c.call_tool("status", {}))
        profile = (await c.read_resource(PROFILE_URI)).contents[0].text
        return unknown, wrong_type, st, profile

    unknown, wrong_type, st, profile = call(store, WORK, steps)
    assert unknown.is_error and wrong_type.is_error
    assert st["client"] == "tester" and st["read_scopes"] == ["work"] and st["write_scope"] == "work"
    assert st["visible"] == {"memories": 4, "evidence": 2, "vault_entries": 1}
    assert "backend engineer" in profile and "dentist" not in profile


def test_recall_within_budget(store, seeded):
    pytest.importorskip("memory.retrieval.recall", reason="memory/retrieval/recall.py (budgeted recall) has not landed yet")

    async def steps(c):
        ok = data(await c.call_tool("memory_recall", {"query": "which database does staging use", "budget_tokens": 200}))
        low = await c.call_tool("memory_recall", {"query": "x", "budget_tokens": 10})
        return ok, low

    ok, low = call(store, WORK, steps)
    assert ok["used_tokens"] <= 200 and ok["budget_tokens"] == 200 and ok["text"]
    assert "dentist" not in json.dumps(ok) and "hunter2" not in json.dumps(ok)
    assert low.is_error


def test_evidence_search_shows_the_lines_that_match_a_long_capture(store):
    noise = [f"step {i}/40: uploading layer {i:02d} of image registry.acme.dev/web done" for i in range(40)]
    capture = "\n".join(["File Edit View Terminal Help", "$ make deploy ENV=prod", *noise[:25],
                         "Error: TLS handshake failed: certificate for api.acme.dev expired on 2024-05-01", *noise[25:]])
    evd = store.add_evidence(capture, app="kitty", window="deploy", scope="work")["id"]

    async def steps(c):
        return data(await c.call_tool("evidence_search", {"query": "which certificate expired?"}))

    found = call(store, WORK, steps)
    hit = next(r for r in found["results"] if r["id"] == evd)
    assert "certificate for api.acme.dev expired" in hit["text"] and len(hit["text"]) <= 400
    assert hit["text"].startswith("…") and "File Edit View" not in hit["text"]
    assert "match the query" in found["hint"]


def test_search_time_range_applies_to_vault_entries(store, seeded):
    async def steps(c):
        future = data(await c.call_tool("memory_search", {"query": "staging db password", "since": "2100-01-01"}))
        past = data(await c.call_tool("memory_search", {"query": "staging db password", "until": "2000-01-01"}))
        now = data(await c.call_tool("memory_search", {"query": "staging db password", "types": ["vault"]}))
        return future, past, now

    future, past, now = call(store, WORK, steps)
    assert seeded["vault"] not in json.dumps(future) and seeded["vault"] not in json.dumps(past)
    assert [r["id"] for r in now["results"]] == [seeded["vault"]]


def test_status_finds_the_newest_evidence_without_reading_every_row(store, seeded, monkeypatch):
    from datetime import timedelta

    from memory.store.audit import utcnow

    old = store.add_evidence("an old capture", app="kitty", scope="work", captured_at=utcnow() - timedelta(days=400))
    assert old["id"]

    async def steps(c):
        return data(await c.call_tool("status", {}))

    first = call(store, WORK, steps)  # reads the new fragments once (memory/store/tallies.py)
    newest = max(r["captured_at"] for r in store.rows("evidence", None, ["captured_at"]))
    assert first["last_evidence_at"] == iso(newest)
    # From then on status reads no rows at all, however many there are (it used to answer null over 50,000).
    reads = []
    for name in ("rows", "scan", "table_rows", "scan_table"):
        monkeypatch.setattr(store, name, lambda *a, **k: reads.append(a) or pytest.fail("status read rows"))
    monkeypatch.setattr(store.evidence, "count_rows", lambda *a, **k: reads.append(a) or 60_000)
    again = call(store, WORK, steps)
    assert again["last_evidence_at"] == iso(newest) and again["visible"] == first["visible"] and not reads


def test_recall_does_not_offer_vault_and_words_errors_for_a_model(store, seeded):
    async def steps(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        asked = await c.call_tool("memory_recall", {"query": "x", "types": ["vault"]})
        return tools, asked

    tools, asked = call(store, WORK, steps)
    items = tools["memory_recall"].input_schema["properties"]["types"]["anyOf"][0]["items"]
    assert "vault" not in items["enum"]
    assert asked.is_error and "--type" not in text(asked) and "types" in text(asked)
    # The store's error names the CLI's flag for a person and the tool's argument for a model (no rewriting).
    from memory.errors import InputError
    from memory.mcp.replies import for_model
    from memory.retrieval.recall import recall

    with pytest.raises(InputError) as raised:
        recall(store, "x", types=["vault"])
    assert "--type vault" in str(raised.value) and "--type" not in for_model(raised.value)


def test_empty_scope_and_unknown_arguments_are_refused(store, seeded):
    async def steps(c):
        return [await c.call_tool("memory_add", {"text": "empty scope", "scope": ""}),
                await c.call_tool("memory_search", {"query": "tabs", "scope": ""}),
                await c.call_tool("memory_search", {"query": "tabs", "scopes": "work"}),
                await c.call_tool("status", {"verbose": True})]

    add, search, typo, status = call(store, WORK, steps)
    assert add.is_error and "'scope'" in text(add) and memory_texts(store).count("empty scope") == 0
    assert search.is_error and "'scope'" in text(search)
    assert typo.is_error and "unknown argument 'scopes'" in text(typo) and "scope" in text(typo)
    assert status.is_error and "unknown argument 'verbose'" in text(status)
    from memory.mcp.tools import read_scopes, write_scope

    for fn in (read_scopes, write_scope):
        with pytest.raises(Exception, match="scope is empty"):
            fn(WORK, " ")


def test_validation_errors_are_one_line_naming_the_argument(store, seeded):
    async def steps(c):
        return [await c.call_tool("memory_search", {"query": "x", "limit": "many"}),
                await c.call_tool("memory_search", {}),
                await c.call_tool("memory_update", {"id": seeded["tabs"], "status": "deleted"})]

    for r in call(store, WORK, steps):
        assert r.is_error and "\n" not in text(r) and "pydantic" not in text(r) and "http" not in text(r)
    limit, missing, status = call(store, WORK, steps)
    assert "'limit'" in text(limit) and "from 1 to 50" in text(limit)
    assert "missing argument 'query'" in text(missing)
    assert "'status'" in text(status) and '"superseded"' in text(status)


def test_adding_the_same_text_twice_keeps_one_memory(store, seeded):
    async def steps(c):
        first = data(await c.call_tool("memory_add", {"text": "The CI runner is ci-7"}))
        again = data(await c.call_tool("memory_add", {"text": "The CI runner is ci-7"}))
        return first, again

    first, again = call(store, WORK, steps)
    assert again["created"] is None and again["existing"]["id"] == first["created"]["id"]
    assert "already remembered" in again["hint"]
    assert memory_texts(store).count("The CI runner is ci-7") == 1


def test_search_has_a_relevance_floor(store, seeded):
    async def steps(c):
        nothing = data(await c.call_tool("memory_search", {"query": "quantum chromodynamics lecture"}))
        dentist = data(await c.call_tool("memory_search", {"query": "kubernetes cluster upgrade"}))
        found = data(await c.call_tool("memory_search", {"query": "when do deploys happen"}))
        return nothing, dentist, found

    nothing, unrelated, found = call(store, WORK, steps)
    assert nothing["results"] == [] and nothing["hint"].startswith("no match")
    assert unrelated["results"] == []
    assert found["results"][0]["id"] == seeded["pinned"]


def test_schemas_describe_every_input_and_name_the_id_kind(store, seeded):
    async def steps(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        init = await c.call_tool("timeline", {})
        return tools, init

    tools, tl = call(store, WORK, steps)
    for t in tools.values():
        assert t.input_schema.get("additionalProperties") is False, t.name
        for name, prop in t.input_schema["properties"].items():
            assert prop.get("description"), f"{t.name}.{name} has no description"
    props = {n: t.input_schema["properties"] for n, t in tools.items()}
    assert props["memory_add"]["scope"]["description"] != props["memory_search"]["scope"]["description"]
    assert "write scope" in props["memory_add"]["scope"]["description"]
    assert "evd_" in props["evidence_get"]["id"]["description"]
    assert "mem_" not in props["evidence_get"]["id"]["description"]
    for tool, arg in (("memory_update", "id"), ("memory_related", "id"), ("memory_chain", "id"),
                      ("memory_relate", "src"), ("memory_relate", "dst")):
        assert "mem_" in props[tool][arg]["description"] and "evd_" not in props[tool][arg]["description"], tool
    assert "evd_" not in props["memory_get"]["id"]["description"]
    assert "since" not in tools["timeline"].input_schema.get("required", [])
    assert props["timeline"]["since"]["description"]
    assert not tl.is_error and json.loads(text(tl))["evidence_rows"] == 2  # default: the last 24 hours


def test_server_reports_miradors_version():
    from importlib.metadata import version

    from mcp.client.session import ClientSession
    from mcp.shared.memory import create_client_server_memory_streams

    from memory.mcp.server import build_server

    server = build_server(lambda: None)

    async def initialize():  # what a client is told when it connects
        async with create_client_server_memory_streams() as (client, ends), anyio.create_task_group() as tg:
            tg.start_soon(lambda: server.run(*ends, server.create_initialization_options()))
            async with ClientSession(*client) as session:
                result = await session.initialize()
            tg.cancel_scope.cancel()
        return result

    assert anyio.run(initialize).server_info.version == version("mirador")
