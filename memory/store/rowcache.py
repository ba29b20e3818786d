"""The columns search ranks by (and, for memories, what a hit shows), kept in memory by row address,
so ranking legs read only scores and memory searches fetch nothing after.

Why: a LanceDB leg that reads `id` for its 50-120 candidates spends much of its time on that read
(each value is a random read that decodes a whole mini-block), and recall runs four such legs.
Served from here, recall and the MCP searches are faster (bench/scale.py; bench/RESULTS.md).

Why it is safe: a row's address (`_rowid`: fragment id << 32 | offset) names one immutable row
version. An update or a compaction writes the row at a new address, a delete hides the address, and
fragment ids are never reused. So what is kept under an address is never stale; it can only be
missing (then it is taken from the table), and a leg never returns the address of a deleted row.
(The cached columns are also never changed after a row is written; the one migration that filled
run_id/run_pos in place runs when the store opens, before any search.) Forgetting clears the cache
of the process that forgets (`Reader.forget_cached`), so nothing of a forgotten row stays there;
every other process (the MCP server, the app) drops its whole cache at its next search, which sees
that the tombstones table moved (memory/store/reads.py), and rebuilds it in the background. Nothing here
is ever written to disk.

Per table: a base, built by one background scan (sorted addresses + Arrow columns; memories' text
included, so theirs is the larger; bench/scale.py reports its size), plus a bounded spill of rows
taken on a miss (new rows). Memory hits come from here too, so a memory search fetches nothing after
ranking.
A lookup that misses most of its addresses (another process compacted the table) asks for a rebuild.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from memory.store.filters import Where

# Per table, what ranking reads of every candidate: memory/retrieval/search.py fuses by id; memory/retrieval/rank.py also
# credits turns by their neighbours (run_id, run_pos) and boosts named speakers and dates.
COLUMNS: dict[str, tuple[str, ...]] = {
    # Memories: also what a hit shows (the MCP search's columns, recall's), so a memory search asks
    # LanceDB for scores alone and fetches nothing after (bench/scale.py). Their text makes this base far
    # larger than one of ids alone; BASE_MAX_ROWS_BY_TABLE caps it.
    "memories": ("id", "type", "scope", "title", "text", "status", "confidence", "updated_at", "provenance",
                 "valid_from", "created_at", "origin"),
    "evidence": ("id", "speaker", "captured_at", "run_id", "run_pos"),
}
BASE_MAX_ROWS = 1_000_000  # above this, an evidence base would weigh on every searching process: only the spill is kept
# Memories carry their text, so a row weighs far more. Above this many, no base is built and
# memory searches read their columns from the table as before (Reader.covers is False).
BASE_MAX_ROWS_BY_TABLE = {"memories": 250_000}
# ... and above this many bytes: memories run to 10,000 characters, so 250k long ones would hold
# gigabytes in every searching process. Estimated from a sample before the scan, checked after it.
BASE_MAX_BYTES = 256 << 20
SIZE_SAMPLE_ROWS = 2_000
SPILL_MAX = 20_000  # rows taken on a miss, before the next rebuild replaces them
REBUILD_MISS_SHARE = 0.5  # of one lookup's addresses (at least REBUILD_MIN_LOOKUP of them)
REBUILD_MIN_LOOKUP = 20
REBUILD_MIN_INTERVAL_S = 30.0
# Few distinct values: dictionary-encoded in the base.
_DICT_COLS = ("speaker", "run_id", "type", "scope", "status", "origin")


class RowCache:
    """Columns `cols` of one table's rows by address. Lookups and fills run on the reads loop thread;
    `clear` may come from any thread, so state changes hold a lock."""

    def __init__(self, cols: tuple[str, ...], max_rows: int = BASE_MAX_ROWS, max_bytes: int = BASE_MAX_BYTES) -> None:
        self.cols = cols
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.too_large = False  # the last build found more than max_rows rows or max_bytes
        self._lock = threading.Lock()
        self._addrs: np.ndarray | None = None  # sorted addresses of the base
        self._base: pa.Table | None = None  # the base's columns, in the order of _addrs
        self._spill: dict[int, dict[str, Any]] = {}
        self._epoch = 0  # bumped by clear(): a build started before it is thrown away
        self._building = False
        self._built_at = 0.0
        self._want_build = True

    def lookup(self, addrs: list[int],
               cols: Iterable[str] | None = None) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """Cached rows by address (`cols` of them, default all), and the addresses not cached.

        Only the asked columns become Python objects: a memory leg's 120 candidates need their ids,
        not their text (converting every column would hold the GIL for nothing).
        """
        with self._lock:
            base, spill, found_addrs = self._base, self._spill, self._addrs
        cols = list(self.cols) if cols is None else [c for c in self.cols if c in set(cols)]
        out: dict[int, dict[str, Any]] = {}
        rest = addrs
        if base is not None and found_addrs is not None and len(found_addrs) and addrs:
            q = np.asarray(addrs, dtype=np.uint64)
            at = np.searchsorted(found_addrs, q)
            at[at >= len(found_addrs)] = 0
            hit = found_addrs[at] == q
            rows = base.select(cols).take(pa.array(at[hit])).to_pylist()
            out = dict(zip(q[hit].tolist(), rows, strict=True))
            rest = q[~hit].tolist()
        missing = []
        for a in rest:
            r = spill.get(a)
            if r is None:
                missing.append(a)
            else:
                out[a] = {c: r[c] for c in cols}
        if base is not None and len(addrs) >= REBUILD_MIN_LOOKUP and len(missing) > REBUILD_MISS_SHARE * len(addrs):
            self._want_build = True  # addresses moved: compacted, probably by another process
        return out, missing

    @property
    def epoch(self) -> int:
        """Changes when the cache is cleared: a fill read before that is not added."""
        return self._epoch

    def add(self, rows: list[dict[str, Any]], epoch: int) -> None:
        """Rows taken on a miss at `epoch`, each with its `_rowid`."""
        with self._lock:
            if epoch != self._epoch:
                return
            if len(self._spill) + len(rows) > SPILL_MAX:
                self._spill = {}
                self._want_build = True
            for r in rows:
                self._spill[r["_rowid"]] = {c: r[c] for c in self.cols}

    def build_due(self, force: bool = False) -> int | None:
        """The epoch to build for, when a base build should start now (and marks it started)."""
        with self._lock:
            recent = time.monotonic() - self._built_at < REBUILD_MIN_INTERVAL_S
            if not force and (not self._want_build or self._building or recent):
                return None
            self._building, self._want_build = True, False
            return self._epoch

    def set_base(self, scanned: pa.Table | None, epoch: int) -> None:
        """The result of a base build started at `epoch` (None: the table was too large, or it failed)."""
        base = addrs = None
        if scanned is not None:
            order = np.argsort(scanned["_rowid"].to_numpy(), kind="stable")
            addrs = scanned["_rowid"].to_numpy()[order].astype(np.uint64)
            cols = {c: scanned[c].take(pa.array(order)) for c in self.cols}
            base = pa.table({c: (a.dictionary_encode() if c in _DICT_COLS else a) for c, a in cols.items()})
        with self._lock:
            self._building = False
            self._built_at = time.monotonic()
            if epoch != self._epoch:
                return
            if base is not None:
                self._base, self._addrs, self._spill = base, addrs, {}

    def clear(self) -> None:
        """Drop everything (after a forget); the next use builds the base again."""
        with self._lock:
            self._epoch += 1
            self._base = self._addrs = None
            self._spill = {}
            self._want_build = True
            self._built_at = 0.0

    def nbytes(self) -> int:
        """Memory held by the base (Arrow columns and addresses); the spill is not counted."""
        with self._lock:
            return 0 if self._base is None or self._addrs is None else self._base.nbytes + self._addrs.nbytes

    def size(self) -> int:
        """Rows held (base + spill)."""
        with self._lock:
            return (len(self._addrs) if self._addrs is not None else 0) + len(self._spill)



# ---- vectors of small tables without a vector index ----------------------------------------------------

# Below memory/store/indexes.py's VECTOR_INDEX_MIN_ROWS a table has no vector index, and LanceDB answers
# a vector leg by reading and decoding every vector of the table at every query (2,000 memories: the
# costliest leg of a memory search or recall). Exact search over the same vectors, kept here by row
# address, returns the same rows. Up to this many rows (20,000 x 384 dims x 4 bytes = 30 MB); a larger
# or indexed table is searched by LanceDB as before.
FLAT_TABLES = {"memories": 20_000}
FLAT_MAX_FILTERS = 64  # filters (scopes, types, statuses, dates) whose matching addresses are kept
FLAT_SPILL_MAX = 2_000  # vectors taken since the last full scan; more, and the next miss scans again

# Row blocks this small keep OpenBLAS's matrix-vector product on the calling thread. Over a whole table
# it hands the product to its worker threads, which then spin-wait for more work: measured at ~5 ms of
# CPU per search on 2,000 rows, against ~0.3 ms in blocks (the same products, bit for bit).
_BLOCK_ELEMS = 8_192


def _dots(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    rows = max(1, _BLOCK_ELEMS // mat.shape[1])
    return np.concatenate([mat[i:i + rows] @ q for i in range(0, len(mat), rows)])


def unit_vectors(scanned: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(addresses, unit vectors, addresses whose vector is missing or zero) of a scan of `_rowid` and `vector`."""
    addrs = scanned["_rowid"].to_numpy().astype(np.uint64)
    col = scanned["vector"].combine_chunks()
    dims = col.type.list_size
    good = np.ones(len(addrs), dtype=bool)
    if col.null_count:
        good &= ~col.is_null().to_numpy(zero_copy_only=False)
        col = col.fill_null([0.0] * dims)
    mat = col.flatten().to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dims)
    norms = np.linalg.norm(mat, axis=1)
    good &= np.isfinite(norms) & (norms > 0)
    unit = mat[good] / norms[good, None]
    return addrs[good], unit.astype(np.float32, copy=False), addrs[~good]


class FlatVectors:
    """One table's unit vectors by row address, and the addresses each filter matched at a table version.

    Like RowCache: an address names one immutable row version, so a kept vector is never stale, only
    missing (then taken from the table). Which rows a filter matches does change with every write, so
    those are kept per version. Read and filled on the reads loop; `clear` may come from any thread.
    """

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._epoch = 0  # bumped by clear(): vectors read before it are not kept
        self._addrs: np.ndarray | None = None  # sorted addresses of the last full scan
        self._unit: np.ndarray | None = None  # their unit vectors, float32 [rows, dims]
        self._spill: dict[int, np.ndarray] = {}  # unit vectors taken since
        self._bad: set[int] = set()  # addresses without a usable vector: legs over them go to LanceDB
        self._masks: dict[str | None, tuple[int, np.ndarray]] = {}  # where -> (version, sorted addresses)
        self.eligible: tuple[int, bool] | None = None  # (version, searched here at that version)

    @property
    def epoch(self) -> int:
        """Changes when the vectors are cleared: a read from before that is not kept."""
        return self._epoch

    def matching(self, where: Where | None, version: int) -> np.ndarray | None:
        """The addresses `where` matched at this table version, if kept."""
        with self._lock:
            got = self._masks.get(where)
        return got[1] if got is not None and got[0] == version else None

    def set_matching(self, where: Where | None, version: int, addrs: np.ndarray, epoch: int) -> np.ndarray:
        """Keep the addresses a scan under `where` found at `version`; returns them sorted."""
        addrs = np.sort(np.asarray(addrs, dtype=np.uint64))
        with self._lock:
            if epoch == self._epoch:
                if len(self._masks) >= FLAT_MAX_FILTERS:
                    self._masks.clear()
                self._masks[where] = (version, addrs)
        return addrs

    def unknown(self, addrs: np.ndarray) -> np.ndarray:
        """Of these addresses, those whose vector is not kept (nor known to be unusable)."""
        with self._lock:
            base, spill, bad = self._addrs, self._spill, self._bad
        if base is not None and len(base):
            at = np.minimum(np.searchsorted(base, addrs), len(base) - 1)
            addrs = addrs[base[at] != addrs]
        return np.array([a for a in addrs.tolist() if a not in spill and a not in bad], dtype=np.uint64)

    def set_base(self, scanned: pa.Table, epoch: int) -> None:
        """The vectors of a full scan (`_rowid`, `vector`) replace everything kept."""
        addrs, unit, bad = unit_vectors(scanned)
        order = np.argsort(addrs, kind="stable")
        with self._lock:
            if epoch == self._epoch:
                self._addrs, self._unit, self._spill, self._bad = addrs[order], unit[order], {}, set(bad.tolist())

    def add(self, scanned: pa.Table, epoch: int) -> None:
        """Vectors taken by address (`_rowid`, `vector`)."""
        addrs, unit, bad = unit_vectors(scanned)
        with self._lock:
            if epoch == self._epoch:
                self._spill.update(zip(addrs.tolist(), unit, strict=True))
                self._bad.update(bad.tolist())

    def spill_full(self, more: int) -> bool:
        """Whether `more` taken vectors would overflow the spill (then scan everything again)."""
        return self._addrs is None or len(self._spill) + more > FLAT_SPILL_MAX

    def search(self, vector: Sequence[float] | np.ndarray, addrs: np.ndarray, limit: int) -> pa.Table | None:
        """The `limit` rows at these (sorted) addresses nearest to `vector` by cosine distance, nearest first,
        as LanceDB's vector leg returns them (`_distance`, `_rowid`; ties in address order). None when a
        row's vector is not kept or not usable: LanceDB answers then."""
        with self._lock:
            base, unit, spill, bad = self._addrs, self._unit, self._spill, self._bad
        if base is None or unit is None:
            return None
        q = np.asarray(vector, dtype=np.float32)
        norm = np.linalg.norm(q)
        if not np.isfinite(norm) or norm == 0:
            return None
        q = q / np.float32(norm)
        dist = np.empty(len(addrs), dtype=np.float32)
        if len(base):
            at = np.minimum(np.searchsorted(base, addrs), len(base) - 1)
            in_base = base[at] == addrs
        else:
            at, in_base = np.zeros(len(addrs), dtype=np.int64), np.zeros(len(addrs), dtype=bool)
        if in_base.any():
            dist[in_base] = np.float32(1.0) - _dots(unit, q)[at[in_base]]
        for i in np.flatnonzero(~in_base).tolist():
            a = int(addrs[i])
            v = spill.get(a)
            if v is None or a in bad:
                return None
            dist[i] = np.float32(1.0) - v @ q
        top = np.argsort(dist, kind="stable")[:limit]
        return pa.table({"_distance": pa.array(dist[top], pa.float32()), "_rowid": pa.array(addrs[top], pa.uint64())})

    def clear(self) -> None:
        """Drop every vector and filter result (after rows were forgotten)."""
        with self._lock:
            self._epoch += 1
            self._addrs = self._unit = None
            self._spill, self._bad, self._masks = {}, set(), {}
            self.eligible = None

    def size(self) -> int:
        """Vectors held (full scan + spill)."""
        with self._lock:
            return (len(self._addrs) if self._addrs is not None else 0) + len(self._spill)
