"""Items → evidence rows: redact first, then de-duplicate by key, then write in batches.

Idempotency: each item's stable key becomes its evidence id (`evd_` + 24 hex of the key), so "was this
imported before?" is an `id IN (...)` query over one batch of ids — never a scan of the whole table
into Python. A tombstoned id (the person deleted that row) is never imported again (principle 3).
Redaction: every text, speaker, title and meta string goes through the capture redactor before it is
hashed or written (principle 4); the caller passes the redactor, since memory/ does not import capture/.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from memory.integrations.importers.base import ImportBroken, Importer, ImportReport, Item, Skip, split_long, stable_key
from memory.integrations.transfer import ids_present
from memory.scopes import validate_scope
from memory.store import tables as T
from memory.types import MAX_EVIDENCE_CHARS

if TYPE_CHECKING:
    from memory.store.core import EvidenceSpec, Store

log = logging.getLogger(__name__)

SKIP_SEEN = "duplicate within this import"
SKIP_EXISTING = "already imported"
SKIP_TOMBSTONED = "deleted by you earlier (never re-imported)"


class Redacts(Protocol):
    """What the writer needs from capture.redact.Redactor."""

    def redact(self, text: str) -> Any:  # -> object with .text and .counts
        """Text with secrets replaced."""


Progress = Callable[[ImportReport, int, int], None]


class _Writer:
    def __init__(self, store: Store, importer: Importer, redactor: Redacts, scope: str, actor: str) -> None:
        self.store, self.importer, self.redactor, self.actor = store, importer, redactor, actor
        self.report = ImportReport(format=importer.name, path=str(importer.path), scope=scope)
        self.pending: list[tuple[str, EvidenceSpec, str]] = []  # (id, row, where it was read)
        self.written: set[str] = set()  # ids written by this run (~60 bytes each): tells duplicates apart

    def _redact(self, text: str) -> str:
        red = self.redactor.redact(text)
        for kind, n in (red.counts or {}).items():
            self.report.redactions += n
            self.report.redactions_by_kind[kind] = self.report.redactions_by_kind.get(kind, 0) + n
        return red.text

    def scrub(self, where: str) -> str:
        """Redact a location shown in the report (it may quote a title), without counting it."""
        return self.redactor.redact(where).text

    def _redact_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._redact(value) if value else value
        if isinstance(value, dict):
            return {k: self._redact_value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._redact_value(v) for v in value]
        return value

    def add(self, item: Item) -> None:
        """Redact one item and queue its row(s); a text over the evidence limit becomes several parts."""
        self.report.read += 1
        text = self._redact(item.text)
        speaker, window = self._redact(item.speaker), self._redact(item.window)
        meta = self._redact_value(item.meta)
        pieces = split_long(text, MAX_EVIDENCE_CHARS)
        for i, piece in enumerate(pieces):
            key = stable_key(item.key, piece if item.keyed_by_text else "", i if len(pieces) > 1 else "")
            extra = {"import_key": key, **({"part": i + 1, "parts": len(pieces)} if len(pieces) > 1 else {})}
            from memory.store.core import EvidenceSpec  # lazily: LanceDB takes seconds to import

            eid = "evd_" + key[:24]
            spec = EvidenceSpec(
                id=eid, text=piece, source="import", app=self.importer.app, window=window,
                speaker=speaker, scope=self.report.scope, captured_at=item.captured_at,
                redactions=piece.count("[REDACTED:"), meta={**meta, **extra})
            self.pending.append((eid, spec, self.scrub(item.where)))

    def flush(self) -> None:
        """Write the queued rows that are new; count the rest as skipped with their reason."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        store = self.store
        ids = list(dict.fromkeys(eid for eid, _, _ in batch))
        existing = ids_present(store, "evidence", ids, local=True)  # what this device imported already
        gone = ids_present(store, T.TOMBSTONES, ids)
        new: list[EvidenceSpec] = []
        new_ids: list[str] = []
        for eid, spec, where in batch:
            if eid in self.written:
                self.report.skip(SKIP_SEEN, where)
            elif eid in gone:
                self.report.skip(SKIP_TOMBSTONED, where)
            elif eid in existing:
                self.report.skip(SKIP_EXISTING, where)
            else:
                self.written.add(eid)
                new.append(spec)
                new_ids.append(eid)
        if new:
            store.add_evidence_batch(new, actor=self.actor)
            self.report.imported += len(new)
            self.report.first_ids.extend(new_ids[: max(0, 5 - len(self.report.first_ids))])
        self.report.batches += 1
        log.info("import %s: batch %d, %d new of %d", self.importer.name, self.report.batches, len(new), len(batch))

    def finish(self, start: float) -> ImportReport:
        r = self.report
        r.seconds = round(time.monotonic() - start, 3)
        r.rows_per_second = round(r.imported / r.seconds, 1) if r.seconds else 0.0
        r.bytes_read, r.bytes_total = self.importer.done, self.importer.total
        return r


def run_import(store: Store, importer: Importer, *, redactor: Redacts, scope: str | None = None,
               progress: Progress | None = None, actor: str = "import") -> ImportReport:
    """Import everything `importer` yields as evidence (source "import"); returns what was done and skipped.

    Raises ImportBroken (with `.report`) where the file breaks; every row read before the break is stored.
    """
    from models.embedder import bulk_threads

    w = _Writer(store, importer, redactor, validate_scope(scope or store.default_scope), actor)
    size = importer.options.batch_size
    start = time.monotonic()
    with bulk_threads(store.config.models.embedder_bulk_threads):
        return _run(w, importer, size, start, progress)


def _run(w: _Writer, importer: Importer, size: int, start: float, progress: Progress | None) -> ImportReport:
    try:
        for obj in importer.items():
            if isinstance(obj, Skip):
                w.report.skip(obj.reason, w.scrub(obj.where))
            else:
                w.add(obj)
                if len(w.pending) >= size:
                    w.flush()
            if progress is not None:
                progress(w.report, importer.done, importer.total)
    except ImportBroken as e:
        w.flush()  # keep everything read before the break
        e.report = w.finish(start)
        e.report.error, e.report.broken_at = str(e), e.location
        raise
    w.flush()
    report = w.finish(start)
    if progress is not None:
        progress(report, importer.done, importer.total)
    return report
