"""Winners fetched by row address: the rows the ranking legs filtered, or nothing stale."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from memory.retrieval.search import fetch_rows, search_evidence, search_memories
from memory.store import filters as F
from memory.store import rowcache
from memory.store import tables as T
from memory.store.core import EvidenceSpec
from memory.store.erasure import forget
from memory.store.reads import Leg, Reader, _event_loop


def _addresses(store, where):
    rows = store.reader.run(Leg("memories", where, ("id",), 100, row_ids=True))[0]
    return {r["id"]: r["_rowid"] for r in rows}


def test_rows_changed_after_the_legs_are_never_returned_stale(store):
    keep, edit, reject, gone = (store.add_memory(f"Release note {i}: billing ships in March.", scope="work")["id"]
                                for i in range(4))
    where = store.where("memory", scopes=["work"])
    addresses = _addresses(store, where)
    assert set(addresses) == {keep, edit, reject, gone}
    # Between the legs and the fetch: an edit (a new row version), a rejection, a forget.
    store.update_memory(edit, text="Release note: billing ships in April.")
    store.set_status(reject, "rejected")
    forget(store, [gone], purge_now=False)  # purging compacts, which moves every row (next test)

    legs = []
    run = store.reader.run
    store.reader.run = lambda *ls: legs.extend(ls) or run(*ls)
    rows = fetch_rows(store, "memories", [keep, edit, reject, gone], where, ["id", "text", "status"], addresses)
    assert legs[0].take is not None and len(legs[0].take) == 4  # by address first...
    assert legs[1].take is None and keep not in legs[1].where  # ...then by id, for the three changed rows only
    assert set(rows) == {keep, edit}  # rejected and forgotten rows do not come back
    assert rows[edit]["text"] == "Release note: billing ships in April."  # the current version, not the old one
    assert rows[keep]["text"].startswith("Release note 0")


def test_fetch_by_address_survives_compaction(store):
    ids = [store.add_memory(f"Note {i} about the lighthouse key.", scope="work")["id"] for i in range(3)]
    where = store.where("memory", scopes=["work"])
    addresses = _addresses(store, where)
    store.optimize()  # compaction rewrites every row at a new address
    rows = fetch_rows(store, "memories", ids, where, ["id", "text"], addresses)
    assert set(rows) == set(ids)
    assert {r["text"] for r in rows.values()} == {f"Note {i} about the lighthouse key." for i in range(3)}


def test_search_hits_carry_no_row_address(store):
    store.add_memory("The lighthouse keeper's spare key is under the blue flowerpot.", scope="work")
    hits = search_memories(store, "lighthouse spare key", scopes=["work"])
    assert hits and all("_rowid" not in h.row and "_rowid" not in h.to_dict() for h in hits)


# ---- ranking legs served from the row cache (memory/store/rowcache.py) ----------------------------------

_NOW = datetime(2024, 3, 14, 15, 0)


def _turns(store, n=12, scope="work", start=0):
    specs = [EvidenceSpec(text=f"Turn {i}: the lighthouse {'key' if i % 2 else 'lamp'} needs {i} new bolts.",
                          source="audio", speaker=("Sam" if i % 3 else "Priya"), scope=scope,
                          captured_at=_NOW - timedelta(minutes=60 - i)) for i in range(start, start + n)]
    return [r["id"] for r in store.add_evidence_batch(specs)]


def _asked(monkeypatch):
    """The legs LanceDB is really asked (after the reader took out the cached columns)."""
    asked = []
    query = Reader._query
    monkeypatch.setattr(Reader, "_query", staticmethod(lambda t, leg: asked.append(leg) or query(t, leg)))
    return asked


def _results(store):
    ev = [(h.id, round(h.score, 9), h.row["speaker"]) for h in
          search_evidence(store, "which lighthouse key did Sam mention", scopes=["work"], limit=8, now=_NOW)]
    mem = [(h.id, round(h.score, 9)) for h in search_memories(store, "lighthouse bolts", scopes=["work"], limit=20)]
    return ev, mem


def test_ranking_legs_ask_lancedb_for_scores_only_and_rank_as_before(store, monkeypatch):
    _turns(store)
    for i in range(5):
        store.add_memory(f"The lighthouse needs {i} new bolts on the north side.", scope="work")
    store.reader.warm(T.MEMORIES, T.EVIDENCE)
    asked = _asked(monkeypatch)
    cached = _results(store)
    ranking = [leg for leg in asked if leg.table != T.VAULT and (leg.vector is not None or leg.text is not None)]
    assert ranking and all(set(leg.cols) <= {"_distance", "_score"} for leg in ranking)
    store.reader = Reader(store.home / "lancedb", row_cache=False, sealer=store.sealer)
    assert cached == _results(store) and cached[0]


def test_rows_written_after_the_cache_was_built_are_found(store):
    _turns(store)
    store.reader.warm(T.EVIDENCE)
    new = store.add_evidence_batch([EvidenceSpec(text="Priya: the foghorn schedule moved to Tuesdays.",
                                                 source="audio", speaker="Priya", scope="work",
                                                 captured_at=_NOW)])[0]["id"]
    hits = search_evidence(store, "foghorn schedule", scopes=["work"], limit=3, now=_NOW)
    assert hits[0].id == new and hits[0].row["speaker"] == "Priya"


def test_forgotten_rows_leave_the_cache_and_never_come_back(store):
    ids = _turns(store)
    store.reader.warm(T.EVIDENCE)
    cache = store.reader._caches[T.EVIDENCE]
    assert cache.size() == len(ids)
    forget(store, ids[:3], purge_now=False)
    assert cache.size() == 0  # not a single id of the forgotten rows stays in memory
    found = {h.id for h in search_evidence(store, "lighthouse key bolts", scopes=["work"], limit=20, now=_NOW)}
    assert found and not found & set(ids[:3])
    forget(store, ids[3:5])  # with the purge: compaction moves every row
    found = {h.id for h in search_evidence(store, "lighthouse key bolts", scopes=["work"], limit=20, now=_NOW)}
    assert found == set(ids[5:])


def test_compaction_moves_addresses_and_the_cache_rebuilds(store, monkeypatch):
    monkeypatch.setattr(rowcache, "REBUILD_MIN_INTERVAL_S", 0.0)
    monkeypatch.setattr(rowcache, "REBUILD_MIN_LOOKUP", 5)
    ids = _turns(store, 6) + _turns(store, 6, start=6)  # two fragments
    store.reader.warm(T.EVIDENCE)
    cache = store.reader._caches[T.EVIDENCE]
    before = set(cache._addrs.tolist())
    store.commit(lambda: store.evidence.optimize())  # compaction: the two fragments become one
    hits = search_evidence(store, "lighthouse key bolts", scopes=["work"], limit=20, now=_NOW)
    assert {h.id for h in hits} == set(ids)  # every row found at its new address, by a take
    for _ in range(100):  # the lookup that missed most addresses asked for a rebuild, in the background
        if cache._addrs is not None and not before & set(cache._addrs.tolist()):
            break
        time.sleep(0.05)
    assert len(cache._addrs) == len(ids) and not before & set(cache._addrs.tolist())


def test_a_row_deleted_between_its_leg_and_the_fill_is_dropped(store):
    ids = _turns(store, 4)
    where = store.where("evidence", scopes=["work"])
    leg = Leg(T.EVIDENCE, where, ("id", "speaker", "_distance"), 10,
              vector=store.embedder.embed_query("lighthouse"), row_ids=True)
    rows = Reader(store.home / "lancedb", row_cache=False, sealer=store.sealer).run(leg)[0]  # ids and addresses, as a leg saw them
    store.commit(lambda: store.evidence.delete(F.id_is(ids[0])))
    reader, out = store.reader, [[{k: r[k] for k in ("_rowid", "_distance")} for r in rows]]
    cache = reader._caches[T.EVIDENCE]
    asyncio.run_coroutine_threadsafe(reader._fill([leg], [cache], out), _event_loop()).result()
    assert {r["id"] for r in out[0]} == set(ids[1:])
    store.sealer.open_rows(T.EVIDENCE, out[0])  # the fill brings columns as stored; Reader.run opens them
    assert all(r["speaker"] in ("Sam", "Priya") for r in out[0])


def test_row_cache_bookkeeping(monkeypatch):
    monkeypatch.setattr(rowcache, "SPILL_MAX", 3)
    cache = rowcache.RowCache(("id",))
    scanned = pa.table({"id": ["c", "a", "b"], "_rowid": pa.array([30, 10, 20], pa.uint64())})
    cache.set_base(scanned, cache.build_due(force=True))
    found, missing = cache.lookup([20, 99, 10])
    assert found == {20: {"id": "b"}, 10: {"id": "a"}} and missing == [99]
    epoch = cache.epoch
    cache.add([{"_rowid": 99, "id": "z"}], epoch)
    assert cache.lookup([99]) == ({99: {"id": "z"}}, [])
    cache.add([{"_rowid": i, "id": str(i)} for i in range(100, 103)], epoch)  # past SPILL_MAX: spill dropped
    assert cache.lookup([99])[1] == [99] and cache.build_due(force=False) is None  # built < 30 s ago
    cache.clear()
    cache.add([{"_rowid": 5, "id": "old"}], epoch)  # read before the clear: not kept
    cache.set_base(scanned, epoch)  # a build started before the clear: thrown away
    assert cache.size() == 0 and cache.lookup([5, 10]) == ({}, [5, 10])
    many = [{"_rowid": i, "id": str(i)} for i in range(40)]
    cache.set_base(pa.Table.from_pylist(many), cache.build_due())
    _, missing = cache.lookup(list(range(1000, 1030)))  # most addresses moved: a rebuild is due
    assert len(missing) == 30 and cache._want_build


def test_every_kind_of_row_change_moves_the_row_to_a_new_address(store):
    # The row cache rests on this: what an address names never changes (memory/store/rowcache.py).
    ids = [store.add_memory(f"Note {i} about the lighthouse.", scope="work")["id"] for i in range(4)]
    where = store.where("memory", scopes=["work"])
    before = _addresses(store, where)
    store.commit(lambda: store.memories.update(where=F.id_is(ids[0]), values={"salience": 0.1}))
    store.commit(lambda: store.memories.update(where=F.id_is(ids[1]), values_sql={"salience": "salience * 0.5"}))
    store.update_memory(ids[2], text="Note 2 about the lighthouse, edited.")  # merge_insert of the whole row
    after = _addresses(store, where)
    assert [before[i] != after[i] for i in ids] == [True, True, True, False]


def test_memory_hits_with_cached_columns_need_no_fetch_and_match_the_table(store, monkeypatch):
    """The MCP search's and recall's memory columns come from the row cache with the legs' scores:
    no leg reads them and no fetch follows, and the hits equal the uncached reader's."""
    from memory.mcp.tools import MEMORY_BRIEF_COLS
    from memory.retrieval.recall import _MEMORY_READ

    for i in range(6):
        store.add_memory(f"The lighthouse needs {i} new bolts on the north side.", scope="work",
                         title=f"bolts {i}")
    store.reader.warm(T.MEMORIES)
    asked = _asked(monkeypatch)

    def hits():
        return [[(h.id, round(h.score, 9), h.to_dict()) for h in
                 search_memories(store, "lighthouse bolts", scopes=["work"], limit=limit, cols=cols)]
                for cols, limit in ((MEMORY_BRIEF_COLS, 10), (_MEMORY_READ, 40))]

    cached = hits()
    mem_legs = [leg for leg in asked if leg.table == T.MEMORIES]
    assert mem_legs and all(set(leg.cols) <= {"_distance", "_score"} and leg.take is None for leg in mem_legs)
    store.reader = Reader(store.home / "lancedb", row_cache=False, sealer=store.sealer)
    assert cached == hits() and cached[0][0][2]["title"].startswith("bolts")


def test_another_process_forgetting_drops_this_processs_cached_text(store, mirador_home):
    """The MCP server is another process: its cache holds memory text by address. When anything is
    forgotten (the tombstones table moves), its next search drops the whole cache first."""
    from memory.mcp.tools import MEMORY_BRIEF_COLS
    from memory.store.core import Store

    ids = [store.add_memory(f"The harbour code {i} is 47{i}1.", scope="work")["id"] for i in range(4)]
    other = Store(mirador_home)  # stands in for the MCP server process: its own reader and caches
    other.reader.warm(T.MEMORIES)
    assert search_memories(other, "harbour code", scopes=["work"], cols=MEMORY_BRIEF_COLS)
    cache = other.reader._caches[T.MEMORIES]
    assert ids[0] in cache._base["id"].to_pylist()
    forget(store, [ids[0]], purge_now=False)  # no compaction: addresses stay, only the forget tells
    found = search_memories(other, "harbour code", scopes=["work"], cols=MEMORY_BRIEF_COLS)
    assert ids[0] not in {h.id for h in found} and found
    held = (cache._base["text"].to_pylist() if cache._base is not None else []) + \
        [r["text"] for r in cache._spill.values()]
    assert not any("47" + "01" in t for t in held)  # the forgotten text left this process's memory


@pytest.mark.parametrize("limit", ["rows", "bytes, sampled", "bytes, scanned"])
def test_a_memory_table_too_large_for_the_cache_is_read_from_the_table(store, monkeypatch, limit):
    from memory.mcp.tools import MEMORY_BRIEF_COLS

    for i in range(5):
        store.add_memory(f"Ferry timetable {i}: the 7:1{i} boat leaves from pier 2. " + "Long memory. " * 40,
                         scope="work")
    if limit == "rows":
        monkeypatch.setattr("memory.store.reads.BASE_MAX_ROWS_BY_TABLE", {T.MEMORIES: 3})
    else:  # 5 rows of ~600 characters each: over 2 kB; the estimate from 2 rows, or the whole scan, says so
        monkeypatch.setattr("memory.store.reads.BASE_MAX_BYTES", 2_000)
        monkeypatch.setattr("memory.store.reads.SIZE_SAMPLE_ROWS", 2 if limit == "bytes, sampled" else 1_000)
    store.reader = Reader(store.home / "lancedb", forgets=T.TOMBSTONES, sealer=store.sealer)
    assert store.reader.covers(T.MEMORIES, MEMORY_BRIEF_COLS)  # not known before the first build
    store.reader.warm(T.MEMORIES)
    assert not store.reader.covers(T.MEMORIES, MEMORY_BRIEF_COLS)  # over the limit: no text kept in memory
    cache = store.reader._caches[T.MEMORIES]
    assert cache._base is None
    asked = _asked(monkeypatch)
    hits = search_memories(store, "ferry timetable pier", scopes=["work"], cols=MEMORY_BRIEF_COLS)
    assert len(hits) == 5 and all(h.row["text"].startswith("Ferry timetable") for h in hits)
    assert any("text" in leg.cols for leg in asked if leg.table == T.MEMORIES)  # the legs read the columns


# ---- vector legs of small unindexed tables, answered from kept vectors (rowcache.FlatSnapshot) ----------


def _memory_vector_legs(store, query="lighthouse bolts"):
    qv = store.embedder.embed_query(query)
    wheres = [store.where("memory", scopes=["work"], statuses=["candidate", "active"]),
              store.where("memory", scopes=["work/acme"], types=["semantic"]), None]
    return [Leg(T.MEMORIES, w, ("id", "_distance"), limit, vector=qv, row_ids=True) for w in wheres for limit in (3, 50)]


def _same_rows(a, b):
    return [r["id"] for r in a] == [r["id"] for r in b] and \
        all(abs(x["_distance"] - y["_distance"]) < 1e-5 for x, y in zip(a, b, strict=True))


def test_memory_vector_legs_come_from_kept_vectors_and_match_lancedb(store, monkeypatch):
    ids = [store.add_memory(f"The lighthouse needs {i} new bolts on the {side} side.", scope=scope, type=kind)["id"]
           for i, (side, scope, kind) in enumerate([("north", "work", "semantic"), ("south", "work/acme", "semantic"),
                                                    ("east", "work/acme", "episodic"), ("west", "home", "semantic")])]
    store.set_status(ids[0], "rejected")
    plain = Reader(store.home / "lancedb", row_cache=False, sealer=store.sealer)  # every leg asked of LanceDB
    asked = _asked(monkeypatch)
    legs = _memory_vector_legs(store)
    mine = [store.reader.run(leg)[0] for leg in legs]
    assert not [leg for leg in asked if leg.table == T.MEMORIES and leg.vector is not None]  # LanceDB not asked
    assert all(_same_rows(rows, plain.run(leg)[0]) for rows, leg in zip(mine, legs, strict=True))
    assert ids[0] not in {r["id"] for r in store.reader.run(legs[0])[0]}  # the filter holds: rejected left out
    assert {r["id"] for r in store.reader.run(legs[2])[0]} == {ids[1]}  # work/acme semantic only

    # Every write moves the table's version: the next leg scans again, and sees exactly what LanceDB sees.
    new = store.add_memory("The lighthouse bolts arrived on Monday.", scope="work")["id"]
    store.update_memory(ids[2], text="The lighthouse east side needs no bolts after all.")
    forget(store, [ids[3]], purge_now=False)
    for leg in _memory_vector_legs(store, "lighthouse bolts arrived"):
        mine, theirs = store.reader.run(leg)[0], plain.run(leg)[0]
        assert _same_rows(mine, theirs) and ids[3] not in {r["id"] for r in mine}
    assert new in {r["id"] for r in store.reader.run(_memory_vector_legs(store)[5])[0]}


def test_forgetting_drops_the_kept_vectors(store, mirador_home):
    from memory.store.core import Store

    ids = [store.add_memory(f"The harbour code {i} is 47{i}1.", scope="work")["id"] for i in range(3)]
    flats = store.reader._flats[T.MEMORIES]
    store.reader.run(_memory_vector_legs(store)[0])
    assert flats.size() == 3
    forget(store, [ids[0]], purge_now=False)
    assert flats.size() == 0 and not flats._masks  # this process forgot: not one vector of it stays
    other = Store(mirador_home)  # another process (the MCP server) with its own kept vectors
    other.reader.run(_memory_vector_legs(other)[0])
    assert other.reader._flats[T.MEMORIES].size() == 2
    forget(store, [ids[1]], purge_now=False)
    rows = other.reader.run(_memory_vector_legs(other)[0])[0]
    assert {r["id"] for r in rows} == {ids[2]}
    assert other.reader._flats[T.MEMORIES].size() == 0  # its next search saw the forget and dropped them all
    assert {r["id"] for r in other.reader.run(_memory_vector_legs(other)[0])[0]} == {ids[2]}
    assert other.reader._flats[T.MEMORIES].size() == 1  # read again: only what is left


@pytest.mark.parametrize("why", ["too many rows", "indexed"])
def test_a_table_too_large_or_indexed_is_searched_by_lancedb(store, monkeypatch, why):
    from memory.store import indexes

    for i in range(6):
        store.add_memory(f"Ferry timetable {i}: the boat leaves from pier {i}.", scope="work")
    if why == "too many rows":
        monkeypatch.setattr("memory.store.reads.FLAT_TABLES", {T.MEMORIES: 5})
        store.reader = Reader(store.home / "lancedb", forgets=T.TOMBSTONES, sealer=store.sealer)
    else:
        assert indexes.ensure_vector_index(store.memories, min_rows=1, force=True)
    asked = _asked(monkeypatch)
    leg = _memory_vector_legs(store, "ferry pier")[1]
    rows = store.reader.run(leg)[0]
    assert len(rows) == 6 and [a for a in asked if a.table == T.MEMORIES and a.vector is not None]
    flats = store.reader._flats[T.MEMORIES]
    assert flats.eligible is not None and not flats.eligible[1] and flats.size() == 0


def test_kept_vectors_bookkeeping(monkeypatch):
    def scan(addrs, vectors):
        return pa.table({"_rowid": pa.array(addrs, pa.uint64()), "vector": pa.array(vectors, pa.list_(pa.float32(), 2))})

    flats = rowcache.FlatVectors(100)
    flats.set_base(scan([30, 10, 20], [[0.0, 2.0], [1.0, 0.0], [1.0, 1.0]]), flats.epoch)
    where = flats.set_matching("w", 7, np.array([30, 10, 99], dtype=np.uint64), flats.epoch)
    assert flats.matching("w", 7).tolist() == [10, 30, 99] and flats.matching("w", 8) is None  # per version
    assert flats.unknown(where).tolist() == [99]  # written after the full scan
    assert flats.search([1.0, 0.0], where, 5) is None  # a vector not kept: LanceDB answers
    flats.add(scan([99], [[-1.0, 0.0]]), flats.epoch)
    got = flats.search([2.0, 0.0], where, 5).to_pylist()
    assert [r["_rowid"] for r in got] == [10, 30, 99]
    assert [round(r["_distance"], 6) for r in got] == [0.0, 1.0, 2.0]
    assert [r["_rowid"] for r in flats.search([1.0, 0.0], where, 2).to_pylist()] == [10, 30]
    flats.add(pa.table({"_rowid": pa.array([5], pa.uint64()), "vector": pa.array([None], pa.list_(pa.float32(), 2))}),
              flats.epoch)
    assert flats.unknown(np.array([5], dtype=np.uint64)).size == 0  # known: a row without a usable vector...
    assert flats.search([1.0, 0.0], np.array([5, 10], dtype=np.uint64), 5) is None  # ...is left to LanceDB
    epoch = flats.epoch
    flats.clear()
    flats.add(scan([40], [[1.0, 0.0]]), epoch)  # read before a forget cleared the vectors: not kept
    flats.set_matching("w", 7, np.array([40], dtype=np.uint64), epoch)
    assert flats.size() == 0 and flats.matching("w", 7) is None
    monkeypatch.setattr(rowcache, "FLAT_SPILL_MAX", 1)
    flats.set_base(scan([1], [[1.0, 0.0]]), flats.epoch)
    assert not flats.spill_full(1) and flats.spill_full(2)  # past the spill: scan everything again
