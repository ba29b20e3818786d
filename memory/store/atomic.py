"""Atomic file writes: a reader sees the old file or the new one, never half of either.

Each writer gets its own temporary file (a unique name from `tempfile`, in the target's directory so
that the final rename stays on one file system): two threads or two processes writing the same file
at once each finish, and the last rename wins. A fixed temporary name (`x.tmp`, or `x.tmp-PID`, which
threads of one process share) let one writer rename or truncate the other's half-written file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Owner-only unless the caller asks otherwise: nearly every file written here lies in the data folder,
# which no other user may read (memory/store/permissions.py). A file outside it whose mode is the
# person's (an assistant's settings.json) passes the mode it had.
PRIVATE_FILE_MODE = 0o600


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a fresh temporary path next to `path`; once the block has written it, it replaces `path`.

    If the block raises, the temporary file is removed and `path` is left as it was. suffix: what the
    temporary name ends with (a writer that picks a format by extension can pass the real one)."""
    target = Path(path)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def create_exclusive(path: str | os.PathLike[str], data: str | bytes, mode: int = PRIVATE_FILE_MODE) -> bool:
    """Write `path` whole (fsynced) only if it does not exist yet; False when another writer made it first.

    The file appears complete or not at all: written under a temporary name, then hard-linked to `path`, which
    fails if `path` exists (two processes making a file that must be made once: the first one wins)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    target = Path(path)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".new")
    try:
        os.fchmod(fd, mode) if hasattr(os, "fchmod") else os.chmod(name, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(name, target)
        except FileExistsError:
            return False
        return True
    finally:
        Path(name).unlink(missing_ok=True)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, mode: int = PRIVATE_FILE_MODE,
                 fsync: bool = False) -> None:
    """Write text (UTF-8) or bytes to `path` atomically. mode: the file's permission bits (default 0o600:
    only its owner may read it, whatever the umask). fsync: flush the data to disk before the rename, for
    a file whose loss after a crash would cost the person something."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_path(path) as tmp:
        os.chmod(tmp, mode)
        with open(tmp, "wb") as fh:
            fh.write(raw)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
