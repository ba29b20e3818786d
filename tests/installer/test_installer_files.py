"""The installer files agree with each other and with pyproject (cheap checks; the build itself is `make installer`)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_spec_freezes_the_console_script_entry_point():
    spec = (ROOT / "installer" / "mirador.spec").read_text()
    entry = (ROOT / "installer" / "entry.py").read_text()
    assert PYPROJECT["project"]["scripts"]["mirador"] == "desktop.cli.main:main"
    assert '"installer" / "entry.py"' in spec
    assert "from desktop.cli.main import main" in entry and "freeze_support()" in entry
    assert '"pyproject.toml"' in spec  # the version comes from pyproject, not a second copy
    assert re.search(r'exe\("mirador", console=True\)', spec)
    assert 'copy_metadata("mirador")' in spec  # `mirador --version` reads the dist metadata
    for name in ("QtWebEngineCore", "QtQml", "Qt3DCore", "QtMultimedia"):
        assert f'"{name}"' in spec  # big Qt modules stay out


def test_inno_script_installs_what_the_spec_builds():
    iss = (ROOT / "installer" / "windows" / "mirador.iss").read_text()
    spec = (ROOT / "installer" / "mirador.spec").read_text()
    build = (ROOT / "scripts" / "build_installer.sh").read_text()
    assert '#define GuiExe "mirador-gui.exe"' in iss and '#define CliExe "mirador.exe"' in iss
    assert 'exe("mirador-gui", console=False)' in spec
    assert f'#define AppVersion "{PYPROJECT["project"]["version"]}"' in iss  # default when not passed
    assert "OutputBaseFilename=Mirador-{#AppVersion}-windows-x64-setup" in iss
    assert '"-DAppVersion=$VERSION"' in build
    assert "SetupIconFile=..\\..\\assets\\icons\\mirador.ico" in iss  # relative to installer/windows/
    assert (ROOT / "assets" / "icons" / "mirador.ico").is_file()


def test_release_workflow_is_valid_yaml_and_names_real_files():
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    matrix = wf["jobs"]["build"]["strategy"]["matrix"]["include"]
    assert {m["os"] for m in matrix} == {"ubuntu-latest", "macos-latest", "windows-latest"}
    assert all("-DGGML_NATIVE=OFF" in m["cmake_args"] for m in matrix)
    assert "-DGGML_METAL=ON" in next(m for m in matrix if m["os"] == "macos-latest")["cmake_args"]
    text = (ROOT / ".github" / "workflows" / "release.yml").read_text()
    for path in ("scripts/build_installer.sh", "installer/smoke_test.sh", "installer/smoke_test.py",
                 "tests/desktop/test_selftest.py"):
        assert path in text and (ROOT / path).is_file(), path


def test_icons_are_generated_from_the_svg():
    mk = _load(ROOT / "scripts" / "make_icons.py", "make_icons")
    assert mk.SOURCE.is_file()
    missing = [str(p) for p in mk.outputs() if not p.is_file()]
    assert not missing, f"run scripts/make_icons.py: {missing}"
    for size in mk.PNG_SIZES:
        assert Image.open(mk.ICONS / f"mirador-{size}.png").size == (size, size)
    assert {(16, 16), (32, 32), (256, 256)} <= set(Image.open(mk.ICONS / "mirador.ico").info["sizes"])


def test_prune_removes_build_leftovers_and_keeps_runtime_files(tmp_path):
    prune = _load(ROOT / "installer" / "prune.py", "prune")
    files = {
        "torch/include/ATen/core.h": False, "torch/lib/libtorch_cpu.so": True, "torch/lib/libdnnl.a": False,
        "torch/lib/libtorchbind_test.so": False, "torch/test/foo_test": False,
        "torch/bin/torch_shm_manager": True, "torch/bin/test_jit": False, "torch/bin/protoc": False, "torch/nn/modules/linear.py": True,
        "torch/testing/_comparison.py": True, "torch/testing/_internal/logging_tensor.py": True,
        "PySide6/Qt/translations/qtbase_de.qm": True, "PySide6/Qt/translations/qtwebengine_de.qm": False,
        "pyarrow/include/arrow/api.h": False, "pyarrow/libarrow.so.2600": True, "models/whisper-tiny.en/model.bin": True,
        "llama_cpp/lib/libllama.so": True, "pyarrow/libarrow_substrait.so.2600": True, "sklearn/utils/tests/test_x.py": False, "numpy/__init__.pyi": False,
    }
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x" * 1000)
    report = prune.prune(tmp_path)
    for rel, keep in files.items():
        assert (tmp_path / rel).exists() == keep, rel
    assert report["before_mb"] >= report["after_mb"]
