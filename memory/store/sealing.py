"""Files an older version left in the clear, sealed in place with the data key: frame thumbnails.

A frame is sealed bound to its path under the data folder ("frame:frames/DAY/ID.webp"), as capture seals new
ones (capture/frames.py), so Store.frame_bytes opens both alike. Each file is replaced atomically: a crash
leaves it plain or sealed, never half of either; nothing is lost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

from memory.store.atomic import write_atomic
from memory.store.keys import SEALED_MAGIC, DataKeys

FRAMES = "frames"


def plain_frames(home: Path) -> Iterator[Path]:
    """Frame files under the data folder that are not sealed yet."""
    root = home / FRAMES
    if not root.is_dir():
        return
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith("."):
            with open(p, "rb") as f:
                if f.read(len(SEALED_MAGIC)) != SEALED_MAGIC:
                    yield p


def seal_frames(home: Path, keys: DataKeys, progress: Callable[[int, int], None] | None = None) -> int:
    """Seal every plain frame in place; progress(done, total) after each. Returns how many were sealed."""
    todo = list(plain_frames(home))
    for i, p in enumerate(todo, 1):
        rel = p.relative_to(home).as_posix()
        sealed = keys.seal_bytes(p.read_bytes(), "frame:" + rel)
        mtime = p.stat().st_mtime  # retention goes by file time: the sealed file keeps the frame's age
        write_atomic(p, sealed, mode=0o600, fsync=False)
        os.utime(p, (mtime, mtime))
        if progress:
            progress(i, len(todo))
    return len(todo)
