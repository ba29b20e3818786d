"""`mirador selftest`: add, search and recall a memory in a throwaway data dir (installer smoke test)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from desktop.cli.output import emit_json

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Iterator

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.store.core import Store

T = TypeVar("T")

FACT = "The Mirador self-test parrot is named Captain Lighthouse and eats sunflower seeds."
QUERY = "what is the name of the self-test parrot?"


@contextmanager
def _temp_home() -> Iterator[Path]:
    """A fresh MIRADOR_HOME for the test; the person's own data dir is never opened."""
    old = os.environ.get("MIRADOR_HOME")
    with tempfile.TemporaryDirectory(prefix="mirador-selftest-") as tmp:
        os.environ["MIRADOR_HOME"] = tmp
        try:
            yield Path(tmp)
        finally:
            if old is None:
                os.environ.pop("MIRADOR_HOME", None)
            else:
                os.environ["MIRADOR_HOME"] = old


class Skipped(Exception):
    """A step whose optional part is not installed: recorded as ok, with the reason."""


def _step(report: dict, name: str, fn: Callable[[], T]) -> T | None:
    """Run one step, recording ok/error and its duration; return its value (None on failure)."""
    t0 = time.perf_counter()
    try:
        value = fn()
        report["steps"].append({"step": name, "ok": True, "seconds": round(time.perf_counter() - t0, 3)})
        return value
    except Skipped as e:
        report["steps"].append({"step": name, "ok": True, "skipped": str(e),
                                "seconds": round(time.perf_counter() - t0, 3)})
        return None
    except Exception as e:  # the report names the failing step; the exit code says it failed
        report["steps"].append({"step": name, "ok": False, "error": f"{type(e).__name__}: {e}",
                                "seconds": round(time.perf_counter() - t0, 3)})
        return None


def _check_memory(store: Store) -> None:
    """Add one memory, then find it by search and by recall with the normal code paths."""
    from memory.retrieval.recall import recall
    from memory.retrieval.search import search_memories

    row = store.add_memory(FACT, type="semantic", actor="person", scope="personal")
    hits = search_memories(store, QUERY, limit=3)
    if not hits or hits[0].id != row["id"]:
        raise AssertionError(f"search did not rank the added memory first (got {[h.id for h in hits]})")
    res = recall(store, QUERY, 200)
    if row["id"] not in [i.id for i in res.items] or "Captain Lighthouse" not in res.text:
        raise AssertionError("recall did not return the added memory")


def _check_llm(home: Path) -> str:
    """Load the configured/bundled GGUF with llama.cpp and complete a tiny JSON answer.

    Skipped when the Gemma model is not installed: installers ship it as an optional add-on, and only
    extraction.engine = "llm" uses it.
    """
    from models.llm import LLM
    from models.locate import ModelNotFound

    llm = LLM(None, home / "models", max_tokens=8, timeout=60)
    try:
        path = llm.path
    except ModelNotFound as e:
        raise Skipped(str(e)) from e
    try:
        out = llm.complete_json("Answer yes or no. Is water wet? Answer:", {
            "type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
            "required": ["answer"]})
        if not isinstance(out.data, dict) or "answer" not in out.data:
            raise AssertionError(f"no JSON answer from the LLM (got {out.text!r})")
        return str(path)
    finally:
        llm.close()


def _check_asr() -> str:
    """Load the bundled whisper model (CTranslate2) and Silero VAD (onnxruntime); decode a second of silence."""
    import numpy as np

    from models.asr import Asr, Vad

    silence = np.zeros(16000, dtype=np.float32)
    if len(Vad().probs(silence)) == 0:
        raise AssertionError("voice detection returned no windows for one second of audio")
    asr = Asr(cpu_threads=1)
    asr.transcribe(silence)
    return str(asr.model_dir)


def run_selftest(models: bool = False) -> dict:
    """Run the self-test in a temp home; models=True also loads the LLM and ASR runtimes."""
    report: dict = {"ok": False, "frozen": bool(getattr(sys, "frozen", False)), "steps": []}
    with _temp_home() as home:
        from memory.store.core import Store

        store = _step(report, "open store", lambda: Store(home))
        if store is not None:
            report["embedder"] = str(store.embedder.model_dir)
            _step(report, "add, search, recall", lambda: _check_memory(store))
        if models:
            report["llm"] = _step(report, "llm", lambda: _check_llm(home))
            report["asr"] = _step(report, "asr", _check_asr)
    report["ok"] = bool(report["steps"]) and all(s["ok"] for s in report["steps"])
    return report


def cmd_selftest(a: argparse.Namespace) -> int:
    """Print the JSON report; exit 1 if any step failed."""
    report = run_selftest(models=a.models)
    emit_json(report)
    return 0 if report["ok"] else 1


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the `selftest` subcommand (always prints JSON)."""
    sp = cmd("selftest", cmd_selftest, "add, search and recall a memory in a temp data dir; print JSON")
    sp.add_argument("--models", action="store_true", help="also load the LLM (llama.cpp) and speech (whisper) models")
    as_json(sp)  # accepted for symmetry with other read commands; the output is always JSON
