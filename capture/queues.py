"""Bounded work queues and the worker threads that drain them (never unbounded memory)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class DropOldestQueue:
    """A bounded FIFO: when full, a live source drops the oldest item (counted); a file source waits."""

    def __init__(self, maxsize: int, name: str = "queue") -> None:
        self.maxsize = maxsize
        self.name = name
        self.dropped = 0
        self._items: deque = deque()
        self._cond = threading.Condition()
        self._in_flight = 0

    def put(self, item: Any, block: bool = False, timeout: float | None = None) -> bool:
        """Add an item; returns False only if block=True timed out. Non-blocking puts drop the oldest."""
        with self._cond:
            if block:
                if not self._cond.wait_for(lambda: len(self._items) < self.maxsize, timeout):
                    return False
            elif len(self._items) >= self.maxsize:
                self._items.popleft()
                self.dropped += 1
                log.warning("%s queue full: dropped the oldest item (%d so far)", self.name, self.dropped)
            self._items.append(item)
            self._cond.notify_all()
            return True

    def get(self, timeout: float | None = None) -> Any | None:
        """Take the next item (marking it in flight until done()), or None after timeout."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout):
                return None
            self._in_flight += 1
            item = self._items.popleft()
            self._cond.notify_all()
            return item

    def done(self) -> None:
        """Mark the item taken by get() as finished."""
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def __len__(self) -> int:
        return len(self._items)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing is queued or in flight; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._items and not self._in_flight, timeout)


class Worker(threading.Thread):
    """Runs handle(item) for each queued item; an exception is reported, never kills the thread."""

    def __init__(self, queue: DropOldestQueue, handle: Callable[[Any], None], on_error: Callable[[str], None],
                 name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.queue = queue
        self.handle = handle
        self.on_error = on_error
        self.busy_since: float | None = None
        self._stop_evt = threading.Event()

    def run(self) -> None:
        """Drain the queue until stop() is called."""
        while not self._stop_evt.is_set():
            item = self.queue.get(timeout=0.5)
            if item is None:
                continue
            self.busy_since = time.monotonic()
            try:
                self.handle(item)
            except Exception as e:  # one bad frame or utterance must not stop capture
                log.exception("%s failed", self.name)
                self.on_error(f"{self.name}: {type(e).__name__}: {e}")
            finally:
                self.busy_since = None
                self.queue.done()

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the thread to finish its current item and exit."""
        self._stop_evt.set()
        if self.is_alive():
            self.join(timeout)
