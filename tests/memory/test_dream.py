"""Dream consolidation: proposes what would hide, applies only what does not, writes nothing on a dry run."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.consolidation.dream import decide_proposal, list_proposals, load_checkpoint, run_dream, state_path
from memory.errors import InputError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import utcnow
from memory.store.erasure import forget


def all_memories(store) -> list[dict]:
    return store.list("memory", statuses=[], limit=10_000)


def snapshot(store) -> dict[str, dict]:
    return {m["id"]: m for m in all_memories(store)}


def seed(store) -> dict:
    """A store with a near-duplicate, a stale fact, repeated episodes and an old unreviewed candidate."""
    now = utcnow()
    out = {
        "fact": store.add_memory("The billing service uses Postgres 16.", details={"subject": "billing database"},
                                 provenance=["evd_a"], created_at=now - timedelta(days=2)),
        "dup": store.add_memory("The billing service uses Postgres 16", status="candidate", actor="extractor",
                                provenance=["evd_b"]),
        "newer": store.add_memory("The billing database is MySQL 8 now.", details={"subject": "billing database"}),
        "old_candidate": store.add_memory("Try the new espresso place", status="candidate", actor="extractor",
                                          created_at=now - timedelta(days=400)),
    }
    out["episodes"] = [store.add_memory(f"Daily standup with the platform team at 9:30 (day {i})", type="episodic")
                       for i in range(3)]
    return out


def versions(store) -> dict[str, int]:
    return {n: v for n, (_, v) in store.tables_state().items()}


def files(home) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns) for p in home.rglob("*") if p.is_file()}


def test_dry_run_writes_nothing(store, mirador_home):
    from desktop.cli.main import main

    seed(store)
    v0, f0, m0 = versions(store), files(mirador_home), snapshot(store)
    plan = run_dream(store, dry_run=True)
    assert plan.dry_run and plan.steps, "precondition: there is something to do"
    assert plan.applied == plan.proposed == 0
    assert main(["dream", "--dry-run", "--json"]) == 0
    assert versions(store) == v0
    assert files(mirador_home) == f0
    assert snapshot(store) == m0
    assert not state_path(store).exists() and load_checkpoint(store) is None


def test_pass_applies_safe_steps_and_proposes_the_rest(store):
    s = seed(store)
    before = snapshot(store)
    plan = run_dream(store)
    counts = plan.counts()
    assert counts.get("merge:propose", 0) >= 1 and counts.get("supersede:propose") == 1
    assert counts.get("crystallise:apply") == 1 and counts.get("archive:propose") == 1
    after = snapshot(store)
    # nothing hidden: every memory keeps its status and text
    for id_, m in before.items():
        assert after[id_]["status"] == m["status"] and after[id_]["text"] == m["text"]
    # the duplicate's evidence moved onto the survivor; the duplicate is only proposed for merging
    assert set(after[s["fact"]["id"]]["provenance"]) == {"evd_a", "evd_b"}
    props = {(p["kind"], p["target_id"]) for p in list_proposals(store)}
    assert ("merge", s["dup"]["id"]) in props
    assert ("supersede", s["fact"]["id"]) in props and ("archive", s["old_candidate"]["id"]) in props
    [crystal] = [m for id_, m in after.items() if id_ not in before]
    assert crystal["status"] == "candidate" and crystal["origin"] == "dream:crystallise"
    assert {e["id"] for e in s["episodes"]} <= set(crystal["provenance"])
    # every change is audited as dream
    dream_audit = store.rows("audit", F.equals("actor", "dream"), ["action", "entity_id"])
    actions = {a["action"] for a in dream_audit}
    assert {"propose", "create", "update"} <= actions
    assert sum(a["action"] == "propose" for a in dream_audit) == plan.proposed


def test_second_pass_is_incremental_and_does_not_repeat_proposals(store):
    seed(store)
    run_dream(store)
    n_props = len(list_proposals(store))
    plan = run_dream(store)
    assert plan.changed <= 2  # only what the first pass itself touched (provenance, crystal)
    assert len(list_proposals(store)) == n_props
    store.add_memory("A brand new fact about the CI cache.")
    plan = run_dream(store)
    assert plan.changed == 1


def test_dream_cost_follows_changes_not_store_size(store, monkeypatch):
    import memory.consolidation.dream as dream

    for i in range(40):
        store.add_memory(f"Unrelated fact number {i} about topic {i * 7}")
    run_dream(store)
    looked_up = []
    real = dream.neighbours_many
    monkeypatch.setattr(dream, "neighbours_many", lambda store_, vecs, *a, **k: looked_up.extend(vecs) or
                        real(store_, vecs, *a, **k))
    for i in range(3):
        store.add_memory(f"Fresh note {i} on the release checklist")
    plan = run_dream(store)
    assert plan.changed == 3 and len(looked_up) == 3  # the neighbours of the 3 changed rows, not of 43


def test_deleted_memory_is_not_recreated_by_dream(store):
    seed(store)
    run_dream(store)
    [crystal] = [m for m in all_memories(store) if m["origin"] == "dream:crystallise"]
    forget(store, [crystal["id"]])
    store.add_memory("Daily standup with the platform team at 9:30 (day 9)", type="episodic")
    for _ in range(2):
        run_dream(store)
    assert not [m for m in all_memories(store) if m["origin"] == "dream:crystallise"]


def test_user_edited_and_pinned_memories_are_never_targets(store):
    edited = store.add_memory("The deploy window is Tuesday.", details={"subject": "deploy window"})
    edited = store.update_memory(edited["id"], text="The deploy window is Tuesday afternoon.")
    pinned = store.add_memory("Never deploy on Fridays.", pinned=True,
                              created_at=utcnow() - timedelta(days=3000))
    store.add_memory("The deploy window is Tuesday afternoon", status="candidate", actor="extractor")
    store.add_memory("The deploy window is Thursday.", details={"subject": "deploy window"})
    store.add_memory("Never deploy on Fridays", status="candidate", actor="extractor")
    run_dream(store)
    targets = {p["target_id"] for p in list_proposals(store)}
    assert edited["id"] not in targets and pinned["id"] not in targets
    assert store.get(edited["id"])["text"] == "The deploy window is Tuesday afternoon."
    assert store.get(pinned["id"])["salience"] == pinned["salience"]  # pinned: not even decayed


def test_salience_decays_once_per_half_life(store):
    old = store.add_memory("Went to the team offsite", type="episodic", created_at=utcnow() - timedelta(days=95))
    fresh = store.add_memory("Reviewed the Q3 plan", type="episodic")
    run_dream(store)
    assert store.get(old["id"])["salience"] == pytest.approx(0.5 * 0.5 ** 3)  # 95 days, half-life 30
    assert store.get(fresh["id"])["salience"] == pytest.approx(0.5)
    run_dream(store)
    assert store.get(old["id"])["salience"] == pytest.approx(0.5 * 0.5 ** 3)  # not decayed twice


def test_accepting_a_proposal_hides_the_target_and_only_a_person_may(store):
    s = seed(store)
    run_dream(store)
    prop = next(p for p in list_proposals(store) if p["kind"] == "supersede")
    with pytest.raises(InputError):
        decide_proposal(store, prop["id"], accept=True, actor="dream")
    decide_proposal(store, prop["id"], accept=True)
    hidden = store.get(s["fact"]["id"])
    assert hidden["status"] == "superseded" and hidden["superseded_by"] == s["newer"]["id"] and hidden["valid_to"]
    assert store.get(s["newer"]["id"])["status"] == "active"
    assert all(p["id"] != prop["id"] for p in list_proposals(store))
    assert store.count(T.PROPOSALS, F.equals("status", "accepted"), local=True) == 1


def test_batched_neighbours_equal_one_query_each(store):
    """The pass looks neighbours up in batches; each list must be what one query for it returns."""
    from memory.consolidation.write_policy import neighbours, neighbours_many

    rows = [store.add_memory(f"Standup note {i}: the {t} team shipped item {i * 3}", type="episodic", scope="work")
            for i, t in enumerate(["billing", "search", "auth", "mobile"] * 3)]
    store.add_memory("Standup note in another scope", type="episodic", scope="personal")
    vecs = [store.embedder.embed_query(q) for q in ("billing standup", "search team", "what shipped", "auth", "note")]
    batched = neighbours_many(store, vecs, "episodic", "work", k=4)
    for v, got in zip(vecs, batched, strict=True):
        one = neighbours(store, v, "episodic", "work", k=4)
        assert [r["id"] for r in got] == [r["id"] for r in one] and len(got) == 4
        assert all(r["scope"] == "work" for r in got)
        assert [round(r["similarity"], 5) for r in got] == [round(r["similarity"], 5) for r in one]
    assert len(rows) == 12


def test_a_pass_stopped_while_planning_writes_nothing(store, mirador_home):
    import threading

    from memory.consolidation.scheduler import JobCancelled, job_dream

    seed(store)
    v0, m0 = versions(store), snapshot(store)
    quit_ = threading.Event()
    quit_.set()
    plan = run_dream(store, stop=quit_)
    assert plan.stopped == "while planning, before any write" and plan.applied == plan.proposed == 0
    with pytest.raises(JobCancelled, match="the next pass does the rest"):
        job_dream(store, quit_)  # the scheduler records no run, so it is caught up at the next start
    assert versions(store) == v0 and snapshot(store) == m0
    assert not state_path(store).exists()


def test_a_pass_stopped_after_its_decay_does_not_decay_twice(store, monkeypatch):
    """A stop lands between two steps. Only decay is not idempotent, so it runs first, and the state
    file records it: the next pass redoes the rest of the interval but not its decay."""
    import threading

    import memory.consolidation.dream as dream

    old = store.add_memory("Went to the team offsite", type="episodic", created_at=utcnow() - timedelta(days=95))
    s = seed(store)
    quit_ = threading.Event()
    real = dream._APPLY["decay"]

    def decay_then_quit(store_, step):
        real(store_, step)
        quit_.set()  # Quit pressed while the decay steps run: they still all run

    monkeypatch.setitem(dream._APPLY, "decay", decay_then_quit)
    plan = run_dream(store, stop=quit_)
    n_decay = sum(st.kind == "decay" for st in plan.steps)
    assert n_decay >= 1 and plan.stopped == f"after {n_decay} of {len(plan.steps)} steps"
    assert plan.applied == n_decay and plan.proposed == 0
    assert store.get(old["id"])["salience"] == pytest.approx(0.5 * 0.5 ** 3)
    assert list_proposals(store) == []
    assert load_checkpoint(store) is None  # the pass is not done...
    assert load_checkpoint(store, "decayed_to") is not None  # ... its decay is

    monkeypatch.setitem(dream._APPLY, "decay", real)
    again = run_dream(store)
    assert again.stopped is None and load_checkpoint(store) is not None
    assert store.get(old["id"])["salience"] == pytest.approx(0.5 * 0.5 ** 3)  # not halved again
    props = {(p["kind"], p["target_id"]) for p in list_proposals(store)}
    assert ("merge", s["dup"]["id"]) in props and ("supersede", s["fact"]["id"]) in props
    assert [m for m in all_memories(store) if m["origin"] == "dream:crystallise"]
