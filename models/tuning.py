"""Mirador's tuning of the bundled embedder: low-rank weight deltas merged into a copy of the model.

Why: all-MiniLM-L6-v2 matches a question to a turn that shares its meaning, but a conversation's
answers often share little of it ("what activities does Melanie do?" → "took the kids swimming").
Tuned on question → evidence pairs of other conversations (bench/train_embedder.py), the vector
list finds more of the evidence of conversations it never saw (bench/RESULTS.md).

The delta (models/data/embedder_tuning.npz) names the weights it was trained on by their
fingerprint, and is applied only to those. The merged model is an ordinary sentence-transformers
directory in the per-machine cache, keyed by base weights and delta, made once (NumPy only:
no torch) and then served like any other (its onnxruntime graph is built from it, models/bert_onnx.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

BUNDLED = Path(__file__).resolve().parent / "data" / "embedder_tuning.npz"
WEIGHTS = "model.safetensors"
INFO = "mirador_tuning.json"  # in every merged copy: its base and delta
USERS = ".users"  # in a merged copy: one file per data dir whose store embeds with it (note_user)
COMPLETE = "complete"  # in USERS: every user was registered since the copy was made
_TMP_HOURS = 24  # an unfinished merge this old was left by a process that died


class TuningMismatch(RuntimeError):
    """The delta was trained on other weights than the model it was asked to tune."""


def default_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("mirador", appauthor=False)) / "tuned"


def read_meta(path: Path) -> dict:
    """What a delta file says of itself (base_fingerprint, scale, rank, trained_on, ...), read alone."""
    with np.load(path, allow_pickle=False) as z:
        return json.loads(bytes(z["meta"]).decode())


def read_delta(path: Path) -> tuple[dict, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(meta, {weight name: (B, A)}) of a delta file; the update of a weight W is scale × B @ A."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(bytes(z["meta"]).decode())
        pairs = {name: (z[f"{name}::B"], z[f"{name}::A"]) for name in meta["weights"]}
    return meta, pairs


def write_delta(path: Path, meta: dict, pairs: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
    arrays = {"meta": np.frombuffer(json.dumps({**meta, "weights": sorted(pairs)}).encode(), dtype=np.uint8)}
    for name, (b, a) in pairs.items():
        arrays[f"{name}::B"], arrays[f"{name}::A"] = b.astype(np.float16), a.astype(np.float16)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)  # type: ignore[arg-type]  # numpy's stub: **kwds meets allow_pickle: bool


def _digest(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def copy_name(base_fingerprint: str, delta_digest: str) -> str:
    """The cache dir name of a merged copy: base weights and delta, so it names the model it holds."""
    return f"{base_fingerprint[:12]}-{delta_digest[:12]}"


def cached_copy(name: str | None, cache_dir: Path | None = None) -> Path | None:
    """The merged copy called `name` (an embedder.json's "weights") if it is complete in the cache."""
    if not name or not re.fullmatch(r"[0-9a-f]{12}-[0-9a-f]{12}", name):
        return None
    here = Path(cache_dir or default_dir()) / name
    return here if (here / WEIGHTS).is_file() else None


def tuned_dir(model_dir: Path, delta: Path, cache_dir: Path | None = None) -> Path:
    """model_dir with the delta merged in, made once under cache_dir and reused.

    Raises TuningMismatch when the delta belongs to other weights (a configured embedder_dir).
    """
    from models.onnx_encoder import fingerprint

    meta = read_meta(delta)
    base = fingerprint(model_dir / WEIGHTS) if (model_dir / WEIGHTS).exists() else None
    if base is None or base != meta["base_fingerprint"]:
        raise TuningMismatch(f"{delta.name} tunes other weights than those in {model_dir}")
    out = Path(cache_dir or default_dir()) / copy_name(base, _digest(delta))
    if (out / WEIGHTS).exists():
        return out
    from safetensors.numpy import load_file, save_file

    _, pairs = read_delta(delta)
    for stale in out.parent.glob("*.tmp-*"):  # a merge cut off by a crash or a full disk
        if time.time() - stale.stat().st_mtime > _TMP_HOURS * 3600:
            shutil.rmtree(stale, ignore_errors=True)
    # Unique per writer (process and thread): two merging the same copy at once each finish their own.
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}-{threading.get_ident()}")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(model_dir, tmp, ignore=shutil.ignore_patterns(WEIGHTS, "pytorch_model.bin", "*.onnx", "README.md"))
    weights = load_file(str(model_dir / WEIGHTS))
    scale = float(meta["scale"])
    for name, (b, a) in pairs.items():
        w = weights[name]
        weights[name] = (w.astype(np.float32) + scale * (b.astype(np.float32) @ a.astype(np.float32))).astype(w.dtype)
    save_file(weights, str(tmp / WEIGHTS), metadata={"format": "pt"})
    (tmp / INFO).write_text(json.dumps({"base": str(model_dir), "delta": delta.name, **meta}))
    (tmp / USERS).mkdir()
    (tmp / USERS / COMPLETE).write_text("")
    try:
        os.replace(tmp, out)
    except OSError:  # another process made it first
        shutil.rmtree(tmp, ignore_errors=True)
    log.info("tuned embedder made in %s", out)
    return out


def is_copy(model_dir: Path) -> bool:
    """Whether model_dir is a merged copy made here (not a base model)."""
    return (Path(model_dir) / INFO).is_file()


def _user_file(copy_dir: Path, home: Path) -> Path:
    return copy_dir / USERS / hashlib.sha1(str(Path(home).resolve()).encode()).hexdigest()[:16]


def note_user(copy_dir: Path, home: Path) -> None:
    """Record that the store in `home` embeds with this merged copy, so release() keeps it for it."""
    f = _user_file(copy_dir, home)
    try:
        if f.exists():
            return
        f.parent.mkdir(exist_ok=True)
        f.write_text(str(Path(home).resolve()))
        # A new data dir is rare (a test suite makes hundreds): only then drop the entries of data dirs
        # deleted since, so the list does not grow for good.
        for other in f.parent.iterdir():
            if other.name != COMPLETE and other != f and not Path(other.read_text()).exists():
                other.unlink(missing_ok=True)
    except OSError as e:  # a read-only cache: the copy is then never deleted, which is safe
        log.debug("could not note %s as a user of %s: %s", home, copy_dir, e)


def _still_uses(home: Path, name: str) -> bool:
    """Whether the store in home embeds with the copy called name, by its embedder.json."""
    try:
        made = json.loads((home / "embedder.json").read_text())
    except FileNotFoundError:
        return False  # the data dir was deleted or moved
    except (OSError, ValueError):
        return True  # unreadable now: keep the copy rather than guess
    return isinstance(made, dict) and made.get("weights") == name and not made.get("reembedding")


def release(copy_dir: Path, home: Path, onnx_dir: Path) -> int:
    """The store in `home` has moved off this merged copy (`mirador reembed`): delete the copy and its
    onnxruntime exports in onnx_dir when no other data dir's store embeds with it. Returns the bytes
    freed, 0 when it is kept.

    Why: each release that retunes the embedder leaves ~90 MB of copy and ~90 MB of export behind. A
    copy made by a release that did not register its users (no COMPLETE mark) is kept: some data dir
    never recorded may still use it, and an earlier release's copy cannot be made again.
    """
    users = copy_dir / USERS
    try:
        _user_file(copy_dir, home).unlink(missing_ok=True)
        if not (users / COMPLETE).is_file():
            return 0
        for f in users.iterdir():
            if f.name == COMPLETE:
                continue
            if _still_uses(Path(f.read_text()), copy_dir.name):
                return 0
            f.unlink()  # that data dir is gone, or has moved on too
        files = [p for p in copy_dir.rglob("*") if p.is_file()]
        exports = list(Path(onnx_dir).glob(f"{copy_dir.name}-*.onnx")) + \
            list(Path(onnx_dir).glob(f"{copy_dir.name}-*.onnx.data"))  # a graph's weights (models/bert_onnx.py)
        freed = sum(p.stat().st_size for p in files + exports)
        shutil.rmtree(copy_dir)
        for p in exports:
            p.unlink(missing_ok=True)
    except OSError as e:
        log.warning("the earlier tuned embedder in %s was not deleted: %s — delete it by hand if no "
                    "Mirador data dir uses it", copy_dir, e)
        return 0
    log.info("deleted the earlier tuned embedder %s and its exports (%.0f MB): no data dir uses it",
             copy_dir, freed / 1e6)
    return freed
