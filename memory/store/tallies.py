"""Row counts per scope (memories also per status) and the newest evidence time, kept rather than scanned.

A Lance table is a list of data fragments. A fragment's rows never change: a write adds fragments, a
delete or an update adds a deletion file to a fragment (an update appends the new row elsewhere), and
compaction replaces fragments with new ones. So the counts of a fragment are kept under its identity
(its data files and deletion file), and when the table's version moves only the fragments not seen
before are read. Writes from any process show up, since the fragments are the table's own, and a
reader never depends on every writer remembering to bump a counter.

Callers filter the kept groups by scope (`in_scopes`, the twin of the SQL scope filter), so one
client's answer never counts rows outside the scopes it may read.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory.scopes import in_scopes
from memory.types import Status

if TYPE_CHECKING:
    from memory.store.core import Store

# The columns a kind's rows are grouped by, and the time column whose newest value is kept.
GROUPS: dict[str, tuple[str, ...]] = {"memory": ("scope", "status"), "evidence": ("scope",), "vault": ("scope",)}
NEWEST: dict[str, str] = {"evidence": "captured_at"}
DEFAULT_STATUSES = (Status.CANDIDATE.value, Status.ACTIVE.value)  # as memory/store/filters.py's where()


@dataclass(frozen=True)
class Tally:
    """How many rows a selection holds and, for evidence, the newest captured_at among them."""

    count: int = 0
    newest: datetime | None = None


Groups = dict[tuple[str, ...], Tally]


def _merge(into: dict[tuple[str, ...], list[Any]], groups: Groups) -> None:
    for key, t in groups.items():
        cur = into.setdefault(key, [0, None])
        cur[0] += t.count
        if t.newest is not None and (cur[1] is None or t.newest > cur[1]):
            cur[1] = t.newest


class Tallies:
    """Per-fragment counts of the memory, evidence and vault tables of one store (`store.tallies`)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._locks = {kind: threading.Lock() for kind in GROUPS}
        # kind -> (table version, {fragment identity: its groups}, the groups summed over the table)
        self._kept: dict[str, tuple[int, dict[str, Groups], Groups]] = {}

    def groups(self, kind: str) -> Groups:
        """{(scope,) or (scope, status): Tally} over the whole table as of its latest version."""
        table = self._store.kind_table(kind)
        kept = self._kept.get(kind)
        if kept is not None and kept[0] == table.version:
            return kept[2]
        with self._locks[kind]:  # one thread reads the new fragments; the others then find them kept
            kept = self._kept.get(kind)
            ds = table.to_lance()
            if kept is not None and kept[0] == ds.version:
                return kept[2]
            old = kept[1] if kept is not None else {}
            frags: dict[str, Groups] = {}
            for frag in ds.get_fragments():
                ident = frag.metadata.to_json()
                key = repr(sorted(ident.items())) if isinstance(ident, dict) else str(ident)
                frags[key] = old[key] if key in old else self._read(kind, frag)
            total: dict[tuple[str, ...], list[Any]] = {}
            for g in frags.values():
                _merge(total, g)
            summed = {k: Tally(c, n) for k, (c, n) in total.items()}
            self._kept[kind] = (ds.version, frags, summed)
            return summed

    def _read(self, kind: str, frag: Any) -> Groups:
        by = list(GROUPS[kind])
        newest = NEWEST.get(kind)
        t = frag.to_table(columns=by + ([newest] if newest else []))
        if t.num_rows == 0:
            return {}
        aggs = [(by[0], "count")] + ([(newest, "max")] if newest else [])
        out = t.group_by(by).aggregate(aggs).to_pylist()
        return {tuple(r[c] for c in by): Tally(r[f"{by[0]}_count"], r.get(f"{newest}_max") if newest else None)
                for r in out}

    def warm(self) -> None:
        """Read every table's fragments now (a server's start), so the first status is not the slow one."""
        for kind in GROUPS:
            self.groups(kind)

    def visible(self, kind: str, scopes: Iterable[str] | None,
                statuses: Iterable[str] | None = None) -> Tally:
        """The rows of a kind in `scopes` (and their descendants; None: every scope); memories only with
        `statuses` (default candidate and active, as every read path)."""
        scopes = list(scopes) if scopes is not None else None
        wanted = set(statuses if statuses is not None else DEFAULT_STATUSES)
        count, newest = 0, None
        for key, t in self.groups(kind).items():
            if key[0] is None or not in_scopes(key[0], scopes) or (kind == "memory" and key[1] not in wanted):
                continue
            count += t.count
            if t.newest is not None and (newest is None or t.newest > newest):
                newest = t.newest
        return Tally(count, newest)
