"""Let go of the pages a process has mapped from a file and no longer needs (Linux; elsewhere a no-op).

Why: a process's resident set counts every page of a mapped file it has touched, and the kernel maps
whole page-cache folios (up to megabytes, depending on how the file was read ahead) around each touch.
A one-shot CLI call (a Claude Code hook) that has embedded its query still holds the embedder's
weights while LanceDB searches, and LanceDB's library keeps the pages it read only while Python
imported it. madvise(MADV_DONTNEED) on such a mapping removes its pages from this process and nothing
else: they stay in the page cache, shared with every other process, and a later touch maps them again
from there (a minor fault), with the same bytes, since the file is never written while mapped.

Only clean file pages are let go: a mapping with any page this process has written (a private copy,
e.g. the relocated part of a library) is left alone, since dropping such a page would lose the write.
"""

from __future__ import annotations

import os
import sys

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MADV_DONTNEED = 4
_PRESENT, _FILE_PAGE = 1 << 63, 1 << 61  # /proc/PID/pagemap entry bits (Documentation/admin-guide/mm/pagemap.rst)
_madvise = None


def _libc_madvise():
    global _madvise
    if _madvise is None:
        import ctypes

        f = ctypes.CDLL(None, use_errno=True).madvise
        f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        f.restype = ctypes.c_int
        _madvise = f
    return _madvise


def mappings(path: str | os.PathLike, perms: tuple[str, ...] | None = None) -> list[tuple[int, int]]:
    """(start, end) of this process's mappings of the file at path (resolved), with one of perms
    (as /proc/self/maps spells them, e.g. "r-xp") if given. Empty where /proc is not there."""
    target = os.path.realpath(path)
    out = []
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and parts[5].rstrip("\n") == target and (perms is None or parts[1] in perms):
                    lo, hi = parts[0].split("-")
                    out.append((int(lo, 16), int(hi, 16)))
    except OSError:
        return []
    return out


def _all_clean(pagemap, start: int, end: int) -> bool:
    """Whether every resident page of [start, end) is a page of the file (none copied on write)."""
    import numpy as np

    pagemap.seek(start // _PAGE * 8)
    raw = pagemap.read((end - start) // _PAGE * 8)
    entries = np.frombuffer(raw, dtype=np.uint64)
    present = (entries & np.uint64(_PRESENT)) != 0
    file_page = (entries & np.uint64(_FILE_PAGE)) != 0
    return len(raw) == (end - start) // _PAGE * 8 and not bool(np.any(present & ~file_page))


def release(path: str | os.PathLike, perms: tuple[str, ...] | None = None) -> int:
    """Drop this process's clean pages of the file at path (mappings with one of perms, if given) from its
    resident set; returns the bytes of the mappings advised. Only for files nobody writes while they are
    mapped (a library, a cached graph's weights). Never raises: at worst nothing is let go."""
    if not sys.platform.startswith("linux"):
        return 0
    done = 0
    try:
        spans = mappings(path, perms)
        if not spans:
            return 0
        madvise = _libc_madvise()
        with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
            for start, end in spans:
                if _all_clean(pagemap, start, end) and madvise(start, end - start, _MADV_DONTNEED) == 0:
                    done += end - start
    except (OSError, ValueError, AttributeError):  # no pagemap (a container without /proc), no madvise
        return done
    return done
