"""The store's write plumbing: commits retried on a raced writer, sealed appends and merges, and the typed writes a
caller outside the store package makes to a side table or to its own rows (never through a table handle).

Why here: Store.commit's retry is the one every write shares — the local tables' and, through
memory/store/remote_io.py, the shared stores' — so a full disk, a read-only folder or a raced commit is handled
one way (memory/store/io_faults.py). Filters come from memory/store/filters.py.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from memory.errors import InputError
from memory.store import audit_hold, io_faults
from memory.store import filters as F
from memory.store import tables as T
from memory.store.filters import Where
from memory.store.retrying import retry
from memory.store.rows import to_arrow
from memory.store.sealer import SEALED
from memory.store.store_reads import ID_CHUNK, SIDE_TABLES

if TYPE_CHECKING:
    from memory.store.sealer import Sealer

log = logging.getLogger(__name__)


class Writes:
    """Mixed into Store (memory/store/core.py)."""

    # Set by Store.__init__ (and the Reads mixin).
    home: Path
    sealer: Sealer
    write_lock: threading.RLock
    evidence: Any
    audit: Any
    table: Callable[[str], Any]

    # ---- plumbing (memory/store modules; outside it, the typed writes below) -------------------

    def commit(self, fn: Callable[..., Any], attempts: int = 6, landed: Callable[[], bool] | None = None) -> Any:
        """Run a write under write_lock, retrying when another writer (e.g. the MCP stdio process)
        committed first; other errors propagate at once.

        A full, read-only or failing disk raises a StorageError that says what to do (memory/store/io_faults.py),
        never LanceDB's text. landed: whether the write is in the table after all; asked when fn raised, since
        a commit can go through before an error, and a write reported failed is retried into a duplicate."""
        def on_error(e: Exception) -> bool:
            if landed is not None and landed():
                log.warning("a write raised after its commit went through; it is kept as written (%s)",
                            str(e).splitlines()[0][:200] if str(e) else type(e).__name__)
                return True
            fault = io_faults.storage_error(e, self.home)
            if fault is not None:
                raise fault from e
            return False

        def locked() -> Any:
            with self.write_lock:
                return fn()

        return retry(locked, attempts, on_error=on_error)

    def append(self, table: Any, rows: list[dict[str, Any]], schema: pa.Schema | None = None) -> None:
        """Add rows to a table of this data folder in one commit, sealed (memory/store/sealer.py); schema: how
        to read the rows (the table's own by default)."""
        if rows:
            data = self.sealer.seal_arrow(table.name, to_arrow(rows, schema if schema is not None else table.schema),
                                          table.schema)
            # Tables whose appended rows always carry new ids: there, every id present after a failed add means it
            # went through (an outbox or staging row may repeat an id, so the check would not prove anything there).
            fresh = getattr(table, "name", None) in (T.EVIDENCE, T.MEMORIES, T.VAULT, T.AUDIT)
            ids = [r["id"] for r in rows if r.get("id")] if fresh and "id" in data.schema.names else []
            before = table.version if ids else None

            def landed() -> bool:  # a new version holding every row: the add committed before it raised
                return bool(table.version != before and io_faults.all_landed(table, ids))

            self.commit(lambda: table.add(data), landed=landed if ids else None)

    def merge_rows(self, table: Any, data: pa.Table | list[dict[str, Any]], insert: bool = False,
                   on: str = "id") -> None:
        """Write rows of a table of this data folder by their `on` column, sealed: rows found are replaced
        (only the columns data has), others added when insert is True."""
        if isinstance(data, list):
            if not data:
                return
            data = to_arrow(data, table.schema)
        if data.num_rows == 0:
            return
        sealed = self.sealer.seal_arrow(table.name, data)

        def write() -> Any:
            m = table.merge_insert(on).when_matched_update_all()
            return (m.when_not_matched_insert_all() if insert else m).execute(sealed)

        # A merge whose commit raised may still have gone through (a full disk failing after the commit): a
        # sealed column read back exactly as written says so, and the edit is not reported failed.
        # (A store not sealed yet writes values in the clear: equal text proves nothing there.)
        proof = next((c for c in SEALED.get(table.name, ()) if c in sealed.schema.names), None) \
            if self.sealer.active else None
        before = table.version if proof is not None and on in sealed.schema.names else None

        def landed() -> bool:
            return table.version != before and io_faults.all_landed_as_written(table, sealed, on, proof or "")

        self.commit(write, landed=landed if before is not None else None)

    def equal_value(self, table: str, column: str, value: str) -> str:
        """What a column compared by equality (an evidence row's window, speaker) holds for value, to filter on
        (filters.sealed_value_equals)."""
        return self.sealer.equal_value(table, column, value)

    def equal_forms(self, table: str, column: str, values: Iterable[str]) -> F.EqualForms:
        """Every form these values of a column compared by equality (an evidence row's app, window, speaker)
        may be held in, here or in a shared bucket, to filter on (filters.sealed_one_of, where's `apps`)."""
        return F.EqualForms(self.sealer.equal_forms(table, column, values))

    def write_audit(self, rows: list[dict[str, Any]]) -> None:
        """Append audit rows (memory/store/audit.py audit_row builds them). When the disk refuses them, the change
        they record was saved already: they wait in memory and go in with the next audit write (audit_hold.py)."""
        audit_hold.write(self, rows, lambda batch: self.append(self.audit, batch, T.audit_schema()))

    # ---- side tables, by name ----------------------------------------------------------------

    def _side(self, name: str) -> Any:
        if name not in SIDE_TABLES:
            raise InputError(f"{name!r} is not a side table this API writes ({', '.join(sorted(SIDE_TABLES))}); "
                             "memories, evidence and vault entries are written by Store's own methods")
        return self.table(name)

    def add_rows(self, name: str, rows: list[dict[str, Any]]) -> None:
        """Append rows to a side table (proposals, derivations, …) in one commit."""
        table = self._side(name)
        self.append(table, rows, table.schema)

    def upsert_rows(self, name: str, rows: list[dict[str, Any]], on: str = "id") -> None:
        """Write rows of a side table by their `on` column: replaced where found, added where not."""
        self.merge_rows(self._side(name), rows, insert=True, on=on)

    def update_rows(self, name: str, where: Where, values: dict[str, Any]) -> None:
        """Set columns of a side table's rows under the filter. A sealed column may only be cleared (None):
        a value written here would bypass the seal."""
        sealed = set(SEALED.get(name, ()))
        if any(k in sealed and v is not None for k, v in values.items()):
            raise InputError(f"{name}: sealed columns are cleared here, never set (write the row instead)")
        table = self._side(name)
        self.commit(lambda: table.update(where=where, values=values))

    def delete_rows(self, name: str, where: Where) -> None:
        """Delete a side table's rows under the filter (never a memory, evidence row or vault entry: those are
        forgotten through memory/store/erasure.py, which also purges their old versions)."""
        table = self._side(name)
        self.commit(lambda: table.delete(where))

    def clear_audit_content(self, entity_ids: Iterable[str]) -> None:
        """Drop the before/after content of these entities' audit rows (keep who, when and what kind of change)."""
        ids = sorted(set(entity_ids))
        for start in range(0, len(ids), ID_CHUNK):
            where = F.id_in(ids[start:start + ID_CHUNK], "entity_id")
            self.commit(lambda w=where: self.audit.update(where=w, values={"before": None, "after": None}))

    # ---- this device's evidence ----------------------------------------------------------------

    def mark_extracted(self, ids: Iterable[str], when: datetime) -> None:
        """Note that extraction has read these evidence rows of this device (extracted_at)."""
        listed = sorted(set(ids))
        evidence = self.evidence
        for start in range(0, len(listed), ID_CHUNK):
            where = F.id_in(listed[start:start + ID_CHUNK])
            self.commit(lambda w=where: evidence.update(where=w, values={"extracted_at": when}))
