"""One binding's bucket (memory/store/remote.py): its connection and tables (memories, tombstones, relations,
the edit log, the maintainer lease), the writes a flush commits to it, its health, and its maintenance.
"""

from __future__ import annotations

import logging
import time
import warnings
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import pyarrow as pa

from memory.config import RemoteBinding
from memory.errors import MiradorError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.remote_check import Problem, StoreRefused, checked, problem
from memory.store.remote_credentials import credential_env, load_credentials, storage_options
from memory.store.remote_dedup import dedupe_table, distinct_query, order_columns
from memory.store.remote_io import (
    ANY_DELETION,
    EDITS,
    LEASE,
    STONES,
    RemoteCommits,
    delete_ids,
    edits_schema,
    fresh,
    ids_where,
    retry,
    within,
)

log = logging.getLogger(__name__)


class Shared:
    """One binding's remote LanceDB: a connection and its memories table, opened on first use."""

    def __init__(self, binding: RemoteBinding, dim: int, timeout: float) -> None:
        self.binding = binding
        self.dim = dim
        self.timeout = timeout
        self._db: Any = None
        self._memories: Any = None
        self._stones: Any = None
        self._edits: Any = None
        self._relations: Any = None
        self._evidence: Any = None  # the bucket's evidence table, when the binding shares evidence (remote_evidence.py)
        self.last_checked: float | None = None
        self.last_error: str | None = None
        self.problem: str | None = None  # the kind of the last error (remote_check.HEADLINE)
        self.last_ok: float | None = None
        self._timed_out: float | None = None  # monotonic time of the last failure that was a timeout

    def _connect(self) -> Any:
        if self._db is None:
            import lancedb

            # A store that just did not answer is not asked again at once: one command's reads and its flush
            # would each wait the whole timeout on it again (the audit saw a shared add take 64 s).
            if self._timed_out is not None and time.monotonic() - self._timed_out < max(self.timeout, 5.0):
                raise StoreRefused(Problem("timeout", self.last_error or
                                           f"{self.binding.endpoint or self.binding.url} did not answer in time"))

            creds = load_credentials(self.binding.name)
            if creds is None:
                raise StoreRefused(Problem("credentials",
                    f"no credentials for the shared scope {self.binding.scope!r} (binding {self.binding.name!r}) "
                    f"in the OS keyring or in {' and '.join(credential_env(self.binding.name))} — run "
                    "`mirador remote add` again with --key-id and the secret, or set those variables"))
            # No automatic version checks: LanceDB would make one per call it makes (several per query);
            # every read below moves its table to the latest version once (fresh) before it queries,
            # so a row another device forgot is never read from an older version.
            # LanceDB reports a store that refuses or does not answer as ValueError, the type every caller here
            # reads as "no table yet": the connection raises StoreRefused instead (remote_check.py), so a wrong
            # secret or a store that is down never looks like an empty shared scope.
            options = storage_options(self.binding, *creds, self.timeout)
            try:
                # LanceDB's connect lists the store and tries that list again several times, each try waiting
                # the whole request timeout (6 tries: 32 s at a 5 s timeout, against a store that accepts and
                # never answers); the connect is bounded here to the timeout itself.
                self._db = checked(within(self.timeout + 1.0, lambda: lancedb.connect(
                    self.binding.url, read_consistency_interval=None, storage_options=options)), self.binding)
            except (ValueError, TimeoutError) as e:
                raise StoreRefused(problem(e, self.binding)) from e
        return self._db

    def memories(self, create: bool = True) -> Any:
        """The remote memories table (same schema as the local one); created by the first writer."""
        if self._memories is None:
            db = self._connect()
            try:
                self._memories = db.open_table(T.MEMORIES)
            except (ValueError, FileNotFoundError) as e:  # not there yet
                if not create:
                    raise
                log.info("creating the shared memories table at %s (%s)", self.binding.url, e)
                self._memories = retry(lambda: db.create_table(
                    T.MEMORIES, schema=T.memories_schema(self.dim), exist_ok=True))
            stored = self._memories.schema.field("vector").type.list_size
            if stored != self.dim:
                self._memories = None
                raise MiradorError(
                    f"the shared store at {self.binding.url} holds {stored}-dimension vectors and this machine's "
                    f"embedder makes {self.dim}: every device sharing a scope must use the same embedder")
        return self._memories

    def tombstones(self, create: bool = True) -> Any:
        """The bucket's tombstones table: what any device sharing the scope forgot (ids and fingerprints)."""
        if self._stones is None:
            db = self._connect()
            try:
                self._stones = db.open_table(STONES)
            except (ValueError, FileNotFoundError):
                if not create:
                    raise
                self._stones = retry(lambda: db.create_table(STONES, schema=T.tombstones_schema(), exist_ok=True))
        return self._stones

    def relations(self, create: bool = True) -> Any:
        """The bucket's relations table (same schema as the local one): edges between two shared memories."""
        if self._relations is None:
            db = self._connect()
            try:
                self._relations = db.open_table(T.RELATIONS)
            except (ValueError, FileNotFoundError):
                if not create:
                    raise
                self._relations = retry(lambda: db.create_table(T.RELATIONS, schema=T.relations_schema(),
                                                                 exist_ok=True))
        return self._relations

    def put_edges(self, data: pa.Table) -> None:
        """Upsert edges by id (a hash of src, relation and dst): an edge sent twice is one row."""
        t = self.relations()
        retry(lambda: t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data))

    def delete_edges(self, ids: list[str]) -> int:
        """Delete these edges; returns how many the store held. Only ids it holds are named in a delete: a
        delete's predicate stays in the table's transaction file until the purge drops that version."""
        try:
            t = fresh(self.relations(create=False))
        except (ValueError, FileNotFoundError):
            return 0
        return delete_ids(t, ids_where(t, ids, F.id_in, 500))

    def unlink(self, memory_ids: list[str]) -> int:
        """Delete every edge touching these (forgotten) memories, by edge id: the memory ids never go into a
        delete's predicate, where they would outlive the memories until the purge."""
        try:
            t = fresh(self.relations(create=False))
        except (ValueError, FileNotFoundError):
            return 0
        return delete_ids(t, ids_where(t, memory_ids, F.touching, 200))

    def edge_query(self, where: F.Where | None, cols: list[str], limit: int | None) -> list[dict[str, Any]]:
        """Edges of the bucket under the filter; none when no device has shared one yet."""
        try:
            t = fresh(self.relations(create=False))
        except (ValueError, FileNotFoundError):
            return []

        def run(n: int | None) -> list[dict[str, Any]]:
            q = t.search()
            if where:
                q = q.where(where)
            return list(q.select(cols).limit(n).to_arrow().to_pylist())

        # One row per edge id: two devices that sent one edge at once may both have inserted it.
        return distinct_query(run, limit) if "id" in cols else run(limit)

    def edits(self, create: bool = True) -> Any:
        """The bucket's edit log (edits_schema): who wrote each version of a shared memory."""
        if self._edits is None:
            db = self._connect()
            try:
                self._edits = db.open_table(EDITS)
            except (ValueError, FileNotFoundError):
                if not create:
                    raise
                self._edits = retry(lambda: db.create_table(EDITS, schema=edits_schema(), exist_ok=True))
        return self._edits

    def writers(self, ids: list[str]) -> dict[tuple[str, Any], dict[str, Any]]:
        """(id, updated_at) -> the edit-log row of that version, for these ids."""
        try:
            t = self.edits(create=False)
        except (ValueError, FileNotFoundError):
            return {}
        rows = fresh(t).search().where(F.id_in(ids)).select(edits_schema().names).limit(None)
        return {(r["id"], r["updated_at"]): r for r in rows.to_arrow().to_pylist()}

    def log_edits(self, rows: list[dict[str, Any]]) -> None:
        if rows:
            t = self.edits()
            data = pa.Table.from_pylist(rows, schema=edits_schema())
            retry(lambda: t.merge_insert(["id", "updated_at"]).when_not_matched_insert_all().execute(data))

    def put_stones(self, data: pa.Table) -> None:
        """Add tombstones by id: one forget sent twice leaves one tombstone."""
        t = self.tombstones()
        retry(lambda: t.merge_insert("id").when_not_matched_insert_all().execute(data))

    def stones(self, where: F.Where | None = None) -> list[dict[str, Any]]:
        """Tombstones in the bucket (all, or those matching the filter); none when no device forgot yet."""
        try:
            t = fresh(self.tombstones(create=False))
        except (ValueError, FileNotFoundError):
            return []
        q = t.search()
        if where:
            q = q.where(where)
        return list(q.select(T.tombstones_schema().names).limit(None).to_arrow().to_pylist())

    def _ok(self) -> None:
        self.last_ok, self.last_error, self.problem, self._timed_out = time.time(), None, None, None

    def _failed(self, e: Exception) -> None:
        # What went wrong and what to do (remote_check.py): "credentials refused" is not "offline".
        found = problem(e, self.binding)
        self.last_error, self.problem = found.message[:400], found.kind
        if found.kind == "timeout":
            self._timed_out = time.monotonic()
        log.info("shared scope %s: %s failure: %s", self.binding.scope, found.kind, e.__cause__ or e)  # raw, for diagnosis
        self._db = self._memories = self._stones = self._edits = self._relations = self._evidence = None  # reconnect next time: the endpoint may have restarted

    def put(self, data: pa.Table, new: bool = False) -> None:
        """Upsert rows by id: a batch sent twice leaves one row per id. new: rows no device holds (a bulk load)."""
        t = self.memories()
        retry(lambda: t.add(data) if new else
              t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data))

    def delete(self, ids: list[str]) -> None:
        t = self.memories()
        try:
            edit_log = self.edits(create=False)
        except (ValueError, FileNotFoundError):
            edit_log = None
        # From the newest version of each: a delete on a handle opened before another device's write leaves the
        # rows that write added (its edit-log rows of the forgotten memory: its id, who, which device).
        delete_ids(fresh(t), ids)
        if edit_log is not None:
            delete_ids(fresh(edit_log), ids)

    def ensure_text_index(self) -> None:
        """The full-text index the search's text leg needs (rows added after it are still scanned)."""
        from memory.store.indexes import ensure_fts, has_index

        t = fresh(self.memories())
        if t.count_rows() and not has_index(t, "search_text"):
            retry(lambda: ensure_fts(t, "search_text"))

    def purge(self, tables: Iterable[str] = (T.MEMORIES,)) -> None:
        """Remove deleted rows' bytes from the bucket: rewrite the fragments that held them, rebuild the
        full-text index (it keeps deleted rows' tokens), and drop every old version and its files.
        tables: the memories table and/or the relations table. With the memories goes the edit log, whose
        rows of a forgotten memory (its id, who wrote it from which device) are deleted with it."""
        for name in tables:
            if name == T.RELATIONS:
                try:
                    t = self.relations(create=False)
                except (ValueError, FileNotFoundError):
                    continue
            else:
                t = self.memories()
            self._purge(t)
            if name == T.MEMORIES:
                try:
                    self._purge(self.edits(create=False))
                except (ValueError, FileNotFoundError):
                    pass

    def _purge(self, t: Any) -> None:
        from memory.store.indexes import ensure_fts, has_index

        t = fresh(t)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")

            def compact() -> None:
                ds = fresh(t).to_lance()
                if any(f.metadata.num_deletions for f in ds.get_fragments()):
                    ds.optimize.compact_files(materialize_deletions=True,
                                              materialize_deletions_threshold=ANY_DELETION)

            # Each step from the newest version (see maintain): compaction commits through Lance directly.
            retry(lambda: fresh(t).optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
            retry(compact)
            if has_index(fresh(t), "search_text"):
                retry(lambda: ensure_fts(fresh(t), "search_text", replace=True))
            # A delete that emptied whole fragments leaves nothing to compact, so it stays the newest version,
            # which the cleanup keeps, and its predicate (the deleted ids) with it. A version on top that
            # changes only the table's config makes the delete an old version like any other.
            retry(lambda: fresh(t).to_lance().update_config({"mirador.purged_at": str(time.time_ns())}))
            retry(lambda: fresh(t).optimize(cleanup_older_than=timedelta(0), delete_unverified=False))

    def lease(self, device: str, minutes: float) -> bool:
        """Take or renew the maintainer lease for `minutes`: True when this device holds it now. The lease
        passes to another device only once it has expired, so one device at a time maintains the store."""
        from memory.types import utcnow

        db = self._connect()
        schema = pa.schema([("id", pa.string()), ("device", pa.string()), ("until", T.TS)])
        t = retry(lambda: db.create_table(LEASE, schema=schema, exist_ok=True))
        now = utcnow()
        row = pa.Table.from_pylist([{"id": LEASE, "device": device, "until": now + timedelta(minutes=minutes)}],
                                   schema=schema)
        retry(lambda: t.merge_insert("id")
               .when_matched_update_all(where=F.lease_free(now, device))
               .when_not_matched_insert_all().execute(row))
        held = t.search().where(F.id_is(LEASE)).select(["device"]).limit(1).to_arrow().to_pylist()
        return bool(held) and held[0]["device"] == device

    def maintain(self, stop: Any = None) -> dict[str, Any]:
        """Bring the shared memories table's indexes up to date and compact it, as the local scheduled
        maintenance does for local tables (memory/store/indexes.py), never on the query path."""
        from memory.store.indexes import (
            SCALAR_INDEXES,
            ensure_fts,
            ensure_scalar_indexes,
            ensure_vector_index,
            optimize_table,
        )

        try:
            t = fresh(self.memories(create=False))
        except (ValueError, FileNotFoundError):
            return {"rows": 0}
        started = time.perf_counter()
        # First one row per id (remote_dedup.py): concurrent inserts of one id from two homes both commit.
        out: dict[str, Any] = {"duplicates": retry(lambda: dedupe_table(t))}
        out["rows"] = fresh(t).count_rows()
        # Each step starts from the newest version: the handle does not follow commits made through
        # Lance directly (compaction) or by other devices, and a step begun on an old version conflicts.
        retry(lambda: ensure_fts(fresh(t), "search_text"))
        out["vector"] = retry(lambda: ensure_vector_index(fresh(t)))
        out["scalar"] = retry(lambda: ensure_scalar_indexes(fresh(t), SCALAR_INDEXES["memories"]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.update(optimize_table(RemoteCommits(t), t, stop))
            try:  # the shared edges: one small commit per sent batch, compacted here
                edges = self.relations(create=False)
            except (ValueError, FileNotFoundError):
                edges = None
            if edges is not None:
                out["edge_duplicates"] = retry(lambda: dedupe_table(edges))
                out["relations"] = optimize_table(RemoteCommits(edges), fresh(edges), stop)
        out["seconds"] = round(time.perf_counter() - started, 2)
        self._ok()
        return out

    def probe(self) -> dict[str, Any]:
        """Write, read back and delete one row in a probe table (remote_check.probe_store)."""
        from memory.store.remote_check import probe_store

        return probe_store(self)

    def query(self, where: F.Where | None, cols: list[str], limit: int | None, vector: Any = None,
              text: str | None = None) -> list[dict[str, Any]]:
        try:
            t = fresh(self.memories(create=False))
        except (ValueError, FileNotFoundError) as e:  # no device has written the shared scope yet
            log.debug("no shared memories table at %s yet (%s)", self.binding.url, e)
            return []
        if vector is not None:
            from memory.store.reads import NPROBES

            q = t.search(vector, vector_column_name="vector").distance_type("cosine").nprobes(NPROBES)
        elif text is not None:
            from memory.store.indexes import has_index

            if not has_index(t, "search_text"):
                return []
            q = t.search(text, query_type="fts", fts_columns="search_text")
        else:
            q = t.search()
        if where:
            q = q.where(where, prefilter=True) if vector is not None else q.where(where)
        if "id" not in cols:
            return list(q.select(cols).limit(limit).to_arrow().to_pylist())
        # One row per id, chosen by its newest version (remote_dedup.py): the bucket may hold an id twice when
        # two homes inserted it at once, and a duplicate must neither repeat in a read nor use up its limit.
        order = [] if vector is not None or text is not None else \
            [c for c in order_columns(t.schema.names) if c not in cols][:1]
        sel = [*cols, *order]

        def run(n: int | None) -> list[dict[str, Any]]:
            return list(q.select(sel).limit(n).to_arrow().to_pylist())

        rows = distinct_query(run, limit)
        if order:
            for r in rows:
                for c in order:
                    r.pop(c, None)
        return rows

