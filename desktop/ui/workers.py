"""Run store and model calls off the GUI thread; results come back to the GUI thread through signals.

Every callback given to `Jobs.submit` runs in the GUI thread (the thread that owns the Jobs
object), so views may touch widgets there. Workers themselves never touch widgets.
"""

from __future__ import annotations

import itertools
import logging
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from memory.errors import MiradorError

log = logging.getLogger(__name__)

Callback = Callable[[Any], object]  # what it returns is not used


class _Task(QRunnable):
    def __init__(self, jobs: Jobs, job_id: int, fn: Callable, args: tuple, kwargs: dict) -> None:
        super().__init__()
        self.jobs, self.job_id, self.fn, self.args, self.kwargs = jobs, job_id, fn, args, kwargs

    def run(self) -> None:  # worker thread
        try:
            result = self.fn(*self.args, **self.kwargs)
        except MiradorError as e:  # expected: a message written for the person
            self._emit(self.jobs._failed, str(e))
        except Exception as e:  # unexpected: keep the traceback in the log, show one line
            log.error("background job failed:\n%s", traceback.format_exc())
            self._emit(self.jobs._failed, f"{type(e).__name__}: {e}")
        else:
            self._emit(self.jobs._done, result)

    def _emit(self, signal, value) -> None:
        try:
            signal.emit(self.job_id, value)
        except RuntimeError:  # the Jobs object was deleted (app quitting): nobody is left to tell
            log.debug("job %d finished after its queue was deleted", self.job_id)


class Jobs(QObject):
    """A small job queue on a QThreadPool. Create it in the GUI thread."""

    # Emitted from worker threads; received by this object's slots in its own (GUI) thread,
    # so Qt queues the call: the GUI thread never blocks on a job.
    _done = Signal(int, object)
    _failed = Signal(int, str)
    busy_changed = Signal(int)
    error = Signal(str)  # any job's failure, for a status bar or notification

    def __init__(self, parent: QObject | None = None, max_threads: int = 2) -> None:
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._ids = itertools.count(1)
        self._callbacks: dict[int, tuple[Callback | None, Callback | None]] = {}
        self._done.connect(self._on_done)
        self._failed.connect(self._on_failed)

    @property
    def pending(self) -> int:
        """Jobs submitted whose callbacks have not run yet."""
        return len(self._callbacks)

    def submit(self, fn: Callable, *args, on_done: Callback | None = None, on_error: Callback | None = None,
               **kwargs) -> int:
        """Run fn(*args, **kwargs) in the pool; on_done(result) or on_error(message) runs in the GUI thread."""
        job_id = next(self._ids)
        self._callbacks[job_id] = (on_done, on_error)
        self.busy_changed.emit(self.pending)
        self.pool.start(_Task(self, job_id, fn, args, kwargs))
        return job_id

    @Slot(int, object)
    def _on_done(self, job_id: int, result: object) -> None:
        on_done, _ = self._callbacks.pop(job_id, (None, None))
        self.busy_changed.emit(self.pending)
        _deliver(on_done, result)

    @Slot(int, str)
    def _on_failed(self, job_id: int, message: str) -> None:
        _, on_error = self._callbacks.pop(job_id, (None, None))
        self.busy_changed.emit(self.pending)
        self.error.emit(message)
        _deliver(on_error, message)

    def shutdown(self, timeout_ms: int = 10_000) -> None:
        """Let running jobs finish (at quit); queued ones are dropped."""
        self.pool.clear()
        self.pool.waitForDone(timeout_ms)


def _deliver(callback: Callback | None, value: object) -> None:
    if callback is None:
        return
    try:
        callback(value)
    except RuntimeError as e:
        # The window that asked was closed (its C++ side deleted) before the answer came back.
        if "already deleted" not in str(e):
            raise
        log.debug("dropped a result for a closed view: %s", e)


class MainThreadGC(QObject):
    """Run Python's cyclic garbage collector only on the GUI thread.

    If automatic collection fires in a worker thread it can finalise a Qt object there; its
    destructor takes a Qt mutex and then waits for the GIL while the GUI thread holds the GIL
    and waits for that mutex — a deadlock we hit in the tray-app test. So automatic collection
    is turned off while the app runs, and a timer collects on the GUI thread instead.
    """

    def __init__(self, parent=None, interval_ms: int = 1000) -> None:
        import gc

        from PySide6.QtCore import QTimer

        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.collect)
        self._timer.start(interval_ms)

    def collect(self) -> None:
        """Collect the generations whose thresholds have been crossed (what automatic GC would do)."""
        import gc

        t0, t1, t2 = gc.get_threshold()
        c0, c1, c2 = gc.get_count()
        if c0 > t0:
            gc.collect(2 if c2 > t2 else 1 if c1 > t1 else 0)

    def stop(self) -> None:
        """Stop the timer, collect once, and give collection back to the interpreter."""
        import gc

        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()
