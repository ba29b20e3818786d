"""Batched evidence writer: one thread, one commit per batch (every flush_seconds or flush_rows).

Crash-loss bound: a hard kill loses only rows not yet committed — at most the rows captured in the
last `flush_seconds` (default 5 s) or `flush_rows` (default 50), whichever is reached first, plus
frames and utterances still in the OCR/ASR queues (at most their queue sizes). A commit is atomic
in LanceDB (a new manifest version), so a kill during a commit leaves the previous version readable.

A full disk (or a read-only or failing one) holds the writer: the batch goes back to the front of the queue,
`held` says why ("disk full: capture paused until space is freed — …") and the capture runner stops grabbing
frames and listening until it clears, so the queue stops growing and no row it holds is dropped. While held,
the writer tries again every HOLD_RETRY_S once the disk has room again (every HOLD_PROBE_S regardless: a quota
or a remount does not show as free space), and resumes by itself on the first commit that goes through.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

from capture.health import Health
from memory.errors import DiskFullError, StorageError
from memory.store.core import EvidenceSpec
from memory.store.io_faults import free_bytes

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

HOLD_RETRY_S = 5.0  # while held: how often the disk's free space is looked at
HOLD_PROBE_S = 60.0  # ... and a commit is tried even without visible room (a quota, a disk made writable again)
ROOM_BYTES = 4_000_000  # free space that is worth a try: a batch, its index text and vectors, LanceDB's manifest


class EvidenceWriter(threading.Thread):
    """Collects EvidenceSpecs from the sources and commits them in batches through the store."""

    def __init__(self, store: Store, health: Health, flush_seconds: float = 5.0, flush_rows: int = 50,
                 max_pending: int = 5000, model_lock: threading.Lock | None = None) -> None:
        super().__init__(name="evidence-writer", daemon=True)
        self.store = store
        self.health = health
        self.flush_seconds = flush_seconds
        self.flush_rows = flush_rows
        self.max_pending = max_pending
        self._pending: deque[EvidenceSpec] = deque()
        self._inflight: set[str] = set()  # ids of the batch being committed
        self._first_at: float | None = None
        self._cond = threading.Condition()
        self._write_lock = threading.Lock()
        self._stopping = False
        self._retry_at = 0.0
        self.held: str | None = None  # why the disk refuses rows ("disk full: capture paused ..."), None when not
        self._held_free: int | None = None  # free bytes when the hold began (room is more than that, or ROOM_BYTES)
        self._probe_at = 0.0
        # Shared with the ASR worker: torch (embedder) and CTranslate2 (whisper) each bring their own
        # OpenMP pool; running both at once on a 2-core box thrashed and once lost a transcript.
        self._model_lock = model_lock or threading.Lock()

    def _locked(self) -> bool:
        keys = getattr(self.store, "keys", None)
        return bool(keys is not None and keys.locked)

    def submit(self, spec: EvidenceSpec) -> None:
        """Queue one row; the writer thread commits it within flush_seconds."""
        with self._cond:
            if len(self._pending) >= self.max_pending:
                # Only reachable when the store keeps failing (a held writer pauses capture first, so
                # only frames already in the OCR queue still arrive); keep memory bounded and say so.
                self._pending.popleft()
                self.health.error("writer backlog full: dropped the oldest pending row")
            self._pending.append(spec)
            if self._first_at is None:
                self._first_at = time.monotonic()
            self.health.set(evidence_pending=len(self._pending))
            self._cond.notify_all()

    def _due(self) -> bool:
        if not self._pending or time.monotonic() < self._retry_at:
            return False
        if self._locked():
            return False  # rows wait in memory until `mirador unlock`: sealing them needs the key
        if self.held is not None and not self._stopping and not self._room_again():
            self._retry_at = time.monotonic() + HOLD_RETRY_S
            return False
        return (self._stopping or len(self._pending) >= self.flush_rows
                or time.monotonic() - (self._first_at or 0) >= self.flush_seconds)

    def _room_again(self) -> bool:
        """While held: whether a commit is worth trying (the disk has room again, or a probe is due)."""
        if time.monotonic() >= self._probe_at:
            return True
        free = free_bytes(self.store.home)
        return free is not None and free >= max(ROOM_BYTES, (self._held_free or 0) + ROOM_BYTES // 4)

    def _hold(self, e: StorageError) -> None:
        """The disk refuses rows: keep them, pause capture (the runner reads `held`), say so once."""
        what = ("disk full: capture paused until space is freed" if isinstance(e, DiskFullError)
                else "the data folder's disk cannot be written: capture paused until it can")
        first = self.held is None
        self.held = f"{what} — {e}"
        self._held_free = free_bytes(self.store.home)
        self._probe_at = time.monotonic() + HOLD_PROBE_S
        self._retry_at = time.monotonic() + HOLD_RETRY_S
        self.health.set(held=self.held)
        if first:  # once per hold, not once per retry: the reason stays in health until it clears
            log.warning("evidence writer held, %d row(s) kept: %s", len(self._pending), e)
            self.health.error(self.held)

    def _release(self) -> None:
        if self.held is not None:
            log.warning("the disk takes rows again: capture resumed (%d row(s) still pending)", len(self._pending))
            self.held = None
            self.health.set(held=None)

    def run(self) -> None:
        """Commit batches until stop(); the last pending rows are flushed on the way out."""
        try:
            # Load the embedder now, not inside the first batch: under load that takes seconds,
            # and a stop() arriving meanwhile would otherwise wait on it with rows still pending.
            with self._model_lock:
                self.store.embedder.embed(["warm-up"])
        except Exception as e:
            self.health.error(f"embedder did not load: {type(e).__name__}: {e}")
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._stopping or self._due(), timeout=0.5)
                stopping = self._stopping
            if stopping:
                self.flush()  # one last attempt; rows still pending after it are reported by health
                if self._pending:
                    log.error("capture stopped with %d row(s) not written%s", len(self._pending),
                              f" ({self.held})" if self.held else "")
                return
            if self._due():
                self.flush()

    def flush(self) -> int:
        """Commit everything pending now (in chunks of flush_rows); returns rows written."""
        written = 0
        with self._write_lock:
            while True:
                with self._cond:
                    batch = [self._pending.popleft() for _ in range(min(len(self._pending), self.flush_rows))]
                    self._first_at = time.monotonic() if self._pending else None
                    self._inflight = {s.id for s in batch if s.id}
                if not batch:
                    break
                try:
                    with self._model_lock:
                        self.store.add_evidence_batch(batch, actor="capture")
                except Exception as e:  # store busy/broken: keep the rows, retry later, make it visible
                    with self._cond:
                        self._inflight = set()
                        self._pending.extendleft(reversed(batch))
                        self._first_at = self._first_at or time.monotonic()
                        self._retry_at = time.monotonic() + 2.0
                    if isinstance(e, StorageError):  # the disk, not the store: hold until it takes rows again
                        self._hold(e)
                        break
                    log.exception("evidence batch of %d failed", len(batch))
                    self.health.error(f"writing evidence failed: {type(e).__name__}: {e}")
                    break
                with self._cond:
                    self._inflight = set()  # only now: existing() finds them in the store from here on
                self._release()
                written += len(batch)
                self.health.bump("evidence_written", len(batch))
                self.health.bump("write_batches")
                self.health.set(last_write_at=time.time())
        self.health.set(evidence_pending=len(self._pending))
        return written

    def existing(self, ids: set[str]) -> set[str]:
        """Which of these evidence ids exist: waiting here, being committed, or in the store.

        The writer's own queue is asked first: a row committed between the two looks is then still
        found in the store. If the store cannot be read, every id is taken as existing (store nothing
        twice rather than guess).
        """
        with self._cond:
            found = ids & ({s.id for s in self._pending if s.id} | self._inflight)
        rest = ids - found
        if not rest:
            return found
        try:
            rows = self.store.get_many("evidence", sorted(rest), ["id"], local=True).values()  # what this device wrote
        except Exception as e:
            log.warning("could not check stored evidence ids: %s", e)
            return set(ids)
        return found | {r["id"] for r in rows}

    @property
    def pending(self) -> int:
        """Rows waiting for the next commit."""
        return len(self._pending)

    def stop(self, timeout: float = 300.0) -> None:
        """Flush what is pending and end the thread (waits for a commit in progress)."""
        with self._cond:
            self._stopping = True
            self._retry_at = 0.0
            self._cond.notify_all()
        if self.is_alive():
            self.join(timeout)
            if self.is_alive():
                log.error("evidence writer still busy after %.0fs; %d row(s) may be lost", timeout, self.pending)
        else:
            self.flush()
