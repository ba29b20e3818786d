"""What every module of the shared scopes needs to commit to and read from a bucket: retries on a raced
commit, the newest version of a table, the time. Its own module so that remote.py and the modules it uses
(remote_conflicts.py) share them without importing each other."""

from __future__ import annotations

import time
from typing import Any


def retry(fn, attempts: int = 8):
    """fn(), tried again (backing off) while it fails with a commit conflict: the shared store has no write lock,
    other devices commit to it too, and Lance reports a raced commit as a plain error naming the conflict."""
    delay = 0.05
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # lance raises plain errors for commit conflicts
            text = str(e).lower()
            if i == attempts - 1 or not ("conflict" in text or "retryable" in text or "concurrent" in text):
                raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
    raise AssertionError("unreachable")


def fresh(table: Any) -> Any:
    """The table moved to the newest version in the bucket (one listing of its versions), and returned."""
    table.checkout_latest()
    return table


def now():
    from memory.types import utcnow

    return utcnow()
