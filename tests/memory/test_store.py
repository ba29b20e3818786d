"""Store: every memory type, lifecycle, audit, batching, migrations."""

from __future__ import annotations

import json

import pytest

from memory.errors import InputError, NotFoundError
from memory.store.core import EvidenceSpec, MemorySpec, Store
from memory.types import MAX_MEMORY_CHARS
from tests.conftest import StopAfter

TYPED = [
    ("episodic", "Sprint review with Sam on Friday", {"who": ["Sam"], "where": "room 4", "when": "2024-05-10T15:00:00"}),
    ("semantic", "The team picked PostgreSQL for the ledger", {"subject": "database"}),
    ("procedural", "Release the app", {"steps": ["bump version", "tag", "push tag"]}),
    ("resource", "Design doc for the ledger", {"uri": "https://example.com/ledger", "kind": "doc"}),
    ("core", "Prefers concise answers with code first", {"block": "user"}),
]


def _audit(store, entity_id):
    return [r for r in store.rows("audit") if r["entity_id"] == entity_id]


@pytest.mark.parametrize("mtype,text,details", TYPED)
def test_each_type_is_stored_with_its_typed_fields(store, mtype, text, details):
    row = store.add_memory(text, type=mtype, details=details, scope="work")
    got = store.get(row["id"])
    assert got["type"] == mtype and got["text"] == text and got["scope"] == "work"
    for k, v in details.items():
        assert got["details"][k] == v
    assert got["status"] == "active" and got["user_edited"] is False
    assert [a["action"] for a in _audit(store, row["id"])] == ["create"]


def test_typed_fields_are_validated(store):
    with pytest.raises(InputError, match="procedural"):
        store.add_memory("x", type="procedural", details={"steps": "not a list"})
    with pytest.raises(InputError, match="takes: subject, fact"):
        store.add_memory("x", type="semantic", details={"colour": "red"})
    with pytest.raises(InputError, match="unknown memory type"):
        store.add_memory("x", type="gossip")
    assert store.count("memory", local=True) == 0


def test_empty_and_oversized_text_are_refused(store):
    with pytest.raises(InputError, match="empty"):
        store.add_memory("   ")
    with pytest.raises(InputError, match=f"{MAX_MEMORY_CHARS:,}"):
        store.add_memory("x" * (MAX_MEMORY_CHARS + 1))
    with pytest.raises(InputError, match="source"):
        store.add_evidence("hello", source="telepathy")
    assert store.count("memory", local=True) == 0 and store.count("evidence", local=True) == 0


def test_edit_marks_user_edited_and_audits_before_after(store):
    row = store.add_memory("The API limit is 100 requests", scope="work")
    new = store.update_memory(row["id"], text="The API limit is 250 requests")
    assert new["user_edited"] is True and new["details"]["fact"] == "The API limit is 250 requests"
    upd = [a for a in _audit(store, row["id"]) if a["action"] == "update"]
    assert len(upd) == 1
    assert "100" in json.loads(upd[0]["before"])["text"] and "250" in json.loads(upd[0]["after"])["text"]


def test_automated_actor_cannot_overwrite_user_edited(store):
    row = store.add_memory("Standup is at 9:30", scope="work")
    store.update_memory(row["id"], text="Standup is at 9:45")
    with pytest.raises(InputError, match="edited or pinned"):
        store.update_memory(row["id"], text="Standup is at 10:00", actor="extractor")
    # corroboration (provenance only) is still allowed
    ev = store.add_evidence("standup 9:45 confirmed", source="screen")
    got = store.update_memory(row["id"], actor="extractor", confidence=1.0, provenance_add=[ev["id"]])
    assert got["text"] == "Standup is at 9:45" and ev["id"] in got["provenance"]


def test_status_lifecycle_and_illegal_moves(store):
    row = store.add_memory("Candidate fact", status="candidate")
    assert store.set_status(row["id"], "active")["status"] == "active"
    with pytest.raises(InputError, match="allowed"):
        store.set_status(row["id"], "deleted")
    with pytest.raises(InputError, match="may propose"):
        store.set_status(row["id"], "rejected", actor="dream")
    assert store.set_status(row["id"], "rejected")["status"] == "rejected"


def test_supersede_keeps_both_rows_with_closed_validity(store):
    old = store.add_memory("Deploys go out on Tuesdays", scope="work")
    old2, new = store.supersede(old["id"], MemorySpec(text="Deploys go out on Thursdays"))
    assert old2["status"] == "superseded" and old2["valid_to"] is not None
    assert old2["superseded_by"] == new["id"] and new["supersedes"] == old["id"]
    assert store.get(old["id"])["text"] == "Deploys go out on Tuesdays"


def test_unknown_id_is_a_clear_error(store):
    with pytest.raises(NotFoundError, match="mirador search"):
        store.get("mem_doesnotexist0000")
    with pytest.raises(InputError, match="mem_, evd_ or vlt_"):
        store.get("banana")


def test_evidence_batch_is_one_commit_and_one_audit_row(store):
    before = store.version("evidence")
    rows = store.add_evidence_batch([EvidenceSpec(text=f"line {i}", source="screen", app="term") for i in range(50)])
    assert len(rows) == 50 and store.count("evidence", local=True) == 50
    assert store.version("evidence") == before + 1
    ev_audit = [a for a in store.rows("audit") if a["entity_kind"] == "evidence"]
    assert len(ev_audit) == 1 and len(json.loads(ev_audit[0]["after"])["ids"]) == 50


def test_migrations_are_recorded_and_not_reapplied(mirador_home):
    from memory.store.migrations import MIGRATIONS

    s1 = Store(mirador_home)
    assert s1.migrations_applied == [name for name, _ in MIGRATIONS]
    assert s1.migrations_applied[:2] == ["m001_initial", "m002_fts_indexes"]
    s1.add_memory("survives reopening")
    s2 = Store(mirador_home)
    assert s2.migrations_applied == []
    assert s2.count("memory", local=True) == 1


def test_rows_added_after_index_build_are_found(store):
    from memory.retrieval.search import search_memories

    store.add_memory("first row about kubernetes")
    store.optimize()
    store.add_memory("a later row about zeppelins")  # not covered by the FTS index yet
    hits = search_memories(store, "zeppelins")
    assert hits and hits[0].text == "a later row about zeppelins"


def _add_screens(store, n: int, start: int) -> None:
    store.add_evidence_batch([EvidenceSpec(f"Screen {i}: notes on topic {i % 7} and item {i}.", scope="work")
                              for i in range(start, start + n)])


def test_vector_index_is_retrained_once_the_table_doubles_even_after_optimize(store):
    """optimize() folds new rows into the index, so the index's own counts cannot tell that it was trained
    on half the table: the trained size is recorded, and an index without the record is retrained once."""
    from memory.store.indexes import TRAINED_ROWS_KEY, ensure_vector_index, trained_rows, vector_index_rows

    _add_screens(store, 120, 0)
    assert ensure_vector_index(store.evidence, min_rows=100) == "built"
    assert trained_rows(store.evidence) == 120
    _add_screens(store, 60, 120)
    store.evidence.optimize()  # folds the 60 rows in: the index now reports 180 indexed, 0 unindexed
    assert vector_index_rows(store.evidence) == (180, 0)
    assert ensure_vector_index(store.evidence, min_rows=100) is None  # 180 < 2 x 120
    _add_screens(store, 60, 180)
    store.evidence.optimize()
    assert ensure_vector_index(store.evidence, min_rows=100) == "retrained"  # 240 = 2 x 120
    assert trained_rows(store.evidence) == 240
    # Rows still go in after the metadata change, and an index without the record is retrained once.
    _add_screens(store, 10, 240)
    store.evidence.update_field_metadata({"path": "vector", "metadata": {TRAINED_ROWS_KEY: None}})
    assert trained_rows(store.evidence) is None
    assert ensure_vector_index(store.evidence, min_rows=100) == "retrained"
    assert ensure_vector_index(store.evidence, min_rows=100) is None


def test_maintenance_keeps_one_vector_delta_one_segment_per_other_index_and_few_fragments(store):
    """LanceDB's optimize() adds every pass's rows to the vector index as one more delta that each query
    searches, and leaves a fragment per pass. Maintenance merges the deltas (the trained base plus at
    most one delta, the base never rewritten), keeps full-text and scalar indexes whole, and compacts
    small fragments once MAX_SMALL_FRAGMENTS have piled up; every row stays findable."""
    from memory.retrieval.search import search_evidence
    from memory.store.indexes import (
        MAX_SMALL_FRAGMENTS,
        SCALAR_INDEXES,
        ensure_scalar_indexes,
        ensure_vector_index,
        maintain,
        trained_rows,
        vector_index_segments,
    )

    _add_screens(store, 200, 0)
    assert ensure_vector_index(store.evidence, min_rows=100) == "built"
    ensure_scalar_indexes(store.evidence, SCALAR_INDEXES["evidence"], force=True)
    base = next(ix for ix in store.evidence.to_lance().list_indices() if ix["name"] == "vector_idx")
    passes = MAX_SMALL_FRAGMENTS + 3
    most_fragments = 0
    for k in range(passes):
        _add_screens(store, 5, 200 + 5 * k)
        report = maintain(store, tables=["evidence"], train=False)["evidence"]
        assert report["vector_segments"] == 2, report
        most_fragments = max(most_fragments, len(store.evidence.to_lance().get_fragments()))
        for ix in store.evidence.list_indices():
            stats = store.evidence.index_stats(ix.name)
            assert stats.num_unindexed_rows == 0, (ix.name, stats)
            if ix.name != "vector_idx":
                assert stats.num_indices == 1, (ix.name, stats)
    segments = [ix for ix in store.evidence.to_lance().list_indices() if ix["name"] == "vector_idx"]
    assert base["uuid"] in {ix["uuid"] for ix in segments}  # the trained base was not rewritten
    assert trained_rows(store.evidence) == 200
    assert ensure_vector_index(store.evidence, min_rows=100) is None  # nothing to retrain
    assert vector_index_segments(store.evidence) == 2
    assert most_fragments <= MAX_SMALL_FRAGMENTS + 1, most_fragments  # without compaction: passes + 1
    for item in (7, 203, 200 + 5 * passes - 1):  # in the base, the first pass, the last pass
        hits = search_evidence(store, f"notes on topic {item % 7} and item {item}", scopes=["work"])
        assert hits and hits[0].text.startswith(f"Screen {item}:"), (item, [h.text for h in hits[:3]])


def test_vector_index_with_many_deltas_is_retrained_by_the_scheduled_pass(store):
    """A store that LanceDB's optimize() maintained (older versions) can hold many deltas: the scheduled
    maintenance retrains past MAX_VECTOR_DELTAS, back to one segment, and every row is still found."""
    from memory.retrieval.search import search_evidence
    from memory.store.indexes import MAX_VECTOR_DELTAS, ensure_vector_index, vector_index_segments

    _add_screens(store, 200, 0)
    assert ensure_vector_index(store.evidence, min_rows=100) == "built"
    for k in range(MAX_VECTOR_DELTAS + 1):
        _add_screens(store, 5, 200 + 5 * k)
        store.evidence.optimize()  # LanceDB's own pass: one more delta each time
    segments = vector_index_segments(store.evidence)
    assert segments > MAX_VECTOR_DELTAS, segments  # precondition: LanceDB still appends deltas
    assert ensure_vector_index(store.evidence, min_rows=100) == "retrained"
    assert vector_index_segments(store.evidence) == 1
    assert ensure_vector_index(store.evidence, min_rows=100) is None
    hits = search_evidence(store, "notes on topic 3 and item 213", scopes=["work"])
    assert hits and hits[0].text.startswith("Screen 213:")  # rows of every delta are still found


def test_maintenance_without_pylance_falls_back_to_lancedb_optimize(store, monkeypatch, caplog):
    """A bundle that missed the module still folds new rows in, and says what is wrong."""
    import builtins

    from memory.store.indexes import maintain, vector_index_rows

    real_import = builtins.__import__

    def no_lance(name, *args, **kwargs):
        if name == "lance" or name.startswith("lance."):
            raise ImportError("No module named 'lance'")
        return real_import(name, *args, **kwargs)

    _add_screens(store, 120, 0)
    from memory.store.indexes import ensure_vector_index

    assert ensure_vector_index(store.evidence, min_rows=100) == "built"
    _add_screens(store, 5, 120)
    monkeypatch.setattr(builtins, "__import__", no_lance)
    report = maintain(store, tables=["evidence"], train=False)["evidence"]
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert report["fallback"] == "lancedb optimize"
    assert vector_index_rows(store.evidence) == (125, 0)
    assert "pylance is missing" in caplog.text


def test_maintenance_stops_between_commits_and_the_next_pass_finishes(store):
    """At quit the scheduler's stop event ends maintenance before its next commit: nothing written is
    lost, the report says where it stopped, and the next pass does the rest."""
    import threading

    from memory.consolidation.scheduler import job_optimize
    from memory.retrieval.search import search_evidence
    from memory.store.indexes import maintain

    _add_screens(store, 30, 0)
    versions = {n: store.version(n) for n in ("memories", "evidence", "vault")}
    stopped = threading.Event()
    stopped.set()
    assert maintain(store, stop=stopped) == {"stopped": "before memories"}
    assert {n: store.version(n) for n in ("memories", "evidence", "vault")} == versions  # no commit
    assert job_optimize(store, stopped) == "stopped before memories"

    report = maintain(store, stop=StopAfter(8))  # memories: 6 steps; evidence: its start and vector index
    assert report["stopped"].startswith("in evidence, before"), report
    assert "memories" in report and "vault" not in report
    hits = search_evidence(store, "notes on topic 3 and item 17", scopes=["work"])
    assert hits and hits[0].text.startswith("Screen 17:")  # every row still there and found

    done = maintain(store)
    assert "stopped" not in done and set(done) == {"memories", "evidence", "vault"}
    for ix in store.evidence.list_indices():
        assert store.evidence.index_stats(ix.name).num_unindexed_rows == 0, ix.name
