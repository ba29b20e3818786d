"""Winners fetched by row address: the rows the ranking legs filtered, or nothing stale."""

from __future__ import annotations

from memory.erasure import forget
from memory.reads import Leg
from memory.search import fetch_rows, search_memories


def _addresses(store, where):
    rows = store.reader.run(Leg(store.memories.name, where, ("id",), 100, row_ids=True))[0]
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
    rows = fetch_rows(store, store.memories, [keep, edit, reject, gone], where, ["id", "text", "status"], addresses)
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
    rows = fetch_rows(store, store.memories, ids, where, ["id", "text"], addresses)
    assert set(rows) == set(ids)
    assert {r["text"] for r in rows.values()} == {f"Note {i} about the lighthouse key." for i in range(3)}


def test_search_hits_carry_no_row_address(store):
    store.add_memory("The lighthouse keeper's spare key is under the blue flowerpot.", scope="work")
    hits = search_memories(store, "lighthouse spare key", scopes=["work"])
    assert hits and all("_rowid" not in h.row and "_rowid" not in h.to_dict() for h in hits)
