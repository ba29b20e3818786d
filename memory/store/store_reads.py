"""The store's public reads: this device's rows and the shared scopes' rows together, under one filter.

Why here and not in each caller: a read that asked the local table alone left a shared scope's memories out
(MCP memory_list, memory_add's same-text check, the browser's listing and its "memories drawn from this
evidence" did), and every caller that merged did it its own way. Every read below runs the caller's filter
and the scope filter inside each query — the local table's, the outbox's and each bucket's (principle 5,
docs/architecture.md) — and gives a row this device holds itself once, from its own table.

Sources: a kind ("memory", "evidence", "vault") or a side table (memory/store/tables.py: tombstones, audit,
derivations, proposals, relations, memory_usage). Memories, evidence of a binding that shares it, and
relations have shared copies; `local=True` asks this device's table alone, for the reads that are about this
device's own rows (its capture, what it has yet to extract, what it made before a scope was bound).

Filters come from memory/store/filters.py; no caller outside the store package holds a table handle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import pyarrow as pa

from memory.errors import InputError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.filters import TIME_COLUMN, Where
from memory.store.rows import public_evidence, public_memory, public_vault
from memory.store.sealer import ROTATED
from memory.store.tables import EVIDENCE_COLS, MEMORY_COLS, VAULT_COLS

if TYPE_CHECKING:
    from memory.store.reads import Reader
    from memory.store.remote import Remotes
    from memory.store.sealer import Sealer

Kind = Literal["memory", "evidence", "vault"]
KINDS: tuple[str, ...] = ("memory", "evidence", "vault")
KIND_TABLE = {"memory": T.MEMORIES, "evidence": T.EVIDENCE, "vault": T.VAULT}
# The side tables a caller outside the store may read or write by name (never by handle).
SIDE_TABLES = frozenset({T.TOMBSTONES, T.AUDIT, T.DERIVATIONS, T.PROPOSALS, T.RELATIONS, T.USAGE})
_OPENED = {T.MEMORIES: "memories", T.EVIDENCE: "evidence", T.VAULT: "vault", T.TOMBSTONES: "tombstones",
           T.AUDIT: "audit"}
KIND_COLS = {"memory": MEMORY_COLS, "evidence": EVIDENCE_COLS, "vault": VAULT_COLS}
ID_CHUNK = 500  # ids per `id IN (...)` query: a bounded predicate, never a scan of the whole table
R = TypeVar("R")


def not_found(id_: str) -> str:
    return f"no row with id {id_} (it never existed, is outside your scopes, or was forgotten)"


class Reads:
    """Mixed into Store (memory/store/core.py): every read a caller outside the store package makes."""

    # Set by Store.__init__.
    remotes: Remotes
    sealer: Sealer
    reader: Reader
    db: Any
    _tables: dict[str, Any]
    _snapshots: dict[str, tuple[int, Any]]

    # ---- tables (store-internal: handles never leave memory/store) -------------------------

    def kind_table(self, kind: str) -> Any:
        """The local table that holds rows of a kind: "memory", "evidence" or "vault"."""
        if kind not in KINDS:
            raise InputError(f"unknown kind {kind!r}: use one of {', '.join(KINDS)}")
        return self.table(KIND_TABLE[kind])

    def table(self, name: str) -> Any:
        """A handle on the named table (memory/store/tables.py), opened once per store. Store-internal.

        Opening costs a manifest read, and some of these are read inside every search; the store
        connects with read_consistency_interval=0, so a kept handle still sees new writes."""
        if name in _OPENED:  # opened with the store (reopen_tables), so one handle per table
            return getattr(self, _OPENED[name])
        handle = self._tables.get(name)
        if handle is None:
            handle = self._tables[name] = self.db.open_table(name)
        return handle

    def _source_table(self, source: str) -> Any:
        if source in KINDS:
            return self.kind_table(source)
        if source in (T.MEMORIES, T.VAULT):
            return self.table(source)
        if source not in SIDE_TABLES:
            raise InputError(f"unknown table {source!r}: read a kind (memory, evidence, vault) or one of "
                             f"{', '.join(sorted(SIDE_TABLES))}")
        return self.table(source)

    def has_table(self, name: str) -> bool:
        """Whether this store has the table yet (some arrive with a migration, e.g. proposals)."""
        return name in self.db.table_names()

    def columns(self, source: str) -> list[str]:
        """The column names of a kind's or side table's local table (some arrive with a migration)."""
        return list(self._source_table(source).schema.names)

    def version(self, name: str) -> int:
        """The table's latest version: it moves with every commit, from any process."""
        return int(self._source_table(name).version)

    def tables_state(self) -> dict[str, tuple[int, int]]:
        """Every table's row count and version, by name: any write, however small, moves one of them."""
        return {n: (int(self.table(n).count_rows()), int(self.table(n).version)) for n in sorted(self.db.table_names())}

    # ---- this device's tables, by handle (memory/store modules only) ------------------------

    def scan_table(self, table: Any, where: Where | None, cols: list[str], limit: int | None = None) -> pa.Table:
        """The matching rows' columns of one local table as Arrow, opened (memory/store/sealer.py); limit None
        means every matching row. Store-internal: callers outside the package use scan / rows."""
        q = table.search()
        if where:
            q = q.where(where)
        if limit is None:
            limit = max(table.count_rows(where) if where else table.count_rows(), 1)
        return self.sealer.open_arrow(table.name, q.select(cols).limit(limit).to_arrow())

    def table_rows(self, table: Any, where: Where | None, cols: list[str],
                   limit: int | None = None) -> list[dict[str, Any]]:
        """scan_table as dicts."""
        rows: list[dict[str, Any]] = self.scan_table(table, where, cols, limit).to_pylist()
        return rows

    def nearest_table(self, table: Any, vectors: Any, where: Where | None, cols: list[str],
                      k: int) -> list[dict[str, Any]]:
        """The k rows of one local table nearest each query vector by cosine (filter inside the query), with
        `_distance`; for several vectors in one query, each row names its vector by `query_index`."""
        q = table.search(self.sealer.query_vector(vectors) if table.name in ROTATED else vectors,
                         vector_column_name="vector").distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        rows: list[dict[str, Any]] = self.sealer.open_arrow(
            table.name, q.select([*cols, "_distance"]).limit(k).to_arrow()).to_pylist()
        return rows

    # ---- merged reads ----------------------------------------------------------------------

    def _shared_rows(self, source: str, scopes: Iterable[str] | None, where: Where | None, cols: list[str],
                     limit: int | None) -> list[dict[str, Any]]:
        """The shared copies a read of source may find (memories, shared evidence, shared edges)."""
        if not self.remotes.shared:
            return []
        if source in ("memory", T.MEMORIES):
            return self.remotes.rows(scopes, where, cols, limit)
        if source == "evidence" and self.remotes.evidence is not None:
            return self.remotes.evidence.rows(scopes, where, cols, limit)
        if source == T.RELATIONS:
            return self.remotes.edges(scopes, where, cols, limit)
        return []

    def _scoped(self, source: str, where: Where | None, scopes: Iterable[str] | None) -> Where | None:
        if scopes is None:
            return F.and_(where)
        # An edge is visible only when both its ends are (memory/graph/relations.py).
        scope = F.both_ends(scopes) if source == T.RELATIONS else F.scope_in(scopes)
        return F.and_(scope, where)

    def scan(self, source: str, where: Where | None = None, cols: list[str] | None = None, *,
             scopes: Iterable[str] | None = None, limit: int | None = None, local: bool = False) -> pa.Table:
        """Rows of a kind or side table under the filter and the scope filter, as Arrow: this device's and
        (unless local) the shared scopes' — a row held in both once, from here. limit None: every row."""
        scopes = None if scopes is None else list(scopes)
        table = self._source_table(source)
        cols = list(cols) if cols is not None else _default_cols(source, table)
        pred = self._scoped(source, where, scopes)
        here = self.scan_table(table, pred, cols, limit)
        if local:
            return here
        want = list(dict.fromkeys(["id", *cols]))
        shared = self._shared_rows(source, scopes, pred, want, limit)
        if not shared:
            return here
        have = set(self.scan_table(table, pred, ["id"], limit)["id"].to_pylist()) if "id" not in cols \
            else set(here["id"].to_pylist())
        extra = []
        for r in shared:  # a row held here, or already taken from another shared store, once
            if r["id"] not in have:
                have.add(r["id"])
                extra.append({c: r.get(c) for c in cols})
        if not extra:
            return here
        merged = pa.concat_tables([here, pa.Table.from_pylist(extra, schema=here.schema)])
        return merged if limit is None else merged.slice(0, limit)

    def rows(self, source: str, where: Where | None = None, cols: list[str] | None = None, *,
             scopes: Iterable[str] | None = None, limit: int | None = None,
             local: bool = False) -> list[dict[str, Any]]:
        """scan as dicts."""
        rows: list[dict[str, Any]] = self.scan(source, where, cols, scopes=scopes, limit=limit, local=local).to_pylist()
        return rows

    def count(self, source: str, where: Where | None = None, *, scopes: Iterable[str] | None = None,
              local: bool = False) -> int:
        """How many rows scan would return (a count query here; the shared copies' ids when there are any)."""
        scopes = None if scopes is None else list(scopes)
        table = self._source_table(source)
        pred = self._scoped(source, where, scopes)
        n = int(table.count_rows(pred) if pred else table.count_rows())
        if local:
            return n
        shared = {r["id"] for r in self._shared_rows(source, scopes, pred, ["id"], None)}
        if not shared:
            return n
        listed = sorted(shared)
        held = sum(int(table.count_rows(F.and_(pred, F.id_in(listed[i:i + ID_CHUNK]))))
                   for i in range(0, len(listed), ID_CHUNK))
        return n + len(shared) - held

    def get_many(self, source: str, ids: Iterable[str], cols: list[str] | None = None, *,
                 scopes: Iterable[str] | None = None, where: Where | None = None,
                 local: bool = False) -> dict[str, dict[str, Any]]:
        """Rows by id, as {id: row} (ids that are absent or outside scopes are left out), this device's and the
        shared scopes'. source: a kind or a side table whose rows have an `id`. cols: default every column but
        the vector. where: a further filter. Ids go in `id IN (...)` queries of ID_CHUNK, never a scan."""
        scopes = None if scopes is None else list(scopes)
        table = self._source_table(source)
        if cols is None:
            cols = _default_cols(source, table)
        extra = self._scoped(source, where, scopes)
        wanted = list(dict.fromkeys(ids))
        out: dict[str, dict[str, Any]] = {}
        for start in range(0, len(wanted), ID_CHUNK):
            chunk = wanted[start:start + ID_CHUNK]
            pred = F.and_(F.id_in(chunk), extra)
            out.update((r["id"], r) for r in self.table_rows(table, pred, cols, len(chunk)))
            if not local and len(out) < start + len(chunk):  # the rest may be in a shared scope
                out.update((r["id"], r) for r in self._shared_rows(source, scopes, pred, cols, len(chunk))
                           if r["id"] not in out)
        return out

    def derived_from(self, evidence_ids: Iterable[str], cols: list[str], *, scopes: Iterable[str] | None = None,
                     where: Where | None = None, ledger: bool = False, limit: int | None = None,
                     local: bool = False) -> list[dict[str, Any]]:
        """Memories drawn from any of these evidence rows: their provenance names one, this device's and the shared
        scopes' (by id). ledger: also those the derivations ledger names (an erase that emptied a memory's
        provenance leaves it there), read whatever their provenance says now."""
        scopes = None if scopes is None else list(scopes)
        ids = sorted(set(evidence_ids))
        cols = list(dict.fromkeys(["id", *cols]))
        hits: dict[str, dict[str, Any]] = {}
        named: set[str] = set()
        with_ledger = ledger and self.has_table(T.DERIVATIONS)
        for start in range(0, len(ids), ID_CHUNK):
            chunk = ids[start:start + ID_CHUNK]
            for r in self.rows("memory", F.and_(F.derived_from(chunk), where), cols, scopes=scopes, limit=limit,
                               local=local):
                hits.setdefault(r["id"], r)
            if with_ledger:
                named |= {d["memory_id"] for d in self.rows(T.DERIVATIONS, F.id_in(chunk, "evidence_id"),
                                                             ["memory_id"])}
        missing = sorted(named - set(hits))
        if missing:
            hits.update(self.get_many("memory", missing, cols, scopes=scopes, where=where, local=local))
        out = list(hits.values())
        return out if limit is None else out[:limit]

    def nearest(self, source: str, vectors: Any, where: Where | None, cols: list[str], k: int, *,
                scopes: Iterable[str] | None = None, local: bool = False) -> list[dict[str, Any]]:
        """The k rows nearest each query vector by cosine, this device's and the shared scopes' memories, the
        filter inside every query; each row has `_distance` and, for several vectors, `query_index`."""
        import numpy as np

        scopes = None if scopes is None else list(scopes)
        table = self._source_table(source)
        pred = self._scoped(source, where, scopes)
        here = self.nearest_table(table, vectors, pred, cols, k)
        if local or source not in ("memory", T.MEMORIES) or not self.remotes.reading(scopes):
            return here
        many = np.asarray(vectors).ndim == 2
        queries = list(np.asarray(vectors, dtype=np.float32)) if many else [np.asarray(vectors, dtype=np.float32)]
        out: list[dict[str, Any]] = []
        for n, q in enumerate(queries):
            mine = [r for r in here if not many or r.get("query_index") == n]
            seen = {r.get("id") for r in mine}
            theirs = [r for r in self.remotes.nearest(scopes, pred, q, list(dict.fromkeys(["id", *cols])), k)
                      if r["id"] not in seen]
            best = sorted(mine + [{**{c: r.get(c) for c in cols}, "_distance": r["_distance"],
                                  **({"query_index": n} if many else {})} for r in theirs],
                          key=lambda r: r["_distance"])[:k]
            out += best
        return out

    def list(self, kind: str = "memory", *, scopes: Iterable[str] | None = None, types: Iterable[str] | None = None,
             statuses: Iterable[str] | None = None, limit: int = 50, offset: int = 0) -> list[dict[str, Any]]:
        """Newest first, this device's rows and the shared scopes'. Memories default to candidate+active;
        `statuses=[]` means every status."""
        import pyarrow.compute as pc

        conv: Callable[[dict[str, Any]], dict[str, Any]] = {
            "memory": public_memory, "evidence": public_evidence, "vault": public_vault}[kind]
        time_col = TIME_COLUMN[kind]
        scopes = None if scopes is None else list(scopes)
        where = F.where(kind, types=types, statuses=statuses)
        # The scopes go to scan and get_many (not only into the filter), so only the shared stores whose scope
        # they reach are asked: a list of a local scope never waits on a bucket that does not answer.
        keys = self.scan(kind, where, ["id", time_col], scopes=scopes)
        order = pc.sort_indices(keys, [(time_col, "descending")])  # nulls last
        ids = keys["id"].take(order[offset: offset + limit]).to_pylist() if keys.num_rows else []
        rows = self.get_many(kind, ids, scopes=scopes)
        return [conv(rows[i]) for i in ids if i in rows]

    def where(self, kind: str, *, scopes: Iterable[str] | None = None, types: Iterable[str] | None = None,
              statuses: Iterable[str] | None = None, sources: Iterable[str] | None = None,
              apps: Iterable[str] | None = None, since: Any = None, until: Any = None) -> Where | None:
        """A kind's listing filter (memory/store/filters.py where). apps: names as captured (exact), sealed here
        the way the evidence table holds them."""
        forms = F.EqualForms(self.sealer.equal_forms(T.EVIDENCE, "app", apps)) if apps else None
        return F.where(kind, scopes=scopes, types=types, statuses=statuses, sources=sources, apps=forms,
                       since=since, until=until)

    def apps_matching(self, match: Callable[[str], bool], where: Where | None = None) -> F.EqualForms:
        """The app values of this device's evidence (under where) whose name passes match, as the table holds
        them, for filters.sealed_one_of: a test a filter cannot make on a sealed column (a name whatever its
        case, a wildcard pattern) made on the opened names. Reads the app column only; each distinct value is
        opened once."""
        import pyarrow.compute as pc

        table = self.kind_table("evidence")
        q = table.search()
        if where:
            q = q.where(where)
        n = max(table.count_rows(where) if where else table.count_rows(), 1)
        held = [v for v in pc.unique(q.select(["app"]).limit(n).to_arrow()["app"]).to_pylist() if v is not None]
        names = self.sealer.open_values(T.EVIDENCE, "app", held)
        return F.EqualForms(tuple(h for h, name in zip(held, names, strict=True) if match(name)))

    def versioned(self, key: str, name: str, load: Callable[[], R], version: int | None = None) -> R:
        """load(), kept until the named table's version moves: for small tables read inside every search.

        The version check is far cheaper than a LanceDB query.
        version: the table's latest version when the caller has just read it (Reader.versions).
        """
        version = self.version(name) if version is None else version
        snap = self._snapshots.get(key)
        if snap is None or snap[0] != version:
            snap = self._snapshots[key] = (version, load())
        return snap[1]

    # ---- tombstones --------------------------------------------------------------------------

    def is_tombstoned(self, fp: str, scopes: Iterable[str] | None = None) -> bool:
        """True if content with this fingerprint was deleted by the person (so must not be recreated); scopes:
        only tombstones of those scopes count (a client must not learn what another scope forgot)."""
        return bool(self.count(T.TOMBSTONES, F.equals("fingerprint", fp), scopes=scopes) > 0)

    def tombstoned(self, *, ids: Iterable[str] = (), fingerprints: Iterable[str] = ()) -> set[str]:
        """Which of these ids, and which of these fingerprints, a tombstone names."""
        out: set[str] = set()
        for column, values in (("id", sorted(set(ids))), ("fingerprint", sorted(set(fingerprints)))):
            for start in range(0, len(values), ID_CHUNK):
                chunk = values[start:start + ID_CHUNK]
                out |= {r[column] for r in self.rows(T.TOMBSTONES, F.id_in(chunk, column), [column])}
        return out


def _default_cols(source: str, table: Any) -> list[str]:
    return KIND_COLS.get(source) or [n for n in table.schema.names if n != "vector"]
