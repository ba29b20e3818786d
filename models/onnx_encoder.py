"""The embedder's transformer exported to ONNX and run by onnxruntime.

Why: onnxruntime runs the same graph as torch several times faster for a single query, with vectors
equal to torch's to 1e-6. Once the export is cached, batches
go through it too (TextEncoder: chunks of 8, shortest first, faster than torch on one or two threads),
and a process never needs to import torch or sentence-transformers.

The export is derived from the local weights only (torch.onnx, no hub) and kept in a cache
directory, keyed by the weights' content and torch version, so it is made once per machine and model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import warnings
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
PROBE = "onnx export check: why did we pick PostgreSQL?"
MIN_PROBE_COSINE = 0.9999


class OnnxUnavailable(RuntimeError):
    """This model cannot be served by onnxruntime; the torch path keeps serving it."""


def default_dir() -> Path:
    """Per-machine cache: the export holds public weights only, never anything from a store."""
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
    (fine-tuning changes nearly every byte); a file that differed only elsewhere would be caught by
    load_or_export's probe against torch, which removes an export that does not reproduce it. Reading
    the whole file on every start would slow every CLI call and hook."""
    size = weights.stat().st_size
    h = hashlib.sha1(str(size).encode())
    with weights.open("rb") as f:
        for k in range(_SAMPLES):
            f.seek(max(0, (size - _SAMPLE) * k // (_SAMPLES - 1)))
            h.update(f.read(_SAMPLE))
    return h.hexdigest()


def export_path(model_dir: Path, cache_dir: Path) -> Path:
    """Where this model's export lives; other weights or another torch version get another name.

    Keyed by the weights' content, not their path: every checkout or reinstall of the same model
    shares one ~90 MB export instead of making its own.
    """
    weights = next((p for p in (model_dir / "model.safetensors", model_dir / "pytorch_model.bin") if p.exists()),
                   None)
    if weights is None:
        raise OnnxUnavailable(f"no weights file in {model_dir}")
    key = f"{fingerprint(weights)}|{torch_version()}"
    return Path(cache_dir) / f"{model_dir.name}-{hashlib.sha1(key.encode()).hexdigest()[:16]}.onnx"


def torch_version() -> str:
    """The installed torch's version, read from its metadata: importing torch costs time and memory,
    which a process that only needs the export (TextEncoder) never pays."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:  # a frozen app may ship torch without its metadata
        import torch

        return torch.__version__


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
    """An export already in the cache, served with Tokenize: texts to vectors with neither
    sentence-transformers nor torch loaded (importing them would dominate a cold `mirador recall`).

    Many texts go in chunks of CHUNK, shortest first, so that little of each call is padding: that way
    batches embed faster than through torch, on one thread or two, idle or with the other core busy.
    """

    def __init__(self, path: Path, model_dir: Path, threads: int) -> None:
        self.tokenize = Tokenize(model_dir)
        self.encoder = OnnxEncoder(path, threads)
        self.path = path

    @property
    def session(self):
        return self.encoder.session

    def encode(self, texts: list[str]) -> np.ndarray:
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
        return out


def cached(model_dir: Path, cache_dir: Path, threads: int) -> TextEncoder | None:
    """A TextEncoder for this model if an export of it is already cached, else None.

    The export was checked against torch when it was made (load_or_export removes one that is not);
    a file that does not load is left for that path to replace.
    """
    try:
        if not mean_pooled(model_dir):
            return None
        path = export_path(model_dir, cache_dir)
        if not path.exists():
            return None
        enc = TextEncoder(path, model_dir, threads)
        prune(cache_dir, keep=path)  # marks ours used; a process that never loads torch cleans up too
        return enc
    except Exception as e:  # any failure: the torch path loads and exports or checks as before
        log.info("no cached query encoder for %s: %s", model_dir, e)
        return None


_EXPORTING = threading.Lock()


def export(st_model, target: Path) -> None:
    """Write the transformer (token ids -> last hidden state) as ONNX, atomically."""
    import torch

    try:
        import onnx  # noqa: F401  (torch.onnx needs it to serialise)
    except ImportError as e:
        raise OnnxUnavailable("the onnx package is not installed (`pip install onnx`)") from e

    hf = st_model[0].auto_model

    class _Hidden(torch.nn.Module):
        def __init__(self, m) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    feats = features(st_model, [PROBE])
    args = tuple(feats[k] for k in INPUTS)
    dyn = {k: {0: "batch", 1: "tokens"} for k in (*INPUTS, "hidden")}
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f"{target.name}.{os.getpid()}-{threading.get_ident()}.tmp")  # unique per writer
    try:
        # The tracer warns about data-dependent Python branches it freezes; for fixed-shape-agnostic
        # BERT ops that is expected, and the probe in load_or_export checks the result anyway.
        # torch.onnx keeps its tracing state in globals: two embedders exporting at once in one
        # process (the tuned model and the one as shipped) would trip over each other.
        with _EXPORTING, torch.inference_mode(False), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(_Hidden(hf).eval(), args, str(tmp), input_names=list(INPUTS),
                              output_names=["hidden"], dynamic_axes=dyn, opset_version=17, dynamo=False)
        os.replace(tmp, target)  # another process exporting at once writes its own tmp file
    finally:
        tmp.unlink(missing_ok=True)


def features(st_model, texts: list[str]) -> dict:
    """The model's tokenizer output for texts (the method was renamed in sentence-transformers 6)."""
    prep = getattr(st_model, "preprocess", None) or st_model.tokenize
    return prep(texts)


def as_numpy(features: dict) -> dict:
    """The tensors of a sentence-transformers feature dict (it also carries non-tensor entries)."""
    return {k: v.numpy() for k, v in features.items() if hasattr(v, "numpy")}


class OnnxEncoder:
    """One loaded onnxruntime session; encode() takes the sentence-transformers features of one text."""

    def __init__(self, path: Path, threads: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads  # 0 = onnxruntime's default (one per core)
        opts.inter_op_num_threads = 1
        # Same reason as the torch setting: a spinning pool starves capture on the other core.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.path = path

    def encode(self, features: dict) -> np.ndarray:
        ids = np.asarray(features["input_ids"], dtype=np.int64)
        feeds = {k: (np.asarray(features[k], dtype=np.int64) if k in features else np.zeros_like(ids))
                 for k in INPUTS}
        hidden = self.session.run(None, feeds)[0]
        mask = feeds["attention_mask"][..., None].astype(np.float32)
        vec = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        vec /= np.clip(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12, None)
        return vec.astype(np.float32, copy=False)


def load_or_export(st_model, model_dir: Path, cache_dir: Path, threads: int, torch_vector) -> TextEncoder:
    """An encoder for this model, exporting it first if the cache has none; checked against torch.

    torch_vector(text) gives the torch path's vector: an export that does not reproduce it through
    Tokenize (a damaged file, an exporter bug) is discarded and the torch path keeps serving.
    """
    if not mean_pooled(model_dir):
        raise OnnxUnavailable(f"{model_dir} is not transformer + mean pooling")
    try:
        Tokenize(model_dir)  # a tokenizer problem is not the export's: keep the file
    except Exception as e:
        raise OnnxUnavailable(f"{model_dir}: its tokenizer cannot be read without torch ({e})") from e
    path = export_path(model_dir, cache_dir)
    if not path.exists():
        log.info("exporting the query encoder to %s (once per model)", path)
        export(st_model, path)
    try:
        enc = TextEncoder(path, model_dir, threads)
        got = enc.encode([PROBE])[0]
    except Exception as e:  # a truncated or foreign file: remove it so the next start exports again
        path.unlink(missing_ok=True)
        raise OnnxUnavailable(f"{path} could not be loaded ({e}); removed, it is exported again next start") from e
    cos = float(got @ torch_vector(PROBE))
    if cos < MIN_PROBE_COSINE:
        path.unlink(missing_ok=True)
        raise OnnxUnavailable(f"{path} gives vectors unlike torch's (cosine {cos:.5f}); removed")
    prune(cache_dir, keep=path)
    return enc


UNUSED_DAYS = 30  # an export no install has loaded for this long is deleted
_TMP_HOURS = 24  # an unfinished export this old was left by a process that died


def prune(cache_dir: Path, keep: Path) -> list[Path]:
    """Mark `keep` as used now, and delete the exports nothing has loaded for UNUSED_DAYS.

    Why: every new torch version or weights file gets a new ~90 MB export, and the old ones would pile
    up. Not "every other export": two installs on one machine with different torch versions (a dev
    checkout and the app) each keep theirs, since each marks its own on every load.
    """
    import time

    now = time.time()
    removed = []
    try:
        os.utime(keep)
        old = [(p, UNUSED_DAYS * 86400) for p in Path(cache_dir).glob("*.onnx") if p != keep]
        old += [(p, _TMP_HOURS * 3600) for p in Path(cache_dir).glob("*.tmp")]
        for p, age in old:
            if now - p.stat().st_mtime > age:
                p.unlink(missing_ok=True)
                removed.append(p)
    except OSError as e:  # a read-only or shared cache dir: the exports stay, queries are unaffected
        log.warning("old query encoder exports in %s not cleaned up: %s", cache_dir, e)
    if removed:
        log.info("removed %d query encoder export(s) unused for %d days from %s", len(removed), UNUSED_DAYS, cache_dir)
    return removed
