"""Forget means gone: the content exists in no file under the data dir after delete + purge."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memory.errors import NotFoundError
from memory.retrieval.search import search_evidence, search_memories
from memory.store.core import Store
from memory.store.erasure import forget, forget_where
from tests.conftest import files_containing

PHRASE = "zanzibar-quokka-7731 ledger migration"


def test_deleted_memory_leaves_no_bytes_behind(store, mirador_home):
    keep = store.add_memory("Unrelated fact about coffee", scope="work")
    row = store.add_memory(f"We decided the {PHRASE} happens in May", scope="work")
    store.update_memory(row["id"], text=f"We decided the {PHRASE} happens in June")
    store.optimize()
    assert files_containing(mirador_home, "zanzibar-quokka-7731"), "precondition: phrase is on disk"

    result = forget(store, [row["id"]])
    assert result["deleted"] == 1 and result["purged"]
    assert files_containing(mirador_home, "zanzibar-quokka-7731") == []
    assert files_containing(mirador_home, "quokka") == []
    # the row is gone from every read path, the rest survives, and a tombstone remains
    with pytest.raises(NotFoundError):
        store.get(row["id"])
    assert not [h for h in search_memories(store, "zanzibar quokka ledger migration") if h.id == row["id"]]
    assert store.get(keep["id"])["text"] == "Unrelated fact about coffee"
    stone = store.rows("tombstones", local=True)
    assert [s["id"] for s in stone] == [row["id"]] and len(stone[0]["fingerprint"]) == 64
    # who and when stay in the audit log, the content does not
    actions = [a["action"] for a in store.rows("audit") if a["entity_id"] == row["id"]]
    assert actions == ["create", "update", "delete"]
    # reopening the store does not bring anything back
    again = Store(mirador_home)
    assert again.count("memory", local=True) == 1


def test_deleted_evidence_and_its_frame_are_gone(store, mirador_home):
    frames = mirador_home / "frames"
    frames.mkdir()
    frame = frames / "f1.webp"
    frame.write_bytes(b"RIFF fake webp with " + PHRASE.encode())
    ev = store.add_evidence(f"terminal shows {PHRASE}", source="screen", app="xterm", frame_path=str(frame))
    forget(store, [ev["id"]])
    assert not frame.exists()
    assert files_containing(mirador_home, "zanzibar-quokka-7731") == []
    assert search_evidence(store, "zanzibar quokka") == []


def test_unknown_id_deletes_nothing(store):
    row = store.add_memory("stays put")
    with pytest.raises(NotFoundError, match="nothing was deleted"):
        forget(store, [row["id"], "mem_000000000000000000000000"])
    assert store.get(row["id"])["text"] == "stays put"


def test_bulk_forget_by_scope_app_and_time(store, mirador_home):
    t0 = datetime(2024, 5, 1, 12, 0)
    store.add_memory("work memory alphaqx17", scope="work/acme")
    store.add_memory("personal memory betaqx17", scope="personal")
    store.add_evidence("slack message gammaqx17", app="Slack", source="screen", captured_at=t0)
    store.add_evidence("editor text deltaqx17", app="Code", source="screen", captured_at=t0 + timedelta(hours=2))
    store.add_evidence("editor text epsilonqx17", app="Code", source="screen", captured_at=t0 + timedelta(days=2))

    r = forget_where(store, app="Slack")
    assert r["by_kind"] == {"evidence": 1}
    r = forget_where(store, since=t0 + timedelta(hours=1), until=t0 + timedelta(hours=3))
    assert r["by_kind"].get("evidence") == 1
    r = forget_where(store, scope="work")
    assert r["by_kind"].get("memory") == 1
    texts = {e["text"] for e in store.list("evidence")} | {m["text"] for m in store.list("memory", statuses=[])}
    assert texts == {"editor text epsilonqx17", "personal memory betaqx17"}
    for gone in ("gammaqx17", "deltaqx17", "alphaqx17"):
        assert files_containing(mirador_home, gone) == [], gone


def test_is_tombstoned_by_fingerprint(store):
    from memory.store.fingerprint import fingerprint

    row = store.add_memory("The wifi password rotates monthly")
    forget(store, [row["id"]])
    assert store.is_tombstoned(fingerprint("the WiFi password rotates monthly!"))
    assert not store.is_tombstoned(fingerprint("something else"))


def test_a_row_forgotten_from_a_large_fragment_leaves_no_deleted_row_on_disk(store, mirador_home, monkeypatch):
    from memory.store import erasure
    from memory.store.core import MemorySpec

    specs = [MemorySpec(text=f"Routine fact {i} about the weekly report.", scope="work") for i in range(400)]
    specs.insert(123, MemorySpec(text=f"We decided the {PHRASE} happens in May", scope="work"))
    rows = store.add_memories(specs)  # one fragment: a single deleted row is 0.25% of it
    store.optimize()

    def deletion_files():
        return sorted(p.name for p in (mirador_home / "lancedb" / "memories.lance").rglob("_deletions/*"))

    rewrite = erasure._rewrite_fragments_with_deletions
    monkeypatch.setattr(erasure, "_rewrite_fragments_with_deletions", lambda *a: 0)
    forget(store, [rows[0]["id"]])
    assert deletion_files()  # without the rewrite, LanceDB's compaction keeps the deleted row's bytes
    monkeypatch.setattr(erasure, "_rewrite_fragments_with_deletions", rewrite)
    forget(store, [rows[123]["id"]])
    assert deletion_files() == []  # no fragment holds a deleted row: both are physically gone
    assert files_containing(mirador_home, "zanzibar-quokka-7731") == []
    assert store.count("memory", local=True) == 399
    assert [h.text for h in search_memories(store, "routine fact 7 weekly report", limit=1)] == \
        ["Routine fact 7 about the weekly report."]


def test_purge_after_a_forget_rebuilds_only_the_tables_it_changed(store, mirador_home, monkeypatch):
    from memory.store import erasure
    rebuilt = []
    fts = erasure.ensure_fts
    monkeypatch.setattr(erasure, "ensure_fts", lambda t, col, **kw: rebuilt.append(t.name) or fts(t, col, **kw))
    mem = store.add_memory(f"We decided the {PHRASE} happens in May", scope="work")
    ev = store.add_evidence(f"terminal shows {PHRASE}", source="screen", app="xterm")
    forget(store, [mem["id"]])
    assert set(rebuilt) == {"memories"}  # the evidence indexes are left alone
    assert files_containing(mirador_home, "zanzibar-quokka-7731"), "the evidence row is still there"
    rebuilt.clear()
    forget(store, [ev["id"]])
    assert set(rebuilt) == {"evidence"}
    assert files_containing(mirador_home, "zanzibar-quokka-7731") == []


# ---- evidence deletes: the provenance cascade (issue 30) -------------------------------------------

def _last_hour():
    from memory.store.audit import utcnow

    return utcnow() - timedelta(hours=1)


def test_last_hour_delete_keeps_hand_written_memories_and_the_vault(store, mirador_home):
    from memory.store.erasure import plan_forget_where

    checklist = store.add_memory("Release checklist: tag, build, sign, upload", scope="work")
    dentist = store.add_memory("Dentist appointment Tuesday 3pm", type="episodic", scope="personal")
    secret = store.add_memory("Staging database password", type="vault", value="hunter2-vault", scope="work")
    ev = store.add_evidence(f"terminal shows {PHRASE}", source="screen", app="xterm")
    derived = store.add_memory(f"The {PHRASE} is planned", provenance=[ev["id"]], origin="extractor",
                               status="candidate")
    before = store.count("memory", local=True)

    plan = plan_forget_where(store, since=_last_hour())
    assert plan.counts() == {"evidence": 1, "frames": 0, "memories": 1, "review": 0, "vault": 0}
    assert store.count("memory", local=True) == before, "a plan changes nothing"
    assert "1 memory derived only from them" in plan.describe()
    assert "vault entries are kept" in plan.describe()

    r = forget_where(store, since=_last_hour())
    assert r["by_kind"] == {"evidence": 1, "memory": 1} and r["reviewed"] == 0
    assert store.get(checklist["id"])["text"] == checklist["text"]
    assert store.get(dentist["id"])["text"] == dentist["text"]
    assert store.reveal(secret["id"]) == "hunter2-vault"
    with pytest.raises(NotFoundError):
        store.get(derived["id"])
    assert files_containing(mirador_home, "zanzibar-quokka-7731") == []


def test_app_delete_leaves_no_memory_derived_only_from_it_and_blocks_re_extraction(store, mirador_home):
    from memory.consolidation.extraction import Extractor, run_extraction
    from tests.memory.test_extraction import FakeLLM, mem

    slack = "Slack: we agreed the quokka-harbour launch moves to Friday"
    store.add_evidence(slack, source="screen", app="Slack")
    run_extraction(store, extractor=Extractor(llm=FakeLLM([mem("semantic", "launch date",
                                                                "The quokka-harbour launch moves to Friday.")]),
                                              engine="llm"))
    code = store.add_evidence("Code: the build uses Python 3.11", source="screen", app="Code")
    run_extraction(store, extractor=Extractor(llm=FakeLLM([mem("semantic", "python", "The build uses Python 3.11.")]),
                                              engine="llm"))
    hand = store.add_memory("Call the quokka-harbour venue about parking")  # hand-made: no provenance
    mems = store.list("memory", statuses=[])
    assert len(mems) == 3 and any("Friday" in m["text"] for m in mems)

    r = forget_where(store, app="Slack")
    assert r["by_kind"] == {"evidence": 1, "memory": 1}
    left = store.list("memory", statuses=[])
    assert {m["text"] for m in left} == {"The build uses Python 3.11.", hand["text"]}
    assert [m["provenance"] for m in left if m["text"].startswith("The build")] == [[code["id"]]]
    assert files_containing(mirador_home, "moves to Friday") == []
    # The same message captured again is not turned back into the memory the person erased.
    store.add_evidence(slack, source="screen", app="Slack")
    report = run_extraction(store, extractor=Extractor(
        llm=FakeLLM([mem("semantic", "launch date", "The quokka-harbour launch moves to Friday.")]), engine="llm"))
    assert report.skip_reasons.get("the person deleted this memory", 0) == 1
    assert not [m for m in store.list("memory", statuses=[]) if "Friday" in m["text"]]


def test_memory_resting_on_other_evidence_loses_the_deleted_source_and_goes_to_review(store, mirador_home):
    from memory.store.erasure import plan_forget_where

    a = store.add_evidence("Slack: the standup moves to 9:30", source="screen", app="Slack")
    b = store.add_evidence("Calendar: standup 9:30 daily", source="screen", app="Calendar")
    both = store.add_memory("The standup is at 9:30", provenance=[a["id"], b["id"]], origin="extractor")
    # Provenance naming evidence that no longer exists does not keep a memory alive.
    stale = store.add_memory("The standup room is Kestrel", provenance=[a["id"], "evd_000000000000000000000000"],
                             origin="extractor")
    assert store.get(both["id"])["status"] == "active"

    plan = plan_forget_where(store, app="Slack")
    assert plan.counts() == {"evidence": 1, "frames": 0, "memories": 1, "review": 1, "vault": 0}
    assert "1 memory that also rest on other evidence" in plan.describe()
    r = forget_where(store, app="Slack", actor="mcp:claude")
    assert r["reviewed"] == 1 and r["by_kind"] == {"evidence": 1, "memory": 1}
    kept = store.get(both["id"])
    assert kept["status"] == "candidate" and kept["provenance"] == [b["id"]]
    with pytest.raises(NotFoundError):
        store.get(stale["id"])
    audit = [x for x in store.rows("audit") if x["entity_id"] == both["id"]]
    assert audit[-1]["actor"] == "mcp:claude" and a["id"] not in audit[-1]["after"]
    assert store.get(b["id"])["text"] == b["text"]
    assert files_containing(mirador_home, "moves to 9:30") == []


def test_evidence_delete_within_a_scope_leaves_other_scopes_alone(store):
    w = store.add_evidence("Slack work note falconqx", source="screen", app="Slack", scope="work")
    p = store.add_evidence("Slack family note heronqx", source="screen", app="Slack", scope="personal")
    mw = store.add_memory("falconqx memory", provenance=[w["id"]], scope="work", origin="extractor")
    mp = store.add_memory("heronqx memory", provenance=[p["id"]], scope="personal", origin="extractor")
    r = forget_where(store, app="Slack", scope="work")
    assert r["by_kind"] == {"evidence": 1, "memory": 1}
    assert store.get(p["id"]) and store.get(mp["id"])
    with pytest.raises(NotFoundError):
        store.get(mw["id"])


def test_scope_delete_still_erases_memories_vault_and_evidence_in_the_scope(store):
    from memory.store.erasure import plan_forget_where

    store.add_memory("work note ospreyqx", scope="work")
    store.add_memory("Work VPN", type="vault", value="s3cret", scope="work")
    store.add_evidence("work screen ospreyqx", source="screen", app="Code", scope="work")
    keep = store.add_memory("Home vault", type="vault", value="kept", scope="personal")
    plan = plan_forget_where(store, scope="work")
    assert plan.counts() == {"evidence": 1, "frames": 0, "memories": 1, "review": 0, "vault": 1}
    assert "1 vault entry in the scope" in plan.describe()
    r = forget_where(store, scope="work")
    assert r["by_kind"] == {"evidence": 1, "memory": 1, "vault": 1}
    assert store.reveal(keep["id"]) == "kept"


def test_evidence_delete_counts_frames_and_refuses_bad_requests(store, mirador_home):
    from memory.errors import InputError
    from memory.store.erasure import plan_forget_where

    frames = mirador_home / "frames"
    frames.mkdir()
    f = frames / "f2.webp"
    f.write_bytes(b"RIFF")
    store.add_evidence("screen with a frame", source="screen", app="xterm", frame_path=str(f))
    assert plan_forget_where(store, app="xterm").frames == 1
    assert plan_forget_where(store, app="NoSuchApp").describe() == "Nothing matches: nothing will be erased."
    with pytest.raises(InputError, match="refusing to erase everything"):
        plan_forget_where(store)
    with pytest.raises(InputError, match="may not delete"):
        forget_where(store, app="xterm", actor="extractor")
    assert f.exists()
    assert forget_where(store, app="xterm")["frames_removed"] == 1 and not f.exists()
