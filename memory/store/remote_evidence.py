"""Evidence of a shared scope in its bucket, when the binding says so (`evidence = true`, docs/sharing.md).

Mirrored, not moved: evidence of a scope covered by an evidence-sharing binding stays in this device's
local evidence table exactly as before (capture, timeline, frames, re-scoping and erasure of local rows
are untouched), and a copy of the row — text, index text, vector and metadata — goes through a local
outbox (EV_OUTBOX) to an `evidence` table in the bucket (a merge on the id: a batch sent twice is one
row per id). The copy never names a file on this machine: `frame_path` is blanked and meta keys that
hold a path (`audio_path`, a note's `path` and `file`) are dropped; frames, audio and vault entries never
leave the machine.

Reads (rank.py's candidate lists, fetch of the winners, Store.get / get_many of an evd_ id, the forget
plans) ask the bucket under the same filter as the local table (scope first), and drop a bucket row
whose id this device also holds locally (its own mirror).

Forget is gone everywhere: erasing an evidence row of such a scope on any device queues its tombstone
(kind "evidence", a content fingerprint, never the text) and then its delete for the bucket; the flush
sends both in that order and purges the bucket table's old versions and index files. Every device pulls
the tombstone (Remotes.pull) and erases its own local copy (and frame) if it has one — the device that
captured it included — audited as a delete from another device; a queued copy of it is never sent. Not
covered there: a re-embed running on that device keeps the row's new vector in its staging table until it
finishes or is run again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa

from memory.store import filters as F
from memory.store import tables as T
from memory.store.remote_dedup import dedupe_table, select_rows
from memory.store.remote_evidence_erase import erase_here, purge_outbox
from memory.store.remote_io import fresh
from memory.store.remote_shared import Shared

log = logging.getLogger(__name__)

EV_OUTBOX = "remote_evidence_outbox"
EV_TABLE = T.EVIDENCE  # the bucket's table, same schema as this device's evidence table
EV_OPS = ("eput", "estone", "edelete")
# Meta keys that name a file on the capturing machine (voice keeps audio, the notes importer a file path).
LOCAL_META = frozenset({"audio_path", "frame_path", "path", "file"})
_OUTBOX_FIELDS = [pa.field("outbox_seq", pa.int64()), pa.field("outbox_binding", pa.string()),
                  pa.field("outbox_op", pa.string()), pa.field("queued_at", T.TS)]


def shareable(row: dict[str, Any]) -> dict[str, Any]:
    """The copy of an evidence row that may leave the machine: no frame path, no meta key naming a file."""
    out = dict(row)
    out["frame_path"] = None
    meta = out.get("meta")
    if meta:
        try:
            data = json.loads(meta) if isinstance(meta, str) else dict(meta)
        except ValueError:
            data = {}
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in LOCAL_META and not k.endswith("_path")}
            out["meta"] = json.dumps(data, ensure_ascii=False) if data else None
        else:
            out["meta"] = None
    return out


class EvidenceMirror:
    """The evidence half of `Remotes`: which bindings share evidence, their outbox, flush and reads."""

    def __init__(self, remotes: Any) -> None:
        self.remotes = remotes
        self.store = remotes.store
        self._outbox: Any = None

    # ---- routing --------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        return any(s.binding.evidence for s in self.remotes.shared.values())

    def binding_for(self, scope: str) -> Shared | None:
        """The shared store that keeps a copy of evidence of this scope, or None (it stays here only)."""
        s = self.remotes.binding_for(scope) if scope else None
        return s if s is not None and s.binding.evidence else None

    def reading(self, scopes: Iterable[str] | None) -> list[Shared]:
        return [s for s in self.remotes.reading(scopes) if s.binding.evidence]

    def schema(self) -> pa.Schema:
        """This device's evidence table schema (migrations add columns), which the bucket's table copies."""
        return self.store.evidence.schema

    def outbox(self) -> Any:
        if self._outbox is None:
            db = self.store.db
            if EV_OUTBOX in db.table_names():
                self._outbox = db.open_table(EV_OUTBOX)
            else:
                self._outbox = db.create_table(EV_OUTBOX, schema=pa.schema([*self.schema(), *_OUTBOX_FIELDS]),
                                               exist_ok=True)
        return self._outbox

    def pending(self) -> dict[str, int]:
        if not self.active or EV_OUTBOX not in self.store.db.table_names():
            return {}
        ob = self.outbox()
        out: dict[str, int] = {}
        if ob.count_rows():
            for r in self.store.table_rows(ob, None, ["outbox_binding"], None):
                out[r["outbox_binding"]] = out.get(r["outbox_binding"], 0) + 1
        return out

    def _enqueue(self, items: list[tuple[str, str, dict[str, Any]]]) -> None:
        from memory.types import utcnow

        schema = self.outbox().schema
        dim = self.store.embedder.dim
        now, base = utcnow(), time.time_ns()
        rows = []
        for n, (name, op, r) in enumerate(items):
            if op == "eput":
                row = {k: r.get(k) for k in self.schema().names}
            elif op == "estone":  # a tombstone in the evidence columns it shares: never any text
                row = {"id": r["id"], "scope": r["scope"], "content_hash": r["fingerprint"],
                       "captured_at": r["deleted_at"], "vector": [0.0] * dim}
            else:
                row = {"id": r["id"], "vector": [0.0] * dim}
            row.update(outbox_seq=base + n, outbox_binding=name, outbox_op=op, queued_at=now)
            rows.append(row)
        self.store.append(self.outbox(), rows, schema)

    def mirror(self, rows: list[dict[str, Any]]) -> int:
        """Queue copies of the evidence rows just written here whose scope's binding shares evidence, and
        send them if the store answers. Returns how many were queued."""
        if not self.active:
            return 0
        items = [(s.binding.name, "eput", shareable(r)) for r in rows if (s := self.binding_for(r["scope"]))]
        if items:
            self._enqueue(items)
            self.remotes.flush(quiet=True)
        return len(items)

    def forget(self, rows: list[dict[str, Any]]) -> None:
        """Evidence rows (id, scope) erased here: drop their queued copies, then queue their tombstones and
        deletes for every evidence-sharing binding, sent now if the store answers."""
        if not self.active or not rows:
            return
        ids = [r["id"] for r in rows]
        self._drop_queued(ids)
        shared_rows = [(s, r) for r in rows if (s := self.binding_for(r["scope"])) is not None]
        if not shared_rows:
            return  # evidence of local scopes: nothing of it was ever sent
        stones = [(s.binding.name, "estone", r) for r in self.store.table_rows(
                      self.store.tombstones, F.id_in([r["id"] for _, r in shared_rows]), T.tombstones_schema().names,
                      None)
                  if (s := self.binding_for(r["scope"])) is not None]
        deletes = [(s.binding.name, "edelete", {"id": r["id"]}) for s, r in shared_rows]
        if stones or deletes:
            self._enqueue(stones + deletes)
            self.remotes.flush()

    def moved(self, ids: list[str], old_scopes: dict[str, str], to: str) -> None:
        """Evidence rows re-scoped here (memory/store/rescope.py): a copy whose new scope is no longer shared
        by its binding is deleted from the bucket (and purged there), and a row moved into (or within) an
        evidence-sharing binding is sent in its new scope."""
        if not self.active or not ids:
            return
        now = self.binding_for(to)
        leaving = [(s.binding.name, "edelete", {"id": i}) for i in ids
                   if (s := self.binding_for(old_scopes.get(i, ""))) is not None and s is not now]
        if leaving:
            self._drop_queued([i for _, _, r in leaving for i in [r["id"]]])
        items = list(leaving)
        if now is not None:
            for start in range(0, len(ids), 500):
                chunk = F.id_in(ids[start:start + 500])
                items += [(now.binding.name, "eput", shareable(r))
                          for r in self.store.table_rows(self.store.evidence, chunk, self.schema().names, None)]
        if items:
            self._enqueue(items)
            self.remotes.flush(quiet=True)

    def _drop_queued(self, ids: list[str]) -> set[str]:
        """Remove queued copies of these ids, and every old outbox version that held their text."""
        if EV_OUTBOX not in self.store.db.table_names():
            return set()
        ob = self.outbox()
        queued: set[str] = set()
        for start in range(0, len(ids), 500):
            pred = F.and_(F.queued(("eput",)), F.id_in(ids[start:start + 500]))
            found = {r["id"] for r in self.store.table_rows(ob, pred, ["id"], None)} if ob.count_rows() else set()
            if found:
                self.store.commit(lambda p=pred: ob.delete(p))
                queued |= found
        if queued:
            purge_outbox(self.store, ob)
        return queued

    def gone_elsewhere(self, name: str, ids: list[str]) -> int:
        """Evidence another device forgot (its tombstone just pulled): its queued copies are never sent, and
        this device's own copy — the original, where it was captured — is erased with its frame, so forget
        means gone on every device. Returns how many local rows were erased."""
        if not ids:
            return 0
        self._drop_queued(ids)
        return erase_here(self.store, ids)

    # ---- sending --------------------------------------------------------------------------

    def flush(self, name: str, shared: Shared) -> tuple[int, list[dict[str, Any]], bool]:
        """Send this binding's queued evidence ops, oldest first, in batches. Returns (sent, dropped, deleted);
        raises when the store does not answer (the batch stays queued)."""
        from memory.store.remote_io import FLUSH_BATCH

        if EV_OUTBOX not in self.store.db.table_names():
            return 0, [], False
        ob = self.outbox()
        where = F.equals("outbox_binding", name)
        sent, dropped, deleted = 0, [], False
        while ob.count_rows(where):
            table = self.store.scan_table(ob, where, ob.schema.names).sort_by("outbox_seq").slice(0, FLUSH_BATCH)
            gone, dels = self._apply(shared, table)
            seqs = F.numbers_in("outbox_seq", table["outbox_seq"].to_pylist())
            self.store.commit(lambda s=seqs: ob.delete(s))
            sent += table.num_rows - len(gone)
            dropped += gone
            deleted = deleted or dels
        if sent or dropped:
            purge_outbox(self.store, ob)
        if deleted:
            shared._purge(bucket_table(shared, self.schema()))
        return sent, dropped, deleted

    def _apply(self, shared: Shared, table: pa.Table) -> tuple[list[dict[str, Any]], bool]:
        from memory.store.remote_io import delete_ids, ids_where, retry

        ops = table["outbox_op"].to_pylist()
        ids = table["id"].to_pylist()
        put_ids = sorted({i for i, op in zip(ids, ops, strict=True) if op == "eput"})
        stoned_here = {i for i, op in zip(ids, ops, strict=True) if op == "estone"}
        # Evidence another device forgot is never sent again (its tombstone is in the bucket).
        dead = ({r["id"] for r in shared.stones(F.id_in(put_ids))} - stoned_here) if put_ids else set()
        cols = self.schema().names
        t = bucket_table(shared, self.schema())
        dropped: list[dict[str, Any]] = []
        deleted = False
        n = 0
        while n < len(ops):
            op, end = ops[n], n
            while end < len(ops) and ops[end] == op:
                end += 1
            run = table.slice(n, end - n)
            if op == "eput":
                last: dict[str, int] = {}
                for k, i in enumerate(run["id"].to_pylist()):
                    if i in dead:
                        dropped.append({"id": i, "scope": run["scope"][k].as_py(), "kind": "evidence"})
                    else:
                        last[i] = k
                if last:
                    data = run.take(sorted(last.values())).select(cols).cast(self.schema())
                    retry(lambda d=data: t.merge_insert("id").when_matched_update_all()
                           .when_not_matched_insert_all().execute(d))
            elif op == "estone":
                shared.put_stones(pa.table({
                    "id": run["id"], "kind": pa.array(["evidence"] * run.num_rows, pa.string()),
                    "fingerprint": run["content_hash"], "deleted_at": run["captured_at"], "scope": run["scope"]},
                    schema=T.tombstones_schema()))
            else:
                held = ids_where(fresh_table(t), sorted(set(run["id"].to_pylist())), F.id_in, 500)
                delete_ids(t, held)
                deleted = deleted or bool(held)
            n = end
        ensure_text_index(t)
        return dropped, deleted

    # ---- reads ----------------------------------------------------------------------------

    def start_search(self, scopes: Iterable[str] | None, legs: list[dict[str, Any]], cols: list[str]) -> Any:
        """Start the bucket's legs in the background (they wait on the network while the local legs run); None
        when no evidence-sharing binding is in reach. The result (`.result()`): for each leg ({where, limit,
        vector | text}) the bucket rows under its filter, with cols and the score (`_distance` / `_score`),
        from every binding the scopes reach. A store that does not answer adds nothing (logged)."""
        stores = self.reading(scopes) if self.active else []
        if not stores or not legs:
            return None
        schema = self.schema()
        pool = self.remotes._pool()
        futures = [pool.submit(self._each, stores, lambda s, leg=leg: _query(s, schema, leg, cols)) for leg in legs]
        return _All(futures)

    def rows(self, scopes: Iterable[str] | None, where: F.Where | None, cols: list[str],
             limit: int | None) -> list[dict[str, Any]]:
        """Rows of the bucket's evidence under the filter (which holds the scope filter)."""
        stores = self.reading(scopes) if self.active else []
        if not stores:
            return []
        cols = list(dict.fromkeys(["id", *cols]))
        return self._each(stores, lambda s: _query(s, self.schema(), {"where": where, "limit": limit}, cols))

    def _each(self, stores: list[Shared], fn: Callable[[Shared], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for s in stores:
            try:
                out += fn(s)
                s._ok()
            except Exception as e:  # offline: what is local still answers
                s._failed(e)
                log.warning("shared evidence of %s not searched: %s", s.binding.scope, s.last_error)
        return out

    def maintain(self, shared: Shared, stop: Any = None) -> dict[str, Any] | None:
        """Indexes and compaction of the bucket's evidence table (with the memories', by the lease holder)."""
        from memory.store.indexes import ensure_vector_index, optimize_table
        from memory.store.remote_io import RemoteCommits, retry

        if not shared.binding.evidence:
            return None
        try:
            t = fresh_table(bucket_table(shared, self.schema(), create=False))
        except (ValueError, FileNotFoundError):
            return None
        duplicates = retry(lambda: dedupe_table(t))  # one row per id (remote_dedup.py)
        ensure_text_index(t)
        out: dict[str, Any] = {"rows": fresh_table(t).count_rows(), "duplicates": duplicates,
                               "vector": retry(lambda: ensure_vector_index(fresh_table(t)))}
        out.update(optimize_table(RemoteCommits(t), t, stop))
        return out


class _All:
    """The results of several futures, in order, as one `.result()`."""

    def __init__(self, futures: list[Any]) -> None:
        self.futures = futures

    def result(self) -> list[list[dict[str, Any]]]:
        return [f.result() for f in self.futures]



def fresh_table(t: Any) -> Any:
    """The table at the bucket's newest version (memory/store/remote_io.py fresh)."""
    return fresh(t)


def bucket_table(shared: Shared, schema: pa.Schema, create: bool = True) -> Any:
    """The bucket's evidence table of a binding (kept on the Shared, reset with its connection)."""
    from memory.store.remote_io import retry

    if getattr(shared, "_evidence", None) is None:
        db = shared._connect()
        try:
            shared._evidence = db.open_table(EV_TABLE)
        except (ValueError, FileNotFoundError):
            if not create:
                raise
            shared._evidence = retry(lambda: db.create_table(EV_TABLE, schema=schema, exist_ok=True))
    return shared._evidence


def ensure_text_index(t: Any) -> None:
    """The full-text index the text leg needs (rows added after it are still scanned)."""
    from memory.store.indexes import ensure_fts, has_index
    from memory.store.remote_io import retry

    t = fresh_table(t)
    if t.count_rows() and not has_index(t, "search_text"):
        retry(lambda: ensure_fts(t, "search_text"))


def _query(shared: Shared, schema: pa.Schema, leg: dict[str, Any], cols: list[str]) -> list[dict[str, Any]]:
    try:
        t = fresh_table(bucket_table(shared, schema, create=False))
    except (ValueError, FileNotFoundError):  # no device has shared evidence of this scope yet
        return []
    where = leg.get("where")
    if leg.get("vector") is not None:
        from memory.store.reads import NPROBES

        q = t.search(leg["vector"], vector_column_name="vector").distance_type("cosine").nprobes(NPROBES)
        if where:
            q = q.where(where, prefilter=True)
        cols = [*cols, "_distance"]
    elif leg.get("text") is not None:
        from memory.store.indexes import has_index

        if not has_index(t, "search_text"):
            return []
        q = t.search(leg["text"], query_type="fts", fts_columns="search_text")
        cols = [*cols, "_score"]
    else:
        q = t.search()
    if where and leg.get("vector") is None:  # (the vector leg's filter went in above, as a prefilter)
        q = q.where(where)
    # One row per id (remote_dedup.py): two homes that sent one evidence row at once may both have inserted it.
    return select_rows(q, cols, leg.get("limit"))
