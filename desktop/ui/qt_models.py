"""Table models over the store that page lazily: ids first, rows a page at a time, all in workers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSize,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QPalette, QPixmap, QTextDocument
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem

from desktop.ui.browser_data import (
    STATUS_TIPS,
    TYPE_TIPS,
    KeyList,
    fetch_rows,
    highlight,
    relevance_label,
    rows_to_refetch,
    status_word,
    type_word,
)
from desktop.ui.frame_image import frame_image
from desktop.ui.workers import Jobs

log = logging.getLogger(__name__)

ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # the whole public row (dict)
ID_ROLE = Qt.ItemDataRole.UserRole + 2
SORT_ROLE = Qt.ItemDataRole.UserRole + 3  # native value, so the proxy sorts numbers and times correctly
HTML_ROLE = Qt.ItemDataRole.UserRole + 4  # the cell as rich text with the query's words marked (search results)

THUMB_WIDTH = 96


def local_time(iso: str | None) -> str:
    """'2024-05-08T13:56:00Z' -> local 'YYYY-MM-DD HH:MM'."""
    if not iso:
        return ""
    dt = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    return dt.astimezone().strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class Column:
    """One table column: header, the row key it shows, and how to render the value."""

    header: str
    key: str
    fmt: Callable[[Any], str] = lambda v: "" if v is None else str(v)
    width: int = 100  # fixed widths: measuring contents would read every loaded row
    tip: Callable[[Any], str | None] | None = None  # a cell's tooltip from its value
    header_tip: str = ""
    by_shown: bool = False  # sort by the words shown, not the stored value ("Event" before "Fact")


def type_column(width: int = 90) -> Column:
    """The memory type in a person's words (browser_data.TYPE_WORDS), explained in its tooltip."""
    return Column("Type", "type", type_word, width=width, tip=lambda v: TYPE_TIPS.get(str(v or "")),
                  header_tip="What kind of memory: an event, a fact, a how-to, a link or file, something "
                             "about you, or a secret", by_shown=True)


def confidence_column(width: int = 85) -> Column:
    """How sure Mirador is, as a percentage (sorted by the number)."""
    return Column("Confidence", "confidence", lambda v: f"{v:.0%}" if v is not None else "", width=width,
                  header_tip="How sure Mirador is that it is right: 100% for what you wrote yourself, "
                             "less for what it worked out from your captures")


def status_column(width: int = 90) -> Column:
    """The status in a person's words (browser_data.STATUS_SHORT), explained in its tooltip."""
    return Column("Status", "status", status_word, width=width, tip=lambda v: STATUS_TIPS.get(str(v or "")),
                  header_tip="Needs review: proposed, waiting for you in Review · In use: found by search "
                             "and recall · Replaced · Rejected", by_shown=True)


def _one_line(v: Any) -> str:
    return " ".join(str(v or "").split())[:200]


class LazyRowModel(QAbstractTableModel):
    """Rows of one kind ("memory" or "evidence"), fetched a page at a time through `Jobs`."""

    PAGE = 200
    COLUMNS: list[Column] = []
    KIND = "memory"
    loading_changed = Signal(bool)
    reloaded = Signal(int)  # how many ids match, once the id list is in
    page_loaded = Signal(int)  # rows loaded so far
    refreshed = Signal(bool)  # a refresh() is in: True when the list changed (the model was reset)

    def __init__(self, jobs: Jobs, store: Store, fetch: Callable = fetch_rows, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store, self._fetch = jobs, store, fetch
        self._ids: list[str] = []
        self._rows: list[dict] = []
        self._prefetched: dict[str, dict] = {}
        self._fetching = False
        self._generation = 0  # results of an older reload are dropped when they arrive late

    # ---- loading ----------------------------------------------------------------------------

    @property
    def total(self) -> int:
        """How many rows match (loaded or not)."""
        return len(self._ids)

    @property
    def busy(self) -> bool:
        """True while ids or a page are being fetched."""
        return self._fetching

    def reload(self, keys_fn: Callable[[], KeyList]) -> None:
        """Fetch the id list with keys_fn in a worker, then reset the model and load the first page."""
        self._generation += 1
        gen = self._generation
        self._set_fetching(True)
        self.jobs.submit(keys_fn, on_done=lambda keys: self._on_keys(gen, keys),
                         on_error=lambda _msg: self._set_fetching(False))

    def _on_keys(self, gen: int, keys: KeyList) -> None:
        if gen != self._generation:
            return
        self.beginResetModel()
        self._ids, self._rows, self._prefetched = list(keys.ids), [], dict(keys.rows)
        self.endResetModel()
        self._set_fetching(False)
        self.reloaded.emit(len(self._ids))
        if self.canFetchMore(QModelIndex()):
            self.fetchMore(QModelIndex())

    def refresh(self, keys_fn: Callable[[], KeyList], keep: Iterable[str] = ()) -> None:
        """Re-read the id list and the rows already shown, in a worker, without a visible reset when
        nothing moved: same ids in the same order → rows are updated in place (selection and scroll
        stay); otherwise the model resets to the new list with every row that was loaded still loaded
        (rows that arrived above them load too), and `refreshed(True)` tells the view to restore its
        selection and scroll position. Only the shown rows that changed since they were read are read
        again (browser_data.rows_to_refetch: by their last-change time; every shown row when the list has
        no times), plus `keep` (the selected ids); what a page load adds (thumbnails) is made only for new
        rows. So a refresh costs one listing of ids and times, however many rows are loaded."""
        self._generation += 1
        gen, shown = self._generation, max(len(self._rows), min(self.PAGE, len(self._ids)) or self.PAGE)
        old = {r["id"]: r for r in self._rows}
        keep = set(keep)
        self._set_fetching(True)

        def work() -> tuple[KeyList, list[dict], int]:
            keys = keys_fn()
            last = max((n for n, i in enumerate(keys.ids) if i in old), default=-1)
            want = keys.ids[:max(shown, last + 1)]
            have = {i: keys.rows[i] for i in want if i in keys.rows}
            again = rows_to_refetch(keys, want, old, keep)
            have.update((i, old[i]) for i in want if i in old and i not in have)
            for i in again:
                have.pop(i, None)  # read again below; gone if it no longer exists
            if again:
                have.update((r["id"], r) for r in self._fetch(self.store, self.KIND, again))
            rows = [have[i] for i in want if i in have]
            self._decorate([r for r in rows if r["id"] not in old])
            rows = [{**{k: v for k, v in old[r["id"]].items() if k.startswith("_") and k not in r}, **r}
                    if r["id"] in old and r is not old[r["id"]] else r for r in rows]
            return keys, rows, len(want)

        self.jobs.submit(work, on_done=lambda res: self._on_refreshed(gen, *res),
                         on_error=lambda _msg: self._set_fetching(False))

    def _on_refreshed(self, gen: int, keys: KeyList, rows: list[dict], shown: int) -> None:
        if gen != self._generation:
            return
        self._set_fetching(False)
        fetched = {r["id"] for r in rows}
        gone = {i for i in keys.ids[:shown] if i not in fetched}  # forgotten between listing and fetching
        ids = [i for i in keys.ids if i not in gone]
        if ids == self._ids and [r["id"] for r in rows] == [r["id"] for r in self._rows]:
            changed = [i for i, r in enumerate(rows) if not same_row(r, self._rows[i])]
            for i in changed:
                self._rows[i] = rows[i]
            if changed:
                self.dataChanged.emit(self.index(min(changed), 0), self.index(max(changed), self.columnCount() - 1))
            self.refreshed.emit(False)
            return
        self.beginResetModel()
        self._ids, self._rows, self._prefetched = ids, list(rows), dict(keys.rows)
        self.endResetModel()
        self.reloaded.emit(len(self._ids))
        self.refreshed.emit(True)

    def canFetchMore(self, parent=QModelIndex()) -> bool:  # noqa: B008 - Qt signature
        return not parent.isValid() and not self._fetching and len(self._rows) < len(self._ids)

    def fetchMore(self, parent=QModelIndex()) -> None:  # noqa: B008 - Qt signature
        if parent.isValid() or self._fetching:
            return
        ids = self._ids[len(self._rows): len(self._rows) + self.PAGE]
        if not ids:
            return
        gen = self._generation
        self._set_fetching(True)
        if all(i in self._prefetched for i in ids):  # search hits arrive with their rows
            rows = [self._prefetched[i] for i in ids]
            if type(self)._decorate is LazyRowModel._decorate:
                self._on_page(gen, rows)
            else:  # thumbnails are decoded off the GUI thread
                self.jobs.submit(lambda: self._decorated(rows), on_done=lambda r: self._on_page(gen, r),
                                 on_error=lambda _msg: self._set_fetching(False))
            return
        self.jobs.submit(self._load_page, ids, on_done=lambda rows: self._on_page(gen, rows),
                         on_error=lambda _msg: self._set_fetching(False))

    def _load_page(self, ids: list[str]) -> list[dict]:  # worker thread
        rows = self._fetch(self.store, self.KIND, ids)
        self._decorate(rows)
        return rows

    def _decorate(self, rows: list[dict]) -> None:  # worker thread
        """Add what the view shows besides the row's fields (a subclass's thumbnails); in place."""

    def _decorated(self, rows: list[dict]) -> list[dict]:  # worker thread
        self._decorate(rows)
        return rows

    def _on_page(self, gen: int, rows: list[dict]) -> None:
        self._set_fetching(False)
        if gen != self._generation:
            return
        loaded = {r["id"] for r in rows}
        # ids that vanished between listing and fetching (forgotten meanwhile) are dropped
        want = self._ids[len(self._rows): len(self._rows) + self.PAGE]
        gone = {i for i in want if i not in loaded}
        if gone:
            self._ids = [i for i in self._ids if i not in gone]
        if not rows:
            return
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        self._rows.extend(rows)
        self.endInsertRows()
        self.page_loaded.emit(len(self._rows))

    def _set_fetching(self, on: bool) -> None:
        if on != self._fetching:
            self._fetching = on
            self.loading_changed.emit(on)

    # ---- edits from the views ---------------------------------------------------------------

    def row_at(self, i: int) -> dict:
        """The public row shown at position i."""
        return self._rows[i]

    def index_of(self, id_: str) -> int:
        """Position of a loaded row, or -1."""
        return next((i for i, r in enumerate(self._rows) if r["id"] == id_), -1)

    def replace_row(self, row: dict) -> None:
        """Show an updated row in place (one dataChanged, no reset); what a search added (`_match`...) stays."""
        i = self.index_of(row["id"])
        if i >= 0:
            self._rows[i] = {**{k: v for k, v in self._rows[i].items() if k.startswith("_")}, **row}
            self.dataChanged.emit(self.index(i, 0), self.index(i, self.columnCount() - 1))

    def remove_ids(self, ids) -> None:
        """Drop rows (after a delete, approve or reject) without reloading."""
        drop = set(ids)
        for i in range(len(self._rows) - 1, -1, -1):
            if self._rows[i]["id"] in drop:
                self.beginRemoveRows(QModelIndex(), i, i)
                del self._rows[i]
                self.endRemoveRows()
        self._ids = [i for i in self._ids if i not in drop]

    # ---- Qt model API -----------------------------------------------------------------------

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section].header
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return self.COLUMNS[section].header_tip or None
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        row, col = self._rows[index.row()], self.COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.fmt(row.get(col.key))
        if role == SORT_ROLE:
            v = row.get(col.key)
            return v if isinstance(v, int | float | str) and not col.by_shown else col.fmt(v)
        if role == ROW_ROLE:
            return row
        if role == ID_ROLE:
            return row["id"]
        if role == Qt.ItemDataRole.ToolTipRole:
            if col.tip is not None:
                return col.tip(row.get(col.key))
            if col.key in ("title", "text"):
                return row.get("text")
        return None


def same_row(a: dict, b: dict) -> bool:
    """Equal public fields (what a refresh compares; images and search marks are the view's own)."""
    return {k: v for k, v in a.items() if not k.startswith("_")} == {k: v for k, v in b.items() if not k.startswith("_")}


class MemoryTableModel(LazyRowModel):
    """Memories: title, type, status, scope, confidence, updated."""

    COL_TITLE, COL_TYPE, COL_STATUS, COL_SCOPE, COL_CONFIDENCE, COL_UPDATED = range(6)
    COLUMNS = [
        Column("Memory", "title", _one_line),
        type_column(90),
        status_column(95),
        Column("Scope", "scope", width=110),
        confidence_column(85),
        Column("Updated", "updated_at", local_time, width=130),
    ]
    KIND = "memory"


# _Marked is mixed into LazyRowModel subclasses: the type checker reads it as one, Python as a plain mixin
# (a second QAbstractTableModel base would make Qt's layout of the class ambiguous).
if TYPE_CHECKING:
    from memory.store.core import Store
    _MarkedBase = LazyRowModel
else:
    _MarkedBase = object


class _Marked(_MarkedBase):
    """Search results: the text column as rich text with the query's words marked, and a relevance column."""

    TEXT_KEY = "title"

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == HTML_ROLE and index.isValid() and index.row() < len(self._rows):
            col = self.COLUMNS[index.column()]
            row = self._rows[index.row()]
            if col.key == self.TEXT_KEY and row.get("_match"):
                return highlight(_one_line(row.get(col.key)), row["_match"])
            return None
        if role == Qt.ItemDataRole.ToolTipRole and index.isValid() and self.COLUMNS[index.column()].key == "_relevance":
            row = self._rows[index.row()]
            words = ", ".join(row.get("_match") or [])
            return ("Shares the words: " + words if words else "Matched by meaning, no shared word") + \
                f" — closeness {row.get('_relevance', 0):.0%}"
        return super().data(index, role)


class BrowserMemoryModel(_Marked, MemoryTableModel):
    """The browser's memory list: MemoryTableModel plus how relevant each search hit is."""

    COLUMNS = [MemoryTableModel.COLUMNS[0], Column("Relevance", "_relevance", relevance_label, width=78),
               type_column(108), status_column(96),
               Column("Scope", "scope", width=95),
               confidence_column(84),
               Column("Updated", "updated_at", local_time, width=118)]
    COL_RELEVANCE = 1


class EvidenceTableModel(LazyRowModel):
    """Evidence with a thumbnail of the frame (loaded in the worker with the page)."""

    COL_TIME, COL_APP, COL_SOURCE, COL_TEXT = range(4)
    COLUMNS = [
        Column("Captured", "captured_at", local_time, width=240),
        Column("App", "app", width=110),
        Column("Source", "source", width=80),
        Column("Text", "text", _one_line),
    ]
    KIND = "evidence"

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self._pixmaps: dict[str, QPixmap] = {}

    def _decorate(self, rows: list[dict]) -> None:  # worker thread: QImage is safe here, QPixmap is not
        for r in rows:
            img = frame_image(self.store, r.get("frame_path"))
            if img is not None:
                r["_thumb"] = img.scaledToWidth(
                    THUMB_WIDTH, Qt.TransformationMode.SmoothTransformation)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DecorationRole and index.isValid() and index.column() == self.COL_TIME:
            row = self._rows[index.row()]
            img = row.get("_thumb")
            if img is None:
                return None
            if row["id"] not in self._pixmaps:
                self._pixmaps[row["id"]] = QPixmap.fromImage(img)
            return self._pixmaps[row["id"]]
        return super().data(index, role)


class BrowserEvidenceModel(_Marked, EvidenceTableModel):
    """The browser's "Captured" list: evidence with thumbnails, marked words and relevance when searching."""

    TEXT_KEY = "text"
    ICON = QSize(40, 22)  # a hint of the frame beside its time; the card shows it large

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        value = super().data(index, role)
        if role == Qt.ItemDataRole.DecorationRole and isinstance(value, QPixmap) and value.height() > self.ICON.height():
            # a pixmap is drawn at its own size (the view's icon size applies to icons only): scale it here,
            # once per row, so the time beside it is not pushed out of the cell
            row = self._rows[index.row()]
            value = self._pixmaps[row["id"]] = value.scaled(self.ICON, Qt.AspectRatioMode.KeepAspectRatio,
                                                            Qt.TransformationMode.SmoothTransformation)
        return value

    COLUMNS = [Column("Captured", "captured_at", local_time, width=200),
               Column("Relevance", "_relevance", relevance_label, width=78),
               Column("App", "app", width=100),
               Column("Window", "window", _one_line, width=160),
               Column("Text", "text", _one_line)]
    COL_TIME, COL_RELEVANCE, COL_APP, COL_WINDOW, COL_TEXT = range(5)


class HighlightDelegate(QStyledItemDelegate):
    """Paints a cell's HTML_ROLE rich text (the marked query words) where the model gives one."""

    def paint(self, painter, option, index) -> None:
        markup = index.data(HTML_ROLE)
        if not markup:
            super().paint(painter, option, index)
            return
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        color = opt.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        doc = QTextDocument()
        doc.setDefaultFont(opt.font)
        doc.setDocumentMargin(0)
        doc.setHtml(f"<span style='color:{color.name()}; white-space:pre'>{markup}</span>")
        rect = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, opt, opt.widget)
        painter.save()
        painter.setClipRect(rect)
        painter.translate(rect.left() + 3, rect.top() + (rect.height() - doc.size().height()) / 2)
        doc.drawContents(painter)
        painter.restore()


def sort_proxy(model: LazyRowModel, parent=None) -> QSortFilterProxyModel:
    """A proxy that sorts on native values (SORT_ROLE)."""
    proxy = QSortFilterProxyModel(parent)
    proxy.setSourceModel(model)
    proxy.setSortRole(SORT_ROLE)
    return proxy


def now_utc() -> datetime:
    """Naive UTC now (what store timestamps hold)."""
    from memory.types import utcnow

    return utcnow()
