"""Sentence embeddings with sentence-transformers, offline, lazy-loaded, batched, with a query cache."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from models import onnx_encoder
from models.locate import embedder_dir

log = logging.getLogger(__name__)


class Embedder:
    """Turns text into L2-normalised float32 vectors.

    model_dir: a sentence-transformers model directory; None = the bundled all-MiniLM-L6-v2.
    batch_size: texts per forward pass when embedding many at once.
    threads: torch's intra-op threads (onnxruntime's query session takes at least two, see
      query_threads); 0 keeps their defaults.
    cache_size: how many distinct query strings keep their vector (repeated searches are free).
    device: "cpu" here; any torch device string elsewhere.
    onnx_dir: where the onnxruntime export of the model is kept (models/onnx_encoder.py); None = the
      per-user cache directory. use_onnx=False keeps every text on torch.
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
        self._model = None
        self._lock = threading.Lock()
        self.onnx_dir = Path(onnx_dir) if onnx_dir else None
        self.use_onnx = use_onnx and device == "cpu"
        self._onnx = None  # a TextEncoder once exported/loaded and checked here; until then torch serves
        self._light = None  # a cached export with its own tokenizer: serves without torch (onnx_encoder.cached)
        self._light_tried = False
        self._onnx_done = threading.Event()
        self.onnx_error: str | None = None

    @property
    def dim(self) -> int:
        """Vector size, read from the model's pooling config so it costs no model load."""
        pooling = self.model_dir / "1_Pooling" / "config.json"
        if pooling.exists():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return int(self._load().get_sentence_embedding_dimension())

    @property
    def name(self) -> str:
        """A short identifier of the weights, recorded with the store."""
        base = self.base_dir.name if self.base_dir.name != "model" else self.base_dir.parent.name
        return f"{base}+tuned-{self.model_dir.name}" if self.tuning else base

    def _load(self):
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
                    raise RuntimeError(
                        "sentence-transformers is not installed — run `make run` once or "
                        "`pip install sentence-transformers torch==2.13.0`"
                    ) from e
                try:  # a progress bar on stderr would pollute every CLI call's output
                    import transformers

                    transformers.logging.set_verbosity_error()
                    transformers.logging.disable_progress_bar()
                except (ImportError, AttributeError):
                    pass
                if self.threads:
                    _set_torch_threads(torch, self.threads)
                log.info("loading embedder from %s", self.model_dir)
                self._model = SentenceTransformer(str(self.model_dir), device=self.device)
                self._start_onnx()
            return self._model

    def _start_onnx(self) -> None:
        """Load (or export once, which takes a while) the onnxruntime encoder beside the queries, never in their way.

        Not a daemon thread: an export cut off by the interpreter's exit would leave nothing useful, so
        the first process to export waits for it on the way out.
        """
        if not self.use_onnx:
            self._onnx_done.set()
            return

        def work() -> None:
            try:
                self._onnx = onnx_encoder.load_or_export(
                    self._model, self.model_dir, self.onnx_dir or onnx_encoder.default_dir(), self.query_threads,
                    self._torch_one)
                log.info("query encoder: onnxruntime (%s)", self._onnx.path)
            except Exception as e:  # any failure leaves the torch path, which is always correct
                self.onnx_error = str(e)
                log.warning("query encoder stays on torch (slower, ~27 ms a query): %s", e)
            finally:
                self._onnx_done.set()

        # daemon=False explicitly: a thread inherits daemon from its creator (the hook runs in a daemon
        # thread), and an onnxruntime load cut off at exit aborts the process (std::terminate).
        threading.Thread(target=work, name="embedder-onnx", daemon=False).start()

    @property
    def query_threads(self) -> int:
        """onnxruntime's threads for one query: at least two where there are two cores.

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
        """Which engine embeds a single text right now: "onnxruntime" or "torch"."""
        return "onnxruntime" if self._onnx is not None or self._light is not None else "torch"

    @property
    def torch_loaded(self) -> bool:
        """Whether this embedder has loaded sentence-transformers and torch (no export cached yet, or
        embedder_onnx off)."""
        return self._model is not None

    def _light_encoder(self):
        """The export already cached for this model, served without torch; None until one exists.

        Why: importing sentence-transformers and torch takes seconds and much memory, which a CLI recall, a
        hook or the capture process would otherwise pay to embed a few texts. Looked up once per embedder.
        """
        if not self._light_tried and self.use_onnx:
            with self._lock:
                if not self._light_tried:
                    self._light = onnx_encoder.cached(self.model_dir, self.onnx_dir or onnx_encoder.default_dir(),
                                                      self.query_threads)
                    self._light_tried = True
        return self._light

    def _onnx_vectors(self, texts: list[str]) -> np.ndarray | None:
        """texts through onnxruntime: the cached export if there is one, else the one torch's load made
        (or None: torch serves)."""
        enc = self._light_encoder() or self._onnx
        return enc.encode(texts) if enc is not None else None

    def wait_ready(self, timeout: float | None = None) -> str:
        """Block until the onnxruntime encoder is loaded or has failed; returns the backend."""
        self._load()
        self._onnx_done.wait(timeout)
        return self.backend

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed many texts in batches; returns an (n, dim) float32 array."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if len(texts) == 1:  # a single row (live capture, one note) takes the query path's speed
            return self._embed_one(texts[0])[None, :]
        vecs = self._onnx_vectors(list(texts))  # faster than torch at every batch size measured (TextEncoder)
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
        vec = self._embed_one(text)
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
        vecs = self._onnx_vectors(missing) if len(missing) > 1 else None
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
        """One text through onnxruntime once it is ready, else through torch; the same vector either way."""
        vecs = self._onnx_vectors([text])
        if vecs is None:
            self._load()  # loading starts the export beside the torch path
            vecs = self._onnx_vectors([text])
        return vecs[0] if vecs is not None else self._torch_one(text)

    def _torch_one(self, text: str) -> np.ndarray:
        """One text through the model's own modules (tokenizer, transformer, pooling, normalize).

        Why not encode(): for a single short query its batching machinery is pure overhead, and search
        would pay it on every new query. Same vector as embed().
        """
        import torch

        model = self._load()
        feats = onnx_encoder.features(model, [text]).items()
        features = {k: (v.to(model.device) if isinstance(v, torch.Tensor) else v) for k, v in feats}
        with torch.inference_mode():
            out = model(features)["sentence_embedding"]
        out = torch.nn.functional.normalize(out, p=2, dim=1)
        return out[0].float().cpu().numpy().astype(np.float32, copy=False)


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

    Only where torch serves (no export cached yet, or embedder_onnx off): the onnxruntime path has its
    own two non-spinning threads, and this never imports torch for a process that does not use it.
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
