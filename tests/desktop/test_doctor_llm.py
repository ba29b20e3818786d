"""`mirador doctor`'s llm check in an installer bundle, which ships the Gemma GGUF as an optional add-on."""

from __future__ import annotations

import sys

import pytest

from desktop.cli import doctor
from models import locate


@pytest.fixture
def bundle(tmp_path, monkeypatch):
    """A frozen one-folder app whose models/ holds everything but the Gemma GGUF (as installers build it)."""
    app = tmp_path / "app"
    (app / "_internal" / "models" / locate.BUNDLED_WHISPER).mkdir(parents=True)
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(app / "_internal"), raising=False)
    monkeypatch.setattr(sys, "executable", str(app / "mirador"))
    return app


def _config(mirador_home, text: str) -> None:
    mirador_home.mkdir(parents=True, exist_ok=True)
    (mirador_home / "config.toml").write_text(text)


def test_without_the_addon_the_default_engine_is_fine_and_the_hint_names_the_addon(bundle):
    status, detail, fix = doctor.check_llm()
    assert status == doctor.OK and "not installed (optional" in detail
    assert locate.LLM_ADDON in fix and "pip install" not in fix


def test_without_the_addon_an_llm_engine_is_a_warning_not_a_failure(bundle, mirador_home):
    _config(mirador_home, '[extraction]\nengine = "llm"\n')
    status, detail, fix = doctor.check_llm()
    assert status == doctor.WARN and "rule-based" in detail and locate.LLM_ADDON in fix


def test_the_addon_unpacked_next_to_the_executable_is_reported(bundle):
    (bundle / "models").mkdir()
    (bundle / "models" / locate.BUNDLED_GGUF).write_bytes(b"GGUF")
    status, detail, fix = doctor.check_llm()
    assert status == doctor.OK and str(bundle / "models" / locate.BUNDLED_GGUF) in detail and fix is None
