"""Batched evidence writer: one thread, one commit per batch (every flush_seconds or flush_rows).

Crash-loss bound: a hard kill loses only rows not yet committed — at most the rows captured in the
last `flush_seconds` (default 5 s) or `flush_rows` (default 50), whichever is reached first, plus
frames and utterances still in the OCR/ASR queues (at most their queue sizes). A commit is atomic
in LanceDB (a new manifest version), so a kill during a commit leaves the previous version readable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from capture.health import Health
from memory.store.core import EvidenceSpec
from memory.store.rows import sql_id_list

log = logging.getLogger(__name__)


class EvidenceWriter(threading.Thread):
    """Collects EvidenceSpecs from the sources and commits them in batches through the store."""

    def __init__(self, store, health: Health, flush_seconds: float = 5.0, flush_rows: int = 50,
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
                # Only reachable when the store keeps failing; keep memory bounded and say so.
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
        return (self._stopping or len(self._pending) >= self.flush_rows
                or time.monotonic() - (self._first_at or 0) >= self.flush_seconds)

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
                    log.exception("evidence batch of %d failed", len(batch))
                    with self._cond:
                        self._inflight = set()
                        self._pending.extendleft(reversed(batch))
                        self._first_at = self._first_at or time.monotonic()
                        self._retry_at = time.monotonic() + 2.0
                    self.health.error(f"writing evidence failed: {type(e).__name__}: {e}")
                    break
                with self._cond:
                    self._inflight = set()  # only now: existing() finds them in the store from here on
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
            rows = self.store.rows(self.store.evidence, f"id IN {sql_id_list(rest)}", ["id"], limit=len(rest))
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
