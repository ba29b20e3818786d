"""Every list and read path returns a shared scope's rows (issue 41), on a real SeaweedFS with two homes: the Store
API, MCP memory_list and memory_add's same-text check, the browser's listing and cards, "memories drawn from this
evidence", Review's count, a dream pass and the stats. Each check asserts what must be there (the shared row) and
what must never be (a row of another scope)."""

from __future__ import annotations

import json

import pytest

from memory.mcp.auth import make_principal
from memory.store import filters as F
from tests.memory import seaweed as sw_fixtures
from tests.memory.mcp_support import call
from tests.memory.test_remote import SHARED, open_home

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures


@pytest.fixture
def homes(tmp_path, seaweed, memory_keyring):
    import uuid

    prefix = f"t-{uuid.uuid4().hex[:10]}"
    a = open_home(tmp_path, "a", seaweed, prefix)
    b = open_home(tmp_path, "b", seaweed, prefix, embedder=a.embedder)
    return a, b


@pytest.fixture
def seeded(homes):
    """A's evidence (its binding keeps evidence local) and, drawn from it, a shared memory; a shared candidate;
    B's own memories in plain `work` and in `personal`."""
    a, b = homes
    ev = a.add_evidence("Standup: the acme deploy freeze starts Thursday at noon", scope=SHARED, app="slack",
                        source="manual")
    ids = {
        "ev": ev["id"],
        "shared": a.add_memory("The acme deploy freeze starts on Thursday at noon", scope=SHARED,
                               provenance=[ev["id"]])["id"],
        "candidate": a.add_memory("The acme billing exporter moves to the new cluster", scope=SHARED,
                                  status="candidate")["id"],
        "b_work": b.add_memory("The internal wiki moved to a new host", scope="work")["id"],
        "b_private": b.add_memory("My zebrafinch passport is in the blue drawer", scope="personal")["id"],
    }
    for s in (a, b):
        assert sum(s.remotes.pending().values()) == 0  # sent: only the bucket holds the shared rows
        assert not s.rows("memory", F.id_in([ids["shared"], ids["candidate"]]), ["id"], local=True)
    return a, b, ids


def test_the_store_api_merges_shared_rows_under_the_scope_filter(seeded):
    a, b, ids = seeded
    shared = {ids["shared"], ids["candidate"]}
    work = {r["id"] for r in b.rows("memory", None, ["id", "scope"], scopes=["work"])}
    assert shared | {ids["b_work"]} == work  # the shared rows ARE there...
    assert ids["b_private"] not in work  # ...and another scope's never is
    assert {r["id"] for r in b.rows("memory", None, ["id"], scopes=["personal"])} == {ids["b_private"]}
    assert b.count("memory", None, scopes=["work"]) == 3 and b.count("memory", None, scopes=["personal"]) == 1
    assert set(b.scan("memory", F.equals("status", "candidate"), ["id"], scopes=[SHARED])["id"].to_pylist()) == \
        {ids["candidate"]}
    assert set(b.get_many("memory", [*shared, ids["b_private"]], ["id"], scopes=[SHARED])) == shared
    assert {m["id"] for m in b.list(scopes=["work"], statuses=[])} == shared | {ids["b_work"]}
    assert {m["id"] for m in b.list(scopes=["personal"], statuses=[])} == {ids["b_private"]}
    # Drawn from A's evidence: found on A, where the evidence is, though the memory lives in the bucket.
    assert [r["id"] for r in a.derived_from([ids["ev"]], ["id"])] == [ids["shared"]]
    assert not a.derived_from([ids["ev"]], ["id"], scopes=["personal"])
    # Stats count the shared memories too (B holds two of its own).
    stats = b.stats()
    assert stats["memories"] == 4 and stats["shared_memories"] == 2
    assert stats["memories_by_status"] == {"active": 3, "candidate": 1}


def test_mcp_memory_list_and_the_same_text_check_see_the_shared_memories(seeded):
    a, b, ids = seeded
    shared_text = a.get(ids["shared"])["text"]

    async def steps(client):
        pages, cursor = [], None
        while True:  # one row a page: the keyset cursor pages through local and shared rows alike
            r = await client.call_tool("memory_list", {"limit": 1, **({"cursor": cursor} if cursor else {})})
            doc = json.loads(r.content[0].text)
            pages.append([m["id"] for m in doc["results"]])
            cursor = doc["next_cursor"]
            if not cursor:
                break
        status = json.loads((await client.call_tool("status", {})).content[0].text)
        return pages, status

    pages, status = call(b, make_principal("work-bot", ["work"], "work"), steps)
    listed = [i for p in pages for i in p]
    assert sorted(listed) == sorted([ids["shared"], ids["candidate"], ids["b_work"]])  # each once
    assert ids["b_private"] not in listed
    assert status["visible"]["memories"] == 3  # B's own `work` memory and both shared ones

    async def add_again(client):
        r = await client.call_tool("memory_add", {"text": shared_text, "scope": SHARED})
        return json.loads(r.content[0].text)

    before = b.count("memory", None, scopes=[SHARED])
    added = call(b, make_principal("acme-bot", [SHARED], SHARED), add_again)
    assert added["created"] is None and added["existing"]["id"] == ids["shared"]  # the teammate's memory
    assert b.count("memory", None, scopes=[SHARED]) == before  # nothing new, here or in the bucket

    async def personal_list(client):
        return json.loads((await client.call_tool("memory_list", {})).content[0].text)

    mine = call(b, make_principal("home-bot", ["personal"], None), personal_list)
    assert [m["id"] for m in mine["results"]] == [ids["b_private"]]  # no shared row leaks into another scope

    async def add_in_personal(client):
        r = await client.call_tool("memory_add", {"text": shared_text, "scope": "personal"})
        status = json.loads((await client.call_tool("status", {})).content[0].text)
        return json.loads(r.content[0].text), status

    # The same-text check looks in the scope written to only: the shared memory is not "already remembered" in
    # `personal`, and a personal client learns nothing of it.
    added, status = call(b, make_principal("home-bot", ["personal"], "personal"), add_in_personal)
    assert added["created"] is not None and added["created"]["id"] != ids["shared"]
    assert status["visible"]["memories"] == 2  # its own two; neither shared one


def test_browser_listing_cards_and_review_count_show_the_shared_memories(seeded):
    from desktop.ui.browser_data import MemoryFilter, fetch_rows, memory_detail, memory_keys, pending_count
    from desktop.ui.browser_detail import load_evidence_detail
    from desktop.ui.review_proposals import review_pending

    a, b, ids = seeded
    keys = memory_keys(b, MemoryFilter(scopes=["work"]))
    assert {ids["shared"], ids["b_work"]} <= set(keys.ids) and ids["b_private"] not in keys.ids
    assert ids["shared"] not in memory_keys(b, MemoryFilter(scopes=["personal"])).ids
    assert {r["id"] for r in fetch_rows(b, "memory", keys.ids)} >= {ids["shared"], ids["b_work"]}
    # Review lists the shared candidate, and the tray's count says so.
    assert ids["candidate"] in memory_keys(b, MemoryFilter(statuses=["candidate"])).ids
    assert pending_count(b) == 1 and review_pending(b) == 1
    assert not memory_keys(b, MemoryFilter(statuses=["candidate"], scopes=["personal"])).ids
    # B holds neither the shared memory nor its evidence: its card still opens, from the bucket.
    assert b.rows("memory", F.id_in([ids["shared"]]), ["id"], local=True) == []
    assert memory_detail(b, ids["shared"])["text"] == a.get(ids["shared"])["text"]
    # The card of the shared memory, with the evidence it rests on where that evidence is (A).
    card = memory_detail(a, ids["shared"])
    assert card["text"].startswith("The acme deploy freeze") and [e["id"] for e in card["_evidence"]] == [ids["ev"]]
    # "Memories drawn from it" on A's evidence card, and the app filter that goes through the same provenance.
    assert [m["id"] for m in load_evidence_detail(a, ids["ev"])["_derived"]] == [ids["shared"]]
    assert memory_keys(a, MemoryFilter(apps=["slack"], scopes=[SHARED])).ids == [ids["shared"]]
    assert not memory_keys(a, MemoryFilter(apps=["slack"], scopes=["personal"])).ids


def test_a_dream_pass_proposes_merging_shared_duplicates(seeded):
    from memory.consolidation.dream import plan_dream

    a, b, ids = seeded
    text = a.get(ids["shared"])["text"]
    dup = b.add_memory(text, scope=SHARED)  # the same fact, written again on B
    elsewhere = b.add_memory(text, scope="personal")  # and in another scope: never merged across scopes
    plan = plan_dream(b)
    merges = [s for s in plan.steps if s.kind == "merge"]
    assert [{s.target_id, s.other_id} for s in merges] == [{ids["shared"], dup["id"]}]
    # Decay is this device's alone (every device runs its own pass): no shared memory is halved here.
    assert not any(set(s.ids) & {ids["shared"], ids["candidate"], dup["id"]} for s in plan.steps if s.kind == "decay")
    assert not any({ids["b_private"], elsewhere["id"]} & {s.target_id, s.other_id} for s in plan.steps)
