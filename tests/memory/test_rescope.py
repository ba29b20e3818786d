"""Memories live in their evidence's scope: extraction never mixes scopes, and `mirador evidence rescope` moves
captured rows with the memories drawn only from them, sends memories resting on two scopes to review, and
leaves everything else exactly as it was."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.consolidation.extraction import Extractor, batches, run_extraction
from memory.errors import InputError
from memory.store import filters as F
from memory.store.audit import utcnow
from memory.store.rescope import plan_rescope, rescope, select_evidence

ACME = [
    ("We decided to use Postgres 16 for the acme billing service.", "#acme-eng | Acme Corp - Slack"),
    ("We decided to ship the acme invoice export on Monday.", "#acme-release | Acme Corp - Slack"),
]
OTHER = [
    ("We decided to hire a second designer for the studio.", "#general | Studio - Slack", "Slack"),
    ("We decided to paint the kitchen walls yellow.", "Mum", "Signal"),
]


def seed(store) -> dict:
    ids = {"acme": [store.add_evidence(t, actor="capture", source="screen", app="Slack", window=w)["id"]
                    for t, w in ACME],
           "other": [store.add_evidence(t, actor="capture", source="screen", app=a, window=w)["id"]
                     for t, w, a in OTHER]}
    run_extraction(store, extractor=Extractor(engine="rules"))
    return ids


def memories(store) -> dict[str, dict]:
    return {m["id"]: m for m in store.list("memory", statuses=[], limit=1000)}


def derived(mems: dict, ev_ids: list[str]) -> list[dict]:
    return [m for m in mems.values() if set(m["provenance"]) & set(ev_ids)]


def test_extraction_batches_never_mix_scopes_and_a_paraphrase_in_another_scope_is_not_merged(store):
    now = utcnow()
    rows = [{"id": f"evd_{i}", "scope": s, "app": "Slack", "source": "screen", "captured_at": now + timedelta(seconds=i)}
            for i, s in enumerate(["work/acme", "personal", "work/acme", "personal"])]
    for b in batches(rows, 10, timedelta(minutes=5)):
        assert len({r["scope"] for r in b}) == 1

    # The same decision seen in a work chat and at home: two memories, one per scope, never one that
    # corroborates across scopes (a token for either scope would otherwise see the other's provenance).
    text = "We decided to move the team offsite to Lisbon in May."
    w = store.add_evidence(text, actor="capture", source="screen", app="Slack", scope="work/acme")["id"]
    p = store.add_evidence(text.replace("We decided", "We have decided"), actor="capture", source="screen",
                           app="Signal", scope="personal")["id"]
    report = run_extraction(store, extractor=Extractor(engine="rules"))
    assert report.corroborated == 0
    mems = memories(store)
    by_ev = {e: [m for m in mems.values() if e in m["provenance"]] for e in (w, p)}
    assert by_ev[w] and by_ev[p]
    assert {m["scope"] for m in by_ev[w]} == {"work/acme"} and {m["scope"] for m in by_ev[p]} == {"personal"}
    assert all(set(m["provenance"]) == {w} for m in by_ev[w]) and all(set(m["provenance"]) == {p} for m in by_ev[p])


def test_rescope_moves_evidence_and_the_memories_drawn_from_it_and_nothing_else(store):
    ids = seed(store)
    from memory.graph.relations import add_relation

    person = store.add_memory("My passport is in the top drawer", scope="personal")  # written by hand
    first = next(m for m in memories(store).values() if set(m["provenance"]) & set(ids["acme"]))
    edge = add_relation(store, first["id"], "MENTIONS", person["id"])["id"]
    before = memories(store)
    acme_mems = derived(before, ids["acme"])
    other_mems = derived(before, ids["other"])
    assert acme_mems and other_mems and all(m["scope"] == "personal" for m in before.values())

    rows = select_evidence(store, app="slack", keep=lambda r: "#acme-" in r["window"])
    assert sorted(r["id"] for r in rows) == sorted(ids["acme"])
    plan = plan_rescope(store, "work/acme", rows)
    assert plan.counts()["evidence"] == 2 and {m["id"] for m in plan.follow} == {m["id"] for m in acme_mems}
    assert plan.review == [] and "Moves 2 captured rows (2 from personal) to work/acme" in plan.describe()
    assert memories(store) == before  # a plan changes nothing

    result = rescope(store, plan)
    assert result["evidence"] == 2 and result["memories"] == len(acme_mems) and result["review"] == 0
    assert {store.get(e)["scope"] for e in ids["acme"]} == {"work/acme"}
    assert {store.get(e)["scope"] for e in ids["other"]} == {"personal"}
    after = memories(store)
    for m in acme_mems:
        moved = after[m["id"]]
        assert moved["scope"] == "work/acme"
        # A move that follows the evidence is not the person's edit of the memory: nothing else changes.
        assert not moved["user_edited"] and moved["text"] == m["text"] and moved["status"] == m["status"]
    for m in other_mems:
        assert after[m["id"]] == before[m["id"]]
    assert after[person["id"]]["scope"] == "personal"
    # The moved memory's edges carry its new scope (the store's rescope listeners ran).
    row = store.rows("relations", F.id_is(edge), ["scope", "dst_scope"], limit=1)[0]
    assert row == {"scope": "work/acme", "dst_scope": "personal"}
    # Reads by scope see the move at once.
    work = {m["id"] for m in store.list("memory", scopes=["work"], statuses=[], limit=100)}
    assert work == {m["id"] for m in acme_mems}
    audit = store.rows("audit", F.equals("action", "update"), ["entity_id", "entity_kind", "actor", "after"])
    assert {a["entity_id"] for a in audit if a["entity_kind"] == "evidence"} == set(ids["acme"])
    assert {a["entity_id"] for a in audit if a["entity_kind"] == "memory"} == {m["id"] for m in acme_mems}
    assert all(a["actor"] == "person" and "work/acme" in a["after"] for a in audit)

    # Once moved, nothing is left to move.
    assert plan_rescope(store, "work/acme", select_evidence(store, app="Slack", keep=lambda r: "#acme-" in r["window"])).empty()


def test_a_memory_resting_on_evidence_of_two_scopes_goes_to_review_and_stays(store):
    ids = seed(store)
    a, o = ids["acme"][0], ids["other"][0]
    mixed = store.add_memory("Acme and the studio both settled on Postgres", scope="personal", status="active",
                             provenance=[a, o], origin="extracted")
    plan = plan_rescope(store, "work/acme", select_evidence(store, ids=[a]))
    assert mixed["id"] in {m["id"] for m in plan.review}
    assert mixed["id"] not in {m["id"] for m in plan.follow}
    assert "rest on evidence of two scopes" in plan.describe()
    rescope(store, plan)
    got = store.get(mixed["id"])
    assert got["scope"] == "personal" and got["status"] == "candidate"  # not shown to a work token; the person decides
    assert set(got["provenance"]) == {a, o}  # nothing is dropped: both sources still hold
    # Moving the other source too makes it whole again in one scope: it follows.
    plan2 = plan_rescope(store, "work/acme", select_evidence(store, ids=[o]))
    assert mixed["id"] in {m["id"] for m in plan2.follow}


def test_rescope_refuses_vague_or_wrong_requests(store):
    ids = seed(store)
    with pytest.raises(InputError, match="refusing to move everything"):
        select_evidence(store)
    with pytest.raises(InputError, match="invalid scope"):
        plan_rescope(store, "Work Acme", select_evidence(store, ids=ids["acme"]))
    mem = next(iter(memories(store)))
    with pytest.raises(InputError, match="not an evidence id"):
        select_evidence(store, ids=[mem])
    with pytest.raises(InputError, match="may not move"):
        rescope(store, plan_rescope(store, "work", select_evidence(store, ids=ids["acme"])), actor="dream")


def test_cli_rescope_dry_run_exits_2_then_moves_with_yes_and_by_rules(store, mirador_home, capsys):
    from desktop.cli.main import main
    from memory.config import ScopeRule, save_config

    ids = seed(store)
    argv = ["evidence", "rescope", "--app", "Slack", "--window", "#acme-*", "--to", "work/acme"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Moves 2 captured rows" in err and "repeat with --yes" in err
    assert {store.get(e)["scope"] for e in ids["acme"]} == {"personal"}  # nothing moved yet
    assert main([*argv, "--yes"]) == 0
    assert "moved 2 row(s)" in capsys.readouterr().out
    assert {store.get(e)["scope"] for e in ids["acme"]} == {"work/acme"}

    # Apply rules to past captures: the studio's Slack channel goes to work/studio, Signal stays.
    cfg = store.config.model_copy(deep=True)
    cfg.capture.scope_rules = [ScopeRule(app="Slack", title="#general*", scope="work/studio")]
    save_config(cfg, mirador_home)
    assert main(["evidence", "rescope", "--by-rules", "--yes"]) == 0
    assert store.get(ids["other"][0])["scope"] == "work/studio"
    assert store.get(ids["other"][1])["scope"] == "personal"
    assert {store.get(e)["scope"] for e in ids["acme"]} == {"work/acme"}  # no rule matches them: they stay
