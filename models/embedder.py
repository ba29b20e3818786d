"""Sentence embeddings on onnxruntime, offline, lazy-loaded, batched, with a query cache.

The run-time path imports neither torch, transformers nor sentence-transformers: the model's graph is
built from its safetensors weights (models/bert_onnx.py) and cached (models/onnx_encoder.py). The torch
path (sentence-transformers) remains for `models.embedder_onnx = false`, a model the builder does not
reproduce, and the training benches; it needs the dev extra.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from models import onnx_encoder
from models.locate import embedder_dir, embedder_name

log = logging.getLogger(__name__)

ONNX_RETRY_S = 60.0  # after a failed graph load or build, the next try waits this long


class Embedder:
    """Turns text into L2-normalised float32 vectors.

    model_dir: a sentence-transformers model directory; None = the bundled all-MiniLM-L6-v2.
    batch_size: texts per forward pass when embedding many at once (torch path).
    threads: the thread count asked for (onnxruntime's session takes at least two, see query_threads;
      torch's pool takes it as it is); 0 keeps their defaults.
    cache_size: how many distinct query strings keep their vector (repeated searches are free).
    device: "cpu" here; any torch device string elsewhere (torch path only).
    onnx_dir: where the model's onnxruntime graph is kept (models/onnx_encoder.py); None = the
      per-user cache directory. use_onnx=False keeps every text on torch (needs the dev extra).
    tuning: a delta of models/tuning.py (models.tuning.BUNDLED: Mirador's) merged into the weights;
      None, or a delta made for other weights (logged), embeds with the weights as they are.
    """

    def __init__(
        self,
        model_dir: Path | None = None,
        batch_size: int = 32,
        threads: int = 0,
        cache_size: int = 2048,
        device: str = "cpu",
        onnx_dir: Path | None = None,
        use_onnx: bool = True,
        tuning: Path | None = None,
    ) -> None:
        self.base_dir = embedder_dir(model_dir)
        self.model_dir, self.tuning = self.base_dir, None
        if tuning is not None:
            from models import tuning as T

            try:
                self.model_dir, self.tuning = T.tuned_dir(self.base_dir, Path(tuning)), Path(tuning)
            except T.TuningMismatch as e:
                log.info("embedding with %s untuned: %s", self.base_dir, e)
            except (OSError, ValueError, KeyError) as e:  # a damaged install: embed as shipped, say so
                log.warning("embedder tuning %s unreadable (%s); embedding with %s untuned", tuning, e, self.base_dir)
        self.batch_size = batch_size
        self.threads = threads
        self.device = device
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._model: Any = None  # sentence-transformers, only where torch serves
        self._lock = threading.Lock()
        self.onnx_dir = Path(onnx_dir) if onnx_dir else None
        self.use_onnx = use_onnx and device == "cpu"
        self._onnx: onnx_encoder.TextEncoder | None = None  # a TextEncoder once its graph is built or loaded (models/onnx_encoder.py)
        self._onnx_failed_at: float | None = None  # time.monotonic() of the last failed load or build
        self.onnx_error: str | None = None  # why onnxruntime does not serve this model, if it does not
        self.query_prompt, self.passage_prompt = prompts(self.model_dir)

    @property
    def dim(self) -> int:
        """Vector size, read from the model's pooling config so it costs no model load."""
        pooling = self.model_dir / "1_Pooling" / "config.json"
        if pooling.exists():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        if self._encoder() is not None:
            return int(self._encoder().encode(["dim"]).shape[1])
        return int(self._load().get_sentence_embedding_dimension())

    @property
    def name(self) -> str:
        """A short identifier of the weights, recorded with the store."""
        base = embedder_name(self.base_dir)
        return f"{base}+tuned-{self.model_dir.name}" if self.tuning else base

    def _load(self):
        """sentence-transformers and torch: only for use_onnx=False or a model onnxruntime cannot serve."""
        with self._lock:
            if self._model is None:
                # Never reach for a hub: the weights are local and the machine may be offline.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                try:
                    import torch
                    from sentence_transformers import SentenceTransformer
                except ImportError as e:
                    why = f"onnxruntime cannot embed with it: {self.onnx_error}" if self.onnx_error else \
                        "models.embedder_onnx = false asks for torch"
                    raise RuntimeError(
                        f"the embedder {self.model_dir} needs torch and sentence-transformers ({why}), which "
                        "the app does not ship — set models.embedder_onnx = true and use a BERT model with mean "
                        "pooling (the bundled one is), or install them: `pip install 'mirador[dev]'`"
                    ) from e
                try:  # a progress bar on stderr would pollute every CLI call's output
                    import transformers

                    transformers.logging.set_verbosity_error()
                    transformers.logging.disable_progress_bar()
                except (ImportError, AttributeError):
                    pass
                if self.threads:
                    _set_torch_threads(torch, self.threads)
                log.info("loading embedder from %s on torch", self.model_dir)
                self._model = SentenceTransformer(str(self.model_dir), device=self.device)
            return self._model

    def _encoder(self):
        """The onnxruntime encoder, its graph built once per machine if missing; None where torch serves.

        A model the builder does not reproduce (not BERT with mean pooling) or a graph that cannot be built
        falls to torch, and onnx_error says why. Without torch (the app) that embed fails, and the graph is
        tried again after ONNX_RETRY_S: a full disk or a cache dir made writable again must not leave a
        long-running app without embeddings until it restarts. Once torch serves, it keeps serving.
        """
        failed = self._onnx_failed_at
        if self._onnx is None and self.use_onnx and self._model is None and \
                (failed is None or time.monotonic() - failed > ONNX_RETRY_S):
            with self._lock:
                if self._onnx is None and self._onnx_failed_at == failed:  # not done by another thread meanwhile
                    try:
                        self._onnx = onnx_encoder.load_or_build(
                            self.model_dir, self.onnx_dir or onnx_encoder.default_dir(), self.query_threads)
                        self.onnx_error = None
                        log.info("embedder: onnxruntime (%s)", self._onnx.path)
                    except Exception as e:
                        self.onnx_error = str(e)
                        self._onnx_failed_at = time.monotonic()
                        log.warning("the embedder cannot run on onnxruntime, trying torch: %s", e)
        return self._onnx

    @property
    def query_threads(self) -> int:
        """onnxruntime's threads for one call: at least two where there are two cores.

        Why not `threads`: its default of one is for torch, whose pool spin-waits when the other core is
        busy. onnxruntime's pool here does not spin (models/onnx_encoder.py), so the second thread costs
        a busy core nothing: a query was faster on two threads than on one, both with the machine idle
        and with one core kept busy.
        """
        if self.threads == 0:
            return 0  # onnxruntime's default: one per core
        return max(self.threads, min(2, os.cpu_count() or 1))

    @property
    def backend(self) -> str:
        """Which engine embeds: "onnxruntime" or "torch" (what it will be, before the first text)."""
        if self._onnx is not None:
            return "onnxruntime"
        if self._model is not None or not self.use_onnx or self._onnx_failed_at is not None:
            return "torch"
        return "onnxruntime"

    @property
    def torch_loaded(self) -> bool:
        """Whether this embedder has loaded sentence-transformers and torch (embedder_onnx off, or a model
        onnxruntime cannot serve)."""
        return self._model is not None

    def _onnx_vectors(self, texts: list[str]) -> np.ndarray | None:
        """texts through onnxruntime, or None where torch serves."""
        enc = self._encoder()
        return enc.encode(texts) if enc is not None else None

    def wait_ready(self, timeout: float | None = None) -> str:
        """Load the encoder (building its graph if this machine has none yet); returns the backend.

        timeout: kept for callers of the earlier background export; the load is synchronous now.
        """
        if self._encoder() is None:
            self._load()
        return self.backend

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed many texts (what is stored and searched: passages) in batches; returns an (n, dim) float32 array."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        texts = [self.passage_prompt + t for t in texts] if self.passage_prompt else list(texts)
        vecs = self._onnx_vectors(texts)
        if vecs is not None:
            return vecs
        model = self._load()
        vecs = model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return vecs.astype(np.float32, copy=False)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query string, served from an LRU cache when seen before."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
                return hit
        vec = self._embed_one(self.query_prompt + text)
        with self._lock:
            self._cache[text] = vec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return vec

    def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        """embed_query for several strings; the uncached ones go through onnxruntime in one call.

        Recall embeds a question and, when it names a known speaker, the same question without the name
        (memory/retrieval/query.py): one padded batch of two costs less than two runs of one.
        """
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for t in texts:
                hit = self._cache.get(t)
                if hit is not None:
                    self._cache.move_to_end(t)
                    out[t] = hit
        missing = list(dict.fromkeys(t for t in texts if t not in out))
        vecs = self._onnx_vectors([self.query_prompt + t for t in missing]) if len(missing) > 1 else None
        if vecs is not None:
            with self._lock:
                for t, v in zip(missing, vecs, strict=True):
                    self._cache[t] = out[t] = v
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        for t in missing:
            if t not in out:
                out[t] = self.embed_query(t)
        return [out[t] for t in texts]

    def _embed_one(self, text: str) -> np.ndarray:
        """One text through onnxruntime, or torch where it serves; the same vector either way."""
        vecs = self._onnx_vectors([text])
        return vecs[0] if vecs is not None else self._torch_one(text)

    def _torch_one(self, text: str) -> np.ndarray:
        """One text through the model's own modules (tokenizer, transformer, pooling, normalize).

        Why not encode(): for a single short query its batching machinery is pure overhead. Same vector
        as embed() on torch.
        """
        model = self._load()  # first: without torch installed it says what to do
        import torch

        feats = onnx_encoder.features(model, [text]).items()
        features = {k: (v.to(model.device) if isinstance(v, torch.Tensor) else v) for k, v in feats}
        with torch.inference_mode():
            out = model(features)["sentence_embedding"]
        out = torch.nn.functional.normalize(out, p=2, dim=1)
        return out[0].float().cpu().numpy().astype(np.float32, copy=False)


def prompts(model_dir: Path) -> tuple[str, str]:
    """(query prefix, passage prefix) the model was trained with, from its config_sentence_transformers.json.

    Why: e5 (and bge, Arctic Embed) learned with a prefix on each side ("query: " / "passage: "); without
    it their recall drops. MiniLM has none, so its texts are embedded exactly as before.
    """
    try:
        named = json.loads((Path(model_dir) / "config_sentence_transformers.json").read_text()).get("prompts") or {}
    except (OSError, ValueError, AttributeError):
        return "", ""
    return str(named.get("query") or ""), str(named.get("passage") or named.get("document") or "")


_shared: dict[tuple, Embedder] = {}
_shared_lock = threading.Lock()


def shared_embedder(model_dir: Path | None = None, batch_size: int = 32, threads: int = 0,
                    onnx_dir: Path | None = None, use_onnx: bool = True, tuning: Path | None = None) -> Embedder:
    """One Embedder per model dir per process: loading weights twice wastes seconds and memory."""
    key = (str(embedder_dir(model_dir)), batch_size, threads, str(onnx_dir or ""), use_onnx, str(tuning or ""))
    with _shared_lock:
        if key not in _shared:
            _shared[key] = Embedder(model_dir, batch_size=batch_size, threads=threads, onnx_dir=onnx_dir,
                                    use_onnx=use_onnx, tuning=tuning)
        return _shared[key]


# torch's intra-op pool is one per process: bulk_threads() raises it for a bulk job and puts back what
# the process had, however many jobs and embedders overlap.
_pool_lock = threading.Lock()
_bulk_wants: list[int] = []  # one entry per running bulk job
_threads_outside_bulk: int | None = None


def _set_torch_threads(torch, n: int) -> None:
    """Size the pool for an embedder that loads now; during a bulk job, for after it."""
    global _threads_outside_bulk
    with _pool_lock:
        if _bulk_wants:
            _threads_outside_bulk = n
            torch.set_num_threads(max(n, *_bulk_wants))
        else:
            torch.set_num_threads(n)


@contextlib.contextmanager
def bulk_threads(n: int) -> Iterator[None]:
    """torch's pool at n threads (0: one per core) while a bulk job (an import) embeds its batches.

    Only where torch serves (embedder_onnx off, the dev extra): the onnxruntime path has its own two
    non-spinning threads, and this never imports torch for a process that does not use it.
    Why not always two: with the other core busy, torch's two-thread pool spin-waited and a query
    got several times slower, so the default stays one thread. With OMP_WAIT_POLICY=PASSIVE (models/
    __init__.py) the waiting threads sleep instead: two threads embed batches much faster on an idle
    machine and about as fast with the other core busy.
    """
    global _threads_outside_bulk
    want = n or os.cpu_count() or 1
    with _pool_lock:
        torch = sys.modules.get("torch")  # a pool that loads during the job is sized by _set_torch_threads
        if torch is not None:
            if not _bulk_wants:
                _threads_outside_bulk = torch.get_num_threads()
            torch.set_num_threads(max(want, torch.get_num_threads()))
        _bulk_wants.append(want)
    try:
        yield
    finally:
        with _pool_lock:
            _bulk_wants.remove(want)
            torch = sys.modules.get("torch")
            if torch is not None and _threads_outside_bulk is not None:
                torch.set_num_threads(max(_threads_outside_bulk, *_bulk_wants) if _bulk_wants
                                      else _threads_outside_bulk)
            if not _bulk_wants:
                _threads_outside_bulk = None
