"""Index management. Builds run at open, after batches and on a schedule — never on the query path.

Small tables stay brute force (a flat scan of a few thousand rows is as fast as an index and needs no
training). Once a table reaches VECTOR_INDEX_MIN_ROWS, maintain() trains an IVF_SQ cosine
index on its vectors and adds scalar indexes on the filtered columns. Rows added after a build are
not in the index: LanceDB scans them and merges them into every query (we never pass fast_search),
and the next maintain() folds them in through table.optimize(); the index is retrained when the
table has doubled since it was trained, so partitions keep fitting the data.

The row count an index was trained on is recorded in the vector column's metadata: once optimize()
has folded new rows in, the index's own counts grow with the table and say nothing about the size it
was trained for, so without the record the doubling rule never fires.

Each optimize() that folds new rows in adds a *delta* segment to the vector index rather than merging
them into it (LanceDB 0.40's Python API does not expose the merge count), and every query searches
every delta: on the 100k bench evidence table, 6 deltas cost 27 ms a vector query against 20-23 ms for
one. The scheduled pass therefore also retrains once an index has more than MAX_VECTOR_DELTAS.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable

log = logging.getLogger(__name__)

VECTOR_INDEX_MIN_ROWS = 5_000
SCALAR_INDEX_MIN_ROWS = 5_000
RETRAIN_GROWTH = 2.0  # retrain the vector index once the table has this many times the rows it was trained on
MAX_VECTOR_DELTAS = 4  # retrain (one segment again) when the vector index has more delta segments than this
TRAINED_ROWS_KEY = "mirador:ivf_trained_rows"  # vector column metadata: rows the index was trained on

# Columns every read path filters on. BITMAP suits a handful of distinct values, BTREE ids and times.
SCALAR_INDEXES: dict[str, dict[str, str]] = {
    "memories": {"id": "BTREE", "scope": "BITMAP", "status": "BITMAP", "type": "BITMAP"},
    "evidence": {"id": "BTREE", "scope": "BITMAP", "source": "BITMAP", "captured_at": "BTREE"},
}
FTS_COLUMNS: dict[str, tuple[str, ...]] = {
    "memories": ("search_text",),
    "evidence": ("text", "search_text"),
    "vault": ("label",),
}


def _fts_config():
    from lancedb.index import FTS

    # Stemming and stop words help natural-language questions; positions are not needed (no phrases).
    return FTS(with_position=False, stem=True, remove_stop_words=True, lower_case=True, ascii_folding=True)


def has_index(table, column: str) -> bool:
    """True if an index covers the column."""
    return any(column in ix.columns for ix in table.list_indices())


def ensure_fts(table, column: str, replace: bool = False) -> None:
    """Create the full-text index on a column if missing (or rebuild it when replace=True)."""
    if replace or not has_index(table, column):
        table.create_index(column, config=_fts_config(), replace=True)
        log.debug("fts index built on %s.%s", table.name, column)


def _vector_index(table):
    for ix in table.list_indices():
        if "vector" in ix.columns:
            return ix
    return None


def _vector_stats(table):
    ix = _vector_index(table)
    return None if ix is None else table.index_stats(ix.name)


def vector_index_rows(table, stats=None) -> tuple[int, int] | None:
    """(indexed, unindexed) row counts of the vector index, or None when the table has none."""
    stats = stats or _vector_stats(table)
    if stats is None:
        return None
    return int(stats.num_indexed_rows), int(stats.num_unindexed_rows)


def vector_index_segments(table, stats=None) -> int | None:
    """How many segments (the trained index plus its deltas) the vector index has; None without one."""
    stats = stats or _vector_stats(table)
    if stats is None:
        return None
    return int(getattr(stats, "num_indices", None) or 1)


def trained_rows(table) -> int | None:
    """Rows the vector index was last trained on, or None when not recorded (an index from before the record)."""
    try:
        meta = table.schema.field("vector").metadata or {}
    except KeyError:
        return None
    raw = meta.get(TRAINED_ROWS_KEY.encode())
    return int(raw) if raw else None


def ensure_vector_index(table, min_rows: int = VECTOR_INDEX_MIN_ROWS, force: bool = False) -> str | None:
    """Train a cosine IVF_SQ index when the table is big enough (or retrain once it has doubled, or
    once optimize() has left more than MAX_VECTOR_DELTAS delta segments).

    IVF_SQ over IVF_HNSW_SQ: IVF_SQ trained ~4x faster on 2 busy cores (63 s vs 237 s), and maintenance
    blocks the writer while it trains. (That comparison's recall figures were taken on indexes that
    optimize() had collapsed, see below; with sqrt(n) partitions kept, IVF_SQ probing 40 of them finds
    0.97 of an exact search's top 10 on the 100k bench store, in ~6 ms.)

    Returns what was done ("built", "retrained") or None. force=True builds even on a small table (tests).
    """
    from lancedb.index import IvfSq

    n = table.count_rows()
    if n == 0 or (n < min_rows and not force):
        return None
    stats = _vector_stats(table)  # one stats read for both rules below
    if stats is not None and not force:
        trained = trained_rows(table)
        if trained and n < RETRAIN_GROWTH * trained and vector_index_segments(table, stats) <= MAX_VECTOR_DELTAS:
            return None  # optimize() adds the new rows to the existing partitions, as a delta
        # Unrecorded: an index from an older version, of unknown shape. Retrained once, here.
    # The usual IVF shape, sqrt(n) partitions of sqrt(n) rows; queries probe memory.reads.NPROBES of them.
    # Given as a partition *size*: LanceDB's optimize() rebalances partitions towards the index's target
    # size, and with only a partition count (default target) it merged 316 partitions into 4 at 100k
    # rows, 141 into 1 at 20k — every query then compared the whole table (LanceDB 0.40, measured).
    size = max(1, int(math.sqrt(n)))
    t = time.perf_counter()
    table.create_index("vector", config=IvfSq(distance_type="cosine", target_partition_size=size), replace=True)
    table.update_field_metadata({"path": "vector", "metadata": {TRAINED_ROWS_KEY: str(n)}})
    log.info("vector index on %s: %d rows, partitions of ~%d, %.1fs", table.name, n, size, time.perf_counter() - t)
    return "built" if stats is None else "retrained"


def ensure_scalar_indexes(table, columns: dict[str, str], min_rows: int = SCALAR_INDEX_MIN_ROWS,
                          force: bool = False) -> list[str]:
    """BTREE/BITMAP indexes on filter columns of a large table; returns the columns indexed now."""
    if table.count_rows() < min_rows and not force:
        return []
    names = set(table.schema.names)
    done = []
    for col, kind in columns.items():
        if col in names and not has_index(table, col):
            table.create_scalar_index(col, index_type=kind, replace=True)
            done.append(col)
    return done


def maintain(store, *, force_vector: bool = False, tables: Iterable[str] | None = None, train: bool = True) -> dict:
    """Bring every index up to date and compact: the store's scheduled maintenance (Store.optimize).

    force_vector builds vector indexes even on small tables (tests use it to exercise the indexed path).
    train=False skips training new vector/scalar indexes (tens of seconds at 100k rows): the light pass
    that runs after write batches only compacts and folds new rows into the existing indexes.
    Returns what was built, per table, with timings.
    """
    report: dict[str, dict] = {}
    wanted = set(tables) if tables else None
    for name, table in (("memories", store.memories), ("evidence", store.evidence), ("vault", store.vault)):
        if wanted is not None and name not in wanted:
            continue
        t = time.perf_counter()
        entry: dict = {"rows": table.count_rows()}
        names = set(table.schema.names)
        for col in FTS_COLUMNS[name]:
            if col in names:
                ensure_fts(table, col)
        if "vector" in names and (train or force_vector):
            entry["vector"] = store._commit(lambda tb=table: ensure_vector_index(tb, force=force_vector))
        if name in SCALAR_INDEXES and (train or force_vector):
            entry["scalar"] = store._commit(lambda tb=table, n=name: ensure_scalar_indexes(
                tb, SCALAR_INDEXES[n], force=force_vector))
        # Compacts fragments and folds rows added since the last build into every index.
        store._commit(table.optimize)
        entry["seconds"] = round(time.perf_counter() - t, 2)
        report[name] = entry
    return report
