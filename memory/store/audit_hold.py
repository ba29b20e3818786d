"""Audit rows a full disk kept out of the audit log: held in memory, written in front of the next ones.

An audit row is written after the change it records (principle 6). When that change committed and the disk
then refuses its audit row, the change is made: reporting it failed would invite a retry that makes it twice.
So the rows wait here, per store, and go in with the next audit write of this process (capture writes every few
seconds; the service's maintenance too). A process that exits with rows still held logs how many at exit: an
error, since the audit log then misses changes that were made.
"""

from __future__ import annotations

import atexit
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from memory.errors import StorageError

log = logging.getLogger(__name__)

# Per store (any object: the Store, or its Writes mixin's self), as long as it lives.
_held: weakref.WeakKeyDictionary[object, list[dict[str, Any]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()
_exit_report = False


def write(store: object, rows: list[dict[str, Any]], append: Callable[[list[dict[str, Any]]], None]) -> None:
    """append(held rows + rows); when the disk refuses them (StorageError), hold them all for the next call."""
    with _lock:
        batch = _held.pop(store, []) + list(rows)
    if not batch:
        return
    try:
        append(batch)
    except StorageError as e:
        with _lock:
            _held[store] = batch + _held.get(store, [])
            count = len(_held[store])
        _report_at_exit()
        log.warning("%d audit row(s) wait in memory for room in the audit log (the changes they record are "
                    "saved): %s", count, e)


def held(store: object) -> int:
    """Audit rows of this store waiting for the disk."""
    with _lock:
        return len(_held.get(store, []))


def _report_at_exit() -> None:
    global _exit_report
    with _lock:
        if _exit_report:
            return
        _exit_report = True
    atexit.register(_left_at_exit)


def _left_at_exit() -> None:
    with _lock:
        left = {getattr(s, "home", "?"): len(rows) for s, rows in _held.items() if rows}
    for home, n in left.items():
        log.error("%d audit row(s) of %s could not be written before exit (its disk refused them): the changes "
                  "they record were saved, but the audit log does not list them", n, home)
