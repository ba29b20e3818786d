"""Which embedder made a store's vectors: the `embedder.json` record in its data dir, and the embedder it names.

Vectors of two models in one table are not comparable, so a store keeps the embedder it was made
with until `mirador reembed` (memory/store/reembed.py) moves it to another and rewrites this record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.errors import MiradorError
from memory.store.atomic import write_atomic

if TYPE_CHECKING:
    from memory.config import ModelsConfig
    from memory.store.embedding import Embedder
    from models.embedder import Embedder as ModelEmbedder

EMBEDDER_RECORD = "embedder.json"  # which embedder this store's vectors come from (Store._own_embedder)
# How often a Store looks whether embedder.json changed (another process's `mirador reembed`); a stat.
RECORD_CHECK_S = 1.0


def embedder_record(home: Path) -> dict[str, Any] | None:
    """What embedder.json says made a store's vectors ({"tuned": bool, ...}); None if it has no record."""
    record = Path(home) / EMBEDDER_RECORD
    try:
        made = json.loads(record.read_text())
        if not isinstance(made, dict) or not isinstance(made.get("tuned"), bool):
            raise ValueError("no 'tuned' flag")
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise MiradorError(f"{record} is damaged ({e}) — restore it from a backup, or delete it if this "
                           "store was made before Mirador tuned its embedder") from e
    return made


def configured_embedder(models: ModelsConfig, tuned: bool) -> ModelEmbedder:
    """The embedder the settings (a ModelsConfig) name, with the bundled tuning merged in or not."""
    from models import tuning

    return _embedder_at(models, models.embedder_dir, tuning.BUNDLED if tuned else None)


def earlier_tuning(models: ModelsConfig, made: dict[str, Any] | None) -> ModelEmbedder | None:
    """The embedder of an earlier release's tuning that the record `made` names, if its merged copy is
    still in the tuning cache; else None.

    An upgrade that ships a new delta leaves the old merged copy behind: the very model the store's
    vectors came from, so searches keep matching until `mirador reembed` moves the store on.
    """
    from models import tuning

    here = tuning.cached_copy(made.get("weights")) if made and made.get("tuned") else None
    return _embedder_at(models, here, None) if here else None


def _embedder_at(m: ModelsConfig, model_dir: Path | None, delta: Path | None) -> ModelEmbedder:
    from models.embedder import shared_embedder

    return shared_embedder(model_dir, m.embedder_batch_size, m.embedder_threads, m.onnx_dir, m.embedder_onnx, delta)


def write_embedder_record(home: Path, emb: Embedder, **extra: Any) -> dict[str, Any]:
    """Record emb as the embedder of the store in home (atomically: a reader never sees half a file)."""
    weights = emb.model_dir.name if emb.tuning else None
    return write_record(home, {"tuned": weights is not None, "weights": weights, "embedder": emb.name, **extra})


def write_record(home: Path, made: dict[str, Any]) -> dict[str, Any]:
    """Write embedder.json as `made`, atomically (each writer through its own temporary file)."""
    write_atomic(Path(home) / EMBEDDER_RECORD, json.dumps(made) + "\n")
    return made


def note_user(emb: Embedder, home: Path) -> None:
    """A merged copy keeps a list of the data dirs that embed with it (models/tuning.py, release)."""
    from models import tuning

    if tuning.is_copy(emb.model_dir):
        tuning.note_user(emb.model_dir, home)


def record_stamp(home: Path) -> tuple[int, int, int] | None:
    """(inode, mtime, size) of embedder.json, or None: a cheap way to see that it changed."""
    try:
        st = os.stat(Path(home) / EMBEDDER_RECORD)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size
