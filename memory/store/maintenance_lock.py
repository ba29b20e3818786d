"""One process at a time builds indexes and compacts a data folder's tables (`maintenance.lock` in it).

Several processes open one store (the app, `mirador mcp`, a CLI command), and each may maintain it: the
scheduled pass, `mirador optimize` / `purge`, the light pass after write batches, a re-embed's index build.
Besides sparing two of them the same work, the lock is what makes it safe to delete what a failed build left
(memory/store/leftovers.py): with every local index build under it, an index folder that appeared while this
process held it and that no version references was this process's own.

Within a process the store's write_lock already orders these passes; the file lock is held on top of it
(write_lock first, always) and is reentrant for this process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memory.errors import MiradorError
from memory.store import io_faults

log = logging.getLogger(__name__)

LOCK_FILE = "maintenance.lock"
WAIT_S = 900.0  # an explicit pass waits this long for another process's (a purge of a large store takes minutes)


class Busy(MiradorError):
    """Another process holds the maintenance lock and did not let go in time."""


@contextmanager
def maintenance_lock(home: Path | str, wait: float = WAIT_S) -> Iterator[bool]:
    """Hold the data folder's maintenance lock for the block; yields True when held.

    wait: seconds to wait for another process (0: do not wait — raises Busy at once). A lock file that cannot
    be created (a full disk without it, a read-only folder) yields False: the pass runs unguarded, as before
    this lock existed, and the sweep of leftovers is skipped (leftovers.py asks)."""
    from filelock import FileLock, Timeout

    # One object per path in this process (is_singleton), shared by its threads (thread_local=False): nested
    # holds in one process count up instead of waiting on themselves. The file stays, so a full disk later
    # does not keep the lock from being taken.
    lock = FileLock(Path(home) / LOCK_FILE, thread_local=False, is_singleton=True, preserve_lock_file=True)
    try:
        lock.acquire(timeout=wait)
        held = True
    except Timeout:
        raise Busy(f"another Mirador process has been compacting or indexing {home} for {wait:.0f}s: run this "
                   "again once it is done") from None
    except OSError as e:
        if io_faults.fault_errno(e) is None:
            raise
        log.warning("maintenance runs without its lock (%s): leftovers of a failed step are kept", e)
        held = False
    try:
        yield held
    finally:
        if held:
            lock.release()
