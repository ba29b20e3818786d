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

import numpy as np
import pyarrow as pa

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
        self._spill: dict[int, dict] = {}
        self._epoch = 0  # bumped by clear(): a build started before it is thrown away
        self._building = False
        self._built_at = 0.0
        self._want_build = True

    def lookup(self, addrs: list[int], cols=None) -> tuple[dict[int, dict], list[int]]:
        """Cached rows by address (`cols` of them, default all), and the addresses not cached.

        Only the asked columns become Python objects: a memory leg's 120 candidates need their ids,
        not their text (converting every column would hold the GIL for nothing).
        """
        with self._lock:
            base, spill, found_addrs = self._base, self._spill, self._addrs
        cols = list(self.cols) if cols is None else [c for c in self.cols if c in set(cols)]
        out: dict[int, dict] = {}
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

    def add(self, rows: list[dict], epoch: int) -> None:
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
# costliest leg of a memory search or recall). Exact search over the same vectors, kept here for one
# table version, returns the same rows. Up to this many rows (20,000 x 384 dims x 4 bytes = 30 MB); a
# larger or indexed table is searched by LanceDB as before.
FLAT_TABLES = {"memories": 20_000}
FLAT_MAX_FILTERS = 64  # filters (scopes, types, statuses, dates) whose matching rows are kept per version


# Row blocks this small keep OpenBLAS's matrix-vector product on the calling thread. Over a whole table
# it hands the product to its worker threads, which then spin-wait for more work: measured at ~5 ms of
# CPU per search on 2,000 rows, against ~0.3 ms in blocks (the same products, bit for bit).
_BLOCK_ELEMS = 8_192


def _dots(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    rows = max(1, _BLOCK_ELEMS // mat.shape[1])
    return np.concatenate([mat[i:i + rows] @ q for i in range(0, len(mat), rows)])


class FlatSnapshot:
    """One table version's unit vectors by row address, and which rows each filter seen so far matches.

    `unit` is None when the table is not searched here (it has a vector index, too many rows, or a
    row without a usable vector): its legs go to LanceDB.
    """

    def __init__(self, version: int, addrs: np.ndarray | None = None, unit: np.ndarray | None = None) -> None:
        self.version = version
        self.addrs = addrs  # sorted uint64 row addresses
        self.unit = unit  # float32 [rows, dims], each row of length 1, in the order of addrs
        self.masks: dict[str | None, np.ndarray] = {}  # where -> indexes into addrs of the rows it matches

    @staticmethod
    def build(version: int, scanned: pa.Table) -> FlatSnapshot:
        """From a scan of `_rowid` and `vector`; not searchable here if any vector is missing or zero."""
        vec = scanned["vector"]
        if scanned.num_rows == 0 or vec.null_count:
            return FlatSnapshot(version)
        col = vec.combine_chunks()
        dims = col.type.list_size
        flat = col.flatten()
        if flat.null_count:
            return FlatSnapshot(version)
        mat = flat.to_numpy(zero_copy_only=False).astype(np.float32, copy=False).reshape(-1, dims)
        norms = np.linalg.norm(mat, axis=1)
        if not np.all(np.isfinite(norms)) or not np.all(norms > 0):
            return FlatSnapshot(version)
        addrs = scanned["_rowid"].to_numpy()
        order = np.argsort(addrs, kind="stable")
        unit = (mat[order] / norms[order, None]).astype(np.float32)
        return FlatSnapshot(version, addrs[order].astype(np.uint64), unit)

    def set_mask(self, where: str | None, matching: np.ndarray) -> np.ndarray:
        """Keep the rows `where` matches (their addresses, from a scan under it); returns their indexes."""
        assert self.addrs is not None
        q = np.asarray(matching, dtype=np.uint64)
        at = np.searchsorted(self.addrs, q)
        at[at >= len(self.addrs)] = 0
        # A row written after this version's scan is not among addrs: the table's version moved, and the
        # next search scans again.
        idx = np.unique(at[self.addrs[at] == q])
        if len(self.masks) >= FLAT_MAX_FILTERS:
            self.masks.clear()
        self.masks[where] = idx
        return idx

    def search(self, vector, idx: np.ndarray, limit: int) -> pa.Table:
        """The `limit` nearest of the rows at idx by cosine distance, nearest first: `_distance`, `_rowid`
        (as LanceDB's vector leg returns them; ties in the order of their addresses)."""
        assert self.unit is not None and self.addrs is not None
        q = np.asarray(vector, dtype=np.float32)
        q = q / np.float32(np.linalg.norm(q))
        dist = np.float32(1.0) - _dots(self.unit, q)[idx]
        top = np.argsort(dist, kind="stable")[:limit]
        return pa.table({"_distance": pa.array(dist[top], pa.float32()),
                         "_rowid": pa.array(self.addrs[idx[top]], pa.uint64())})


class FlatVectors:
    """The latest FlatSnapshot of one table (read and replaced on the reads loop; cleared from any thread)."""

    def __init__(self, max_rows: int) -> None:
        self.max_rows = max_rows
        self._lock = threading.Lock()
        self._snap: FlatSnapshot | None = None
        self._epoch = 0  # bumped by clear(): a snapshot scanned before it is not kept

    @property
    def epoch(self) -> int:
        """Changes when the vectors are cleared: a scan read before that is not kept."""
        return self._epoch

    def at(self, version: int) -> FlatSnapshot | None:
        """The snapshot of this table version, if kept."""
        with self._lock:
            snap = self._snap
        return snap if snap is not None and snap.version == version else None

    def keep(self, snap: FlatSnapshot, epoch: int) -> None:
        """Keep snap (scanned at `epoch`), replacing an older version's (whose rows may since be forgotten)."""
        with self._lock:
            if epoch == self._epoch and (self._snap is None or snap.version >= self._snap.version):
                self._snap = snap

    def clear(self) -> None:
        """Drop the vectors (after rows were forgotten)."""
        with self._lock:
            self._epoch += 1
            self._snap = None
