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
    stone = store.tombstones.to_arrow().to_pylist()
    assert [s["id"] for s in stone] == [row["id"]] and len(stone[0]["fingerprint"]) == 64
    # who and when stay in the audit log, the content does not
    actions = [a["action"] for a in store.audit.to_arrow().to_pylist() if a["entity_id"] == row["id"]]
    assert actions == ["create", "update", "delete"]
    # reopening the store does not bring anything back
    again = Store(mirador_home)
    assert again.memories.count_rows() == 1


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
    assert store.memories.count_rows() == 399
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
