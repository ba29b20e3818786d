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
import shutil
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
    seen, unique = set(), []
    for p in sorted(out, key=lambda p: len(p.parts)):
        if p not in seen and not any(parent in seen for parent in p.parents):
            seen.add(p)
            unique.append(p)
    return unique


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
    after = du(root) if not dry_run else before - sum(r["mb"] for r in removed) * 1e6
    removed.sort(key=lambda r: r["mb"], reverse=True)
    return {"root": str(root), "before_mb": round(before / 1e6, 1), "after_mb": round(after / 1e6, 1),
            "removed_count": len(removed), "removed_top": removed[:20], "biggest": biggest(root)}


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
