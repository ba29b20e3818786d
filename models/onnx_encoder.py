"""The embedder run by onnxruntime, from an ONNX graph built from its weights without torch.

Why: onnxruntime runs the sentence encoder fast for one query and for batches, in a fraction of the
memory torch needs, and the installed app ships neither torch, transformers nor sentence-transformers.
The graph is written from the local safetensors by models/bert_onnx.py (NumPy and onnx.helper, no hub),
with vectors equal to the torch path's to about 1e-6 (tests/models/test_bert_onnx.py), and kept in a
cache directory keyed by the weights' content and the builder's version, so it is made once per machine
and model (a second or two) and then loaded.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # what Tokenize gives and encode() takes
PROBE = "onnx graph check: why did we pick PostgreSQL?"
# Part of every graph's cache name: a change to models/bert_onnx.py that changes the graph bumps it, so
# each machine builds the new graph once instead of loading the old one.
GRAPH_VERSION = "bert_onnx-3"

# Set by a process that embeds a text or two and exits (a CLI call, a hook: desktop/cli/main.py). NumPy and
# hashlib (OpenSSL) are imported only where they are used, so that setting this costs a command that embeds
# nothing (a call the running service answers) no more than this module.
_short_lived = False


def set_short_lived(on: bool = True) -> None:
    """Sessions loaded from now on skip pre-packing the MatMul weights when `on`, and let go of the
    weights' pages after each run.

    Why: onnxruntime re-lays each MatMul's weights into a private copy when a session loads, so that
    every later run reads them faster. A process that embeds one query and ends pays that copy and
    gains nothing from it; without it the session reads the weights where they are mapped from the
    graph's data file (the page cache, shared with every other process using the same graph). The
    vectors are the same. Once its text is embedded such a process has no use for the weights' ~41 MB
    while the rest of the command (LanceDB's search) runs, so they leave its resident set
    (models/pages.py); another text maps them again from the page cache. Likewise the pages of
    onnxruntime's library that building the session read (its graph optimizers, its kernel registry:
    ~11 of the 19 MB it had resident) leave once the session is built; a run maps the code it runs.
    A long-running process (the app, the service, an import) keeps the packing and the pages.
    """
    global _short_lived
    _short_lived = on


class OnnxUnavailable(RuntimeError):
    """This model cannot be served by onnxruntime (not a BERT encoder with mean pooling, or no graph could
    be built); only the torch path (the dev extra) could embed with it."""


def default_dir() -> Path:
    """Per-machine cache: a graph holds public weights only, never anything from a store."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("mirador", appauthor=False)) / "onnx"


def mean_pooled(model_dir: Path) -> bool:
    """True when the model is transformer -> mean pooling (-> normalize): the graph reproduced here."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return False
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    return kinds in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) and \
        modes == {"pooling_mode_mean_tokens"}


_SAMPLE = 1 << 20  # bytes read at each of the fingerprint's offsets
_SAMPLES = 8


def fingerprint(weights: Path) -> str:
    """A digest of the weights' size and eight 1 MB slices spread over the file, from the header to
    the end: the same weights installed in two places share it. Other weights differ in the slices
    (fine-tuning changes nearly every byte, and Mirador's tuned copies also have a name of their own,
    which is part of the graph's). Reading the whole file on every start would slow every CLI call and
    hook."""
    import hashlib

    size = weights.stat().st_size
    h = hashlib.sha1(str(size).encode())
    with weights.open("rb") as f:
        for k in range(_SAMPLES):
            f.seek(max(0, (size - _SAMPLE) * k // (_SAMPLES - 1)))
            h.update(f.read(_SAMPLE))
    return h.hexdigest()


def export_path(model_dir: Path, cache_dir: Path) -> Path:
    """Where this model's graph lives; other weights or another builder version get another name.

    Keyed by the weights' content, not their path: every checkout or reinstall of the same model
    shares one ~90 MB graph instead of making its own.
    """
    import hashlib

    weights = next((p for p in (model_dir / "model.safetensors", model_dir / "pytorch_model.bin") if p.exists()),
                   None)
    if weights is None:
        raise OnnxUnavailable(f"no weights file in {model_dir}")
    key = f"{fingerprint(weights)}|{GRAPH_VERSION}"
    return Path(cache_dir) / f"{model_dir.name}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.onnx"


class Tokenize:
    """The model's tokenizer.json applied as sentence-transformers applies it (stripped texts, truncation
    at max_seq_length, padding to the longest), without importing either it or torch."""

    def __init__(self, model_dir: Path) -> None:
        from tokenizers import Tokenizer

        cfg_path = model_dir / "sentence_bert_config.json"
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        self.lower = bool(cfg.get("do_lower_case"))  # sentence-transformers lower-cases before its tokenizer
        self.tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # The file's own settings are the upstream model's (MiniLM's: truncate and pad to 128); the
        # sentence-transformers config decides, as it does for the torch path.
        self.tok.no_padding()
        self.tok.enable_truncation(int(cfg.get("max_seq_length") or 512))

    def __call__(self, texts: list[str]) -> dict[str, np.ndarray]:
        import numpy as np

        texts = [str(t).strip() for t in texts]
        encs = self.tok.encode_batch([t.lower() for t in texts] if self.lower else texts)
        n = max(len(e.ids) for e in encs)
        out = {k: np.zeros((len(encs), n), dtype=np.int64) for k in INPUTS}
        for row, e in enumerate(encs):
            k = len(e.ids)
            out["input_ids"][row, :k] = e.ids
            out["attention_mask"][row, :k] = e.attention_mask
            out["token_type_ids"][row, :k] = e.type_ids
        return out  # padded positions: masked out of attention and of the mean, so their id is moot


CHUNK = 8  # texts per onnxruntime call when encoding many


class TextEncoder:
    """A built graph served with Tokenize: texts to vectors with neither sentence-transformers nor torch.

    Many texts go in chunks of CHUNK, shortest first, so that little of each call is padding: that way
    batches embed faster than through torch, on one thread or two, idle or with the other core busy.
    """

    def __init__(self, path: Path, model_dir: Path, threads: int, tokenize: Tokenize | None = None) -> None:
        self.tokenize = tokenize or Tokenize(model_dir)
        self.encoder = OnnxEncoder(path, threads)
        self.path = path

    @property
    def session(self):
        return self.encoder.session

    def encode(self, texts: list[str]) -> np.ndarray:
        import numpy as np

        if len(texts) <= CHUNK:
            return self.encoder.encode(self.tokenize(texts))
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: np.ndarray | None = None
        for k in range(0, len(order), CHUNK):
            idx = order[k:k + CHUNK]
            vecs = self.encoder.encode(self.tokenize([texts[i] for i in idx]))
            if out is None:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[idx] = vecs
        assert out is not None  # more than CHUNK texts: the loop ran
        return out


_BUILDING = threading.Lock()  # one build at a time in a process (the tuned model and the one as shipped)


def build(model_dir: Path, target: Path) -> None:
    """Write model_dir's graph (models/bert_onnx.py) as target and its weights beside it, atomically.

    Both files are made in a directory of this writer's own, then moved in: the weights first, so a
    graph file in the cache always has its weights. Another process building the same graph at once
    writes the same bytes, so whichever move comes last changes nothing.
    """
    import shutil

    from models import bert_onnx

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # unique per writer
    try:
        tmp.mkdir()
        bert_onnx.write(model_dir, tmp / target.name)
        try:
            os.replace(bert_onnx.data_path(tmp / target.name), bert_onnx.data_path(target))
            os.replace(tmp / target.name, target)
        except OSError:
            # Windows refuses to replace a file another process has mapped: that process built the same
            # bytes, so theirs serves.
            if not (target.exists() and bert_onnx.data_path(target).exists()):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def remove(path: Path) -> None:
    """Delete a cached graph and its weights."""
    from models.bert_onnx import data_path

    path.unlink(missing_ok=True)
    data_path(path).unlink(missing_ok=True)


def _checked(path: Path, model_dir: Path, threads: int, tokenize: Tokenize) -> TextEncoder:
    """The graph at path loaded, with a probe text giving a finite unit vector (a truncated or foreign file
    fails here or in the load)."""
    import numpy as np

    enc = TextEncoder(path, model_dir, threads, tokenize)
    v = enc.encode([PROBE])[0]
    if not (np.all(np.isfinite(v)) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-3):
        raise ValueError("the probe text's vector is not a finite unit vector")
    return enc


def load_or_build(model_dir: Path, cache_dir: Path, threads: int) -> TextEncoder:
    """An encoder for this model from the cached graph, building the graph first if the cache has none.

    A cached file that does not load (damaged, cut off, foreign) is removed and built again.
    Raises OnnxUnavailable when the model is not a BERT encoder with mean pooling or no graph works.
    """
    if not mean_pooled(model_dir):
        raise OnnxUnavailable(f"{model_dir} is not a transformer with mean pooling")
    try:
        tokenize = Tokenize(model_dir)  # read once: parsing tokenizer.json is a noticeable part of a cold start
    except Exception as e:
        raise OnnxUnavailable(f"{model_dir}: its tokenizer.json cannot be read ({e})") from e
    path = export_path(model_dir, cache_dir)
    if path.exists():
        try:
            enc = _checked(path, model_dir, threads, tokenize)
            prune(cache_dir, keep=path)
            return enc
        except Exception as e:
            log.warning("the embedder graph %s could not be loaded (%s); removed, building it again", path, e)
            remove(path)
    with _BUILDING:
        if not path.exists():  # another thread may have built it meanwhile
            log.info("building the embedder graph %s from %s (once per model)", path, model_dir)
            try:
                build(model_dir, path)
            except Exception as e:
                raise OnnxUnavailable(f"could not build the embedder graph for {model_dir}: {e}") from e
    try:
        enc = _checked(path, model_dir, threads, tokenize)
    except Exception as e:
        remove(path)
        raise OnnxUnavailable(f"the embedder graph built in {path} does not load ({e}); removed") from e
    prune(cache_dir, keep=path)
    return enc


def features(st_model, texts: list[str]) -> dict:
    """sentence-transformers' tokenizer output for texts (the method was renamed in sentence-transformers 6).
    Only the torch path (the dev extra) and tests use it."""
    prep = getattr(st_model, "preprocess", None) or st_model.tokenize
    return prep(texts)


def as_numpy(features: dict) -> dict:
    """The tensors of a sentence-transformers feature dict (it also carries non-tensor entries)."""
    return {k: v.numpy() for k, v in features.items() if hasattr(v, "numpy")}


class OnnxEncoder:
    """One loaded onnxruntime session; encode() takes Tokenize's features and gives unit vectors.

    The rows of the word-embedding table that a batch uses are read from the graph's data file
    (models/bert_onnx.py: why the table is not in the graph) and given to the session as its word_embeds.
    """

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        from models import bert_onnx

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads  # 0 = onnxruntime's default (one per core)
        opts.inter_op_num_threads = 1
        # A spinning pool starves capture on the other core.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.short_lived = _short_lived  # see set_short_lived
        if self.short_lived:
            opts.add_session_config_entry("session.disable_prepacking", "1")
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.path = path
        if self.short_lived:
            from onnxruntime.capi import onnxruntime_pybind11_state as native

            from models import pages

            pages.release(native.__file__, perms=("r--p", "r-xp"))  # its relocated part has private pages: kept
        self._words = open(bert_onnx.data_path(path), "rb", buffering=0)  # noqa: SIM115 (kept for the session's life)
        try:
            size = os.fstat(self._words.fileno()).st_size
            meta = self.session.get_modelmeta().custom_metadata_map
            self._offset, self._rows, self._dim = bert_onnx.words_at(meta, size)
            self._dtype = bert_onnx.words_dtype(meta)  # float32, or float16 for a large vocabulary
        except BaseException:
            self._words.close()
            raise
        self._read_lock = threading.Lock()  # only where os.pread is missing (Windows): seek and read share the offset

    def word_rows(self, ids: np.ndarray) -> np.ndarray:
        """The word-embedding rows of token ids (any shape): float32, shape ids.shape + (hidden,).

        Each distinct id is one read of its row from the page cache: a few dozen for a query, a few
        hundred for a batch of eight long texts, against milliseconds of the session's run.
        """
        import numpy as np

        uniq, where = np.unique(ids, return_inverse=True)
        if uniq.size and (uniq[0] < 0 or uniq[-1] >= self._rows):
            raise ValueError(f"token id {int(uniq[0] if uniq[0] < 0 else uniq[-1])} is outside the vocabulary "
                             f"of {self._rows}")
        row = self._dim * int(self._dtype[-1])  # "<f4" / "<f2": bytes per value
        offsets = [self._offset + int(i) * row for i in uniq]
        fd = self._words.fileno()
        if hasattr(os, "pread"):
            raw = b"".join([os.pread(fd, row, off) for off in offsets])
        else:
            with self._read_lock:
                parts = []
                for off in offsets:
                    self._words.seek(off)
                    parts.append(self._words.read(row))
            raw = b"".join(parts)
        if len(raw) != row * uniq.size:
            raise OSError(f"{self._words.name} is shorter than its graph says (the word embeddings are cut off)")
        table = np.frombuffer(raw, dtype=self._dtype).reshape(uniq.size, self._dim)
        return table[where.reshape(ids.shape)].astype(np.float32, copy=False)

    def encode(self, features: dict) -> np.ndarray:
        import numpy as np

        from models.bert_onnx import WORDS

        ids = np.asarray(features["input_ids"], dtype=np.int64)
        feeds = {k: (np.asarray(features[k], dtype=np.int64) if k in features else np.zeros_like(ids))
                 for k in INPUTS[1:]}
        feeds[WORDS] = self.word_rows(ids)
        out = self.session.run(None, feeds)[0].astype(np.float32, copy=False)
        if self.short_lived:  # see set_short_lived
            from models import bert_onnx, pages

            pages.release(bert_onnx.data_path(self.path))
        return out


UNUSED_DAYS = 30  # a graph no install has loaded for this long is deleted
_TMP_HOURS = 24  # an unfinished build this old was left by a process that died


def prune(cache_dir: Path, keep: Path) -> list[Path]:
    """Mark `keep` as used now, and delete the graphs nothing has loaded for UNUSED_DAYS.

    Why: every new builder version or weights file gets a new ~90 MB graph, and the old ones (torch
    exports of earlier releases too) would pile up. Not "every other graph": two installs on one machine
    with different versions (a dev checkout and the app) each keep theirs, since each marks its own on
    every load.
    """
    import shutil
    import time

    now = time.time()
    removed = []
    try:
        os.utime(keep)
        old = [(p, UNUSED_DAYS * 86400) for p in Path(cache_dir).glob("*.onnx") if p != keep]
        old += [(p, _TMP_HOURS * 3600) for p in Path(cache_dir).glob("*.tmp")]
        for p, age in old:
            if now - p.stat().st_mtime > age:
                if p.is_dir():  # a build cut off (models/onnx_encoder.py build)
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    remove(p)
                removed.append(p)
    except OSError as e:  # a read-only or shared cache dir: the old graphs stay, queries are unaffected
        log.warning("old embedder graphs in %s not cleaned up: %s", cache_dir, e)
    if removed:
        log.info("removed %d embedder graph(s) unused for %d days from %s", len(removed), UNUSED_DAYS, cache_dir)
    return removed
