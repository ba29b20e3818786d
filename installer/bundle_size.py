"""What a built Mirador bundle weighs, item by item: written to dist/bundle-size.json by the build.

    python installer/bundle_size.py dist/mirador --prune-report dist/bundle-size.json \
        --package dist/mirador-0.1.0-linux-x86_64.tar.gz --package dist/mirador_0.1.0_amd64.deb \
        --addon dist/mirador-llm-gemma-0.1.0.tar.gz --out dist/bundle-size.json

installed_mb: bytes on disk once unpacked (the app folder). download_mb: each package file as built.
items: every top-level entry of the bundle's data folder (a Python package, a library, models/ split per
model), largest first, with its unpacked size and its size gzip-compressed (level 6, as `tar -czf`
packs it): what each item costs the download. addons_mb: optional add-ons (the Gemma LLM), each file as
built, outside the targets. The targets are issue 32's for Linux.
"""

from __future__ import annotations

import argparse
import json
import sys
import zlib
from pathlib import Path

TARGETS_MB = {"download": 600, "installed": 1200}
SMALL_MB = 1.0  # items below this are summed into one "(N small items)" row


def du(path: Path) -> int:
    """Bytes under path (files only, symlinks not followed)."""
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def gz(path: Path) -> int:
    """Bytes of path's files after gzip level 6 (tar headers left out: a few hundred bytes a file)."""
    if path.is_symlink():
        return 0  # tar stores the link, not the file it names (counted where it lives)
    files = [path] if path.is_file() else sorted(f for f in path.rglob("*") if f.is_file() and not f.is_symlink())
    total = 0
    for f in files:
        z = zlib.compressobj(6, zlib.DEFLATED, 31)
        with f.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                total += len(z.compress(chunk))
        total += len(z.flush())
    return total


def items(data: Path) -> list[Path]:
    """Top-level entries of the data folder; models/ is split into one item per model."""
    out = []
    for child in sorted(data.iterdir()):
        if child.name == "models" and child.is_dir():
            out += sorted(child.iterdir())
        else:
            out.append(child)
    return out


def measure(app: Path, data: Path, packages: list[Path], addons: list[Path] = ()) -> dict:
    """Sizes of the app folder, its items and the package files."""
    rows, small = [], {"n": 0, "installed": 0, "download": 0}
    for p in items(data):
        size = du(p)
        if size < SMALL_MB * 1e6:
            small["n"] += 1
            small["installed"] += size
            small["download"] += gz(p)
            continue
        rows.append({"item": str(p.relative_to(data)), "installed_mb": round(size / 1e6, 1),
                     "download_mb": round(gz(p) / 1e6, 1)})
    rows.sort(key=lambda r: r["installed_mb"], reverse=True)
    if small["n"]:
        rows.append({"item": f"({small['n']} small items)", "installed_mb": round(small["installed"] / 1e6, 1),
                     "download_mb": round(small["download"] / 1e6, 1)})
    installed = du(app)
    downloads = {p.name: round(p.stat().st_size / 1e6, 1) for p in packages if p.is_file()}
    biggest_download = max(downloads.values(), default=None)
    return {
        "app": str(app),
        "installed_mb": round(installed / 1e6, 1),
        "download_mb": downloads,
        "targets_mb": TARGETS_MB,
        "meets_targets": {"installed": installed / 1e6 <= TARGETS_MB["installed"],
                          "download": biggest_download is not None and biggest_download <= TARGETS_MB["download"]},
        "items": rows,
        "addons_mb": {p.name: round(p.stat().st_size / 1e6, 1) for p in addons if p.is_file()},
    }


def main(argv: list[str] | None = None) -> int:
    """Measure a bundle; merge the prune report (what was removed) in; print and write the JSON."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("app", type=Path, help="the app folder, e.g. dist/mirador")
    p.add_argument("--data", type=Path, help="its data folder (default APP/_internal)")
    p.add_argument("--package", type=Path, action="append", default=[], help="a built package file (repeatable)")
    p.add_argument("--addon", type=Path, action="append", default=[],
                   help="an optional add-on file, listed apart and outside the targets (repeatable)")
    p.add_argument("--prune-report", type=Path, help="installer/prune.py's report, kept under 'prune'")
    p.add_argument("--out", type=Path, help="write the JSON here too")
    a = p.parse_args(argv)
    data = a.data or a.app / "_internal"
    if not data.is_dir():
        print(f"error: {data} is not a directory — build the bundle first", file=sys.stderr)
        return 2
    report = measure(a.app, data, a.package, a.addon)
    if a.prune_report and a.prune_report.is_file():
        pr = json.loads(a.prune_report.read_text())
        report["prune"] = {k: pr[k] for k in ("before_mb", "after_mb", "removed_count", "removed_top") if k in pr}
    text = json.dumps(report, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
