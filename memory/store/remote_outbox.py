"""The outbox of the shared scopes (memory/store/remote.py): writes queued in a local table, then sent to their
buckets in batches by `flush` — settled against concurrent edits (memory/store/remote_conflicts.py), never sending
a write of something another device forgot. The base of Remotes: the bindings, which one a row belongs to.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Iterable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from memory.store import filters as F
from memory.store import tables as T
from memory.store.remote_io import (
    EDGE_OPS,
    FLUSH_BATCH,
    HOME_LOCK_WAIT,
    HOME_LOCK_WAIT_QUIET,
    OUTBOX,
    OUTBOX_ADDED,
    automated,
    covers,
    outbox_schema,
    touches,
)
from memory.store.remote_shared import Shared
from memory.store.retrying import retry as retry_loop

if TYPE_CHECKING:
    from memory.store.core import Store
    from memory.store.remote_evidence import EvidenceMirror

log = logging.getLogger(__name__)

# A connection the store dropped mid-request (reset, closed, "error sending request") is tried again this many
# times, on a fresh connection, before the batch waits for the next flush: one dropped connection should not hold a
# write back for a whole flush interval. A store that is down (refused, no answer, no such host) is not retried.
TRANSIENT_RETRIES = 2


class Outbox:
    """The bindings and their outbox; mixed into Remotes (memory/store/remote.py)."""

    # Set by Remotes.__init__.
    store: Store
    shared: dict[str, Shared]
    evidence: EvidenceMirror
    flush_interval: float
    device: str
    person: str
    lease_minutes: float
    _outbox: Any
    _flush_lock: threading.Lock
    _flush_file_lock: Any
    _last_failed: float
    _pulled: dict[str, int]
    _legs: Any

    if TYPE_CHECKING:  # memory/store/remote_pull.py
        def pull(self, shared: Shared) -> int: ...

    # ---- bindings ------------------------------------------------------------------------

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
            missing = [f for f in OUTBOX_ADDED if f.name not in self._outbox.schema.names]
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

    def queued(self, where: F.Where | None, cols: list[str], limit: int | None) -> list[dict[str, Any]]:
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
                            dropped = self._apply_retrying(shared, batch, table)
                        except Exception as e:  # down, timed out, refused: the batch stays queued
                            shared._failed(e)
                            errors[name] = shared.last_error
                            log.warning("shared scope %s offline: %s (%d writes wait in the outbox; raw error: %s)",
                                        shared.binding.scope, shared.last_error, ob.count_rows(where), e.__cause__ or e)
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

    def _apply_retrying(self, shared: Shared, batch: list[dict[str, Any]], table: pa.Table) -> list[dict[str, Any]]:
        """_apply, tried again on a fresh connection when the connection was dropped mid-request (the store's one
        retry loop, memory/store/retrying.py). Sending a batch again is what the next flush would do anyway: puts
        are upserts settled against the version they replace."""
        from memory.store.remote_check import problem

        def dropped(e: Exception) -> bool:
            return problem(e, shared.binding).kind == "offline"

        def reconnect(e: Exception) -> None:  # dropping the handles makes the next try connect afresh
            shared._failed(e)
            log.info("shared scope %s: connection dropped (%s); sending again", shared.binding.scope, e)
        sent: list[dict[str, Any]] = retry_loop(lambda: self._apply(shared, batch, table), TRANSIENT_RETRIES + 1,
                                                retry_on=dropped, first_delay=0.2, before_retry=reconnect)
        return sent

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
        fps = sorted({rows["fingerprint"][n].as_py() for n in put_rows if automated(rows["origin"][n].as_py())}
                     - {None})
        where = F.or_(F.id_in(ids), F.id_in(fps, "fingerprint") if fps else None)
        found = shared.stones(where)
        dead_ids = {r["id"] for r in found} - stoned_here
        dead_fps = {r["fingerprint"] for r in found}
        return {n for n in put_rows if rows["id"][n].as_py() in dead_ids
                or (automated(rows["origin"][n].as_py()) and rows["fingerprint"][n].as_py() in dead_fps)}

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


def drop_queued(home: Any, name: str) -> None:
    """Drop the writes queued for a binding being removed (`mirador remote remove`): they will never be sent.
    Opens the data folder's outbox alone, not a whole store: the binding is already gone from the config."""
    from pathlib import Path

    import lancedb

    db = lancedb.connect(str(Path(home) / "lancedb"))
    if OUTBOX in db.table_names():
        db.open_table(OUTBOX).delete(F.equals("outbox_binding", name))

