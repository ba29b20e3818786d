"""One row per id in a bucket's tables, whatever concurrent writers did (issue 41).

Lance does not treat two concurrent inserts of one id as a conflict: a merge that inserts "only while the id is
absent" evaluates that against the version it read, so two devices (or a device and the other process of
another home) that insert one id at once both commit, and the table holds the id twice. It happens to the
kept copy of a superseded version (its id is the same on every device, memory/store/remote_conflicts.py
copy_id), and can happen to any upserted row (edges, shared evidence).

So every read of a bucket keeps one row per id (`distinct`), before a limit is applied (`distinct_query`
asks again for more rows when duplicates used up the limit); the lease holder's `remote maintain` deletes
the extra rows (`dedupe_table`); and a flush that inserted ids checks them at once (`dedupe_ids`).
Which row stays: the one with the newest `updated_at` (else `created_at`); between rows equal in that, the
same one on every device (they are ordered by their values), so two devices repairing at once delete the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from memory.store import filters as F
from memory.store.remote_io import fresh, retry

ORDER_COLUMNS = ("updated_at", "created_at")  # which copy of an id is kept: the newest by the first one present
SLACK = 8  # rows asked beyond a read's limit: room for the copies of its ids
SCORES = ("_distance", "_score", "_rowid")  # per-query values, not part of the row


def _rank(row: dict[str, Any]) -> tuple[Any, ...]:
    for c in ORDER_COLUMNS:
        if row.get(c) is not None:
            return (1, row[c])
    return (0,)


def _tiebreak(row: dict[str, Any]) -> str:
    return repr(sorted((k, repr(v)) for k, v in row.items() if k not in SCORES))


def _better(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether a should be kept rather than b (two rows of one id)."""
    ra, rb = _rank(a), _rank(b)
    if ra != rb:
        try:
            return bool(ra > rb)
        except TypeError:  # a timestamp against none: the row with one wins
            return len(ra) > len(rb)
    if "_distance" in a or "_score" in a:  # a search hit: the first (best) one
        return False
    return _tiebreak(a) > _tiebreak(b)


def distinct(rows: Iterable[dict[str, Any]], key: str = "id") -> list[dict[str, Any]]:
    """One row per id, each where its id was first seen: the newest (see the module) of its copies."""
    best: dict[Any, dict[str, Any]] = {}
    for n, r in enumerate(rows):
        k = r.get(key)
        if k is None:  # a row without an id (a caller that selected none) is kept as it is
            best[("\0row", n)] = r
            continue
        have = best.get(k)
        if have is None or _better(r, have):
            best[k] = r
    return list(best.values())


def distinct_query(run: Callable[[int | None], list[dict[str, Any]]], limit: int | None,
                   key: str = "id") -> list[dict[str, Any]]:
    """run(n): at most n rows of a query (None: all). One row per id, up to limit distinct ids.

    Asks for a few rows more than the limit, so that a lookup by id (whose limit is the number of ids) sees
    every copy of its ids and keeps the newest; asked again with a larger n while duplicates took places within
    the limit, so no row past them is left out. (A limited read with no order that stops short of the table
    may see one copy of an id and not the other; it still returns the id once.)"""
    if limit is None:
        return distinct(run(None), key)
    n = limit + max(SLACK, limit // 8)
    while True:
        raw = run(n)
        out = distinct(raw, key)
        if len(raw) < n or len(out) >= limit:
            return out[:limit]
        n = n + 2 * (len(raw) - len(out)) + SLACK


def order_columns(schema_names: Iterable[str]) -> list[str]:
    """The order columns (ORDER_COLUMNS) a table has: what a read adds to its columns to keep the right copy."""
    names = set(schema_names)
    return [c for c in ORDER_COLUMNS if c in names]


def distinct_count(table: Any) -> int:
    """How many distinct ids a bucket table holds."""
    import pyarrow.compute as pc

    ids = fresh(table).to_lance().to_table(columns=["id"])["id"]
    return int(pc.count_distinct(ids).as_py()) if len(ids) else 0


def _extra_rowids(rows: list[dict[str, Any]]) -> list[int]:
    """Of rows with `_rowid`, those to delete so that each id keeps one (the one `distinct` keeps)."""
    by_id: dict[Any, list[dict[str, Any]]] = {}
    for r in rows:
        by_id.setdefault(r["id"], []).append(r)
    out: list[int] = []
    for copies in by_id.values():
        if len(copies) > 1:
            keep = distinct(copies)[0]
            out += [int(r["_rowid"]) for r in copies if r is not keep]
    return out


def _delete_extra(table: Any, filter_: F.Where | None) -> int:
    """Delete the extra copies of ids (under the filter: None = the whole table), from the newest version;
    returns how many rows were deleted. The delete names row ids, never the memories' ids."""

    def once() -> int:
        ds = fresh(table).to_lance()
        names = ds.schema.names
        cols = list(dict.fromkeys(["id", *(c for c in names if c != "vector")]))
        rows = ds.to_table(columns=cols, filter=filter_, with_row_id=True).to_pylist()
        extra = _extra_rowids(rows)
        for start in range(0, len(extra), 500):
            ds.delete(F.rowid_in(extra[start:start + 500]))
        return len(extra)

    n = int(retry(once))
    fresh(table)
    return n


def dedupe_table(table: Any) -> int:
    """Remove every duplicate row of one id from a bucket table, keeping one; returns how many were removed.
    Reads the id and order columns of the whole table first, and reads whole rows only of duplicated ids."""
    import pyarrow.compute as pc

    ds = fresh(table).to_lance()
    ids = ds.to_table(columns=["id"])["id"]
    if not len(ids) or int(pc.count_distinct(ids).as_py()) == len(ids):
        return 0
    counts = pc.value_counts(ids).to_pylist()
    twice = sorted(c["values"] for c in counts if c["counts"] > 1)
    removed = 0
    for start in range(0, len(twice), 500):
        removed += _delete_extra(table, F.id_in(twice[start:start + 500]))
    return removed


def dedupe_ids(table: Any, ids: list[str]) -> int:
    """After an insert of these ids: remove any second row of one of them (a concurrent insert from another
    home); returns how many were removed. One count query when there is none."""
    removed = 0
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        if int(fresh(table).count_rows(F.id_in(chunk))) > len(set(chunk)):
            removed += _delete_extra(table, F.id_in(chunk))
    return removed


def select_rows(q: Any, cols: list[str], limit: int | None) -> list[dict[str, Any]]:
    """A LanceDB query's rows with these columns, one row per id when the id is among them."""
    cols = list(dict.fromkeys(cols))

    def run(n: int | None) -> list[dict[str, Any]]:
        return list(q.select(cols).limit(n).to_arrow().to_pylist())

    return distinct_query(run, limit) if "id" in cols else run(limit)
