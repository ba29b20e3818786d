"""What every module of the shared scopes needs (memory/store/remote.py): the outbox's and the bucket's table names
and schemas, which binding covers a scope, retries on a raced commit (Store.commit's loop, memory/store/retrying.py),
the newest version of a table, deletes and purges by id, and who this device and person are. Its own module so
that remote.py and the modules it is made of share them without importing each other."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from memory.scopes import in_scopes
from memory.store import filters as F
from memory.store import tables as T
from memory.store.retrying import retry as retry_loop

if TYPE_CHECKING:
    from memory.store.core import Store


def retry(fn: Callable[..., Any], attempts: int = 8) -> Any:
    """fn(), tried again (backing off, at most a second apart) while it fails with a commit conflict: the shared
    store has no write lock, other devices commit to it too (memory/store/retrying.py, as Store.commit)."""
    return retry_loop(fn, attempts, max_delay=1.0)


def fresh(table: Any) -> Any:
    """The table moved to the newest version in the bucket (one listing of its versions), and returned."""
    table.checkout_latest()
    return table


def now() -> datetime:
    from memory.types import utcnow

    return utcnow()


OUTBOX = "remote_outbox"
STONES = T.TOMBSTONES  # the bucket's tombstones table, same schema as the local one
FLUSH_BATCH = 500  # queued writes sent in one remote commit
# Seconds a flush waits for another process of this home to finish sending: a write's own (quiet) flush waits
# less, as the person waits on it; what it does not send goes at the next flush.
HOME_LOCK_WAIT, HOME_LOCK_WAIT_QUIET = 30.0, 5.0
ANY_DELETION = 1e-12  # rewrite every fragment that holds a deleted row (as memory/store/erasure.py does)


OUTBOX_COLS = ["outbox_seq", "outbox_binding", "outbox_op", "queued_at", "outbox_actor", "outbox_base"]
LEASE = "maintainer"  # one row: which device keeps the shared store's indexes, and until when
EDITS = "memory_edits"  # the bucket's log of who wrote which version: ids, times, actor, device, person


def outbox_schema(dim: int) -> pa.Schema:
    """One queued remote write, in outbox_seq order: a put (the memory row itself, so reads can query
    queued rows under the same filter as the tables) or a delete (the id alone)."""
    return pa.schema([*T.memories_schema(dim), pa.field("outbox_seq", pa.int64()),
                      pa.field("outbox_binding", pa.string()), pa.field("outbox_op", pa.string()),
                      pa.field("queued_at", T.TS), *OUTBOX_ADDED])


# Added after the first outboxes were written: an older outbox gets them as empty columns.
# outbox_actor: who made the write; outbox_base: updated_at of the shared version an edit started from
# (None for a new memory), so a flush can tell a concurrent edit from its own. src, dst, relation,
# dst_scope: a queued edge (op rput) rides in the memory columns it shares (id, scope, provenance,
# confidence, origin, created_at) plus these, named as in the relations table so a relation read's
# filter applies to the outbox unchanged.
OUTBOX_ADDED = [pa.field("outbox_actor", pa.string()), pa.field("outbox_base", T.TS),
                 pa.field("src", pa.string()), pa.field("dst", pa.string()), pa.field("relation", pa.string()),
                 pa.field("dst_scope", pa.string())]
EDGE_OPS = ("rput", "rdelete", "unlink")  # outbox ops of relations (memory ops: put, stone, delete)


def edits_schema() -> pa.Schema:
    """One version of a shared memory as sent: no content, only who wrote it where and when."""
    return pa.schema([("id", pa.string()), ("updated_at", T.TS), ("actor", pa.string()),
                      ("device", pa.string()), ("person", pa.string()), ("sent_at", T.TS)])


def covers(bound: str, scope: str) -> bool:
    """Whether a row in `scope` belongs to the binding of `bound` (the scope itself or below it)."""
    return in_scopes(scope, [bound])


def touches(bound: str, scopes: Iterable[str] | None) -> bool:
    """Whether a read limited to `scopes` (None: all) can see rows of the binding of `bound`."""
    if scopes is None:
        return True
    return any(covers(bound, s) or covers(s, bound) for s in scopes)


def ids_where(t: Any, values: list[str], predicate: Callable[[list[str]], F.Where], chunk: int) -> list[str]:
    """The ids of the rows matching predicate(values) (a filter from memory/store/filters.py, made for `chunk`
    values at a time so a long list does not make one huge filter), each once."""
    found: set[str] = set()
    for start in range(0, len(values), chunk):
        found.update(r["id"] for r in t.search().where(predicate(values[start:start + chunk])).select(["id"])
                     .limit(None).to_arrow().to_pylist())
    return sorted(found)


def delete_ids(t: Any, ids: list[str]) -> int:
    """Delete these rows by id, 500 to a commit; returns how many."""
    for start in range(0, len(ids), 500):
        chunk = F.id_in(ids[start:start + 500])
        retry(lambda c=chunk: t.delete(c))
    return len(ids)


class RemoteCommits:
    """What optimize_table needs of a store to commit to a shared table: retry on a raced commit (the
    shared store has no local write lock; other devices commit to it too), each try from the newest
    version of the table."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def commit(self, fn: Callable[[], Any]) -> Any:
        def step() -> Any:
            fresh(self.table)
            return fn()
        return retry(step)


def purge_local(store: Store, table: Any) -> None:
    """Remove a local table's deleted and updated-away rows from its files and every old version (what
    memory/store/erasure.py's purge does, which this module may not import: erasure imports the store)."""
    def compact() -> None:
        ds = table.to_lance()
        if any(f.metadata.num_deletions for f in ds.get_fragments()):
            ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=ANY_DELETION)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cleanup_older_than=0 warns about concurrent readers
        store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))
        store.commit(compact)
        # A delete that emptied whole fragments or matched no row stays the newest version, which the cleanup
        # keeps with its predicate (the forgotten ids): a config-only version on top makes it an old one.
        store.commit(lambda: table.to_lance().update_config({"mirador.purged_at": str(time.time_ns())}))
        store.commit(lambda: table.optimize(cleanup_older_than=timedelta(0), delete_unverified=False))


def device_name(home: Any) -> str:
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


def person_name() -> str:
    """The OS user writing, as the shared edit log records it."""
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment (a container without passwd entry)
        return "unknown person"


def automated(origin: str | None) -> bool:
    """Whether a memory's origin is an automated pass (extraction, dream), not a person or a client."""
    from memory.store.audit import ACTORS_AUTOMATED

    return bool(origin and origin.split(":", 1)[0] in ACTORS_AUTOMATED)


def within(seconds: float, fn: Callable[[], Any]) -> Any:
    """fn(), or TimeoutError once it has run `seconds` (it goes on in a daemon thread, its result dropped)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the caller
            box["error"] = e

    worker = threading.Thread(target=run, daemon=True, name="mirador-connect")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeoutError(f"the store timed out: no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]
