"""Tray and window icons, drawn with QPainter so they are crisp at any size and need no files."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QIcon, QPainter, QPainterPath, QPen, QPixmap

COLORS = {
    "capturing": "#2e9d5b",  # green: watching
    "paused": "#8a8f98",  # grey: not watching
    "stopped": "#8a8f98",
    "starting": "#4a7bd0",
    "problem": "#d2452f",  # red: capture stalled or failed
}


def draw(state: str, size: int = 64) -> QPixmap:
    """The Mirador mark (an eye) in the state's colour, with a badge for paused or problem."""
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = size / 64.0
    color = QColor(COLORS.get(state, COLORS["stopped"]))
    p.setBrush(QBrush(color))
    p.setPen(Qt.PenStyle.NoPen)
    p.drawRoundedRect(QRectF(2 * s, 2 * s, 60 * s, 60 * s), 14 * s, 14 * s)
    eye = QPainterPath()
    eye.moveTo(QPointF(10 * s, 32 * s))
    eye.quadTo(QPointF(32 * s, 8 * s), QPointF(54 * s, 32 * s))
    eye.quadTo(QPointF(32 * s, 56 * s), QPointF(10 * s, 32 * s))
    p.setBrush(QBrush(QColor("white")))
    p.drawPath(eye)
    p.setBrush(QBrush(color.darker(130)))
    p.drawEllipse(QPointF(32 * s, 32 * s), 9 * s, 9 * s)
    if state in ("paused", "stopped"):
        p.setBrush(QBrush(QColor("white")))
        p.setPen(QPen(color.darker(150), 2 * s))
        p.drawEllipse(QPointF(48 * s, 48 * s), 13 * s, 13 * s)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(QBrush(color.darker(150)))
        p.drawRect(QRectF(42.5 * s, 41 * s, 4 * s, 14 * s))
        p.drawRect(QRectF(49.5 * s, 41 * s, 4 * s, 14 * s))
    elif state == "problem":
        p.setBrush(QBrush(QColor("#ffd23f")))
        p.setPen(QPen(QColor("#7a1d10"), 2 * s))
        tri = QPainterPath()
        tri.moveTo(QPointF(48 * s, 33 * s))
        tri.lineTo(QPointF(62 * s, 61 * s))
        tri.lineTo(QPointF(34 * s, 61 * s))
        tri.closeSubpath()
        p.drawPath(tri)
        p.setPen(QPen(QColor("#7a1d10"), 3.5 * s))
        p.drawLine(QPointF(48 * s, 42 * s), QPointF(48 * s, 52 * s))
        p.drawPoint(QPointF(48 * s, 57 * s))
    p.end()
    return pm


def icon(state: str) -> QIcon:
    """A multi-size QIcon for a capture state."""
    ic = QIcon()
    for size in (16, 22, 24, 32, 48, 64, 128):
        ic.addPixmap(draw(state, size))
    return ic


def export(directory: Path) -> list[Path]:
    """Write PNGs of every state (for packaging and the .desktop file); needs a QGuiApplication."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for state in ("capturing", "paused", "problem", "starting"):
        path = directory / f"mirador-{state}.png"
        draw(state, 128).save(str(path))
        out.append(path)
    mark = directory / "mirador.png"
    draw("capturing", 256).save(str(mark))
    return out + [mark]
