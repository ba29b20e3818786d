"""Evidence of a shared scope that another device forgot, erased here (memory/store/remote_evidence.py): the rows,
the neighbours' index text that quoted them, their frame files and their content in the audit trail, then the tables
purged of every old version. What memory/store/erasure.py does for a forget made here, which the remote modules may
not import (erasure imports the store, which imports them)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from memory.store import filters as F
from memory.store.remote_io import purge_local

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)


def erase_here(store: Store, ids: list[str]) -> int:
    """Erase this device's rows of evidence another device forgot, whose tombstones the pull has written and
    audited: the rows, the neighbours' index text that quoted them, their frame files, their content in the
    audit trail; then the evidence and audit tables are purged (deleted rows rewritten out of their files, the
    full-text and vector indexes rebuilt, old versions dropped). What memory/store/erasure.py does for a forget
    here, which this module may not import (erasure imports the store, which imports this module)."""
    from memory.store.context import refresh_neighbours
    from memory.store.indexes import ensure_fts, ensure_vector_index, vector_index_rows
    cols = ["id", "scope", "text", "frame_path", "source", "app", "window", "captured_at"]
    rows: list[dict[str, Any]] = []
    for start in range(0, len(ids), 500):
        rows += store.table_rows(store.evidence, F.id_in(ids[start:start + 500]), cols, None)
    if not rows:
        return 0
    for start in range(0, len(rows), 500):
        some = [r["id"] for r in rows[start:start + 500]]
        gone = F.id_in(some)
        store.commit(lambda c=gone: store.evidence.delete(c))
        store.clear_audit_content(some)
    store.reader.forget_cached()
    refresh_neighbours(store, rows)
    for r in rows:
        remove_frame(store.home, r.get("frame_path"))
    ev = store.evidence
    purge_local(store, ev)
    for col in ("text", "search_text"):
        if col in ev.schema.names:
            store.commit(lambda c=col: ensure_fts(ev, c, replace=True))  # it keeps deleted rows' tokens
    if vector_index_rows(ev) is not None:
        store.commit(lambda: ensure_vector_index(ev, force=True))
    purge_local(store, ev)
    purge_local(store, store.audit)
    store.reopen_tables()
    return len(rows)


def remove_frame(home: Any, path: str | None) -> None:
    """Delete a frame file of this data dir (never a file outside it)."""
    from pathlib import Path

    if not path:
        return
    p = Path(path) if Path(path).is_absolute() else Path(home) / path
    try:
        p.resolve().relative_to(Path(home).resolve())
    except ValueError:
        log.warning("frame %s is outside the data dir; not removing it", p)
        return
    p.unlink(missing_ok=True)


def purge_outbox(store: Store, ob: Any) -> None:
    """The outbox held the rows' text: rewrite the files that kept deleted rows and drop every old version, so
    evidence forgotten (or sent, and then forgotten) leaves nothing of itself in this table."""
    purge_local(store, ob)
