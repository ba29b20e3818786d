"""models/pages.py lets go of clean pages of a mapped file, and never of a page the process wrote."""

from __future__ import annotations

import mmap
import sys

import numpy as np
import pytest

from models import pages

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/pagemap is Linux's")


def resident(start: int, end: int) -> int:
    """Pages of [start, end) present in this process (pagemap's bit 63)."""
    size = mmap.PAGESIZE
    with open("/proc/self/pagemap", "rb", buffering=0) as f:
        f.seek(start // size * 8)
        entries = np.frombuffer(f.read((end - start) // size * 8), dtype=np.uint64)
    return int(np.count_nonzero(entries >> np.uint64(63)))


def test_clean_pages_leave_and_come_back_with_the_same_bytes(tmp_path):
    path = tmp_path / "weights.bin"
    data = np.random.default_rng(0).integers(0, 255, 64 * mmap.PAGESIZE, dtype=np.uint8).tobytes()
    path.write_bytes(data)
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert bytes(m) == data  # every page touched
        (start, end), = pages.mappings(path)
        assert end - start == len(data) and resident(start, end) == 64
        assert pages.release(path) == len(data)
        assert resident(start, end) == 0  # gone from this process
        assert bytes(m) == data  # and mapped again from the page cache on the next read
    assert pages.release(path) == 0  # nothing mapped any more


def test_a_mapping_with_a_written_page_is_kept(tmp_path):
    path = tmp_path / "private.bin"
    path.write_bytes(b"a" * (8 * mmap.PAGESIZE))
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY) as m:
        m[:1] = b"z"  # copied on write: the only place this byte exists
        _ = bytes(m)
        assert pages.release(path) == 0
        assert m[:2] == b"za"  # the write survives
    assert path.read_bytes()[:1] == b"a"


def test_only_the_given_permissions(tmp_path):
    path = tmp_path / "lib.bin"
    path.write_bytes(b"x" * (4 * mmap.PAGESIZE))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        _ = bytes(m)
        assert pages.release(path, perms=("r-xp",)) == 0  # mapped r--s: not asked for
        (start, end), = pages.mappings(path)
        assert resident(start, end) == 4
    assert pages.release(tmp_path / "not-mapped") == 0
