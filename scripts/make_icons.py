"""Render assets/icons/mirador.svg into the PNG, .ico and .icns files the installers use.

    .venv/bin/python scripts/make_icons.py [--check]

Writes assets/icons/mirador-<size>.png (16..1024), mirador.ico (Windows, 16..256) and mirador.icns
(macOS, 16..1024). The SVG is drawn with Qt's QSvgRenderer (offscreen, no display needed); the
.ico and .icns containers are written by Pillow. --check exits 1 if a generated file is missing
or older than the SVG, without writing anything.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

ICONS = Path(__file__).resolve().parent.parent / "assets" / "icons"
SOURCE = ICONS / "mirador.svg"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512, 1024)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)


def outputs() -> list[Path]:
    """Every file this script writes."""
    return [ICONS / f"mirador-{s}.png" for s in PNG_SIZES] + [ICONS / "mirador.ico", ICONS / "mirador.icns"]


def render(size: int):
    """The SVG rasterised at size x size as a Pillow RGBA image."""
    from PIL import Image
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        raise SystemExit(f"{SOURCE} is not a valid SVG")
    img = QImage(size, size, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    painter = QPainter(img)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    img.save(buf, "PNG")
    return Image.open(io.BytesIO(bytes(data))).convert("RGBA")


def build() -> list[Path]:
    """Write every PNG size, the .ico and the .icns; return the paths written."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication([])  # noqa: F841 (QImage/QPainter need one)
    images = {s: render(s) for s in PNG_SIZES}
    for s, im in images.items():
        im.save(ICONS / f"mirador-{s}.png", optimize=True)
    # Each size is rendered from the vector source, not downscaled from one bitmap, so 16 px stays crisp.
    ico = [images[s] for s in ICO_SIZES]
    ico[-1].save(ICONS / "mirador.ico", sizes=[(s, s) for s in ICO_SIZES], append_images=ico[:-1])
    icns_sizes = (16, 32, 64, 128, 256, 512, 1024)
    images[1024].save(ICONS / "mirador.icns", append_images=[images[s] for s in icns_sizes[:-1]])
    return outputs()


def main(argv: list[str] | None = None) -> int:
    """Generate the icons, or with --check report stale ones."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check that generated icons are present and fresh")
    args = p.parse_args(argv)
    if args.check:
        src = SOURCE.stat().st_mtime
        stale = [str(f) for f in outputs() if not f.exists() or f.stat().st_mtime < src]
        for f in stale:
            print(f"stale or missing: {f}", file=sys.stderr)
        return 1 if stale else 0
    for f in build():
        print(f"{f.relative_to(ICONS.parent.parent)}  {f.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
