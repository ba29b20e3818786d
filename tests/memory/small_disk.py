"""A real, small filesystem for disk-full tests: a size-limited tmpfs each test mounts and unmounts itself.

tmpfs answers a full disk with ENOSPC exactly as ext4 does (and has no blocks reserved for root, which
would let a root test write on past "full"), and remounting it read-only gives EROFS. Mounting needs
root: CI runs as root; elsewhere these tests skip and say so.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

CHUNK = 64 * 1024


@contextmanager
def small_disk(where: Path, mb: int) -> Iterator[Path]:
    """Mount a tmpfs of `mb` MB at where/disk for the block; unmounted (and its contents gone) afterwards."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root (CI runs the suite as root); run as root to test "
                    "a full disk")
    if not shutil.which("mount"):
        pytest.skip("no `mount` command here")
    mnt = where / "disk"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mb}m,mode=0700", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"this machine does not let a tmpfs be mounted: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        # Threads of LanceDB may still hold a file open for a moment: a lazy unmount lets go once they close it.
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(mnt)], check=True)


def fill(disk: Path, leave: int = 0) -> Path:
    """Fill the disk with one file until `leave` bytes (or less) are free; returns that file."""
    filler = disk / "filler"
    with open(filler, "ab") as f:
        try:
            while (free := shutil.disk_usage(disk).free) > leave:
                f.write(b"\0" * max(4096, min(CHUNK, free - leave)))
                f.flush()
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
    return filler


def free(disk: Path) -> int:
    """Bytes free on the disk."""
    return shutil.disk_usage(disk).free


def remount(disk: Path, mode: str) -> None:
    """Remount the disk "ro" or "rw" (a disk the system made read-only after errors, and back)."""
    subprocess.run(["mount", "-o", f"remount,{mode}", str(disk)], check=True)
