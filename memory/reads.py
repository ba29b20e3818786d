"""Search reads through LanceDB's async client, several queries in one hop.

Why: the sync client turns every result batch into its own round trip to LanceDB's event loop (one
thread hop each, plus one to find the stream's end), which cost 2-4 ms per query at 100k rows; and
running the legs of a search side by side took a thread pool on top. Here the legs of one search are
built as async queries and gathered on one loop, then the winners fetched in one more hop
(bench/scale.py: 100k hybrid memory search p50 39 -> ~26 ms on this machine; README, Performance).

Writes stay on the sync client. Both connections read the latest committed version on every query
(read_consistency_interval=0), so a read here sees what a write there has committed.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

# IVF partitions probed once a table has an index (memory/indexes.py: sqrt(rows) partitions). On the
# 100k bench store, recall@10 against an exact search: 20 probes 0.93-0.95, 40 probes 0.97, 80 0.98;
# 7.2 / 8.1 / 9.3 ms a query.
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
    where: str | None
    cols: tuple[str, ...]
    limit: int
    vector: object = None
    text: str | None = None
    fts_column: str | None = None
    row_ids: bool = False  # also return each row's address as `_rowid`
    take: tuple[int, ...] | None = None


class Reader:
    """Async handles on one store's tables, opened on first use."""

    def __init__(self, db_path: Path) -> None:
        self._path = str(db_path)
        self._db = None
        self._tables: dict[str, object] = {}

    def run(self, *legs: Leg) -> list[list[dict]]:
        """Every leg's rows, in leg order; the legs run concurrently."""
        return asyncio.run_coroutine_threadsafe(self._gather(legs), _event_loop()).result()

    async def _gather(self, legs) -> list[list[dict]]:
        tables = [await self._table(leg.table) for leg in legs]
        results = await asyncio.gather(*(self._query(t, leg).to_arrow() for t, leg in zip(tables, legs, strict=True)))
        return [r.to_pylist() for r in results]

    async def _table(self, name: str):
        t = self._tables.get(name)
        if t is None:
            if self._db is None:
                import lancedb

                self._db = await lancedb.connect_async(self._path, read_consistency_interval=timedelta(0))
            t = self._tables[name] = await self._db.open_table(name)
        return t

    @staticmethod
    def _query(table, leg: Leg):
        if leg.take is not None:
            # A row's address names one immutable row version: a take returns nothing for a row deleted,
            # updated (rewritten elsewhere) or compacted away since the address was read, never another row.
            return table.take_row_ids(list(leg.take)).select(list(leg.cols))
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
