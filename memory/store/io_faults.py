"""A full disk and other I/O faults of the data folder, told as one line a person can act on.

LanceDB raises them as RuntimeError or OSError whose text names Rust source files ("lance error:
LanceError(IO): No space left on device (os error 28), /root/.cargo/registry/.../structural.rs:258:9"),
pyarrow and Python as OSError with an errno. `storage_error` turns any of them into a StorageError
(DiskFullError for ENOSPC and EDQUOT, memory/errors.py) that names the data folder, says how much room is
left and what to do — never the Rust path. Any other exception is not ours to word: it gets None.

`all_landed` answers the question a failed commit leaves open: a write whose commit raised may still have
gone through (the error came after the new version was in place), and reporting it failed would make a
retry write it twice (Store.commit asks before it raises).
"""

from __future__ import annotations

import errno as E
import logging
import os
import re
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memory.errors import DiskFullError, MiradorError, StorageError

log = logging.getLogger(__name__)

FAULTS = frozenset({E.ENOSPC, E.EDQUOT, E.EROFS, E.EIO})
# Rust's io::Error prints "(os error N)" with the platform's errno; Windows says it in words.
_OS_ERROR = re.compile(r"os error (\d+)")
_WORDS = {
    "no space left on device": E.ENOSPC,
    "not enough space on the disk": E.ENOSPC,  # Windows: ERROR_DISK_FULL
    "disk quota exceeded": E.EDQUOT,
    "read-only file system": E.EROFS,
    "input/output error": E.EIO,
}
MOVE = "or stop Mirador, move the data folder to a disk with room and set MIRADOR_HOME to its new path"
PURGE = "`mirador purge` drops the old versions the tables keep"
ID_CHUNK = 500  # ids per `id IN (...)` count, as Store.get_many reads them


def fault_errno(exc: BaseException | None) -> int | None:
    """The errno of the disk fault behind exc (or its cause or context), or None when it is none of FAULTS."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, StorageError):
            return exc.errno
        if isinstance(exc, MiradorError):  # already worded for the person: not a disk fault
            return None
        if isinstance(exc, OSError) and exc.errno in FAULTS:
            return exc.errno
        text = str(exc).lower()
        for m in _OS_ERROR.finditer(text):
            if int(m.group(1)) in FAULTS:
                return int(m.group(1))
        for words, n in _WORDS.items():
            if words in text:
                return n
        exc = exc.__cause__ or exc.__context__
    return None


def storage_error(exc: BaseException, home: Path | str) -> StorageError | None:
    """The StorageError to raise for exc, a disk fault under the data folder `home`; None for anything else."""
    if isinstance(exc, StorageError):
        return exc
    n = fault_errno(exc)
    return None if n is None else describe(n, Path(home))


def describe(n: int, home: Path) -> StorageError:
    """One line for errno n on the disk holding `home`: what happened, then what to do."""
    home = home.expanduser().absolute()
    if n == E.ENOSPC:
        return DiskFullError(f"the disk holding {home} is full ({room(home)}): free space on it ({PURGE}), "
                             f"{MOVE}", n)
    if n == E.EDQUOT:
        return DiskFullError(f"your disk quota for {home} is used up: delete files of yours on that disk ({PURGE}), "
                             f"ask for a larger quota, {MOVE}", n)
    if n == E.EROFS:
        return StorageError(f"the disk holding {home} is read-only (mounted so, or remounted read-only after disk "
                            f"errors): make it writable again, {MOVE}", n)
    return StorageError(f"reading or writing {home} failed with an I/O error (a failing disk, or a drive that went "
                        "away): check the disk (the system log names it) and back the data folder up, then try "
                        "again", n)


def free_bytes(home: Path | str) -> int | None:
    """Bytes free to this user on the disk holding home (its nearest existing folder); None when unknown."""
    p = _existing(Path(home))
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def room(home: Path) -> str:
    """How much room is left, as a person reads it: "12 MB free", "0 bytes free", "no free inodes"."""
    p = _existing(home)
    try:
        st = os.statvfs(p) if hasattr(os, "statvfs") else None
    except OSError:
        st = None
    if st is not None and st.f_files and st.f_favail == 0:
        return "no free inodes: too many files"
    free = free_bytes(p)
    return "free space unknown" if free is None else f"{size(free)} free"


def size(n: int) -> str:
    """Bytes for a person: 0 bytes, 812 KB, 12 MB, 3.4 GB."""
    if n < 1000:
        return f"{n} bytes"
    for unit, scale in (("KB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)):
        if n < scale * 1000 or unit == "TB":
            value = n / scale
            return f"{value:.1f} {unit}" if value < 10 and unit in ("GB", "TB") else f"{value:.0f} {unit}"
    return f"{n} bytes"  # unreachable


def _existing(p: Path) -> Path:
    p = p.expanduser().absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def all_landed(table: Any, ids: Iterable[str]) -> bool:
    """Whether every id is in the table now (a commit that raised may have gone through); False when unsure."""
    from memory.store.filters import id_in

    wanted = list(dict.fromkeys(ids))
    if not wanted:
        return False
    try:
        for start in range(0, len(wanted), ID_CHUNK):
            chunk = wanted[start:start + ID_CHUNK]
            if table.count_rows(id_in(chunk)) < len(chunk):
                return False
    except Exception as e:  # cannot tell (the disk may be failing): report the write as failed, as it may be
        log.warning("could not check whether a failed write went through: %s", e)
        return False
    return True


def all_landed_as_written(table: Any, data: Any, on: str, column: str) -> bool:
    """Whether every row of `data` (Arrow, as written) is in the table with `column` exactly as written; False
    when unsure. For a merge, whose rows may have been there before: the column is a sealed one, whose value
    carries a random nonce, so a value read back identical is this write's and no earlier one."""
    from memory.store.filters import id_in

    want = {k: v for k, v in zip(data[on].to_pylist(), data[column].to_pylist(), strict=True) if v is not None}
    if not want:
        return False
    keys = list(want)
    try:
        for start in range(0, len(keys), ID_CHUNK):
            chunk = keys[start:start + ID_CHUNK]
            got = table.search().where(id_in(chunk, on)).select([on, column]).limit(len(chunk)).to_list()
            found = {r[on]: r[column] for r in got}
            if any(found.get(k) != want[k] for k in chunk):
                return False
    except Exception as e:  # cannot tell (the disk may be failing): report the write as failed, as it may be
        log.warning("could not check whether a failed write went through: %s", e)
        return False
    return True
