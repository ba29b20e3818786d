"""Downscaled WebP thumbnails of stored frames under <data dir>/frames/, and their retention purge."""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from memory.store.atomic import atomic_path

log = logging.getLogger(__name__)

FRAMES = "frames"


def save_thumbnail(image, home: Path, when: datetime, name: str, width: int = 640,
                   black_boxes: Iterable[tuple[int, int, int, int]] = (), keys=None) -> str:
    """Write a WebP thumbnail with the given boxes (left, top, width, height) blacked out; returns the path relative to home.

    keys (memory.store.keys.DataKeys): seal the file with the data key, bound to its path (Store.frame_bytes
    opens it); raises LockedError / KeyUnavailableError before anything is written when the key cannot be had."""
    from PIL import ImageDraw

    img = image.convert("RGB")
    boxes = list(black_boxes)
    if boxes:
        # Redacted words are painted over at full size, before scaling, so no trace survives in the image.
        img = img.copy()
        draw = ImageDraw.Draw(img)
        for left, top, w, h in boxes:
            draw.rectangle([left - 2, top - 2, left + w + 2, top + h + 2], fill=(0, 0, 0))
    if img.width > width:
        img = img.resize((width, max(1, round(img.height * width / img.width))))
    rel = Path(FRAMES) / when.strftime("%Y-%m-%d") / f"{name}.webp"
    path = home / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if keys is None:
        with atomic_path(path) as tmp:
            img.save(tmp, "WEBP", quality=60, method=2)
        return rel.as_posix()
    buf = io.BytesIO()
    img.save(buf, "WEBP", quality=60, method=2)  # in memory: the plain image never touches the disk
    sealed = keys.seal_bytes(buf.getvalue(), "frame:" + rel.as_posix())
    with atomic_path(path) as tmp:
        tmp.write_bytes(sealed)
    return rel.as_posix()


def purge_frames(home: Path, retention_days: int, now: float | None = None) -> int:
    """Delete thumbnails older than retention_days (by file time) and empty day folders; returns files removed."""
    root = home / FRAMES
    if not root.exists():
        return 0
    cutoff = (now or time.time()) - retention_days * 86400
    removed = 0
    for p in root.rglob("*"):
        if p.is_file() and p.stat().st_mtime < cutoff:
            try:
                p.unlink()
                removed += 1
            except OSError as e:
                log.warning("could not remove old frame %s: %s", p, e)
    for d in sorted((d for d in root.iterdir() if d.is_dir()), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    return removed
