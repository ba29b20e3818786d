"""What a failed index build leaves in a table's folder, removed as soon as the build fails.

Lance deletes the data files of a write or compaction that fails, but an index build that fails part-way
(a full disk while a full-text index is written) leaves its `_indices/<uuid>/` folder behind: a partial index
that no version references. Lance's own cleanup keeps such files for 7 days, as it cannot tell them from a
build still running in another process. On a disk that filled up, each failed pass would leave one more, and
the space a person frees would go to them, so the next `mirador optimize` or `purge` failed again.

`swept(store, table, locked)` wraps one table's maintenance. It notes the table's index folders and version
first; when the block fails with a disk fault, it deletes the index folders that appeared meanwhile and that
no version committed since references. That is only safe while no other process builds an index on the table:
every local index build holds the maintenance lock (memory/store/maintenance_lock.py), and `locked` says this
pass holds it. Data files are never touched here: any process's append writes them without that lock.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.store import io_faults

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)


def index_dirs(table: Any) -> set[str] | None:
    """Names of the folders under the table's _indices/, or None when the table is not a local folder."""
    folder = _folder(table)
    if folder is None:
        return None
    try:
        return {p.name for p in (folder / "_indices").iterdir() if p.is_dir()}
    except FileNotFoundError:
        return set()
    except OSError:
        return None


@contextmanager
def swept(store: Store, table: Any, locked: bool) -> Iterator[None]:
    """Run the block; if it fails with a disk fault, remove the index folders it left (see the module doc)."""
    before = index_dirs(table) if locked else None
    version = _version(table) if before is not None else None
    try:
        yield
    except Exception as e:
        if before is not None and version is not None and io_faults.fault_errno(e) is not None:
            freed = sweep(table, before, version)
            if freed:
                log.warning("removed %s of partial indexes a failed step left in %s", io_faults.size(freed),
                            table.name)
        raise


def sweep(table: Any, before: set[str], version: int) -> int:
    """Delete index folders not in `before` that no version after `version` references; returns bytes freed."""
    folder = _folder(table)
    now = index_dirs(table)
    if folder is None or now is None or not (now - before):
        return 0
    try:
        ds = table.to_lance()
        used: set[str] = set()
        for v in range(version + 1, ds.latest_version + 1):  # no version before the step can name a new folder
            used |= {str(ix["uuid"]) for ix in ds.checkout_version(v).list_indices()}
    except Exception as e:  # cannot tell which are in use: keep them all (Lance's cleanup takes them in 7 days)
        log.warning("partial indexes of %s kept: could not read its versions (%s)", table.name, e)
        return 0
    freed = 0
    for name in sorted(now - before - used):
        path = folder / "_indices" / name
        size = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
        try:
            shutil.rmtree(path)
        except OSError as e:
            log.warning("could not remove the partial index %s: %s", path, e)
            continue
        freed += size
    return freed


def _folder(table: Any) -> Path | None:
    try:
        uri = str(table.uri)
    except Exception:  # a handle without a location: nothing to sweep
        return None
    if "://" in uri and not uri.startswith("file://"):
        return None  # a bucket (memory/store/remote.py): not ours to list
    path = Path(uri.removeprefix("file://"))
    return path if path.is_dir() else None


def _version(table: Any) -> int | None:
    try:
        return int(table.version)
    except Exception:
        return None
