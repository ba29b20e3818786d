"""A data folder an older version wrote in the clear, sealed in place (memory/store/sealer.py), with progress.

Each table's rows are read in chunks and written back sealed, one merge per chunk, so a crash or a quit
leaves every row either as it was or sealed, never half of either, and the next run goes on from there (a
row is sealed when its first sealed column is; its vector is turned in the same write). Nothing is lost: a
row is only ever replaced by its own sealed form. When every row is sealed, the full-text indexes over the
words are dropped (their token lists are plaintext), the keyed-term indexes are built, and every old
version of every table is purged, so the clear text leaves the disk; then the store records `s001_sealed`.

An evidence row's app joined the sealed (EQUAL) columns later: a store the version before wrote has its text
sealed (`s001_sealed`) but its apps in the clear. The same pass seals them — only the app column of those
rows travels, so no vector is turned twice — purges the old versions of the evidence tables, and records
`s002_apps_sealed`. Until then an app filter matches both forms (Store.equal_forms).

Runs when the store opens and the key can be had without asking (OS keyring, MIRADOR_PASSPHRASE, a key
this process holds), and in `mirador unlock` otherwise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memory.store import filters as F
from memory.store import tables as T
from memory.store.keys import PASSPHRASE_ENV, KeyUnavailableError, LockedError
from memory.store.sealer import EQUAL_COLUMNS, ROTATED, SEALED, TERMS_COLUMN, is_sealed
from memory.types import utcnow

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

DONE = "s001_sealed"
APPS_DONE = "s002_apps_sealed"  # evidence `app` sealed too (an EQUAL column since)
CHUNK = 2_000
Progress = Callable[[str, int, int], None]


def sealed_already(store: Store) -> bool:
    """True once this data folder's text is sealed and its vectors turned (always, for a store made sealed)."""
    log_table = store.db.open_table(T.MIGRATIONS)
    return bool(log_table.count_rows(F.equals("name", DONE)))


def apps_sealed(store: Store) -> bool:
    """True once this data folder's evidence apps are sealed too (always, for a store made sealed)."""
    log_table = store.db.open_table(T.MIGRATIONS)
    return bool(log_table.count_rows(F.equals("name", APPS_DONE)))


def complete(store: Store) -> bool:
    """Every column that is sealed at rest is sealed in every row: nothing is left for seal_existing."""
    return sealed_already(store) and apps_sealed(store)


def _tables(store: Store) -> list[str]:
    present = set(store.db.table_names())
    return [n for n in (T.MEMORIES, T.EVIDENCE, T.VAULT, T.AUDIT, T.OUTBOX, T.EV_OUTBOX) if n in present]


def _marker(table: str, names: list[str]) -> str | None:
    return next((c for c in SEALED.get(table, ()) if c in names), None)


def plain_rows(store: Store) -> dict[str, int]:
    """Rows with a sealed column still in the clear, per table (doctor shows them); {} when every row is sealed."""
    out = {}
    for name in _tables(store):
        table = store.db.open_table(name)
        cols = [c for c in (*SEALED.get(name, ()), *EQUAL_COLUMNS.get(name, ())) if c in table.schema.names]
        if not cols or not table.count_rows():
            continue
        data = table.search().select(cols).limit(None).to_arrow().to_pylist()
        n = sum(1 for r in data if any(r[c] is not None and not is_sealed(r[c]) for c in cols))
        if n:
            out[name] = n
    return out


# The full-text indexes over the words of older versions: their token lists are plaintext. Kept until the rows
# are sealed (an unsealed store still searches them), then dropped; the purge that follows removes their files.
_WORD_INDEXES = {T.MEMORIES: ("search_text",), T.EVIDENCE: ("text", "search_text"), T.VAULT: ("label",)}


def drop_word_indexes(store: Store) -> None:
    for name, cols in _WORD_INDEXES.items():
        table = store.db.open_table(name)
        for ix in table.list_indices():
            if ix.columns and ix.columns[0] in cols:
                store.commit(lambda t=table, n=ix.name: t.drop_index(n))


def record(store: Store, note: str, name: str = DONE) -> None:
    store.db.open_table(T.MIGRATIONS).add([{"name": name, "applied_at": utcnow(), "note": note}])


def can_unlock_quietly(store: Store) -> bool:
    """Whether the data key can be had without asking anyone (so the store may seal at open)."""
    keys = store.keys
    return not keys.locked and (keys.held or keys.method() == "keyring" or bool(os.environ.get(PASSPHRASE_ENV)))


def seal_at_open(store: Store) -> None:
    """Seal what an older version left in the clear, when the store opens; a fresh store is only recorded."""
    texts = sealed_already(store)
    if texts:
        store.sealer.active = True
        if apps_sealed(store):
            return
    if not any(store.db.open_table(n).count_rows() for n in _tables(store)):
        if not texts:
            drop_word_indexes(store)  # a new store's first migrations made them
            record(store, "made sealed")
        record(store, "made sealed", APPS_DONE)
        store.sealer.active = True
        return
    if not can_unlock_quietly(store):
        if store.keys.locked:
            return  # locked on purpose: `mirador unlock` seals it
        log.warning("this data folder holds text an older Mirador stored in the clear: `mirador unlock` seals it "
                    "(it asks the passphrase once)")
        return
    try:
        seal_existing(store, progress=_log_progress)
    except (KeyUnavailableError, LockedError) as e:
        log.warning("the text an older Mirador stored in the clear is not sealed yet (%s); `mirador unlock` "
                    "seals it", e)


def _log_progress(table: str, done: int, total: int) -> None:
    if done == total or done % (CHUNK * 10) == 0:
        log.warning("sealing this data folder (once, after an upgrade): %s %d/%d rows", table, done, total)


def seal_existing(store: Store, progress: Progress | None = None) -> int:
    """Seal every row still in the clear, drop the plaintext indexes, purge old versions; returns rows sealed.
    (A store whose text is sealed already: its evidence apps, then the old versions of the evidence tables.)
    progress(table, done, total) after each chunk. Raises LockedError / KeyUnavailableError without the key."""
    with store.open_lock:  # one sealing at a time, in any process (memory/store/core.py OPEN_LOCK)
        return _seal_existing(store, progress)


def _seal_existing(store: Store, progress: Progress | None) -> int:
    from memory.store.erasure import purge
    from memory.store.indexes import ensure_fts

    if complete(store):
        return 0
    key_id = store.sealer.key_id()  # the key first: nothing is read or written without it
    if sealed_already(store):
        return _seal_apps(store, progress, key_id)
    sealed = 0
    with store.write_lock:
        for name in _tables(store):
            sealed += _seal_table(store, name, progress)
            if name in EQUAL_COLUMNS:  # a row the version before wrote sealed, but with its app in the clear
                _seal_equal(store, name, None)
        if T.REEMBED_STAGING in store.db.table_names():
            # Staged vectors are not turned, and a staged re-embed cannot tell: it starts over (`mirador reembed`).
            store.db.drop_table(T.REEMBED_STAGING)
            log.warning("a re-embed in progress starts over after sealing: run `mirador reembed` again")
        drop_word_indexes(store)
        for name in (T.MEMORIES, T.EVIDENCE, T.VAULT):
            table = store.db.open_table(name)
            if TERMS_COLUMN in table.schema.names:
                store.commit(lambda t=table: ensure_fts(t, TERMS_COLUMN, replace=True))
        purge(store, tables=sorted(store.db.table_names()))
        record(store, f"sealed {sealed} rows in place; key {key_id}")
        record(store, "sealed with the rest", APPS_DONE)
        store.sealer.active = True
    store.reopen_tables()
    store.reader.forget_cached()
    log.info("sealed %d rows an older version stored in the clear; old versions purged", sealed)
    return sealed


def _seal_apps(store: Store, progress: Progress | None, key_id: str) -> int:
    """A store the version before wrote: its text sealed, its evidence apps in the clear. Seals the apps (the
    EQUAL columns of the rows that hold one in the clear), purges the evidence tables' old versions."""
    from memory.store.erasure import purge

    sealed = 0
    with store.write_lock:
        names = [n for n in _tables(store) if n in EQUAL_COLUMNS]
        for name in names:
            sealed += _seal_equal(store, name, progress)
        purge(store, tables=names)
        record(store, f"sealed the app of {sealed} evidence rows in place; key {key_id}", APPS_DONE)
        store.sealer.active = True
    store.reopen_tables()
    store.reader.forget_cached()
    log.info("sealed the app names of %d evidence rows an older version stored in the clear; old versions purged",
             sealed)
    return sealed


def _seal_equal(store: Store, name: str, progress: Progress | None) -> int:
    """Seal the EQUAL columns still in the clear in one table whose sealed columns are sealed already. Only the
    row's key and those columns are written: its vector, turned when its text was sealed, is not touched."""
    table = store.db.open_table(name)
    cols = [c for c in EQUAL_COLUMNS.get(name, ()) if c in table.schema.names]
    if not cols:
        return 0
    key = "outbox_seq" if name == T.EV_OUTBOX else "id"

    def plain(row: dict[str, Any]) -> bool:
        return any(row[c] is not None and not is_sealed(row[c]) for c in cols)

    return _rewrite_plain(store, table, name, key, cols, [key, *cols], plain, progress)


def _seal_table(store: Store, name: str, progress: Progress | None) -> int:
    """Seal one table's rows that are still in the clear; returns how many."""
    table = store.db.open_table(name)
    names = table.schema.names
    text_cols = [c for c in (*SEALED.get(name, ()), *EQUAL_COLUMNS.get(name, ())) if c in names]
    if not text_cols:
        return 0
    key = "outbox_seq" if name in (T.OUTBOX, T.EV_OUTBOX) else "id"  # an outbox may queue one id twice
    marker = _marker(name, names)
    rotated = name in ROTATED and "vector" in names

    def plain(row: dict[str, Any]) -> bool:
        if rotated:
            # The vector is turned in the write that seals the first sealed column: that column says whether
            # the row was sealed, so its vector is never turned twice.
            assert marker is not None  # a rotated table with text_cols has a SEALED column
            return row[marker] is not None and not is_sealed(row[marker])
        return any(row[c] is not None and not is_sealed(row[c]) for c in text_cols)

    write_cols = [key, *text_cols, *(["vector"] if rotated else [])]
    return _rewrite_plain(store, table, name, key, text_cols, write_cols, plain, progress)


def _rewrite_plain(store: Store, table: Any, name: str, key: str, cols: list[str], write_cols: list[str],
                   plain: Callable[[dict[str, Any]], bool], progress: Progress | None) -> int:
    """Write back, sealed (Store.merge_rows seals on write), the rows whose `cols` `plain` says are still in the
    clear, a chunk per commit; returns how many there were."""
    import pyarrow as pa

    scanned = table.search().select([key, *cols]).limit(None).to_arrow().to_pylist()
    todo = [r[key] for r in scanned if plain(r)]
    done = 0
    for start in range(0, len(todo), CHUNK):
        chunk = todo[start:start + CHUNK]
        listed = F.id_in(chunk) if key == "id" else F.numbers_in(key, chunk)
        data = table.search().where(listed).select(write_cols).limit(len(chunk)).to_arrow()
        # Only rows still in the clear: another process may have written some sealed meanwhile.
        keep = [i for i, r in enumerate(data.select([key, *cols]).to_pylist()) if plain(r)]
        if keep:
            store.merge_rows(table, data.take(pa.array(keep, pa.int64())), on=key)
        done += len(chunk)
        if progress:
            progress(name, done, len(todo))
    return len(todo)
