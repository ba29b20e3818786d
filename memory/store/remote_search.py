"""Reads of the shared scopes (memory/store/remote.py): search, nearest, fetch and rows of every bucket a read's
scopes reach, under the caller's filter, in parallel legs; a bucket that does not answer leaves the local results.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from memory.store import filters as F
from memory.store.remote_dedup import distinct
from memory.store.remote_io import OUTBOX
from memory.store.remote_pull import Pulls

if TYPE_CHECKING:
    from memory.store.remote_shared import Shared

log = logging.getLogger(__name__)


_POOL_LOCK = threading.Lock()


class Searches(Pulls):
    """Mixed into Remotes (memory/store/remote.py)."""

    def _pool(self) -> Any:
        with _POOL_LOCK:
            if self._legs is None:
                from concurrent.futures import ThreadPoolExecutor

                self._legs = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mirador-shared")
            return self._legs

    def _each(self, scopes: Iterable[str] | None, fn: Callable[[Shared], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for s in self.reading(scopes):
            try:
                out += fn(s)
                s._ok()
            except Exception as e:  # the shared scope is offline: local results still answer
                s._failed(e)
                log.warning("shared scope %s not searched: %s", s.binding.scope, s.last_error)
        return out

    def search(self, scopes: Iterable[str] | None, where: F.Where | None, vector: Any, text: str, cols: list[str],
               limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Vector and full-text hits of every shared store the scopes reach, under the same filter.

        Remote hits carry only `id` and their score (`_distance` / `_score`): reading the other columns
        of every candidate costs several times the search itself on an object store, so the caller
        reads just the winners' columns with `fetch`. Writes still queued in the outbox carry `cols`."""
        if not self.shared:
            return [], []
        # The two legs side by side: each waits mostly on the network.
        fts_later = self._pool().submit(self._each, scopes, lambda s: s.query(where, ["id", "_score"], limit,
                                                                              text=text))
        vec = self._each(scopes, lambda s: s.query(where, ["id", "_distance"], limit, vector=vector))
        fts = fts_later.result()
        # Writes still queued (the remote was down): found by their vector, in their newest version.
        newest = self._queued_nearest(where, vector, cols, limit * 4)
        if newest:
            vec = [*newest.values(), *(r for r in vec if r["id"] not in newest)]
            fts = [r for r in fts if r["id"] not in newest]
        return vec, fts

    def _queued_nearest(self, where: F.Where | None, vector: Any, cols: list[str], k: int) -> dict[str, dict[str, Any]]:
        """Memories waiting in the outbox nearest the vector, under the filter, by id in their newest version
        (with cols and `_distance`)."""
        ob = self.outbox()
        if not ob.count_rows():
            return {}
        pred = F.and_(F.queued(("put",)), where)
        # The outbox is a table of this data folder: sealed, its vectors turned (memory/store/sealer.py).
        got = self.store.sealer.open_arrow(OUTBOX, (
            ob.search(self.store.sealer.query_vector(vector), vector_column_name="vector").distance_type("cosine")
            .where(pred, prefilter=True).select([*dict.fromkeys([*cols, "id", "outbox_seq"]), "_distance"])
            .limit(k).to_arrow())).to_pylist()
        newest: dict[str, dict[str, Any]] = {}
        for r in sorted(got, key=lambda r: r["outbox_seq"]):
            newest[r["id"]] = {c: r[c] for c in (*cols, "_distance")}
        return newest

    def nearest(self, scopes: Iterable[str] | None, where: F.Where | None, vector: Any, cols: list[str],
                k: int) -> list[dict[str, Any]]:
        """The k shared memories nearest one query vector under the filter, with cols and `_distance` (Store.nearest
        merges them with the local table's); a write still queued is found in its newest version."""
        if not self.shared:
            return []
        cols = list(dict.fromkeys(["id", *cols]))
        found = self._each(scopes, lambda s: s.query(where, [*cols, "_distance"], k, vector=vector))
        queued = self._queued_nearest(where, vector, cols, k)
        return [*queued.values(), *(r for r in found if r["id"] not in queued)]

    def fetch(self, scopes: Iterable[str] | None, ids: list[str], cols: list[str]) -> dict[str, dict[str, Any]]:
        """The columns of these shared memories (the winners of a search), by id; a row deleted since the
        search, or a store that stopped answering, is simply absent."""
        if not self.shared or not ids:
            return {}
        cols = list(dict.fromkeys(["id", *cols]))
        where = F.id_in(ids)
        return {r["id"]: r for r in distinct(self._each(scopes, lambda s: s.query(where, cols, len(ids))))}

    def rows(self, scopes: Iterable[str] | None, where: F.Where | None, cols: list[str],
             limit: int | None) -> list[dict[str, Any]]:
        """Rows of every shared store the scopes reach, under the filter (which holds the scope filter)."""
        if not self.shared:
            return []
        waiting = self.queued(where, cols, limit) if "id" in cols else []
        mine = {r["id"] for r in waiting}
        found = self._each(scopes, lambda s: s.query(where, cols, limit))
        return waiting + [r for r in (distinct(found) if "id" in cols else found) if r["id"] not in mine]
