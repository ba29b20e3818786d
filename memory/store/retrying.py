"""Retrying: the one loop the store has for trying something again, above all a commit another writer raced.

Store.commit (memory/store/store_writes.py) runs it under the write lock for this data folder's tables; the shared
scopes' commits to a bucket (memory/store/remote_io.py `retry`) run it without one, since other devices commit
there too. Lance reports a raced commit as a plain error naming the conflict, so the text is what tells.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


def is_conflict(exc: Exception) -> bool:
    """Whether LanceDB refused a commit because another writer committed first (worth retrying)."""
    text = str(exc).lower()
    return "conflict" in text or "retryable" in text or "concurrent" in text


def retry(fn: Callable[..., Any], attempts: int, *, max_delay: float | None = None,
                    on_error: Callable[[Exception], bool] | None = None,
                    retry_on: Callable[[Exception], bool] = is_conflict, first_delay: float = 0.05,
                    before_retry: Callable[[Exception], None] | None = None) -> Any:
    """fn(), tried again (backing off from first_delay, doubling up to max_delay) while it fails with an error
    retry_on accepts (by default a commit conflict); other errors propagate at once.

    on_error(e): asked first on each failure; it may raise (a worded error in place of e), or return True when
    the write went through after all, and then None is returned. before_retry(e): run before each new try (the
    shared scopes drop a broken connection there, so the next try connects afresh)."""
    delay = first_delay
    for i in range(attempts):
        try:
            return fn()
        except Exception as e:  # lance raises plain RuntimeError/OSError for commit conflicts
            if on_error is not None and on_error(e):
                return None
            if i == attempts - 1 or not retry_on(e):
                raise
            log.info("retrying after %s", e)
            if before_retry is not None:
                before_retry(e)
            time.sleep(delay)
            delay = delay * 2 if max_delay is None else min(delay * 2, max_delay)
    raise AssertionError("unreachable: the last attempt returns or raises")
