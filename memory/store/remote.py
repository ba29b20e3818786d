"""Shared scopes: the memories of a bound scope live in a LanceDB store on S3-compatible object storage.

A binding (config `remote.bindings`, docs/sharing.md) names a scope, an `s3://bucket/prefix`, an endpoint
and a region; the access key and secret are in the OS keyring under the binding's name. Memories whose
scope is the bound scope or below it are written there instead of the local memories table, and so are
the relations whose two ends are both memories of that binding (`edge_binding`); every other table
(frames, vault, audit, tombstones, usage; evidence unless the binding shares it) stays on this machine.

Writes go through a local outbox table first and are flushed in batches, at once when the remote
answers and later (`Remotes.flush`, called on every write and by the scheduler) when it does not: a
write never waits on the network, and a flush is idempotent (merge on id), so a batch retried after
a lost answer is neither lost nor doubled. Reads (search, get, list) run the same scope filter inside
the remote query as inside the local one and the store merges the rows (principle 5: scope in every
query). Forget deletes the rows remotely, rewrites the fragments that held them, rebuilds the
full-text index and removes every old version, so no object in the bucket keeps their text
(principle 3).

Tombstones are shared too: a forget queues the forgotten memories' tombstones (id, content fingerprint,
scope; never the text) for the bucket's tombstones table, ahead of the delete. Every device pulls them
into its local tombstones table (`Remotes.pull`, on each full flush), so its extraction never writes the
same content again, and a flush never sends a queued write of a memory another device forgot, nor an
automated write of content that was forgotten there.

Concurrent edits: a queued edit keeps the shared version it started from (outbox_base) and who made it
(outbox_actor). A flush settles it against the bucket's version and commits it only onto that version
(memory/store/remote_conflicts.py): a person beats an automated pass; between people the later edit wins and
the earlier stays as a superseded version, and its maker is told in Review. The bucket's edit log (EDITS:
ids, times, actor, device, person; no text) tells who wrote a version.

Relations: an edge (memory/graph/relations.py) is shared when both its ends are memories of one binding. An
edge with an end in a local scope (or in another binding) stays local: sending it would put the id of a
memory the bucket does not hold into the bucket. Shared edges take the same outbox (ops rput, rdelete) and
are read back with every relation read (`edges`); forgetting a memory removes its shared edges too (op
unlink, sent with the memory's delete), by edge id, and purges their bytes like the memories'.

Evidence: a binding with `evidence = true` also keeps a copy of its scope's evidence in the bucket (text,
index text, vector, metadata; never frames, audio or file paths): memory/store/remote_evidence.py. Without it
the evidence of a shared scope stays on the machine that captured it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import Any

import pyarrow as pa

from memory.errors import InputError, MiradorError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.lifecycle import on_forget
from memory.store.remote_check import PROBE, SETTINGS, Problem, StoreRefused, checked, problem
from memory.store.remote_io import fresh
from memory.store.remote_io import retry as _retry

log = logging.getLogger(__name__)

KEYRING_SERVICE = "mirador-remote"
OUTBOX = "remote_outbox"
STONES = T.TOMBSTONES  # the bucket's tombstones table, same schema as the local one
FLUSH_BATCH = 500  # queued writes sent in one remote commit
# Seconds a flush waits for another process of this home to finish sending: a write's own (quiet) flush waits
# less, as the person waits on it; what it does not send goes at the next flush.
HOME_LOCK_WAIT, HOME_LOCK_WAIT_QUIET = 30.0, 5.0
_ANY_DELETION = 1e-12  # rewrite every fragment that holds a deleted row (as memory/store/erasure.py does)


OUTBOX_COLS = ["outbox_seq", "outbox_binding", "outbox_op", "queued_at", "outbox_actor", "outbox_base"]
LEASE = "maintainer"  # one row: which device keeps the shared store's indexes, and until when
EDITS = "memory_edits"  # the bucket's log of who wrote which version: ids, times, actor, device, person


def outbox_schema(dim: int) -> pa.Schema:
    """One queued remote write, in outbox_seq order: a put (the memory row itself, so reads can query
    queued rows under the same filter as the tables) or a delete (the id alone)."""
    return pa.schema([*T.memories_schema(dim), pa.field("outbox_seq", pa.int64()),
                      pa.field("outbox_binding", pa.string()), pa.field("outbox_op", pa.string()),
                      pa.field("queued_at", T.TS), *_OUTBOX_ADDED])


# Added after the first outboxes were written: an older outbox gets them as empty columns.
# outbox_actor: who made the write; outbox_base: updated_at of the shared version an edit started from
# (None for a new memory), so a flush can tell a concurrent edit from its own. src, dst, relation,
# dst_scope: a queued edge (op rput) rides in the memory columns it shares (id, scope, provenance,
# confidence, origin, created_at) plus these, named as in the relations table so a relation read's
# filter applies to the outbox unchanged.
_OUTBOX_ADDED = [pa.field("outbox_actor", pa.string()), pa.field("outbox_base", T.TS),
                 pa.field("src", pa.string()), pa.field("dst", pa.string()), pa.field("relation", pa.string()),
                 pa.field("dst_scope", pa.string())]
EDGE_OPS = ("rput", "rdelete", "unlink")  # outbox ops of relations (memory ops: put, stone, delete)


def edits_schema() -> pa.Schema:
    """One version of a shared memory as sent: no content, only who wrote it where and when."""
    return pa.schema([("id", pa.string()), ("updated_at", T.TS), ("actor", pa.string()),
                      ("device", pa.string()), ("person", pa.string()), ("sent_at", T.TS)])


# ---- credentials: the OS keyring, or the environment of a device without one ------------------


def credential_env(name: str) -> tuple[str, str]:
    """The environment variables a binding's key id and secret are read from when the OS keyring has none
    (a headless device: a server, a container): MIRADOR_REMOTE_<NAME>_KEY_ID and MIRADOR_REMOTE_<NAME>_SECRET."""
    stem = "MIRADOR_REMOTE_" + name.upper().replace("-", "_")
    return f"{stem}_KEY_ID", f"{stem}_SECRET"


def _keyring():
    import keyring
    from keyring.errors import NoKeyringError

    backend = keyring.get_keyring()
    if type(backend).__module__.startswith("keyring.backends.fail") or getattr(backend, "priority", 1) <= 0:
        raise NoKeyringError(f"{type(backend).__name__} cannot keep secrets")
    return keyring


def require_keyring(name: str) -> None:
    """Raise the error save_credentials would (no usable OS keyring) before anything else is done: `remote add`
    asks this before it contacts the store."""
    try:
        _keyring()
    except Exception as e:  # NoKeyringError, a D-Bus error
        raise _no_keyring(name, e) from e


def save_credentials(name: str, key_id: str, secret: str) -> None:
    """Keep a binding's S3 access key and secret in the OS keyring (never in the config file)."""
    if not key_id or not secret:
        raise InputError("both an access key id and a secret are needed")
    try:
        _keyring().set_password(KEYRING_SERVICE, name, json.dumps({"key_id": key_id, "secret": secret}))
    except Exception as e:  # NoKeyringError, a locked keyring, a D-Bus error
        raise _no_keyring(name, e) from e


def _no_keyring(name: str, e: Exception) -> MiradorError:
    return MiradorError(
            f"cannot keep the credentials of {name!r} in the OS keyring ({e}) — install and unlock a Secret "
            "Service (GNOME Keyring, KWallet), macOS Keychain or Windows Credential Manager, then run "
            "`mirador remote add` again; on a device without one (a server), give every Mirador process "
            f"{' and '.join(credential_env(name))} and add the binding with --env-credentials. "
            "Mirador never writes them to a file")


def load_credentials(name: str) -> tuple[str, str] | None:
    """(key id, secret) of a binding: from the OS keyring, else from the environment (credential_env), else None."""
    try:
        raw = _keyring().get_password(KEYRING_SERVICE, name)
    except Exception as e:
        log.info("no OS keyring for the credentials of %s (%s)", name, e)
        raw = None
    if raw:
        data = json.loads(raw)
        return data["key_id"], data["secret"]
    key_var, secret_var = credential_env(name)
    if os.environ.get(key_var) and os.environ.get(secret_var):
        return os.environ[key_var], os.environ[secret_var]
    return None


def delete_credentials(name: str) -> None:
    """Remove a binding's credentials from the keyring (absent ones are fine)."""
    try:
        _keyring().delete_password(KEYRING_SERVICE, name)
    except Exception as e:  # PasswordDeleteError when absent, or no keyring
        log.info("credentials of %s not removed from the keyring (%s)", name, e)


def storage_options(binding: Any, key_id: str, secret: str, timeout: float) -> dict[str, str]:
    """LanceDB / object_store options for a binding. Few retries: a remote that is down must fail fast,
    and the write waits in the outbox instead."""
    opts = {
        "aws_access_key_id": key_id,
        "aws_secret_access_key": secret,
        "aws_region": binding.region,
        "timeout": f"{timeout:g}s",
        "connect_timeout": f"{min(timeout, 2.0):g}s",
        "client_max_retries": "1",
        "client_retry_timeout": f"{max(1, int(timeout))}",
    }
    if binding.endpoint:
        opts["aws_endpoint"] = binding.endpoint
        opts["allow_http"] = "true" if binding.endpoint.startswith("http://") else "false"
    return opts


# ---- scopes ---------------------------------------------------------------------------------


def covers(bound: str, scope: str) -> bool:
    """Whether a row in `scope` belongs to the binding of `bound` (the scope itself or below it)."""
    return scope == bound or scope.startswith(bound + "/")


def touches(bound: str, scopes: Iterable[str] | None) -> bool:
    """Whether a read limited to `scopes` (None: all) can see rows of the binding of `bound`."""
    if scopes is None:
        return True
    return any(covers(bound, s) or covers(s, bound) for s in scopes)


class Shared:
    """One binding's remote LanceDB: a connection and its memories table, opened on first use."""

    def __init__(self, binding: Any, dim: int, timeout: float) -> None:
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

    def _connect(self) -> Any:
        if self._db is None:
            import lancedb

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
            try:
                self._db = checked(lancedb.connect(self.binding.url, read_consistency_interval=None,
                                                   storage_options=storage_options(self.binding, *creds,
                                                                                   self.timeout)), self.binding)
            except ValueError as e:
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
                self._memories = _retry(lambda: db.create_table(
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
                self._stones = _retry(lambda: db.create_table(STONES, schema=T.tombstones_schema(), exist_ok=True))
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
                self._relations = _retry(lambda: db.create_table(T.RELATIONS, schema=T.relations_schema(),
                                                                 exist_ok=True))
        return self._relations

    def put_edges(self, data: pa.Table) -> None:
        """Upsert edges by id (a hash of src, relation and dst): an edge sent twice is one row."""
        t = self.relations()
        _retry(lambda: t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data))

    def delete_edges(self, ids: list[str]) -> int:
        """Delete these edges; returns how many the store held. Only ids it holds are named in a delete: a
        delete's predicate stays in the table's transaction file until the purge drops that version."""
        try:
            t = fresh(self.relations(create=False))
        except (ValueError, FileNotFoundError):
            return 0
        return _delete_ids(t, _ids_where(t, ids, F.id_in, 500))

    def unlink(self, memory_ids: list[str]) -> int:
        """Delete every edge touching these (forgotten) memories, by edge id: the memory ids never go into a
        delete's predicate, where they would outlive the memories until the purge."""
        try:
            t = fresh(self.relations(create=False))
        except (ValueError, FileNotFoundError):
            return 0
        return _delete_ids(t, _ids_where(t, memory_ids, F.touching, 200))

    def edge_query(self, where: str | None, cols: list[str], limit: int | None) -> list[dict[str, Any]]:
        """Edges of the bucket under the filter; none when no device has shared one yet."""
        try:
            t = fresh(self.relations(create=False))
        except (ValueError, FileNotFoundError):
            return []
        q = t.search()
        if where:
            q = q.where(where)
        return list(q.select(cols).limit(limit).to_arrow().to_pylist())

    def edits(self, create: bool = True) -> Any:
        """The bucket's edit log (edits_schema): who wrote each version of a shared memory."""
        if self._edits is None:
            db = self._connect()
            try:
                self._edits = db.open_table(EDITS)
            except (ValueError, FileNotFoundError):
                if not create:
                    raise
                self._edits = _retry(lambda: db.create_table(EDITS, schema=edits_schema(), exist_ok=True))
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
            _retry(lambda: t.merge_insert(["id", "updated_at"]).when_not_matched_insert_all().execute(data))

    def put_stones(self, data: pa.Table) -> None:
        """Add tombstones by id: one forget sent twice leaves one tombstone."""
        t = self.tombstones()
        _retry(lambda: t.merge_insert("id").when_not_matched_insert_all().execute(data))

    def stones(self, where: str | None = None) -> list[dict[str, Any]]:
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
        self.last_ok, self.last_error, self.problem = time.time(), None, None

    def _failed(self, e: Exception) -> None:
        # What went wrong and what to do (remote_check.py): "credentials refused" is not "offline".
        found = problem(e, self.binding)
        self.last_error, self.problem = found.message[:400], found.kind
        self._db = self._memories = self._stones = self._edits = self._relations = self._evidence = None  # reconnect next time: the endpoint may have restarted

    def put(self, data: pa.Table) -> None:
        """Upsert rows by id: a batch sent twice leaves one row per id."""
        t = self.memories()
        _retry(lambda: t.merge_insert("id").when_matched_update_all().when_not_matched_insert_all().execute(data))

    def delete(self, ids: list[str]) -> None:
        t = self.memories()
        try:
            edit_log = self.edits(create=False)
        except (ValueError, FileNotFoundError):
            edit_log = None
        # From the newest version of each: a delete on a handle opened before another device's write leaves the
        # rows that write added (its edit-log rows of the forgotten memory: its id, who, which device).
        _delete_ids(fresh(t), ids)
        if edit_log is not None:
            _delete_ids(fresh(edit_log), ids)

    def ensure_text_index(self) -> None:
        """The full-text index the search's text leg needs (rows added after it are still scanned)."""
        from memory.store.indexes import ensure_fts, has_index

        t = fresh(self.memories())
        if t.count_rows() and not has_index(t, "search_text"):
            _retry(lambda: ensure_fts(t, "search_text"))

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
                                              materialize_deletions_threshold=_ANY_DELETION)

            # Each step from the newest version (see maintain): compaction commits through Lance directly.
            _retry(lambda: fresh(t).optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
            _retry(compact)
            if has_index(fresh(t), "search_text"):
                _retry(lambda: ensure_fts(fresh(t), "search_text", replace=True))
            # A delete that emptied whole fragments leaves nothing to compact, so it stays the newest version,
            # which the cleanup keeps, and its predicate (the deleted ids) with it. A version on top that
            # changes only the table's config makes the delete an old version like any other.
            _retry(lambda: fresh(t).to_lance().update_config({"mirador.purged_at": str(time.time_ns())}))
            _retry(lambda: fresh(t).optimize(cleanup_older_than=timedelta(0), delete_unverified=False))

    def lease(self, device: str, minutes: float) -> bool:
        """Take or renew the maintainer lease for `minutes`: True when this device holds it now. The lease
        passes to another device only once it has expired, so one device at a time maintains the store."""
        from memory.types import utcnow

        db = self._connect()
        schema = pa.schema([("id", pa.string()), ("device", pa.string()), ("until", T.TS)])
        t = _retry(lambda: db.create_table(LEASE, schema=schema, exist_ok=True))
        now = utcnow()
        row = pa.Table.from_pylist([{"id": LEASE, "device": device, "until": now + timedelta(minutes=minutes)}],
                                   schema=schema)
        _retry(lambda: t.merge_insert("id")
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
        out: dict[str, Any] = {"rows": t.count_rows()}
        # Each step starts from the newest version: the handle does not follow commits made through
        # Lance directly (compaction) or by other devices, and a step begun on an old version conflicts.
        _retry(lambda: ensure_fts(fresh(t), "search_text"))
        out["vector"] = _retry(lambda: ensure_vector_index(fresh(t)))
        out["scalar"] = _retry(lambda: ensure_scalar_indexes(fresh(t), SCALAR_INDEXES["memories"]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.update(optimize_table(_RemoteCommits(t), t, stop))
            try:  # the shared edges: one small commit per sent batch, compacted here
                edges = self.relations(create=False)
            except (ValueError, FileNotFoundError):
                edges = None
            if edges is not None:
                out["relations"] = optimize_table(_RemoteCommits(edges), fresh(edges), stop)
        out["seconds"] = round(time.perf_counter() - started, 2)
        self._ok()
        return out

    def probe(self) -> dict[str, Any]:
        """Write, read back and delete one row in a probe table (never the memories): what `mirador remote
        test` reports, with the time each step took in milliseconds."""
        import uuid

        out: dict[str, Any] = {}
        t0 = time.perf_counter()
        db = self._connect()
        token = uuid.uuid4().hex
        table = _retry(lambda: db.create_table(PROBE, schema=pa.schema([pa.field("id", pa.string())]),
                                               exist_ok=True))
        _retry(lambda: table.add(pa.table({"id": [token]})))
        out["write_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        t1 = time.perf_counter()
        found = table.count_rows(F.id_is(token))
        out["read_ms"] = round((time.perf_counter() - t1) * 1000, 1)
        _retry(lambda: table.delete(F.id_is(token)))
        if found != 1:
            raise MiradorError(f"the probe row written to {self.binding.url} was not read back ({found} found)")
        try:
            out["memories"] = fresh(self.memories(create=False)).count_rows()
        except (ValueError, FileNotFoundError):
            out["memories"] = 0
        self._ok()
        return out

    def query(self, where: str | None, cols: list[str], limit: int | None, vector: Any = None,
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
        return list(q.select(cols).limit(limit).to_arrow().to_pylist())


class Remotes:
    """The store's shared scopes: routing of writes through the outbox, and reads of the remote tables.

    Store creates one (`store.remotes`); with no binding configured every method is a cheap no-op.
    """

    def __init__(self, store: Any, evidence: Any = None) -> None:
        self.store = store
        cfg = store.config.remote
        self.flush_interval = cfg.flush_interval_seconds
        self.shared = {b.name: Shared(b, store.embedder.dim, cfg.timeout_seconds) for b in cfg.bindings}
        self._outbox: Any = None
        self._flush_lock = threading.Lock()
        self._flush_file_lock: Any = None
        self._last_failed: float = 0.0
        self._pulled: dict[str, int] = {}  # binding -> version of its bucket's tombstones table last pulled
        self._legs: Any = None  # threads for the shared legs of a search, made on first use
        self.device, self.person = (_device(store.home), _person()) if self.shared else ("", "")
        # A lease outlives two maintenance intervals: a device that stopped hands it over after that.
        self.lease_minutes = 2 * cfg.maintain_interval_minutes
        # Evidence copies for bindings with `evidence = true`: memory/store/remote_evidence.py's EvidenceMirror,
        # handed in by the store (it imports this module, so this one may not import it).
        self.evidence: Any = evidence(self) if evidence is not None else None

    # ---- routing --------------------------------------------------------------------------

    def binding_for(self, scope: str) -> Shared | None:
        """The shared store a row of this scope lives in, or None for a local scope."""
        for s in self.shared.values():
            if covers(s.binding.scope, scope):
                return s
        return None

    def reading(self, scopes: Iterable[str] | None) -> list[Shared]:
        """The shared stores a read limited to scopes may find rows in."""
        scopes = None if scopes is None else list(scopes)
        return [s for s in self.shared.values() if touches(s.binding.scope, scopes)]

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
            raise InputError(f"no shared scope binding named {name!r} — see `mirador remote list`")
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

    def edges(self, scopes: Iterable[str] | None, where: str | None, cols: list[str],
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

    # ---- the outbox -----------------------------------------------------------------------

    def _home_lock(self) -> Any:
        """The file lock that lets one process of this home send at a time (made once per process)."""
        if self._flush_file_lock is None:
            from filelock import FileLock

            self._flush_file_lock = FileLock(str(self.store.home / "remote-flush.lock"))
        return self._flush_file_lock

    def outbox(self) -> Any:
        if self._outbox is None:
            db = self.store.db
            if OUTBOX in db.table_names():
                self._outbox = db.open_table(OUTBOX)
            else:
                self._outbox = db.create_table(OUTBOX, schema=outbox_schema(self.store.embedder.dim), exist_ok=True)
            missing = [f for f in _OUTBOX_ADDED if f.name not in self._outbox.schema.names]
            if missing:
                self.store.commit(lambda: self._outbox.add_columns(missing))
        return self._outbox

    def _drop_queued_puts(self, ids: list[str]) -> set[str]:
        """Remove queued puts of these ids, and every old outbox version that held their text."""
        ob = self.outbox()
        pred = F.and_(F.queued(("put",)), F.id_in(ids))
        queued = {r["id"] for r in self.store.table_rows(ob, pred, ["id"], None)} if ob.count_rows() else set()
        if queued:
            self.store.commit(lambda: ob.delete(pred))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the outbox held their text: no old version keeps it
                self.store.commit(lambda: ob.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
        return queued

    def _drop_queued_edges(self, memory_ids: list[str]) -> None:
        """Remove queued edges touching these memories (forgotten here or on another device), and every old
        outbox version that held them."""
        ob = self.outbox()
        if not memory_ids or not ob.count_rows(F.queued(("rput",))):
            return
        gone = set(memory_ids)
        queued = self.store.table_rows(ob, F.queued(("rput",)), ["outbox_seq", "src", "dst"], None)
        seqs = [r["outbox_seq"] for r in queued if r["src"] in gone or r["dst"] in gone]
        if seqs:
            pred = F.numbers_in("outbox_seq", seqs)
            self.store.commit(lambda: ob.delete(pred))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.store.commit(lambda: ob.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))

    def queued(self, where: str | None, cols: list[str], limit: int | None) -> list[dict[str, Any]]:
        """Memory rows waiting in the outbox that match the filter (the newest queued version of each)."""
        ob = self.outbox()
        if not ob.count_rows():
            return []
        pred = F.and_(F.queued(("put",)), where)
        rows = self.store.table_rows(ob, pred, list(dict.fromkeys([*cols, "id", "outbox_seq"])), None)
        newest: dict[str, dict[str, Any]] = {}
        for r in sorted(rows, key=lambda r: r["outbox_seq"]):
            newest[r["id"]] = r
        return [{k: r[k] for k in cols} for r in newest.values()][:limit]

    def pending(self) -> dict[str, int]:
        """Queued writes per binding name."""
        if not self.shared:
            return {}
        ob = self.outbox()
        names = self.store.table_rows(ob, None, ["outbox_binding"], None) if ob.count_rows() else []
        out = dict.fromkeys(self.shared, 0)
        for r in names:
            out[r["outbox_binding"]] = out.get(r["outbox_binding"], 0) + 1
        for name, n in (self.evidence.pending() if self.evidence is not None else {}).items():
            out[name] = out.get(name, 0) + n
        return out

    def _enqueue(self, items: list[tuple[str, str, dict[str, Any]]]) -> None:
        from memory.types import utcnow

        dim = self.store.embedder.dim
        now, base = utcnow(), time.time_ns()
        rows = []
        for n, (name, op, r) in enumerate(items):
            if op == "put":
                row = dict(r)
            elif op == "rput":  # an edge: ids, a type, evidence ids; never any text
                row = {**{k: r.get(k) for k in T.RELATION_COLS}, "vector": [0.0] * dim}
            elif op == "stone":  # a tombstone rides in the memory columns it shares: never any text
                row = {"id": r["id"], "type": r["kind"], "fingerprint": r["fingerprint"], "scope": r["scope"],
                       "created_at": r["deleted_at"], "vector": [0.0] * dim}
            else:
                row = {"id": r["id"], "vector": [0.0] * dim}
            row.update(outbox_seq=base + n, outbox_binding=name, outbox_op=op, queued_at=now)
            rows.append(row)
        self.store.append(self.outbox(), rows, outbox_schema(dim))

    def flush(self, quiet: bool = False) -> dict[str, Any]:
        """Send queued writes to their remote stores, oldest first, in batches; a batch is removed from
        the outbox only once the remote has committed it. Returns {"sent": n, "pending": n, "errors": {}}.

        quiet: called from a write: after a failure, wait flush_interval before trying again, so a write
        to a shared scope does not wait on a remote that is down at every call."""
        if not self.shared:
            return {"sent": 0, "pending": 0, "errors": {}}
        from filelock import Timeout

        from memory.store.remote_conflicts import propose_conflicts

        if quiet and self._last_failed and time.monotonic() - self._last_failed < self.flush_interval:
            return {"sent": 0, "pending": sum(self.pending().values()), "errors": {}}
        sent, errors = 0, {}
        purge: dict[str, set[str]] = {}
        # One flush at a time per home, not only per process: the processes of one home (the app, `mirador
        # mcp`, a CLI command) share this outbox, and two sending the same queued rows at once would insert
        # them twice (LanceDB does not see two inserts of one id as a conflict).
        home_lock = self._home_lock()
        try:
            with self._flush_lock, home_lock.acquire(timeout=HOME_LOCK_WAIT_QUIET if quiet else HOME_LOCK_WAIT):
                ob = self.outbox()
                for name, shared in self.shared.items():
                    if not quiet:
                        try:
                            self.pull(shared)
                            propose_conflicts(self, shared)  # edits of this device's people kept as earlier versions
                        except Exception as e:  # offline: pulled at the next flush
                            shared._failed(e)
                            errors[name] = shared.last_error
                            continue
                    while True:
                        where = F.equals("outbox_binding", name)
                        if not ob.count_rows(where):
                            break
                        table = self.store.scan_table(ob, where, ob.schema.names)
                        if not table.num_rows:  # another process of this home sent them since the count
                            break
                        table = table.sort_by("outbox_seq").slice(0, FLUSH_BATCH)
                        batch = [{"op": op, "id": i, "row": n} for n, (op, i) in enumerate(zip(
                            table["outbox_op"].to_pylist(), table["id"].to_pylist(), strict=True))]
                        try:
                            dropped = self._apply(shared, batch, table)
                        except Exception as e:  # down, timed out, refused: the batch stays queued
                            shared._failed(e)
                            errors[name] = shared.last_error
                            log.warning("shared scope %s offline: %s (%d writes wait in the outbox)",
                                        shared.binding.scope, shared.last_error, ob.count_rows(where))
                            break
                        shared._ok()
                        seqs = F.numbers_in("outbox_seq", table["outbox_seq"].to_pylist())
                        self.store.commit(lambda s=seqs: ob.delete(s))
                        self._audit_dropped(name, dropped)
                        sent += len(batch) - len(dropped)
                        ops = {r["op"] for r in batch}
                        purge.setdefault(name, set()).update(
                            ([T.MEMORIES] if "delete" in ops else []) + ([T.RELATIONS] if ops & {"rdelete", "unlink"} else []))
                    if name not in errors and shared.binding.evidence and self.evidence is not None:
                        # The evidence copies after the memory ops (remote_evidence.py): tombstones before deletes.
                        try:
                            n, dropped, _ = self.evidence.flush(name, shared)
                        except Exception as e:  # the batch stays queued
                            shared._failed(e)
                            errors[name] = shared.last_error
                            log.warning("shared scope %s offline: %s (evidence waits in the outbox)",
                                        shared.binding.scope, shared.last_error)
                        else:
                            shared._ok()
                            sent += n
                            self._audit_dropped(name, dropped)
                for name, tables in purge.items():
                    if not tables:
                        continue
                    try:
                        self.shared[name].purge(sorted(tables))
                    except Exception as e:
                        errors[name] = str(e)[:300]
                        log.warning("shared scope %s: deleted rows not purged yet (%s); the next forget or "
                                    "`mirador remote test` retries", self.shared[name].binding.scope, e)
        except Timeout:  # the other process is sending; what it did not take goes at the next flush
            log.info("another process of this home is sending the shared scopes' outbox; not sent now")
            return {"sent": 0, "pending": sum(self.pending().values()), "errors": {}}
        self._last_failed = time.monotonic() if errors else 0.0
        return {"sent": sent, "pending": sum(self.pending().values()), "errors": errors}

    def _apply(self, shared: Shared, batch: list[dict[str, Any]], table: pa.Table) -> list[dict[str, Any]]:
        """Send one batch (outbox rows) in queue order; returns the queued writes not sent because the bucket
        holds a tombstone for them (another device forgot that memory, or that content if the write is
        automated). Memory puts are settled against the version they replace and committed only onto it
        (memory/store/remote_conflicts.py), so an edit racing another device's is kept, never overwritten."""
        from memory.store.remote_conflicts import EditCommit, Queued

        rows = table.select(T.memories_schema(1).names)
        dead = self._stoned(shared, batch, rows)
        dead |= self._stoned_edges(shared, batch, table)
        edits = EditCommit(self, shared)
        # Consecutive puts (or tombstones) go in one commit; a delete applies after what was queued before it.
        puts: list[int] = []
        stones: list[int] = []
        # Edge ops likewise: consecutive ones of a kind in one call, in queue order.
        edge_run: tuple[str, list[int]] = ("", [])

        def send_edges() -> None:
            op, run = edge_run
            if op == "rput":
                last = {batch[n]["id"]: n for n in run}  # the newest queued version of each edge
                data = table.take(sorted(last.values())).select(T.RELATION_COLS).to_pylist()
                shared.put_edges(pa.Table.from_pylist(data, schema=T.relations_schema()))
            elif op == "rdelete":
                shared.delete_edges(sorted({batch[n]["id"] for n in run}))
            elif op == "unlink":
                shared.unlink(sorted({batch[n]["id"] for n in run}))
            run.clear()

        def send() -> None:
            if stones:
                t = rows.take(stones)
                shared.put_stones(pa.table({
                    "id": t["id"], "kind": t["type"], "fingerprint": t["fingerprint"],
                    "deleted_at": t["created_at"], "scope": t["scope"]}, schema=T.tombstones_schema()))
                stones.clear()
            if puts:
                # Every queued version of an id, in queue order: two processes of one home share this outbox,
                # so a later version may have started from the same shared version as an earlier one.
                chains: dict[str, list[Queued]] = {}
                for n, row in zip(puts, rows.take(puts).to_pylist(), strict=True):
                    chains.setdefault(row["id"], []).append(Queued(
                        row, table["outbox_base"][n].as_py(), table["outbox_actor"][n].as_py() or "person"))
                edits.send(chains)
                puts.clear()

        for r in batch:
            if r["op"] in EDGE_OPS:
                if r["op"] == "rput" and r["row"] in dead:
                    continue
                if edge_run[0] != r["op"]:
                    send_edges()
                    edge_run = (r["op"], edge_run[1])
                edge_run[1].append(r["row"])
            elif r["op"] == "put":
                if r["row"] not in dead:
                    puts.append(r["row"])
            elif r["op"] == "stone":
                if puts:
                    send()
                stones.append(r["row"])
            else:
                send()
                shared.delete([r["id"]])
        send()
        send_edges()
        edits.finish()
        shared.ensure_text_index()
        return [{**{k: rows[k][n].as_py() for k in ("id", "scope", "fingerprint")},
                 "kind": "memory" if batch[n]["op"] == "put" else "relation"} for n in sorted(dead)]

    @staticmethod
    def _stoned(shared: Shared, batch: list[dict[str, Any]], rows: pa.Table) -> set[int]:
        """Rows of queued puts the bucket's tombstones forbid: the same id, or the same content written by
        an automated pass (a person's own write of forgotten content is theirs to make)."""
        put_rows = [r["row"] for r in batch if r["op"] == "put"]
        if not put_rows:
            return set()
        stoned_here = {batch[n]["id"] for n, r in enumerate(batch) if r["op"] == "stone"}
        ids = sorted({rows["id"][n].as_py() for n in put_rows})
        fps = sorted({rows["fingerprint"][n].as_py() for n in put_rows if _automated(rows["origin"][n].as_py())}
                     - {None})
        where = F.or_(F.id_in(ids), F.id_in(fps, "fingerprint") if fps else None)
        found = shared.stones(where)
        dead_ids = {r["id"] for r in found} - stoned_here
        dead_fps = {r["fingerprint"] for r in found}
        return {n for n in put_rows if rows["id"][n].as_py() in dead_ids
                or (_automated(rows["origin"][n].as_py()) and rows["fingerprint"][n].as_py() in dead_fps)}

    @staticmethod
    def _stoned_edges(shared: Shared, batch: list[dict[str, Any]], table: pa.Table) -> set[int]:
        """Rows of queued edges with an end another device forgot (the bucket holds its tombstone): never sent,
        so a forgotten memory's id does not come back into the bucket."""
        put_rows = [r["row"] for r in batch if r["op"] == "rput"]
        if not put_rows:
            return set()
        ends = sorted({table[c][n].as_py() for n in put_rows for c in ("src", "dst")})
        dead = {r["id"] for r in shared.stones(F.id_in(ends))}
        return {n for n in put_rows if table["src"][n].as_py() in dead or table["dst"][n].as_py() in dead}

    def _audit_dropped(self, name: str, dropped: list[dict[str, Any]]) -> None:
        if dropped:
            from memory.store.audit import audit_row

            self.store.write_audit([audit_row(
                f"shared:{name}", "delete", d.get("kind") or "memory", d["id"], d["scope"],
                after={"reason": "forgotten on another device sharing the scope" if d.get("kind") != "relation"
                       else "an end was forgotten on another device sharing the scope", "not_sent": True})
                for d in dropped])

    def _gone_elsewhere(self, name: str, ids: list[str]) -> None:
        """Memories another device forgot: remove here what a forget here would have removed besides the row
        (which only the bucket held) — the content in this device's audit trail, the local edges that touch
        them (an edge to a memory of a local scope stays on this device) and their use counts — and purge
        those tables, so forget means gone on every device that shares the scope."""
        if not ids:
            return
        from memory.store.lifecycle import memories_forgotten

        audit = self.store.audit
        self.store.clear_audit_content(ids)
        _PULLING.active = True  # the listeners' remote half (Remotes.forget) has nothing left to do
        try:
            memories_forgotten(self.store, ids, f"shared:{name}")
        finally:
            _PULLING.active = False
        # The outbox too: this device may have written or edited the memory, and every flush left an outbox
        # version holding the whole row it sent. And the use counts, which name it.
        present = set(self.store.db.table_names())
        for table in [audit, self.store.relations] + [self.store.table(n) for n in (T.USAGE, OUTBOX) if n in present]:
            _purge_local(self.store, table)

    def pull(self, shared: Shared) -> int:
        """Copy the bucket's tombstones this device lacks into its local tombstones table (audited), and
        drop queued writes they forbid. Returns how many tombstones were new here.

        Skipped while the bucket's tombstones table is at the version this process last pulled: every flush
        pulls, and reading every tombstone each time grows with all a team ever forgot. A queued write a
        tombstone forbids is still refused when it is sent (_stoned), whatever this skips."""
        try:
            version = fresh(shared.tombstones(create=False)).version
        except (ValueError, FileNotFoundError):  # no device forgot anything yet
            return 0
        if self._pulled.get(shared.binding.name) == version:
            return 0
        stones = shared.stones()
        if not stones:
            self._pulled[shared.binding.name] = version
            return 0
        have = set(self.store.get_many(T.TOMBSTONES, [r["id"] for r in stones], ["id"]))
        new = [r for r in stones if r["id"] not in have]
        if new:
            from memory.store.audit import audit_row

            self.store.append(self.store.tombstones, new, T.tombstones_schema())
            self._gone_elsewhere(shared.binding.name, [r["id"] for r in new if (r["kind"] or "memory") == "memory"])
            # Evidence another device forgot: this device's copy goes too (the original, if it captured it).
            if self.evidence is not None:
                self.evidence.gone_elsewhere(shared.binding.name, [r["id"] for r in new if r["kind"] == "evidence"])
            self.store.write_audit([audit_row(f"shared:{shared.binding.name}", "delete", r["kind"] or "memory",
                                              r["id"], r["scope"], after={"tombstone": (r["fingerprint"] or "")[:16],
                                                                          "from": "another device"})
                                    for r in new])
            self.store.reader.forget_cached()
        ob = self.outbox()
        if ob.count_rows():
            dead_ids = {r["id"] for r in stones}
            dead_fps = {r["fingerprint"] for r in stones}
            queued = self.store.table_rows(ob, F.queued(("put",), [shared.binding.name]),
                                           ["id", "scope", "fingerprint", "origin"], None)
            drop = [q for q in queued if q["id"] in dead_ids
                    or (_automated(q["origin"]) and q["fingerprint"] in dead_fps)]
            if drop:
                self._drop_queued_puts(sorted({q["id"] for q in drop}))
                self._audit_dropped(shared.binding.name, list({q["id"]: q for q in drop}.values()))
            self._drop_queued_edges(sorted(dead_ids))
        self._pulled[shared.binding.name] = version
        return len(new)

    # ---- reads ----------------------------------------------------------------------------

    def _pool(self) -> Any:
        with _POOL_LOCK:
            if self._legs is None:
                from concurrent.futures import ThreadPoolExecutor

                self._legs = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mirador-shared")
            return self._legs

    def _each(self, scopes: Iterable[str] | None, fn) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for s in self.reading(scopes):
            try:
                out += fn(s)
                s._ok()
            except Exception as e:  # the shared scope is offline: local results still answer
                s._failed(e)
                log.warning("shared scope %s not searched: %s", s.binding.scope, s.last_error)
        return out

    def search(self, scopes: Iterable[str] | None, where: str | None, vector: Any, text: str, cols: list[str],
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

    def _queued_nearest(self, where: str | None, vector: Any, cols: list[str], k: int) -> dict[str, dict[str, Any]]:
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

    def nearest(self, scopes: Iterable[str] | None, where: str | None, vector: Any, cols: list[str],
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
        return {r["id"]: r for r in self._each(scopes, lambda s: s.query(where, cols, len(ids)))}

    def rows(self, scopes: Iterable[str] | None, where: str | None, cols: list[str],
             limit: int | None) -> list[dict[str, Any]]:
        """Rows of every shared store the scopes reach, under the filter (which holds the scope filter)."""
        if not self.shared:
            return []
        waiting = self.queued(where, cols, limit) if "id" in cols else []
        mine = {r["id"] for r in waiting}
        return waiting + [r for r in self._each(scopes, lambda s: s.query(where, cols, limit)) if r["id"] not in mine]

    def maintain(self, name: str | None = None, elected: bool = False, stop: Any = None) -> dict[str, Any]:
        """Maintain the shared stores (or the one named): {binding: report}. elected=True (the scheduler)
        maintains only the stores whose maintainer lease this device holds or takes, so that of all the
        devices sharing a store one does it; a store that does not answer is reported, not raised."""
        out: dict[str, Any] = {}
        for n, s in self.shared.items():
            if name is not None and n != name:
                continue
            try:
                if elected and not s.lease(self.device, self.lease_minutes):
                    out[n] = {"skipped": "another device maintains it"}
                    continue
                out[n] = s.maintain(stop)
                ev = self.evidence.maintain(s, stop) if self.evidence is not None else None
                if ev is not None:
                    out[n]["evidence"] = ev
            except Exception as e:  # offline: maintenance waits for the next pass
                s._failed(e)
                out[n] = {"error": s.last_error}
        if name is not None and not out:
            raise InputError(f"no shared scope binding named {name!r} — see `mirador remote list`")
        return out

    def check(self, max_age: float = 30.0) -> list[dict[str, Any]]:
        """health(), after asking each store that has not answered within max_age seconds whether it
        answers now (one small read; what the tray and the settings window poll)."""
        now = time.time()
        for s in self.shared.values():
            if s.last_ok is not None and s.last_error is None and now - s.last_ok < max_age:
                continue
            if s.last_checked is not None and now - s.last_checked < max_age and max_age > 0:
                continue
            s.last_checked = now
            try:
                try:
                    fresh(s.memories(create=False)).count_rows()
                except (ValueError, FileNotFoundError):  # the store answers; no device has written yet
                    s._connect().table_names()
                s._ok()
            except Exception as e:
                s._failed(e)
        return self.health()

    def health(self) -> list[dict[str, Any]]:
        """Each binding: scope, url, endpoint, whether it shares evidence, queued writes, and the last error or
        success seen. problem: the kind of the last error (remote_check.HEADLINE: "credentials", "bucket", …,
        "timeout"); settings: whether it is one of the binding's settings (the store answers and refuses, so
        the writes waiting will not go until the binding changes) rather than the store being away."""
        from memory.store.remote_check import HEADLINE

        pending = self.pending()
        return [{"name": n, "scope": s.binding.scope, "url": s.binding.url, "endpoint": s.binding.endpoint,
                 "evidence": s.binding.evidence, "pending": pending.get(n, 0),
                 "online": s.last_error is None and s.last_ok is not None, "last_error": s.last_error,
                 "problem": s.problem if s.last_error else None,
                 "headline": HEADLINE.get(s.problem or "", "offline") if s.last_error else None,
                 "settings": bool(s.last_error) and s.problem in SETTINGS} for n, s in self.shared.items()]


def _ids_where(t: Any, values: list[str], predicate: Callable[[list[str]], str], chunk: int) -> list[str]:
    """The ids of the rows matching predicate(values) (a filter from memory/store/filters.py, made for `chunk`
    values at a time so a long list does not make one huge filter), each once."""
    found: set[str] = set()
    for start in range(0, len(values), chunk):
        found.update(r["id"] for r in t.search().where(predicate(values[start:start + chunk])).select(["id"])
                     .limit(None).to_arrow().to_pylist())
    return sorted(found)


def _delete_ids(t: Any, ids: list[str]) -> int:
    """Delete these rows by id, 500 to a commit; returns how many."""
    for start in range(0, len(ids), 500):
        chunk = F.id_in(ids[start:start + 500])
        _retry(lambda c=chunk: t.delete(c))
    return len(ids)


class _RemoteCommits:
    """What optimize_table needs of a store to commit to a shared table: retry on a raced commit (the
    shared store has no local write lock; other devices commit to it too), each try from the newest
    version of the table."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def commit(self, fn):
        def step():
            fresh(self.table)
            return fn()
        return _retry(step)


_POOL_LOCK = threading.Lock()
_PULLING = threading.local()  # set while a pull applies another device's forget here


def _purge_local(store: Any, table: Any) -> None:
    """Remove a local table's deleted and updated-away rows from its files and every old version (what
    memory/store/erasure.py's purge does, which this module may not import: erasure imports the store)."""
    def compact() -> None:
        ds = table.to_lance()
        if any(f.metadata.num_deletions for f in ds.get_fragments()):
            ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=_ANY_DELETION)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cleanup_older_than=0 warns about concurrent readers
        store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
        store.commit(compact)
        # A delete that emptied whole fragments or matched no row stays the newest version, which the cleanup
        # keeps with its predicate (the forgotten ids): a config-only version on top makes it an old one.
        store.commit(lambda: table.to_lance().update_config({"mirador.purged_at": str(time.time_ns())}))
        store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))


def drop_queued(home: Any, name: str) -> None:
    """Drop the writes queued for a binding being removed (`mirador remote remove`): they will never be sent.
    Opens the data folder's outbox alone, not a whole store: the binding is already gone from the config."""
    from pathlib import Path

    import lancedb

    db = lancedb.connect(str(Path(home) / "lancedb"))
    if OUTBOX in db.table_names():
        db.open_table(OUTBOX).delete(F.equals("outbox_binding", name))


def _device(home: Any) -> str:
    """This Mirador home's device name, as the shared edit log and the maintainer lease record it: the host
    name and a suffix made once per home (two homes on one machine are two devices)."""
    import socket
    import uuid
    from pathlib import Path

    path = Path(home) / "device-id"
    try:
        name = path.read_text(encoding="utf-8").strip()
        if name:
            return name
    except FileNotFoundError:
        pass
    name = f"{socket.gethostname() or 'device'}-{uuid.uuid4().hex[:6]}"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(name + "\n", encoding="utf-8")
    tmp.replace(path)
    return name


def _person() -> str:
    """The OS user writing, as the shared edit log records it."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without passwd entry)
        return "unknown person"


def _automated(origin: str | None) -> bool:
    """Whether a memory's origin is an automated pass (extraction, dream), not a person or a client."""
    from memory.store.audit import ACTORS_AUTOMATED

    return bool(origin and origin.split(":", 1)[0] in ACTORS_AUTOMATED)


def _forgotten(store: Any, ids: list[str], actor: str) -> None:
    remotes = getattr(store, "remotes", None)
    if remotes is not None and not getattr(_PULLING, "active", False):
        remotes.forget(ids)


# memory/store/erasure.py erases local rows and then tells the listeners; the remote copies go here.
on_forget(_forgotten)
