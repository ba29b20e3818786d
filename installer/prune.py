"""Remove what a frozen Mirador bundle does not need at run time, and report sizes before and after.

    python installer/prune.py dist/mirador/_internal --report dist/bundle-size.json [--dry-run]

PyInstaller's torch hook collects the whole torch wheel: C++ headers, static libraries, CMake
files, C++ test binaries and test helper libraries. None of them is loaded by the app. The same
goes for headers and Cython sources that pyarrow and others ship, type stubs, and Qt translations
other than Qt's own base strings. Every pattern here was checked by running `mirador selftest
--models` on the pruned bundle (installer/smoke_test.sh); add to it the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# Directories removed whole (relative to the bundle's data folder: _internal/ or Contents/).
DIRS = [
    "torch/include", "torch/share", "torch/test",
    "torch/utils/benchmark", "torch/utils/tensorboard",
    "pyarrow/include", "pyarrow/src", "pyarrow/tests",
    "numpy/_core/include", "numpy/_core/tests", "numpy/tests", "numpy/f2py",
    "scipy/**/tests", "sklearn/**/tests", "sympy/**/tests", "networkx/**/tests", "pandas/tests",
]
# Files removed wherever they are.
FILES = [
    "**/*.h", "**/*.hpp", "**/*.cuh", "**/*.pyi", "**/*.pxd", "**/*.pyx", "**/*.cmake",
    # torch/bin: C++ test programs and protoc go; torch_shm_manager stays (torch needs it to embed).
    "torch/bin/test_*", "torch/bin/*Test*", "torch/bin/protoc*", "torch/bin/*.pt", "torch/bin/*.ptl",
    "torch/lib/*.a", "torch/lib/*test*", "torch/lib/libbackend_with_compiler*", "torch/lib/libaoti_custom_ops*",
    "torch/lib/*.lib", "**/__pycache__/*.pyc",
]
# Checked on Linux only (readelf: nothing left in the bundle links them once the spec excludes
# pyarrow's flight and S3 modules; collect_dynamic_libs still copies every lib*.so). On macOS and
# Windows the libraries are linked differently, so they stay until a smoke test there says otherwise.
LINUX_FILES = ["pyarrow/libarrow_flight.so*", "pyarrow/libarrow_python_flight.so*", "pyarrow/libarrow_s3.so*"]
# Qt translations: keep Qt's own base strings (standard dialogs and buttons), drop the rest.
QT_TRANSLATIONS = ["PySide6/Qt/translations", "PySide6/translations"]
# Linux: system libraries PyInstaller copies to the top of the bundle that nothing in it links (it finds
# ctypes.util.find_library calls in dependencies and copies what they name, e.g. tesseract, libarchive
# and their chains: curl, LDAP, ICU 72, image codecs). Removed when no ELF file left in the bundle has
# them as NEEDED. These are kept even so: the bootloader loads libpython with dlopen, and sounddevice
# (PortAudio) and mss (Xrandr, Xfixes) load theirs through ctypes.
DLOPENED = ("libpython", "libportaudio", "libXrandr", "libXfixes", "libX11", "libxcb")


def du(path: Path) -> int:
    """Bytes under path (files only, symlinks not followed)."""
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink())


def targets(root: Path) -> list[Path]:
    """Every path the prune removes; one inside a directory already listed is left out."""
    out: list[Path] = []
    for pattern in DIRS:
        out += [p for p in root.glob(pattern) if p.is_dir()]
    for pattern in FILES + (LINUX_FILES if sys.platform.startswith("linux") else []):
        out += [p for p in root.glob(pattern) if p.is_file()]
    for rel in QT_TRANSLATIONS:
        d = root / rel
        if d.is_dir():
            out += [p for p in d.iterdir() if p.is_file() and not p.name.startswith("qtbase_")]
    out += unlinked_system_libs(root)
    seen, unique = set(), []
    for p in sorted(out, key=lambda p: len(p.parts)):
        if p not in seen and not any(parent in seen for parent in p.parents):
            seen.add(p)
            unique.append(p)
    return unique


def _needed(path: Path) -> set[str] | None:
    """The DT_NEEDED names of an ELF file (readelf from binutils); None when readelf cannot tell."""
    try:
        out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)) if out.returncode == 0 else None


def _elf(path: Path) -> bool:
    try:
        with path.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def unlinked_system_libs(root: Path) -> list[Path]:
    """Top-level lib*.so* files that no ELF file in the bundle needs, transitively (Linux; [] without readelf)."""
    if not sys.platform.startswith("linux") or shutil.which("readelf") is None:
        return []
    elfs = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and _elf(p)]
    needed: dict[Path, set[str]] = {}
    for p in elfs:
        n = _needed(p)
        if n is None:
            return []  # a file readelf cannot read: remove nothing rather than guess
        needed[p] = n
    top = [p for p in root.iterdir() if p.is_file() and p.name.startswith("lib") and ".so" in p.name
           and not p.name.startswith(DLOPENED)]
    gone: set[Path] = set()
    while True:
        used = set().union(*(n for p, n in needed.items() if p not in gone))
        more = [p for p in top if p not in gone and p.name not in used]
        if not more:
            return sorted(gone)
        gone.update(more)


def strip_debug(root: Path, dry_run: bool = False) -> int:
    """Remove debug sections (`strip --strip-debug`: symbols that dynamic linking uses stay) from the ELF
    libraries that carry them (Linux, with binutils); returns the bytes saved."""
    if not sys.platform.startswith("linux") or shutil.which("strip") is None:
        return 0
    saved = 0
    for p in root.rglob("*.so*"):
        if p.is_symlink() or not p.is_file() or not _elf(p):
            continue
        out = subprocess.run(["readelf", "-S", "-W", str(p)], capture_output=True, text=True)
        if ".debug_" not in out.stdout:
            continue
        before = p.stat().st_size
        if dry_run:
            continue
        tmp = p.with_name(p.name + ".stripped")
        if subprocess.run(["strip", "--strip-debug", "-o", str(tmp), str(p)], capture_output=True).returncode == 0:
            shutil.copymode(p, tmp)
            os.replace(tmp, p)
            saved += before - p.stat().st_size
        else:
            tmp.unlink(missing_ok=True)
    return saved


def biggest(root: Path, n: int = 15) -> list[dict]:
    """The n largest top-level and second-level entries, largest first."""
    items = []
    for child in root.iterdir():
        items.append((du(child), child))
        if child.is_dir() and not child.is_symlink():
            items += [(du(g), g) for g in child.iterdir()]
    items.sort(key=lambda t: t[0], reverse=True)
    return [{"path": str(p.relative_to(root)), "mb": round(size / 1e6, 1)} for size, p in items[:n]]


def prune(root: Path, dry_run: bool = False) -> dict:
    """Remove the targets under root; return sizes before/after and what was removed."""
    before = du(root)
    removed = []
    for p in targets(root):
        size = du(p)
        removed.append({"path": str(p.relative_to(root)), "mb": round(size / 1e6, 2)})
        if not dry_run:
            shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
    stripped = strip_debug(root, dry_run)
    after = du(root) if not dry_run else before - sum(r["mb"] for r in removed) * 1e6
    removed.sort(key=lambda r: r["mb"], reverse=True)
    return {"root": str(root), "before_mb": round(before / 1e6, 1), "after_mb": round(after / 1e6, 1),
            "removed_count": len(removed), "removed_top": removed[:20], "debug_info_stripped_mb": round(stripped / 1e6, 1),
            "biggest": biggest(root)}


def main(argv: list[str] | None = None) -> int:
    """Prune a bundle and print (and optionally write) the JSON report."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("root", type=Path, help="the bundle's data folder, e.g. dist/mirador/_internal")
    p.add_argument("--report", type=Path, help="also write the JSON report here")
    p.add_argument("--dry-run", action="store_true")
    a = p.parse_args(argv)
    if not a.root.is_dir():
        print(f"error: {a.root} is not a directory — build the bundle first", file=sys.stderr)
        return 2
    report = prune(a.root, a.dry_run)
    text = json.dumps(report, indent=2)
    print(text)
    if a.report:
        a.report.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
