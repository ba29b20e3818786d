"""Search reads through LanceDB's async client, several queries in one hop.

Why: the sync client turns every result batch into its own round trip to LanceDB's event loop (one
thread hop each, plus one to find the stream's end), which added up in every query; and
running the legs of a search side by side took a thread pool on top. Here the legs of one search are
built as async queries and gathered on one loop, then the winners fetched in one more hop
(bench/scale.py times the searches; bench/RESULTS.md).

Writes stay on the sync client. Both connections read the latest committed version on every query
(read_consistency_interval=0), so a read here sees what a write there has committed.

Ranking legs that read only what memory/store/rowcache.py keeps (ids, and the evidence ranking columns)
ask LanceDB for their scores and row addresses alone; the columns come from that cache. Their vector
legs on a small table without a vector index (memories, mostly) are answered from that table's vectors
kept by address (rowcache.FlatVectors): the exact search LanceDB would run, without decoding every
vector of the table at every query.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from memory.store import filters as F
from memory.store import lifetime
from memory.store.rowcache import (
    BASE_MAX_BYTES,
    BASE_MAX_ROWS,
    BASE_MAX_ROWS_BY_TABLE,
    COLUMNS,
    FLAT_TABLES,
    SIZE_SAMPLE_ROWS,
    FlatVectors,
    RowCache,
)
from memory.store.sealer import ROTATED, TERMS_COLUMN, TERMS_FROM, Sealer

if TYPE_CHECKING:
    from lancedb import AsyncConnection
    from lancedb.table import AsyncTable

    from memory.store.core import Store

log = logging.getLogger(__name__)

# IVF partitions probed once a table has an index (memory/store/indexes.py: sqrt(rows) partitions). Fewer
# probes miss more of an exact search's top 10, more cost time for little gain; this was the balance
# on the bench/scale.py store.
NPROBES = 40

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _event_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="mirador-reads", daemon=True).start()
        return _loop


@dataclass(frozen=True)
class Leg:
    """One query: a vector search (`vector` set), a full-text search (`text` set), a take of rows by
    address (`take` set: `_rowid` values a leg with `row_ids` returned) or a plain filter."""

    table: str
    where: F.Where | None
    cols: tuple[str, ...]
    limit: int
    vector: Sequence[float] | np.ndarray | None = None
    text: str | None = None
    fts_column: str | None = None
    row_ids: bool = False  # also return each row's address as `_rowid`
    take: tuple[int, ...] | None = None
    # False: the rows come back as stored (sealed values unopened); the caller opens the few it keeps with
    # Reader.open. A search opens its winners, not every candidate of both legs.
    opened: bool = True


_SCORES = ("_distance", "_score")


class Reader:
    """Async handles on one store's tables, opened on first use.

    row_cache: serve ranking legs' columns from memory/store/rowcache.py (False: every leg reads them).
    """

    def __init__(self, db_path: Path, row_cache: bool = True, forgets: str | None = None,
                 sealer: Sealer | None = None) -> None:
        self._path = str(db_path)
        # Sealed tables (memory/store/sealer.py): a vector leg's query is turned as the stored vectors are, a
        # full-text leg looks for the keyed terms, and every row returned is opened before the caller sees it.
        self._sealer = sealer
        self._db: AsyncConnection | None = None  # opened by the first query, on the reads loop
        self._tables: dict[str, AsyncTable] = {}
        self._caches: dict[str, RowCache] = {
            name: RowCache(cols, BASE_MAX_ROWS_BY_TABLE.get(name, BASE_MAX_ROWS), BASE_MAX_BYTES)
            for name, cols in COLUMNS.items()
        } if row_cache else {}
        # Small unindexed tables' vectors, searched here (rowcache.FLAT_TABLES); with the row cache only,
        # as their legs return addresses whose columns come from it.
        self._flats: dict[str, FlatVectors] = {
            name: FlatVectors(max_rows) for name, max_rows in FLAT_TABLES.items()} if row_cache else {}
        self._builds: set[asyncio.Task[None]] = set()
        # by (table, filter, version)
        self._scans: dict[tuple[str, str | None, int], asyncio.Future[pa.Table]] = {}  # filter scans in flight (Reader._flat_search)
        # forgets: a table every forget writes (tombstones). When its version moves, another process
        # forgot something: the caches are dropped at once, so no forgotten text stays in memory here.
        self._forgets = forgets if row_cache else None
        self._forgets_version: int | None = None

    def covers(self, table: str, cols: Iterable[str]) -> bool:
        """Whether ranking legs on `table` that read `cols` are served from the row cache."""
        cache = self._caches.get(table)
        return cache is not None and not cache.too_large and set(cols) - set(_SCORES) <= set(cache.cols)

    def run(self, *legs: Leg) -> list[list[dict[str, Any]]]:
        """Every leg's rows, in leg order; the legs run concurrently."""
        sealer = self._sealer
        if sealer is None:
            return asyncio.run_coroutine_threadsafe(self._gather(legs), _event_loop()).result()
        if not sealer.active:  # an older version's rows, not sealed yet: its words and vectors as they are
            found_plain = asyncio.run_coroutine_threadsafe(self._gather(legs), _event_loop()).result()
            return [sealer.open_rows(leg.table, rows) if leg.opened else rows
                    for leg, rows in zip(legs, found_plain, strict=True)]
        asked = [self._sealed_leg(sealer, leg) for leg in legs]
        todo = [leg for leg in asked if leg is not None]
        found = iter(asyncio.run_coroutine_threadsafe(self._gather(tuple(todo)), _event_loop()).result()
                     if todo else [])
        return [[] if leg is None else sealer.open_rows(leg.table, next(found)) if leg.opened else next(found)
                for leg in asked]

    def open(self, table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Rows a leg returned unopened (Leg.opened False), opened in place."""
        return self._sealer.open_rows(table, rows) if self._sealer is not None else rows


    @staticmethod
    def _sealed_leg(sealer: Sealer, leg: Leg) -> Leg | None:
        """The leg as a sealed table answers it (None: a text leg with no searchable word finds nothing)."""
        if leg.vector is not None and leg.table in ROTATED:
            leg = replace(leg, vector=sealer.query_vector(leg.vector))
        if leg.text is not None and leg.table in TERMS_FROM:
            terms = sealer.query_terms(leg.text)
            if not terms:
                return None
            leg = replace(leg, text=terms, fts_column=TERMS_COLUMN)
        return leg

    def versions(self, *tables: str) -> dict[str, int | None]:
        """The latest version of each table, checked side by side in one hop (None: not readable).

        A search checks the small tables it keeps snapshots of (vault scopes, usage) before its legs:
        one synchronous check each, one after the other, added their round trips up.
        """
        async def check(name: str) -> int | None:
            try:
                return await (await self._table(name)).version()
            except Exception as e:  # e.g. a table an older store does not have: its reader checks itself
                log.debug("version of %s not read (%s)", name, e)
                return None

        async def run() -> dict[str, int | None]:
            return dict(zip(tables, await asyncio.gather(*(check(n) for n in tables)), strict=True))

        return asyncio.run_coroutine_threadsafe(run(), _event_loop()).result()

    def cached(self, table: str, addrs: list[int], cols: Iterable[str]) -> tuple[dict[int, dict[str, Any]], list[int]]:
        """The row cache's rows (`cols` of them) at these addresses, and the addresses it does not hold."""
        cache = self._caches.get(table)
        if cache is None:
            return {}, list(addrs)
        found, missing = cache.lookup(addrs, cols)
        if self._sealer is not None and found:
            self._sealer.open_rows(table, list(found.values()))  # the cache keeps rows as stored: sealed
        return found, missing

    def warm(self, *tables: str) -> None:
        """Build the row caches of these tables now, waiting for it (benchmarks; searches build lazily)."""
        async def build() -> None:
            await asyncio.gather(*(self._build(n, c, c.build_due(force=True)) for n, c in self._caches.items()
                                   if n in tables))
        asyncio.run_coroutine_threadsafe(build(), _event_loop()).result()

    def cache_nbytes(self) -> int:
        """Memory the row caches' bases hold."""
        return sum(c.nbytes() for c in self._caches.values())

    def forget_cached(self) -> None:
        """Drop every cached row (after rows were forgotten), so nothing of theirs stays in memory."""
        self._clear()
        self._forgets_version = None  # this process's own forget: the next search just notes the version

    async def _gather(self, legs: Sequence[Leg]) -> list[list[dict[str, Any]]]:
        tables = [await self._table(leg.table) for leg in legs]
        caches = [self._cache_for(leg) for leg in legs]
        run = [replace(leg, cols=tuple(c for c in leg.cols if c in _SCORES)) if c else leg
               for leg, c in zip(legs, caches, strict=True)]
        watch = [self._forgets_moved()] if any(caches) and self._forgets else []
        results = await asyncio.gather(*(self._arrow(t, leg, c is not None)
                                         for t, leg, c in zip(tables, run, caches, strict=True)), *watch)
        if watch and results.pop():
            self._clear()
        out = [r.to_pylist() for r in results]
        if any(caches):
            await self._fill(legs, caches, out)
        return out

    def _clear(self) -> None:
        for c in self._caches.values():
            c.clear()
        for f in self._flats.values():
            f.clear()

    async def _arrow(self, table: AsyncTable, leg: Leg, cached: bool) -> pa.Table:
        """One leg's result. A vector leg of a small unindexed table whose columns come from the row
        cache is answered from the table's kept vectors: the same exact search LanceDB would run."""
        flat = self._flats.get(leg.table) if cached and leg.vector is not None else None
        if flat is not None:
            found = await self._flat_search(table, flat, leg)
            if found is not None:
                return found
        return await self._query(table, leg).to_arrow()

    async def _flat_search(self, table: AsyncTable, flat: FlatVectors, leg: Leg) -> pa.Table | None:
        """The leg's rows from kept vectors, or None when LanceDB must answer (an index, too many rows, or
        a row without a usable vector)."""
        version = await table.version()
        if flat.eligible is None or flat.eligible[0] != version:
            ok = await table.count_rows() <= flat.max_rows and not any(
                "vector" in ix.columns for ix in await table.list_indices())
            flat.eligible = (version, ok)
        if not flat.eligible[1]:
            return None
        epoch = flat.epoch
        addrs = flat.matching(leg.where, version)
        if addrs is None:
            # Which rows the filter matches: evaluated by LanceDB, once per filter and table version (legs
            # running side by side share one scan). A write landing during the scan makes it read a later
            # version than `version`; kept under `version` still, it serves only the legs that saw that
            # version before the write, as if they had run a moment later: every later leg sees the newer
            # version and scans again.
            key = (leg.table, leg.where, version)
            scan = self._scans.get(key)
            if scan is None:
                q = table.query()
                if leg.where:
                    q = q.where(leg.where)
                scan = self._scans[key] = asyncio.ensure_future(q.with_row_id().select([]).to_arrow())
                scan.add_done_callback(lambda _: self._scans.pop(key, None))
            scanned = await asyncio.shield(scan)
            addrs = flat.set_matching(leg.where, version, scanned["_rowid"].to_numpy(), epoch)
        unknown = flat.unknown(addrs)
        if len(unknown) and (flat.spill_full(len(unknown)) or len(unknown) > len(addrs) // 2):
            # First use, or many rows written or moved (compaction) since: every vector, in one scan.
            vectors = await table.query().with_row_id().select(["vector"]).to_arrow()
            await asyncio.to_thread(flat.set_base, vectors, epoch)
        elif len(unknown):
            # Rows written since: their vectors by address (what an address names never changes).
            vectors = await table.take_row_ids(unknown.tolist()).with_row_id().select(["vector"]).to_arrow()
            flat.add(vectors, epoch)
        assert leg.vector is not None  # only vector legs are answered here (_arrow)
        return flat.search(leg.vector, addrs, leg.limit)

    async def _forgets_moved(self) -> bool:
        """Whether the forgets table changed since the last search looked (side by side with its legs)."""
        if self._forgets is None:
            return False
        try:
            version = await (await self._table(self._forgets)).version()
        except Exception as e:  # no such table (yet): nothing was forgotten through it
            log.debug("forgets table %s not read (%s)", self._forgets, e)
            return False
        moved = self._forgets_version is not None and version != self._forgets_version
        self._forgets_version = version
        return moved

    def _cache_for(self, leg: Leg) -> RowCache | None:
        cache = self._caches.get(leg.table)
        if cache is None or not leg.row_ids or (leg.vector is None and leg.text is None):
            return None
        return cache if set(leg.cols) - set(_SCORES) <= set(cache.cols) else None

    async def _fill(self, legs: Sequence[Leg], caches: list[RowCache | None], out: list[list[dict[str, Any]]]) -> None:
        """Put the cached columns into the rows of cached legs; a row neither cached nor found by address
        now was deleted or moved since its leg read it, and is dropped (as a fetch by address drops it)."""
        hits: list[dict[int, dict[str, Any]]] = []
        missing: dict[str, set[int]] = {}
        for leg, cache, rows in zip(legs, caches, out, strict=True):
            found, miss = cache.lookup([r["_rowid"] for r in rows], leg.cols) if cache else ({}, [])
            hits.append(found)
            if cache:
                missing.setdefault(leg.table, set()).update(miss)
        taken = dict(zip(missing, await asyncio.gather(*(self._take(n, sorted(a)) for n, a in missing.items())),
                         strict=True))
        for i, (leg, cache) in enumerate(zip(legs, caches, strict=True)):
            if cache is None:
                continue
            found, extra, keep = hits[i], taken[leg.table], [c for c in leg.cols if c not in _SCORES]
            rows = []
            for r in out[i]:
                c = found.get(r["_rowid"]) or extra.get(r["_rowid"])
                if c is not None:
                    rows.append({**{k: c[k] for k in keep}, **r})
            out[i] = rows
        for name in missing:
            cache = self._caches[name]
            epoch = cache.build_due() if not lifetime.short_lived else None  # (memory/store/lifetime.py)
            if epoch is not None:
                task = asyncio.get_running_loop().create_task(self._build(name, cache, epoch))
                self._builds.add(task)
                task.add_done_callback(self._builds.discard)

    async def _take(self, name: str, addrs: list[int]) -> dict[int, dict[str, Any]]:
        if not addrs:
            return {}
        cache = self._caches[name]
        epoch = cache.epoch
        t = await self._table(name)
        rows = (await t.take_row_ids(addrs).with_row_id().select(list(cache.cols)).to_arrow()).to_pylist()
        cache.add(rows, epoch)
        return {r["_rowid"]: r for r in rows}

    async def _build(self, name: str, cache: RowCache, epoch: int | None) -> None:
        if epoch is None:
            return
        scanned = None
        try:
            t = await self._table(name)
            n = await t.count_rows()
            cache.too_large = n > cache.max_rows
            if not cache.too_large and n > SIZE_SAMPLE_ROWS:
                sample = await t.query().select(list(cache.cols)).limit(SIZE_SAMPLE_ROWS).to_arrow()
                cache.too_large = sample.nbytes / max(1, sample.num_rows) * n > cache.max_bytes
            if not cache.too_large:
                scanned = await t.query().with_row_id().select(list(cache.cols)).to_arrow()
                if scanned.nbytes > cache.max_bytes:  # the sample was not typical
                    cache.too_large, scanned = True, None
            if cache.too_large:
                log.info("search row cache for %s not built: %d rows are over its limit of %d rows or %d MB; "
                         "searches read the table instead", name, n, cache.max_rows, cache.max_bytes >> 20)
        except Exception as e:  # searches still work, from the table: slower, never wrong
            log.warning("search row cache for %s not built (%s); searches read the table instead", name, e)
        try:
            await asyncio.to_thread(cache.set_base, scanned, epoch)
        except RuntimeError as e:
            # A one-shot CLI process exits while the build still runs: the interpreter no longer takes
            # new threads, and the cache dies with the process anyway.
            if "shutdown" not in str(e):
                raise

    async def _table(self, name: str) -> AsyncTable:
        t = self._tables.get(name)
        if t is None:
            if self._db is None:
                import lancedb

                self._db = await lancedb.connect_async(self._path, read_consistency_interval=timedelta(0))
            t = self._tables[name] = await self._db.open_table(name)
        return t

    @staticmethod
    def _query(table: AsyncTable, leg: Leg) -> Any:  # one of LanceDB's async query builders
        q: Any
        if leg.take is not None:
            # A row's address names one immutable row version: a take returns nothing for a row deleted,
            # updated (rewritten elsewhere) or compacted away since the address was read, never another row.
            q = table.take_row_ids(list(leg.take))
            return (q.with_row_id() if leg.row_ids else q).select(list(leg.cols))
        if leg.vector is not None:
            # Prefiltered (the async default): the filter is applied before the nearest rows are taken.
            # Rows added since the last index build are always scanned as well (no fast_search).
            q = table.vector_search(leg.vector).column("vector").distance_type("cosine").nprobes(NPROBES)
        elif leg.text is not None:
            q = table.query().nearest_to_text(leg.text, columns=leg.fts_column)
        else:
            q = table.query()
        if leg.where:
            q = q.where(leg.where)
        if leg.row_ids:
            q = q.with_row_id()
        return q.select(list(leg.cols)).limit(leg.limit)


def fetch_rows(store: Store, table: str, ids: list[str], where: F.Where | None, cols: list[str],
               addresses: dict[str, int] | None = None, have: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Full rows of the chosen ids of the named local table, still under the caller's filter; a row deleted
    meanwhile is dropped.

    For legs that selected only ids: materialising every column of every candidate of a leg costs more
    than the search itself on a large table, and most candidates are thrown away by the fusion.
    addresses: the `_rowid` the legs returned per id. Taken by address, the rows are those the legs
    filtered (a row at an address never changes), which is faster than an `id IN` filter on a large
    table; a row rewritten or compacted since then has no row there, and is looked up by id under the
    filter. have: the rows the legs returned per id (with "id"): columns they hold are not read again,
    for the address names the same row version.
    """
    if not ids:
        return {}
    addresses, have = addresses or {}, have or {}
    out: dict[str, dict[str, Any]] = {}
    known = [i for i in ids if addresses and i in addresses]
    if known and store.reader.covers(table, ["id", *cols]):
        # Every column is in the row cache (memories, recall's columns): the table is read only for
        # rows written since the cache was built. A cached row is the version the legs just found, as
        # a leg that reads the columns itself returns it.
        found, _ = store.reader.cached(table, [addresses[i] for i in known], ["id", *cols])
        for i in known:
            row = found.get(addresses[i])
            if row is not None:
                out[i] = row
        known = [i for i in known if i not in out]
    if known:
        held = [c for c in dict.fromkeys(["id", *cols]) if have and all(c in have.get(i, ()) for i in known)]
        if "id" in held:
            read = tuple(c for c in cols if c not in held) or ("id",)  # the take still checks the row is there
            rows = store.reader.run(Leg(table, None, read, len(known), row_ids=True,
                                        take=tuple(addresses[i] for i in known)))[0]
            by_address = {addresses[i]: i for i in known}
            for r in rows:
                id_ = by_address.get(r.pop("_rowid"))
                if id_ is not None:
                    out[id_] = {**{c: have[id_][c] for c in held}, **r}
        else:
            rows = store.reader.run(Leg(table, None, tuple(dict.fromkeys(["id", *cols])), len(known),
                                        take=tuple(addresses[i] for i in known)))[0]
            wanted = set(known)
            out.update((r["id"], r) for r in rows if r["id"] in wanted)
    missing = [i for i in ids if i not in out]
    if missing:
        rows = store.reader.run(Leg(table, F.and_(where, F.id_in(missing)), tuple(cols), len(missing)))[0]
        out.update((r["id"], r) for r in rows)
    return out
