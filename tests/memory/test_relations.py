"""Relations between memories: detection in extraction, MCP related/chain/relate, erasure, scopes, cycles, recall."""

from __future__ import annotations

import json

import pytest

from memory.consolidation.extraction import Extractor, run_extraction
from memory.consolidation.prompts import SCHEMA
from memory.errors import InputError, NotFoundError
from memory.graph import relations as R
from memory.mcp.auth import make_principal
from memory.retrieval.recall import recall
from memory.store.erasure import forget, forget_where
from models.llm import Completion
from tests.conftest import files_containing
from tests.memory.mcp_support import call

WORK = make_principal("tester", ["work"], "work")
DECISION = "We decided to use Postgres for the billing service because it supports row-level locking."


def data(result) -> dict:
    assert not result.is_error, result.content[0].text
    return json.loads(result.content[0].text)


def extract_because(store) -> tuple[dict, dict, dict]:
    """Evidence with a because-sentence, extracted by the rules: (evidence, decision, reason)."""
    ev = store.add_evidence(DECISION, source="manual", scope="work")
    report = run_extraction(store, extractor=Extractor(engine="rules"))
    assert report.relations == 1
    mems = {m["text"]: m for m in store.list("memory", statuses=[], limit=100)}
    return ev, mems["We decided to use Postgres for the billing service."], mems["It supports row-level locking."]


def edges(store) -> list[dict]:
    return store.rows("relations", local=True)


# ---- detection, chain with evidence, erasure ------------------------------------------------------


@pytest.mark.parametrize("end", ["decision", "reason"])
def test_because_sentence_yields_edge_chain_shows_it_and_forgetting_either_end_removes_it(store, mirador_home, end):
    ev, decision, reason = extract_because(store)
    # The reason is its own memory, on the same evidence as the decision it explains.
    assert decision["provenance"] == reason["provenance"] == [ev["id"]]
    assert reason["details"] == {"fact": "It supports row-level locking."}  # no subject: never supersedes it
    [edge] = edges(store)
    assert (edge["src"], edge["relation"], edge["dst"]) == (decision["id"], "BECAUSE", reason["id"])
    assert edge["provenance"] == [ev["id"]] and edge["origin"] == "extractor:rules" and edge["scope"] == "work"

    async def steps(c):
        why = data(await c.call_tool("memory_chain", {"id": decision["id"]}))
        after = data(await c.call_tool("memory_chain", {"id": reason["id"], "direction": "consequences"}))
        near = data(await c.call_tool("memory_related", {"id": reason["id"], "direction": "in"}))
        return why, after, near

    why, after, near = call(store, WORK, steps)
    [hop] = why["hops"]
    assert (hop["from"], hop["relation"], hop["to"], hop["depth"]) == (decision["id"], "BECAUSE", reason["id"], 1)
    assert [e["id"] for e in hop["evidence"]] == [ev["id"]] and hop["evidence"][0]["text"] == DECISION
    assert hop["memory"]["text"] == "It supports row-level locking."
    assert [h["to"] for h in after["hops"]] == [decision["id"]]
    assert [(r["relation"], r["direction"], r["other"]["id"]) for r in near["relations"]] == [
        ("BECAUSE", "in", decision["id"])]

    gone, kept = (decision, reason) if end == "decision" else (reason, decision)
    forget(store, [gone["id"]])
    assert edges(store) == []
    assert R.related(store, kept["id"]) == []
    assert R.chain(store, kept["id"], "causes" if end == "reason" else "consequences")["hops"] == []

    async def after_delete(c):
        return data(await c.call_tool("memory_chain", {"id": kept["id"], "direction": "causes"})), \
            await c.call_tool("memory_chain", {"id": gone["id"]})

    chain_now, missing = call(store, WORK, after_delete)
    assert chain_now["hops"] == [] and missing.is_error and "no memory with id" in missing.content[0].text
    # The deleted id survives in no file of the relations table (old versions and transactions too).
    rel_dir = mirador_home / "lancedb" / "relations.lance"
    assert rel_dir.is_dir() and files_containing(rel_dir, gone["id"]) == []
    # The audit keeps who/when of the edge but no longer names its ends.
    rel_audit = sorted((a for a in store.rows("audit") if a["entity_kind"] == "relation"),
                       key=lambda a: a["at"])
    assert [a["action"] for a in rel_audit] == ["create", "delete"]
    assert not any(gone["id"] in (a["before"] or "") + (a["after"] or "") for a in rel_audit)


def test_bulk_forget_by_scope_removes_edges_into_that_scope(store, mirador_home):
    a = store.add_memory("We ship on Tuesdays", scope="work")["id"]
    b = store.add_memory("Dentist is on Tuesday mornings", scope="personal")["id"]
    R.add_relation(store, a, "BECAUSE", b)
    forget_where(store, scope="personal")
    assert edges(store) == [] and files_containing(mirador_home / "lancedb" / "relations.lance", b) == []
    assert store.get(a)["status"] == "active"


def test_other_cue_words_link_clauses_of_the_persons_own_notes_but_not_screen_prose(store):
    store.add_evidence("The login timeout was fixed by raising the pool size to 50.", source="manual", scope="work")
    store.add_evidence("After the deploy failed twice, we rolled back to version 2.3.", source="audio", scope="work")
    store.add_evidence("The new build script replaces the old Makefile targets.", source="manual", scope="work")
    store.add_evidence("The page loads slowly because the images are huge.", source="screen", scope="work")
    run_extraction(store, extractor=Extractor(engine="rules"))
    text = {m["id"]: m["text"] for m in store.list("memory", statuses=[], limit=100)}
    got = {(text[e["src"]], e["relation"], text[e["dst"]]) for e in edges(store)}
    assert got == {
        ("Raising the pool size to 50.", "RESOLVES", "The login timeout."),
        ("The deploy failed twice.", "TRIGGERED", "We rolled back to version 2.3."),
        ("The new build script.", "UPDATES", "The old Makefile targets."),
    }
    assert not any("images" in t for t in text.values())  # screen text with "because" adds nothing


class RelLLM:
    """A fake model answering with memories and relations (schema shape)."""

    info = None

    def __init__(self, answer: dict) -> None:
        self.answer = answer

    def complete_json(self, prompt: str, schema: dict, max_tokens=None) -> Completion:
        assert schema == SCHEMA and "relations" in schema["properties"]
        return Completion(json.dumps(self.answer), self.answer, 10, 10, 0.01)

    def close(self) -> None:
        pass


def test_llm_relations_are_validated_and_written(store):
    store.add_evidence("Checkout errors rose after the cache change; the rollback of the cache change fixed them.",
                       source="manual", scope="work")
    answer = {"memories": [
        {"type": "semantic", "subject": "checkout errors", "text": "Checkout errors rose after the cache change"},
        {"type": "semantic", "subject": "rollback", "text": "The rollback of the cache change fixed checkout errors"},
        {"type": "semantic", "subject": "weather", "text": "It will snow in Lisbon tomorrow"},  # not grounded
    ], "relations": [{"from": 1, "type": "RESOLVES", "to": 0}, {"from": 0, "type": "BECAUSE", "to": 2},
                     {"from": 0, "type": "MENTIONS", "to": 0}]}
    report = run_extraction(store, extractor=Extractor(llm=RelLLM(answer), engine="llm"))
    text = {m["id"]: m["text"] for m in store.list("memory", statuses=[], limit=100)}
    got = [(text[e["src"]], e["relation"], text[e["dst"]], e["origin"]) for e in edges(store)]
    assert got == [("The rollback of the cache change fixed checkout errors", "RESOLVES",
                    "Checkout errors rose after the cache change", "extractor:llm")]
    assert report.relations == 1 and not any("Lisbon" in t for t in text.values())


def test_supersede_links_new_to_old_with_updates(store):
    first = store.add_evidence("The staging server listens on port 8443.", source="manual", scope="work")
    ans = lambda t: {"memories": [{"type": "semantic", "subject": "staging server port", "text": t}]}  # noqa: E731
    run_extraction(store, extractor=Extractor(llm=RelLLM(ans("The staging server listens on port 8443.")),
                                              engine="llm"))
    store.add_evidence("We moved the staging server to port 9443 today.", source="manual", scope="work")
    report = run_extraction(store, extractor=Extractor(llm=RelLLM(ans("The staging server moved to port 9443.")),
                                                       engine="llm"))
    assert report.superseded == 1
    [old] = [m for m in store.list("memory", statuses=["superseded"])]
    [edge] = [e for e in edges(store) if e["relation"] == "UPDATES"]
    assert (edge["src"], edge["dst"]) == (old["superseded_by"], old["id"])
    assert old["provenance"] == [first["id"]]
    # The old row keeps its edges; related shows the superseded end only when asked for every status.
    assert R.related(store, old["superseded_by"]) == []
    assert [r["other"]["id"] for r in R.related(store, old["superseded_by"], statuses=[])] == [old["id"]]


def test_accepting_a_dream_supersede_links_new_to_old(store):
    from memory.consolidation.dream import decide_proposal, list_proposals, run_dream

    old = store.add_memory("The billing service uses Postgres 16.", details={"subject": "billing database"})
    new = store.add_memory("The billing database is MySQL 8 now.", details={"subject": "billing database"})
    run_dream(store)
    assert edges(store) == []  # a proposal changes nothing until the person accepts it
    prop = next(p for p in list_proposals(store) if p["kind"] == "supersede")
    decide_proposal(store, prop["id"], accept=True)
    [edge] = edges(store)
    assert (edge["src"], edge["relation"], edge["dst"], edge["origin"]) == (new["id"], "UPDATES", old["id"], "dream")


# ---- scopes, cycles, idempotency, audit -----------------------------------------------------------


def test_another_scopes_memory_is_never_returned_or_linked(store):
    a = store.add_memory("Use feature flags for the billing rollout", scope="work")["id"]
    b = store.add_memory("Rollouts broke billing twice last year", scope="work/acme")["id"]
    p = store.add_memory("My partner works in billing at the same company", scope="personal")["id"]
    R.add_relation(store, a, "BECAUSE", b)
    R.add_relation(store, a, "BECAUSE", p)  # the person sees every scope
    R.add_relation(store, p, "TRIGGERED", a)
    R.add_relation(store, b, "BECAUSE", p)

    assert {r["other"]["id"] for r in R.related(store, a)} == {b, p}
    assert [r["other"]["id"] for r in R.related(store, a, scopes=["work"])] == [b]
    assert [h["to"] for h in R.chain(store, a, depth=6, scopes=["work"])["hops"]] == [b]
    assert {h["to"] for h in R.chain(store, a, depth=6)["hops"]} == {b, p}
    with pytest.raises(NotFoundError):
        R.related(store, p, scopes=["work"])
    with pytest.raises(NotFoundError):
        R.add_relation(store, a, "MENTIONS", p, scopes=["work"])
    with pytest.raises(NotFoundError):
        R.remove_relation(store, src=a, relation="BECAUSE", dst=p, scopes=["work"])
    before = len(edges(store))

    async def steps(c):
        related = data(await c.call_tool("memory_related", {"id": a}))
        chain = data(await c.call_tool("memory_chain", {"id": a, "depth": 6}))
        other = await c.call_tool("memory_related", {"id": p})
        relate = await c.call_tool("memory_relate", {"src": a, "relation": "MENTIONS", "dst": p})
        narrow = await c.call_tool("memory_chain", {"id": a, "scope": "personal"})
        return related, chain, other, relate, narrow

    related, chain, other, relate, narrow = call(store, WORK, steps)
    assert [r["other"]["id"] for r in related["relations"]] == [b]
    assert [h["to"] for h in chain["hops"]] == [b] and p not in json.dumps(chain)
    assert p not in json.dumps(related)
    assert other.is_error and "is visible to this client" in other.content[0].text
    assert relate.is_error and narrow.is_error
    assert len(edges(store)) == before  # the refused relate wrote nothing


def test_cycles_terminate_and_each_memory_appears_once(store):
    ids = [store.add_memory(f"step {n} of the incident loop", scope="work")["id"] for n in range(4)]
    for x, y in zip(ids, ids[1:] + ids[:1], strict=True):  # 0→1→2→3→0
        R.add_relation(store, x, "BECAUSE", y)
    R.add_relation(store, ids[0], "TRIGGERED", ids[2])  # 0 caused 2: reached again as a consequence of 0
    causes = R.chain(store, ids[0], depth=6)
    assert [h["to"] for h in causes["hops"]] == ids[1:] and [h["depth"] for h in causes["hops"]] == [1, 2, 3]
    follows = R.chain(store, ids[0], "consequences", depth=6)
    assert sorted(h["to"] for h in follows["hops"]) == sorted(ids[1:])
    assert len({h["to"] for h in follows["hops"]}) == len(follows["hops"])
    self_loop = store.add_memory("loops to itself", scope="work")["id"]
    with pytest.raises(InputError):
        R.add_relation(store, self_loop, "BECAUSE", self_loop)


def test_add_is_idempotent_validated_and_audited(store):
    ev = store.add_evidence("notes about the release", scope="work")
    a = store.add_memory("Release is frozen", scope="work")["id"]
    b = store.add_memory("QA found a blocker", scope="work")["id"]
    first = R.add_relation(store, a, "because", b)
    again = R.add_relation(store, a, "BECAUSE", b)
    more = R.add_relation(store, a, "BECAUSE", b, provenance=[ev["id"]], confidence=0.5)
    assert first["created"] and not again["created"] and not more["created"]
    assert len(edges(store)) == 1 and edges(store)[0]["provenance"] == [ev["id"]]
    assert edges(store)[0]["confidence"] == 1.0  # the higher confidence stays
    actions = [x["action"] for x in sorted(store.rows("audit"), key=lambda x: x["at"])
               if x["entity_kind"] == "relation"]
    assert actions == ["create", "update"]  # adding the same edge unchanged writes nothing
    for bad in (lambda: R.add_relation(store, a, "CAUSES", b), lambda: R.add_relation(store, a, "BECAUSE", ev["id"]),
                lambda: R.add_relation(store, a, "BECAUSE", b, provenance=[a]),
                lambda: R.add_relation(store, a, "BECAUSE", b, confidence=2)):
        with pytest.raises(InputError):
            bad()
    with pytest.raises(NotFoundError):
        R.add_relation(store, a, "BECAUSE", "mem_000000000000000000000000")
    removed = R.remove_relation(store, first["id"])
    assert removed["id"] == first["id"] and edges(store) == []
    with pytest.raises(NotFoundError):
        R.remove_relation(store, first["id"])


def test_mcp_relate_writes_with_the_clients_name_and_only_from_its_write_scope(store):
    ev = store.add_evidence("standup notes", scope="work")
    a = store.add_memory("Moved CI to self-hosted runners", scope="work")["id"]
    b = store.add_memory("Hosted CI minutes ran out", scope="work")["id"]
    reader = make_principal("reader", ["work"], None)

    async def steps(c):
        return data(await c.call_tool("memory_relate", {"src": a, "relation": "BECAUSE", "dst": b,
                                                        "evidence": [ev["id"]]})), \
            await c.call_tool("memory_relate", {"src": a, "relation": "SOMETIMES", "dst": b})

    made, bad = call(store, WORK, steps)
    assert made["relation"]["origin"] == "mcp:tester" and made["relation"]["provenance"] == [ev["id"]]
    assert bad.is_error
    ro = call(store, reader, lambda c: c.call_tool("memory_relate", {"src": b, "relation": "BECAUSE", "dst": a}))
    assert ro.is_error and "read-only" in ro.content[0].text
    assert [(e["src"], e["dst"]) for e in edges(store)] == [(a, b)]
    audit = [x for x in store.rows("audit") if x["entity_kind"] == "relation"]
    assert [x["actor"] for x in audit] == ["mcp:tester"]


# ---- recall ----------------------------------------------------------------------------------------


def test_recall_pulls_in_the_reason_within_budget_and_never_a_hidden_one(store):
    decision = store.add_memory("We decided to use Postgres for the billing service.", scope="work")["id"]
    reason = store.add_memory("It supports row-level locking.", scope="work")["id"]
    for n in range(14):  # billing facts that outrank the reason for a billing query
        store.add_memory(f"Billing service fact {n}: invoices for plan {n} are sent on day {n + 1}.", scope="work")
    query = "which database does the billing service use"

    def ids(budget, **kw):
        res = recall(store, query, budget, scopes=["work"], include_evidence=False, **kw)
        assert res.used_tokens <= budget
        return [i.id for i in res.items], res

    without, _ = ids(300)
    assert decision in without and reason not in without  # precondition: search alone does not find it

    R.add_relation(store, decision, "BECAUSE", reason)
    got, res = ids(300)
    assert got[got.index(decision) + 1] == reason  # right after what it explains
    item = res.items[got.index(reason)]
    assert item.provenance == f"reason for {decision}" and "row-level locking" in res.text
    for budget in (20, 40, 60, 120, 300, 1000):  # never over budget, however tight
        ids(budget)

    # A rejected reason, or one in a scope the caller may not read, is never pulled in.
    store.set_status(reason, "rejected")
    assert reason not in ids(300)[0]
    store.set_status(reason, "active")
    private = store.add_memory("My manager insisted on it in my review.", scope="personal")["id"]
    R.add_relation(store, decision, "BECAUSE", private)
    got, res = ids(1000)
    assert private not in got and "manager" not in res.text
    everything = recall(store, query, 1000, scopes=None, include_evidence=False)
    assert private in [i.id for i in everything.items]


def test_export_carries_relations_and_import_restores_them_once(store, tmp_path):
    from memory.integrations.transfer import import_jsonl, write_export
    from memory.store.core import Store

    a = store.add_memory("Release is frozen", scope="work")["id"]
    b = store.add_memory("QA found a blocker", scope="work")["id"]
    c = store.add_memory("Holiday plans for August", scope="personal")["id"]
    R.add_relation(store, a, "BECAUSE", b, confidence=0.8)
    R.add_relation(store, b, "MENTIONS", c)  # crosses into personal: left out of a work-only export
    out = tmp_path / "work.jsonl"
    with out.open("w") as fh:
        write_export(store, fh, scopes=["work"])
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["src"], x["relation"], x["dst"]) for x in lines if x["kind"] == "relation"] == [(a, "BECAUSE", b)]

    other = Store(tmp_path / "other")
    res = import_jsonl(other, out)
    assert res["memories"] == 2 and res["relations"] == 1
    (edge,) = edges(other)
    assert (edge["src"], edge["relation"], edge["dst"], round(edge["confidence"], 4)) == (a, "BECAUSE", b, 0.8)
    assert import_jsonl(other, out)["relations"] == 0  # a second import adds nothing

    # An edge whose end was forgotten is skipped, never brought back with it.
    forget(other, [b])
    again = import_jsonl(other, out)
    assert again["relations"] == 0 and again["relations_skipped_forgotten"] == 1 and edges(other) == []

    # An edge to a memory in neither the file nor the store stops the whole import before any write.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text().replace(b, "mem_000000000000000000000000").replace(a, "mem_111111111111111111111111"))
    third = Store(tmp_path / "third")
    with pytest.raises(InputError, match="nothing was imported"):
        import_jsonl(third, bad)
    assert third.list("memory", statuses=[]) == []


def test_an_edge_follows_its_memory_into_another_scope(store):
    a = store.add_memory("Release is frozen", scope="work")["id"]
    b = store.add_memory("Note to self about the freeze", scope="personal")["id"]
    R.add_relation(store, a, "MENTIONS", b)
    assert R.related(store, a, scopes=["work"]) == []  # the other end is personal: hidden from work
    store.update_memory(b, scope="work/acme")
    (edge,) = R.related(store, a, scopes=["work"])
    assert edge["other"]["id"] == b and edge["dst_scope"] == "work/acme"
    store.update_memory(b, scope="personal")  # and back out: hidden again
    assert R.related(store, a, scopes=["work"]) == []
