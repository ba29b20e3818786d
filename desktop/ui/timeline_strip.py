"""The timeline's filmstrip: the day as a row of thumbnails, one per frame on a short day, else one per slot of
a few minutes (the slot's first frame), at most MAX_SLOTS. The slot holding the frame shown is highlighted and
kept in view; a click jumps to that slot's frame. Thumbnails come from the list's ThumbCache (decoded off the
GUI thread, newest first): a slot paints at once with a blank tile and gets its picture when it is in. The strip
follows the day's list (new captures, deletes) through the list model's resets."""

from __future__ import annotations

import bisect
from datetime import datetime, timezone

from PySide6.QtCore import QAbstractListModel, QItemSelectionModel, QModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPalette, QPen, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QListView,
    QStyle,
    QStyledItemDelegate,
    QStyleOptionViewItem,
)

from desktop.ui.timeline_model import DayFramesModel, ThumbCache, local_clock

MAX_SLOTS = 240
_DISPLAY, _DECORATION, _TOOLTIP = (int(r) for r in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.DecorationRole,
                                                      Qt.ItemDataRole.ToolTipRole))
_ROLES = frozenset({_DISPLAY, _DECORATION, _TOOLTIP})
_EPOCH = datetime(1970, 1, 1)
SLOT_MINUTES = (1, 2, 5, 10, 15, 20, 30, 60, 120)


def slot_starts(times: list, max_slots: int = MAX_SLOTS) -> tuple[list[int], int]:
    """The first line of each slot and the slot length in minutes (0: one slot per frame). Times are sorted
    naive-UTC datetimes; the shortest slot length that gives at most max_slots non-empty slots wins."""
    if len(times) <= max_slots:
        return list(range(len(times))), 0
    minutes = [int((t - _EPOCH).total_seconds()) // 60 for t in times]
    starts: list[int] = []
    for m in SLOT_MINUTES:
        starts, last = [], None
        for n, x in enumerate(minutes):
            k = x // m
            if k != last:
                starts.append(n)
                last = k
                if len(starts) > max_slots:
                    break
        if len(starts) <= max_slots:
            return starts, m
    return starts[:max_slots], SLOT_MINUTES[-1]


class StripModel(QAbstractListModel):
    """One item per slot of the day: its first frame's thumbnail and time."""

    def __init__(self, frames: DayFramesModel, parent=None) -> None:
        super().__init__(parent)
        self.frames = frames
        self.starts: list[int] = []
        self._labels: list[str] = []
        self.minutes = 0
        self._slot_of_id: dict[str, int] = {}
        blank = QPixmap(ThumbCache.SIZE)
        blank.fill(QColor("#3c4043"))
        self._blank = blank
        frames.modelReset.connect(self.rebuild)
        frames.refreshed.connect(self._refreshed)
        frames.thumbs.ready.connect(self._thumb_in)
        self.rebuild()

    def rebuild(self) -> None:
        self.beginResetModel()
        ix = self.frames.index_
        self.starts, self.minutes = slot_starts(ix.times)
        self._slot_of_id = {ix.ids[line]: s for s, line in enumerate(self.starts)}
        self._labels = [local_clock(ix.times[line], seconds=self.minutes == 0) for line in self.starts]
        self.endResetModel()

    def _refreshed(self, reset: bool) -> None:
        if not reset and self.starts:  # the same frames, some of their titles may have changed
            self.dataChanged.emit(self.index(0), self.index(len(self.starts) - 1))

    def _thumb_in(self, id_: str) -> None:
        s = self._slot_of_id.get(id_)
        if s is not None:
            self.dataChanged.emit(self.index(s), self.index(s), [Qt.ItemDataRole.DecorationRole])

    def slot_of(self, line: int) -> int:
        """The slot holding line (-1 when there is none)."""
        return bisect.bisect_right(self.starts, line) - 1 if self.starts and line >= 0 else -1

    def line_of(self, slot: int) -> int:
        return self.starts[slot]

    def thumb(self, slot: int):
        """The slot's decoded thumbnail, or None (not in yet, or no image)."""
        ix = self.frames.index_
        line = self.starts[slot]
        return self.frames.thumbs.get(ix.ids[line], ix.frames[line])

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008, N802 - Qt
        return 0 if parent.isValid() else len(self.starts)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role not in _ROLES or not index.isValid() or index.row() >= len(self.starts):
            return None
        if role == _DISPLAY:
            return self._labels[index.row()]
        if role == _DECORATION:
            return self.thumb(index.row()) or self._blank
        line = self.starts[index.row()]
        ix = self.frames.index_
        local = ix.times[line].replace(tzinfo=timezone.utc).astimezone()
        if role == _TOOLTIP:
            end = self.starts[index.row() + 1] if index.row() + 1 < len(self.starts) else self.frames.total
            what = " — ".join(x for x in (ix.apps[line], ix.windows[line]) if x) or "(no app)"
            more = f" (+{end - line - 1} more in these {self.minutes} min)" if end - line > 1 else ""
            return f"{local.strftime('%H:%M:%S')} · {what}{more}"
        return None


class _Highlight(QStyledItemDelegate):
    """The default item, plus a thick frame in the highlight colour round the current slot's thumbnail (a
    selected icon alone is hard to tell from the others)."""

    def paint(self, painter: QPainter, option, index) -> None:
        super().paint(painter, option, index)
        if option.state & QStyle.StateFlag.State_Selected:
            opt = QStyleOptionViewItem(option)
            self.initStyleOption(opt, index)
            style = opt.widget.style() if opt.widget is not None else QApplication.style()
            box = style.subElementRect(QStyle.SubElement.SE_ItemViewItemDecoration, opt, opt.widget).adjusted(-2, -2, 1, 1)
            pen = QPen(option.palette.color(QPalette.ColorRole.Highlight))
            pen.setWidth(3)
            painter.save()
            painter.setPen(pen)
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRect(box)
            painter.restore()


class ThumbStrip(QListView):
    """The filmstrip view: one row of thumbnails, scrolled sideways; `jump(line)` on a click."""

    jump = Signal(int)

    def __init__(self, frames: DayFramesModel, parent=None) -> None:
        super().__init__(parent)
        self.strip = StripModel(frames, self)
        self.setModel(self.strip)
        self.setItemDelegate(_Highlight(self))
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setMovement(QListView.Movement.Static)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(False)
        self.setUniformItemSizes(True)
        self.setIconSize(ThumbCache.SIZE)
        cell = QSize(ThumbCache.SIZE.width() + 10, ThumbCache.SIZE.height() + self.fontMetrics().height() + 10)
        self.setGridSize(cell)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setFixedHeight(cell.height() + self.horizontalScrollBar().sizeHint().height() + 6)
        self.setToolTip("The day as thumbnails: click one to jump to it")
        self.clicked.connect(lambda idx: self.jump.emit(self.strip.line_of(idx.row())))

    def wheelEvent(self, e) -> None:  # noqa: N802 - Qt: a plain wheel scrolls the strip sideways
        if e.angleDelta().x() == 0 and e.angleDelta().y() != 0:
            bar = self.horizontalScrollBar()
            bar.setValue(bar.value() - e.angleDelta().y())
            e.accept()
            return
        super().wheelEvent(e)

    def follow(self, line: int) -> None:
        """Highlight the slot holding line and keep it in view (no jump is emitted)."""
        s = self.strip.slot_of(line)
        if s < 0:
            return
        idx = self.strip.index(s)
        if self.currentIndex().row() != s or not self.selectionModel().isSelected(idx):
            self.selectionModel().setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect)
        self.scrollTo(idx, QAbstractItemView.ScrollHint.PositionAtCenter)
