"""Routing of the shared scopes' writes (memory/store/remote.py): which binding a memory or an edge belongs to,
its write diverted into the outbox, rows pushed when a scope is first bound, a move between scopes, a forget's
deletes and tombstones, and relation reads merged with the queued edges.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from memory.errors import Hint, InputError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.remote_search import Searches
from memory.store.remote_shared import Shared

log = logging.getLogger(__name__)


class Routes(Searches):
    """Mixed into Remotes (memory/store/remote.py)."""

    def divert(self, rows: list[dict[str, Any]], actor: str = "person",
               base: Any = None) -> list[dict[str, Any]]:
        """Queue the rows of shared scopes for their remote store and return the others (to be written
        locally). The queue is flushed before this returns when the remote answers. actor: who writes;
        base: updated_at of the shared version an edit started from (None for a new memory)."""
        if not self.shared:
            return rows
        local, queued = [], []
        for r in rows:
            s = self.binding_for(r["scope"])
            if s is None:
                local.append(r)
            else:
                queued.append((s.binding.name, "put", {**r, "outbox_actor": actor, "outbox_base": base}))
        if queued:
            self._enqueue(queued)
            self.flush(quiet=True)
        return local

    def put(self, row: dict[str, Any], actor: str = "person", old: dict[str, Any] | None = None) -> bool:
        """Route one upserted memory row: True when its scope is shared (queued, and flushed if the remote
        answers); False when it belongs in the local table. old: the version this edit started from."""
        if not self.shared:
            return False
        now = self.binding_for(row["scope"])
        if now is None:
            return False
        same = old is not None and self.binding_for(old["scope"]) is now
        # A memory written before its scope was bound is still in the local table: it is new to the shared
        # store (no base version there), and its local copy goes, or reads (local first) would keep answering
        # with it and the edit would seem lost.
        mem, where = self.store.memories, F.id_is(row["id"])
        made_before = same and bool(mem.count_rows(where))
        self.divert([row], actor=actor, base=old.get("updated_at") if same and old and not made_before else None)
        if made_before:
            self.store.commit(lambda: mem.delete(where))
        return True

    def made_before(self) -> dict[str, int]:
        """Per binding, the memories of its scope still in this device's local table: made before the scope was
        bound, and not shared until `push` (or an edit) sends them. Local reads only."""
        mem = self.store.memories
        return {n: mem.count_rows(F.scope_in([s.binding.scope])) for n, s in self.shared.items()}

    def push(self, name: str) -> dict[str, int]:
        """Share what this device made in a scope before it was bound: its local memories of the scope (and
        below), the relations between two of them, and — if the binding shares evidence — its evidence. Each
        goes through the outbox (sent now if the store answers) and leaves the local table. Returns counts."""
        s = self.shared.get(name)
        if s is None:
            raise InputError(f"no shared scope binding named {name!r}", hint=Hint(cli="see `mirador remote list`"))
        sf = F.scope_in([s.binding.scope])
        mem = self.store.memories
        rows = self.store.table_rows(mem, sf, [*T.MEMORY_COLS, "vector"], None)
        ids = [r["id"] for r in rows]
        if rows:
            self.divert(rows, actor="person")  # queued first: readable from the outbox while the local rows go
            for start in range(0, len(ids), 500):
                chunk = F.id_in(ids[start:start + 500])
                self.store.commit(lambda c=chunk: mem.delete(c))
        edges = 0
        rel = self.store.table(T.RELATIONS) if self.store.has_table(T.RELATIONS) else None
        if rel is not None:
            both = F.both_ends([s.binding.scope])
            found = self.store.table_rows(rel, both, list(rel.schema.names), None)
            # Only the edges the outbox took leave the local table (one with its ends in two bindings stays).
            kept = {e["id"] for e in self.divert_edges(found)} if found else set()
            sent = [e["id"] for e in found if e["id"] not in kept]
            for start in range(0, len(sent), 500):
                chunk = F.id_in(sent[start:start + 500])
                self.store.commit(lambda c=chunk: rel.delete(c))
            edges = len(sent)
        evidence = 0
        if s.binding.evidence and self.evidence is not None:
            ev = self.store.table_rows(self.store.evidence, sf, [*T.EVIDENCE_COLS, "vector"], None)
            evidence = self.evidence.mirror(ev) if ev else 0  # a copy: the local rows stay (mirrored, not moved)
        self.store.reader.forget_cached()
        self.flush(quiet=True)
        return {"memories": len(rows), "relations": edges, "evidence": evidence}

    def moved(self, id_: str, old_scope: str, new_scope: str) -> None:
        """A memory changed scope: drop the copy the move left behind (remote or local)."""
        was, now = self.binding_for(old_scope), self.binding_for(new_scope)
        if was is not None and was is not now:
            self._drop_queued_puts([id_])
            self._enqueue([(was.binding.name, "delete", {"id": id_})])
            self.flush(quiet=True)
        if was is None and now is not None:
            mem = self.store.memories
            self.store.commit(lambda: mem.delete(F.id_in([id_])))

    def forget(self, ids: list[str]) -> None:
        """Forget these memories remotely: deleted, purged from every old version, now if the remote answers
        and at the next flush otherwise. Queued puts of them are dropped first, so a flush after this
        never re-creates one."""
        if not self.shared or not ids:
            return
        queued = self._drop_queued_puts(ids)
        self._drop_queued_edges(ids)  # an edge waiting to be sent must not carry a forgotten id to the bucket
        # Only ids a shared store holds (a local forget must not purge the bucket), unless one could not
        # be asked: then every id is queued for it, and a delete of an absent id changes nothing.
        found = {r["id"] for r in self.rows(None, F.id_in(ids), ["id"], len(ids))}
        unsure = [s for s in self.shared.values() if s.last_error]
        # Each delete goes with an unlink: the memory's shared edges are removed with it.
        items = [(s.binding.name, op, {"id": i}) for s in self.shared.values() for i in ids
                 if i in found or (s in unsure and i not in queued) for op in ("unlink", "delete")]
        # The tombstones erasure wrote here go to the bucket first (a delete without its tombstone could
        # be undone by another device's queued write).
        stones = [(s.binding.name, "stone", r) for r in self.store.table_rows(
                      self.store.tombstones, F.id_in(ids), T.tombstones_schema().names, None)
                  if (s := self.binding_for(r["scope"])) is not None]
        if stones or items:
            self._enqueue(stones + items)
            self.flush()

    # ---- relations ------------------------------------------------------------------------

    def edge_binding(self, scope: str | None, dst_scope: str | None) -> Shared | None:
        """The shared store an edge with ends in these scopes lives in: the binding that holds both ends.
        None (a local edge) when either end is in a local scope or the ends are in two bindings: the bucket
        would otherwise hold the id of a memory it does not hold."""
        if not self.shared or not scope or not dst_scope:
            return None
        s = self.binding_for(scope)
        return s if s is not None and s is self.binding_for(dst_scope) else None

    def divert_edges(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Queue the edges whose both ends are in one shared scope for its store (rows of the relations
        table) and return the others, to be written locally. Flushed before this returns when the store
        answers; a queued edge is read back by `edges` meanwhile."""
        if not self.shared:
            return rows
        local, queued = [], []
        for r in rows:
            s = self.edge_binding(r["scope"], r["dst_scope"])
            if s is None:
                local.append(r)
            else:
                queued.append((s.binding.name, "rput", r))
        if queued:
            self._enqueue(queued)
            self.flush(quiet=True)
        return local

    def remove_edges(self, rows: list[dict[str, Any]]) -> int:
        """Remove these edges (rows with id, scope and dst_scope) from the shared stores that hold them: sent
        at once when the store answers (and their bytes purged), at a later flush otherwise. Returns how
        many were shared edges."""
        items = [(s.binding.name, "rdelete", {"id": r["id"]}) for r in rows
                 if (s := self.edge_binding(r["scope"], r["dst_scope"])) is not None]
        if items:
            self._enqueue(items)
            self.flush(quiet=True)
        return len(items)

    def edges(self, scopes: Iterable[str] | None, where: F.Where | None, cols: list[str],
              limit: int | None) -> list[dict[str, Any]]:
        """Edges of every shared store the scopes reach, under the filter (which holds the scope filter on
        both ends: the same query as the local table's), with the edges still queued in the outbox in their
        newest version, less those queued for removal. Each row carries `id` as well as cols."""
        if not self.shared:
            return []
        cols = list(dict.fromkeys(["id", *cols]))
        stores = self.reading(scopes)
        if not stores:
            return []
        names = [s.binding.name for s in stores]
        waiting: list[dict[str, Any]] = []
        pending: set[str] = set()  # edges with a queued op: the bucket's version of them is not current
        ob = self.outbox()
        if ob.count_rows(F.queued(("rput", "rdelete"), names)):
            ops = self.store.table_rows(ob, F.queued(("rput", "rdelete"), names), ["id", "outbox_seq", "outbox_op"], None)
            newest = {r["id"]: r for r in sorted(ops, key=lambda r: r["outbox_seq"])}
            pending = set(newest)
            live = {r["outbox_seq"] for r in newest.values() if r["outbox_op"] == "rput"}
            pred = F.and_(F.queued(("rput",), names), where)
            waiting = [{k: r[k] for k in cols} for r in self.store.table_rows(ob, pred, [*cols, "outbox_seq"], None)
                       if r["outbox_seq"] in live]
        found = self._each(scopes, lambda s: s.edge_query(where, cols, limit))
        out = waiting + [r for r in found if r["id"] not in pending]
        return out if limit is None else out[:limit]
