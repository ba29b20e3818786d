"""Relations of a shared scope on a real SeaweedFS (tests/memory/seaweed.py): an edge between two memories of
one bound scope lives in the binding's bucket (through the outbox), every relation read on every device finds
it under the scope filter, and removing it or forgetting either end removes it from every object in the
bucket; an edge with a personal end never reaches the bucket."""

from __future__ import annotations

import json
import sys

import pytest

from memory.errors import NotFoundError
from memory.graph import relations as R
from memory.store import filters as F
from memory.store.erasure import forget
from memory.store.remote import fresh
from tests.memory import seaweed as sw_fixtures
from tests.memory import test_remote
from tests.memory.test_remote import SHARED, open_home

seaweed, memory_keyring, own_seaweed = sw_fixtures.seaweed, sw_fixtures.memory_keyring, sw_fixtures.own_seaweed  # fixtures
prefix, homes = test_remote.prefix, test_remote.homes  # fixtures: a fresh bucket prefix, two homes bound to it


def shared_edges(store) -> list[dict]:
    """The rows of the binding's remote relations table, read straight from the bucket."""
    try:
        t = store.remotes.shared["team"].relations(create=False)
    except (ValueError, FileNotFoundError):
        return []
    return fresh(t).to_arrow().to_pylist()


def cli(monkeypatch, capsys, home, *args) -> dict:
    from desktop.cli.main import main

    monkeypatch.setenv("MIRADOR_HOME", str(home))
    monkeypatch.setattr(sys, "argv", ["mirador", *args])
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_a_relation_between_shared_memories_is_shared_and_removed_everywhere(homes, seaweed, prefix, monkeypatch,
                                                                          capsys):
    from memory.mcp.auth import make_principal
    from memory.retrieval.recall import recall
    from tests.memory.mcp_support import call

    a, b = homes
    decision = a.add_memory("The acme team moved the nightly build to the arm runners", scope=SHARED)["id"]
    reason = a.add_memory("The arm runners cost a third of the x86 ones", scope=SHARED)["id"]
    edge = R.add_relation(a, decision, "BECAUSE", reason)
    assert edge["created"] and a.remotes.pending() == {"team": 0}
    # In the bucket, not in either home's local relations table.
    assert [r["id"] for r in shared_edges(a)] == [edge["id"]]
    assert a.count("relations", local=True) == 0 and b.count("relations", local=True) == 0
    assert seaweed.holding(edge["id"], prefix)
    # Adding it again changes nothing (one row per edge id, however often it is sent).
    assert not R.add_relation(a, decision, "BECAUSE", reason)["created"]
    assert len(shared_edges(a)) == 1

    # B sees it: the graph reads, the CLI, MCP under a token for the scope, and recall's reasons.
    [seen] = R.related(b, reason)
    assert (seen["id"], seen["direction"], seen["other"]["id"]) == (edge["id"], "in", decision)
    assert [h["to"] for h in R.chain(b, decision)["hops"]] == [reason]
    listed = cli(monkeypatch, capsys, b.home, "related", decision, "--json")
    assert [e["id"] for e in listed["relations"]] == [edge["id"]]
    assert reason in R.reasons_for(b, [decision], [SHARED])[decision][0]["id"]
    got = recall(b, "where does the acme nightly build run", 400, scopes=[SHARED], include_evidence=False)
    assert any(i.id == reason and i.provenance == f"reason for {decision}" for i in got.items)
    assert [e["id"] for e in R.export_edges(b, [SHARED])] == [edge["id"]]

    async def steps(client):
        near = await client.call_tool("memory_related", {"id": decision})
        why = await client.call_tool("memory_chain", {"id": decision})
        return near, why

    near, why = call(b, make_principal("acme-bot", [SHARED], None), steps)
    assert [e["id"] for e in json.loads(near.content[0].text)["relations"]] == [edge["id"]]
    assert [h["to"] for h in json.loads(why.content[0].text)["hops"]] == [reason]

    # A token or a read limited to another scope never sees it.
    async def outsider(client):
        return await client.call_tool("relation_remove", {"id": edge["id"]})

    refused = call(b, make_principal("other", ["personal"], "personal"), outsider)
    assert "no relation" in refused.content[0].text and len(shared_edges(a)) == 1
    with pytest.raises(NotFoundError):
        R.related(b, decision, scopes=["personal"])
    assert R.export_edges(b, ["personal"]) == []

    # B removes it (over MCP, as a client of the scope): A no longer sees it, and no object holds it.
    async def remove(client):
        return await client.call_tool("relation_remove", {"id": edge["id"]})

    removed = call(b, make_principal("acme-bot", [SHARED], SHARED), remove)
    assert json.loads(removed.content[0].text)["removed"]["id"] == edge["id"]
    assert R.related(a, decision) == [] and R.related(a, reason) == []
    assert shared_edges(a) == []
    assert not seaweed.holding(edge["id"], prefix)
    audit = b.rows("audit", F.id_is(edge['id'], "entity_id"), ["actor", "action"])
    assert ("mcp:acme-bot", "delete") in {(r["actor"], r["action"]) for r in audit}


def test_forgetting_either_end_removes_the_shared_relation_from_the_bucket(homes, seaweed, prefix):
    a, b = homes
    x = a.add_memory("The acme status page is hosted on the second vendor", scope=SHARED)["id"]
    y = a.add_memory("The first vendor had two outages in March", scope=SHARED)["id"]
    z = a.add_memory("The acme incident channel is #acme-fire", scope=SHARED)["id"]
    gone = R.add_relation(a, x, "BECAUSE", y)
    kept = R.add_relation(a, x, "MENTIONS", z)
    forget(b, [y])
    assert [e["id"] for e in R.related(a, x)] == [kept["id"]]
    assert [r["id"] for r in shared_edges(a)] == [kept["id"]]
    # No object holds the edge; none of the relations table's names the forgotten memory (its tombstone does,
    # by design: an id and a fingerprint).
    assert not seaweed.holding(gone["id"], prefix)
    assert not [o for o in seaweed.holding(y, prefix) if "/relations.lance/" in o]
    assert seaweed.holding(kept["id"], prefix)


def test_a_relation_with_a_personal_end_never_reaches_the_bucket(homes, seaweed, prefix):
    a, b = homes
    shared = a.add_memory("The acme offsite is in Lisbon in May", scope=SHARED)["id"]
    mine = a.add_memory("I am allergic to shellfish", scope="personal")["id"]
    other = a.add_memory("The acme travel budget is per quarter", scope=SHARED)["id"]
    out = R.add_relation(a, shared, "MENTIONS", mine)
    back = R.add_relation(a, mine, "MENTIONS", shared)
    inside = R.add_relation(a, shared, "MENTIONS", other)
    # Kept on A, in its local table; only the edge between two shared memories is in the bucket.
    assert {r["id"] for r in a.rows("relations", None, ["id"], local=True)} == {out["id"], back["id"]}
    assert [r["id"] for r in shared_edges(a)] == [inside["id"]]
    for text in (mine, out["id"], back["id"]):
        assert not seaweed.holding(text, prefix), text
    assert {e["id"] for e in R.related(a, shared)} == {out["id"], back["id"], inside["id"]}
    assert [e["id"] for e in R.related(b, shared)] == [inside["id"]]  # B cannot see A's personal memory

    # A memory moving out of the shared scope takes its shared edges home; moving back shares them again.
    a.update_memory(other, scope="personal")
    assert shared_edges(a) == [] and not seaweed.holding(inside["id"], prefix)
    assert a.count("relations", F.id_is(inside['id']), local=True) == 1
    assert {e["id"] for e in R.related(a, shared)} == {out["id"], back["id"], inside["id"]}
    a.update_memory(other, scope=SHARED)
    assert [r["id"] for r in shared_edges(a)] == [inside["id"]]
    assert a.count("relations", F.id_is(inside['id']), local=True) == 0
    assert [e["id"] for e in R.related(b, shared)] == [inside["id"]]


def test_a_relation_made_offline_waits_in_the_outbox_and_is_sent_once(tmp_path, memory_keyring, own_seaweed, prefix):
    sw = own_seaweed  # stopped and started again below
    a = open_home(tmp_path, "a", sw, prefix)
    a.add_memory("The acme gateway is owned by the platform team", scope=SHARED)
    sw.stop()
    # Written while the store is down: the memories and the edges between them wait in the outbox. (Relating
    # a memory that is only in the bucket needs the store, to read it: the same as editing one.)
    x = a.add_memory("The acme api gateway times out after thirty seconds", scope=SHARED)["id"]
    y = a.add_memory("The acme load balancer idles connections at sixty seconds", scope=SHARED)["id"]
    w = a.add_memory("The acme gateway logs go to the blue bucket", scope=SHARED)["id"]
    edge = R.add_relation(a, x, "CONTRADICTS", y)
    dropped = R.add_relation(a, x, "MENTIONS", w)
    R.remove_relation(a, dropped["id"])
    assert a.remotes.pending()["team"] >= 2
    # Read back from the outbox while the store is down.
    assert [e["id"] for e in R.related(a, x)] == [edge["id"]]
    sw.start()
    assert a.remotes.flush()["pending"] == 0
    a.remotes.flush()
    rows = shared_edges(a)
    assert [r["id"] for r in rows] == [edge["id"]] and rows[0]["relation"] == "CONTRADICTS"
    assert not sw.holding(dropped["id"], prefix)
    b = open_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    assert [e["id"] for e in R.related(b, y)] == [edge["id"]]


def test_a_queued_relation_to_a_memory_forgotten_elsewhere_is_never_sent(tmp_path, memory_keyring, own_seaweed,
                                                                        prefix):
    sw = own_seaweed  # stopped and started again below
    a = open_home(tmp_path, "a", sw, prefix)
    b = open_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    x = a.add_memory("The acme mobile app ships every other Monday", scope=SHARED)["id"]
    y = a.add_memory("The acme app store review takes two days", scope=SHARED)["id"]
    # A related them while the store was down (a relation waits in the outbox as add_relation queues it).
    from memory.types import utcnow

    edge = {"id": R.edge_id(x, "BECAUSE", y), "src": x, "dst": y, "relation": "BECAUSE", "provenance": [],
            "confidence": 1.0, "origin": "person", "scope": SHARED, "dst_scope": SHARED, "created_at": utcnow()}
    sw.stop()
    assert a.remotes.divert_edges([edge]) == [] and a.remotes.pending() == {"team": 1}
    sw.start()
    b.remotes.flush()  # B's connection saw the store go away: reconnect
    forget(b, [y])
    report = a.remotes.flush()
    assert report["pending"] == 0 and not report["errors"]
    assert shared_edges(a) == [] and not sw.holding(edge["id"], prefix)
    assert not [o for o in sw.holding(y, prefix) if "/relations.lance/" in o]
    assert R.related(a, x) == []


def test_a_local_relation_to_a_shared_memory_goes_when_another_device_forgets_it(homes, seaweed, prefix):
    """A's edge from its personal memory to a shared one stays on A; when B forgets the shared memory, A's next
    flush takes B's tombstone and drops that edge, and A's audit no longer holds the memory's text."""
    from tests.conftest import files_containing

    a, b = homes
    text = "The acme vpn certificate expires at the end of June"
    shared = a.add_memory(text, scope=SHARED)["id"]
    mine = a.add_memory("Renew my own vpn token before the trip", scope="personal")["id"]
    edge = R.add_relation(a, mine, "BECAUSE", shared)
    assert a.count("relations", F.id_is(edge['id']), local=True) == 1 and not seaweed.holding(edge["id"], prefix)
    forget(b, [shared])
    assert a.remotes.flush()["errors"] == {}
    assert a.count("relations", local=True) == 0 and R.related(a, mine) == []
    assert not files_containing(a.home / "lancedb" / "relations.lance", shared)
    assert not files_containing(a.home / "lancedb" / "audit.lance", text)
    assert a.get(mine)["id"] == mine


def test_no_evidence_leaves_the_machine(homes, seaweed, prefix):
    """Evidence of the shared scope stays local (frames, screen text, transcripts): a shared memory and a shared
    relation may name its id, and another device cannot open it."""
    a, b = homes
    ev = a.add_evidence("Standup notes: the acme kestrelwing migration slips to the second week", source="manual",
                        scope=SHARED)
    x = a.add_memory("The acme kestrelwing migration slipped a week", scope=SHARED, provenance=[ev["id"]])["id"]
    y = a.add_memory("The acme data team is short of reviewers", scope=SHARED)["id"]
    R.add_relation(a, x, "BECAUSE", y, provenance=[ev["id"]])
    assert seaweed.holding("kestrelwing migration slipped", prefix)  # the memory is shared...
    assert not seaweed.holding("Standup notes", prefix)  # ...its evidence is not
    assert not [o for o in seaweed.objects(prefix) if "evidence" in o]
    with pytest.raises(NotFoundError):
        b.get(ev["id"])
    assert [e["provenance"] for e in R.related(b, x)] == [[ev["id"]]]
