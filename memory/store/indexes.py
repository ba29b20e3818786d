"""Index management. Builds run at open, after batches and on a schedule — never on the query path.

Small tables stay brute force (a flat scan of a few thousand rows is as fast as an index and needs no
training). Once a table reaches VECTOR_INDEX_MIN_ROWS, maintain() trains an IVF_SQ cosine
index on its vectors and adds scalar indexes on the filtered columns. Rows added after a build are
not in the index: LanceDB scans them and merges them into every query (we never pass fast_search),
and the next maintain() folds them in (optimize_table); the index is retrained when the
table has doubled since it was trained, so partitions keep fitting the data.

The row count an index was trained on is recorded in the vector column's metadata: once a pass
has folded new rows in, the index's own counts grow with the table and say nothing about the size it
was trained for, so without the record the doubling rule never fires.

Maintenance does not call LanceDB's table.optimize(), for two things it does that get worse with
every pass (optimize_table() below does the same three steps through Lance's own API, pylance):
- It adds each pass's new rows to the vector index as one more *delta* segment, and every query
  searches every segment, so vector queries slow down with every light pass (bench/maintenance.py
  runs both strategies; bench/RESULTS.md). Here the deltas are
  merged into one at each pass: the trained base plus at most one delta.
- It compacts towards 1M-row fragments. Once the deltas are merged, every fragment the delta covers
  is a candidate, so each pass would rewrite every row added since the last training. Here only
  fragments under COMPACT_TARGET_ROWS are merged, once MAX_SMALL_FRAGMENTS of them have piled up.
The scheduled pass still retrains once an index has more than MAX_VECTOR_DELTAS segments, for stores
that older versions maintained.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

from memory.store import io_faults
from memory.store.leftovers import swept
from memory.store.maintenance_lock import WAIT_S, Busy, maintenance_lock

if TYPE_CHECKING:
    import threading

    from lancedb.index import FTS
    from lancedb.table import Table

    from memory.store.core import Store

log = logging.getLogger(__name__)

VECTOR_INDEX_MIN_ROWS = 5_000
SCALAR_INDEX_MIN_ROWS = 5_000
RETRAIN_GROWTH = 2.0  # retrain the vector index once the table has this many times the rows it was trained on
MAX_VECTOR_DELTAS = 4  # retrain (one segment again) when the vector index has more delta segments than this
# Compaction merges fragments under this many rows, so a pass rewrites at most about this many; fragments
# of the last training's size are left alone until the next training covers them all.
COMPACT_TARGET_ROWS = 65_536
MAX_SMALL_FRAGMENTS = 8  # ... once this many fragments are under it (each pass adds one)
MATERIALIZE_DELETIONS = 0.1  # or once a fragment has this share of its rows deleted (Lance's default)
KEEP_VERSIONS = timedelta(days=7)  # old versions kept for concurrent readers, as LanceDB's optimize() keeps them
TRAINED_ROWS_KEY = "mirador:ivf_trained_rows"  # vector column metadata: rows the index was trained on

# Columns every read path filters on. BITMAP suits a handful of distinct values, BTREE ids and times.
ScalarKind = Literal["BTREE", "BITMAP", "LABEL_LIST"]  # LanceDB's scalar index types
SCALAR_INDEXES: dict[str, dict[str, ScalarKind]] = {
    "memories": {"id": "BTREE", "scope": "BITMAP", "status": "BITMAP", "type": "BITMAP"},
    "evidence": {"id": "BTREE", "scope": "BITMAP", "source": "BITMAP", "captured_at": "BTREE"},
}
# The full-text index of each table of the data folder: over the keyed hashes of its words' stems
# (memory/store/sealer.py), never the words. Shared scopes' buckets index their search_text as it is.
TERMS_COLUMN = "fts_terms"
FTS_COLUMNS: dict[str, tuple[str, ...]] = {
    "memories": (TERMS_COLUMN,),
    "evidence": (TERMS_COLUMN,),
    "vault": (TERMS_COLUMN,),
}


def _fts_config(column: str) -> FTS:
    from lancedb.index import FTS

    if column == TERMS_COLUMN:
        # The terms are normalised and hashed before they are stored (memory/store/terms.py): split on spaces,
        # nothing else to do to them.
        return FTS(with_position=False, base_tokenizer="whitespace", lower_case=False, stem=False,
                   remove_stop_words=False, ascii_folding=False)
    # Stemming and stop words help natural-language questions; positions are not needed (no phrases).
    return FTS(with_position=False, stem=True, remove_stop_words=True, lower_case=True, ascii_folding=True)


def has_index(table: Table, column: str) -> bool:
    """True if an index covers the column."""
    return any(column in ix.columns for ix in table.list_indices())


def ensure_fts(table: Table, column: str, replace: bool = False) -> None:
    """Create the full-text index on a column if missing (or rebuild it when replace=True)."""
    if replace or not has_index(table, column):
        table.create_index(column, config=_fts_config(column), replace=True)
        log.debug("fts index built on %s.%s", table.name, column)


def _vector_index(table: Table) -> Any:
    for ix in table.list_indices():
        if "vector" in ix.columns:
            return ix
    return None


def _vector_stats(table: Table) -> Any:
    ix = _vector_index(table)
    return None if ix is None else table.index_stats(ix.name)


def vector_index_rows(table: Table, stats: Any = None) -> tuple[int, int] | None:
    """(indexed, unindexed) row counts of the vector index, or None when the table has none."""
    stats = stats or _vector_stats(table)
    if stats is None:
        return None
    return int(stats.num_indexed_rows), int(stats.num_unindexed_rows)


def vector_index_segments(table: Table, stats: Any = None) -> int | None:
    """How many segments (the trained index plus its deltas) the vector index has; None without one."""
    stats = stats or _vector_stats(table)
    if stats is None:
        return None
    return _segments(stats)


def _segments(stats: Any) -> int:
    """Segments (the trained index plus its deltas) of the vector index these stats describe."""
    return int(getattr(stats, "num_indices", None) or 1)


def trained_rows(table: Table) -> int | None:
    """Rows the vector index was last trained on, or None when not recorded (an index from before the record)."""
    try:
        meta = table.schema.field("vector").metadata or {}
    except KeyError:
        return None
    raw = meta.get(TRAINED_ROWS_KEY.encode())
    return int(raw) if raw else None


def ensure_vector_index(table: Table, min_rows: int = VECTOR_INDEX_MIN_ROWS, force: bool = False) -> str | None:
    """Train a cosine IVF_SQ index when the table is big enough (or retrain once it has doubled, or
    once optimize() has left more than MAX_VECTOR_DELTAS delta segments).

    IVF_SQ over IVF_HNSW_SQ: IVF_SQ trains several times faster on busy cores, and maintenance
    blocks the writer while it trains. With sqrt(n) partitions kept, probing NPROBES of them
    (memory/store/reads.py) finds nearly all of an exact search's top 10 (bench/scale.py store).

    Returns what was done ("built", "retrained") or None. force=True builds even on a small table (tests).
    """
    from lancedb.index import IvfSq

    n = table.count_rows()
    if n == 0 or (n < min_rows and not force):
        return None
    stats = _vector_stats(table)  # one stats read for both rules below
    if stats is not None and not force:
        trained = trained_rows(table)
        if trained and n < RETRAIN_GROWTH * trained and _segments(stats) <= MAX_VECTOR_DELTAS:
            return None  # optimize() adds the new rows to the existing partitions, as a delta
        # Unrecorded: an index from an older version, of unknown shape. Retrained once, here.
    # The usual IVF shape, sqrt(n) partitions of sqrt(n) rows; queries probe memory.store.reads.NPROBES of them.
    # Given as a partition *size*: LanceDB's optimize() rebalances partitions towards the index's target
    # size, and with only a partition count (default target) it merged 316 partitions into 4 at 100k
    # rows, 141 into 1 at 20k — every query then compared the whole table (LanceDB 0.40, measured).
    size = max(1, int(math.sqrt(n)))
    t = time.perf_counter()
    table.create_index("vector", config=IvfSq(distance_type="cosine", target_partition_size=size), replace=True)
    table.update_field_metadata({"path": "vector", "metadata": {TRAINED_ROWS_KEY: str(n)}})
    log.info("vector index on %s: %d rows, partitions of ~%d, %.1fs", table.name, n, size, time.perf_counter() - t)
    return "built" if stats is None else "retrained"


def ensure_scalar_indexes(table: Table, columns: dict[str, ScalarKind], min_rows: int = SCALAR_INDEX_MIN_ROWS,
                          force: bool = False) -> list[str]:
    """BTREE/BITMAP indexes on filter columns of a large table; returns the columns indexed now."""
    if table.count_rows() < min_rows and not force:
        return []
    names = set(table.schema.names)
    done: list[str] = []
    for col, kind in columns.items():
        if col in names and not has_index(table, col):
            table.create_scalar_index(col, index_type=kind, replace=True)
            done.append(col)
    return done


class Stopped(Exception):
    """Maintenance stopped between two commits because its caller is quitting (the `stop` event)."""


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise Stopped


def maintain(store: Store, *, force_vector: bool = False, tables: Iterable[str] | None = None, train: bool = True,
             stop: threading.Event | None = None, wait: float = WAIT_S) -> dict[str, Any]:
    """Bring every index up to date and compact: the store's scheduled maintenance (Store.optimize).

    force_vector builds vector indexes even on small tables (tests use it to exercise the indexed path).
    train=False skips training new vector/scalar indexes (tens of seconds at 100k rows): the light pass
    that runs after write batches only compacts and folds new rows into the existing indexes.
    Returns what was built, per table, with timings.
    stop: a threading.Event; once set, no further step starts (each step is one commit, so what was
    done stays done) and the report says where it stopped, under "stopped". At quit, a pass that
    would retrain a large index ends within the current step instead of holding the job.
    wait: seconds to wait while another process maintains the store (memory/store/maintenance_lock.py); with 0
    the pass is skipped then, and the report says so under "skipped".
    A full, read-only or failing disk raises a StorageError; what the failed step left is removed
    (memory/store/leftovers.py), so the next pass, once there is room, starts clean.
    """
    report: dict[str, Any] = {}
    try:
        with maintenance_lock(store.home, wait) as locked:
            _maintain(store, report, force_vector, tables, train, stop, locked)
    except Stopped:
        report["stopped"] = report.pop("_at", "before starting")
        log.info("maintenance stopped (%s): the rest runs at the next pass", report["stopped"])
    except Busy:
        if wait:
            raise
        report["skipped"] = "another process is maintaining the store"
    except Exception as e:
        fault = io_faults.storage_error(e, store.home)
        if fault is None or fault is e:
            raise
        raise fault from e
    report.pop("_at", None)
    return report


def _maintain(store: Store, report: dict[str, Any], force_vector: bool, tables: Iterable[str] | None, train: bool,
              stop: threading.Event | None, locked: bool) -> None:
    wanted = set(tables) if tables else None
    for name, table in (("memories", store.memories), ("evidence", store.evidence), ("vault", store.vault)):
        if wanted is not None and name not in wanted:
            continue
        report["_at"] = f"before {name}"
        _check(stop)
        with swept(store, table, locked):
            _maintain_table(store, report, name, table, force_vector, train, stop)


def _maintain_table(store: Store, report: dict[str, Any], name: str, table: Table, force_vector: bool, train: bool,
                    stop: threading.Event | None) -> None:
    t = time.perf_counter()
    entry: dict[str, Any] = {"rows": table.count_rows()}
    report[name] = entry
    names = set(table.schema.names)
    for col in FTS_COLUMNS[name]:
        if col in names:
            store.commit(lambda c=col: ensure_fts(table, c))
    if "vector" in names and (train or force_vector):
        report["_at"] = f"in {name}, before its vector index"
        _check(stop)
        entry["vector"] = store.commit(lambda tb=table: ensure_vector_index(tb, force=force_vector))
    if name in SCALAR_INDEXES and (train or force_vector):
        report["_at"] = f"in {name}, before its scalar indexes"
        _check(stop)
        entry["scalar"] = store.commit(lambda tb=table, n=name: ensure_scalar_indexes(
            tb, SCALAR_INDEXES[n], force=force_vector))
    # Compacts fragments and folds rows added since the last build into every index.
    report["_at"] = f"in {name}, before compaction"
    def mark(at: str) -> None:
        report.update(_at=f"in {name}, {at}")

    entry.update(optimize_table(store, table, stop, mark=mark))
    entry["seconds"] = round(time.perf_counter() - t, 2)


def _small_fragments(ds: Any) -> tuple[int, bool]:
    """(fragments under COMPACT_TARGET_ROWS, whether any has MATERIALIZE_DELETIONS of its rows deleted)."""
    small, deleted = 0, False
    for f in ds.get_fragments():
        rows = f.metadata.physical_rows or 0
        small += rows < COMPACT_TARGET_ROWS
        deleted = deleted or (rows > 0 and f.metadata.num_deletions >= MATERIALIZE_DELETIONS * rows)
    return small, deleted


class Commits(Protocol):
    """What optimize_table commits through: the Store, or a shared table's RemoteCommits (remote_io.py)."""

    def commit(self, fn: Callable[[], Any]) -> Any: ...


def optimize_table(store: Commits, table: Table, stop: threading.Event | None = None,
                   mark: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Compact, fold new rows into every index, drop versions older than KEEP_VERSIONS (see the module doc).

    Each step is its own commit, retried like any write when another process committed first.
    Returns {"compacted": fragments merged away, "vector_segments": segments after the pass or None}.
    """
    vector = _vector_index(table)
    out = {"compacted": 0, "vector_segments": None}
    try:
        import lance  # noqa: F401  (pylance: table.to_lance() needs it)
    except ImportError as e:
        # A build without it (a bundle that missed the module) still maintains, the way LanceDB does.
        log.warning("pylance is missing (%s): maintenance falls back to LanceDB's optimize(), whose vector "
                    "index deltas slow searches until the scheduled retrain; reinstall Mirador", e)
        store.commit(table.optimize)
        return {**out, "fallback": "lancedb optimize", "vector_segments": vector_index_segments(table)}

    def compact() -> None:
        ds = table.to_lance()
        small, deleted = _small_fragments(ds)
        if small >= MAX_SMALL_FRAGMENTS or deleted:
            m = ds.optimize.compact_files(target_rows_per_fragment=COMPACT_TARGET_ROWS,
                                          materialize_deletions_threshold=MATERIALIZE_DELETIONS)
            out["compacted"] = m.fragments_removed - m.fragments_added

    def fold() -> None:
        segments: dict[str, int] = {}
        for ix in table.to_lance().list_indices():
            segments[ix["name"]] = segments.get(ix["name"], 0) + 1
        for name, n in segments.items():
            # Lance merges the latest n segments of an index and the rows none covers into one segment.
            # Full-text and scalar indexes: all of them, as LanceDB does. The vector index: every delta,
            # never the trained base, whose rewrite would cost a pass the whole table.
            keep_base = vector is not None and name == vector.name
            table.to_lance().optimize.optimize_indices(num_indices_to_merge=n - 1 if keep_base else n,
                                                       index_names=[name])
        if vector is not None:
            out["vector_segments"] = vector_index_segments(table)

    for at, step in (("before compaction", compact), ("before folding new rows into its indexes", fold),
                     ("before cleaning up old versions",
                      lambda: table.to_lance().cleanup_old_versions(older_than=KEEP_VERSIONS))):
        if mark is not None:
            mark(at)  # where maintain() reports it stopped
        _check(stop)
        store.commit(step)
    return out
