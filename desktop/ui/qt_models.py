"""Table models over the store that page lazily: ids first, rows a page at a time, all in workers."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QImage, QPixmap

from desktop.ui.browser_data import KeyList, fetch_rows, resolve_frame
from desktop.ui.workers import Jobs

log = logging.getLogger(__name__)

ROW_ROLE = Qt.ItemDataRole.UserRole + 1  # the whole public row (dict)
ID_ROLE = Qt.ItemDataRole.UserRole + 2
SORT_ROLE = Qt.ItemDataRole.UserRole + 3  # native value, so the proxy sorts numbers and times correctly

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

    def __init__(self, jobs: Jobs, store, fetch: Callable = fetch_rows, parent=None) -> None:
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
            self._on_page(gen, [self._prefetched[i] for i in ids])
            return
        self.jobs.submit(self._load_page, ids, on_done=lambda rows: self._on_page(gen, rows),
                         on_error=lambda _msg: self._set_fetching(False))

    def _load_page(self, ids: list[str]) -> list[dict]:  # worker thread
        return self._fetch(self.store, self.KIND, ids)

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
        """Show an updated row in place (one dataChanged, no reset)."""
        i = self.index_of(row["id"])
        if i >= 0:
            self._rows[i] = row
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
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= len(self._rows):
            return None
        row, col = self._rows[index.row()], self.COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.fmt(row.get(col.key))
        if role == SORT_ROLE:
            v = row.get(col.key)
            return v if isinstance(v, int | float | str) else col.fmt(v)
        if role == ROW_ROLE:
            return row
        if role == ID_ROLE:
            return row["id"]
        if role == Qt.ItemDataRole.ToolTipRole and col.key in ("title", "text"):
            return row.get("text")
        return None


class MemoryTableModel(LazyRowModel):
    """Memories: title, type, status, scope, confidence, updated."""

    COL_TITLE, COL_TYPE, COL_STATUS, COL_SCOPE, COL_CONFIDENCE, COL_UPDATED = range(6)
    COLUMNS = [
        Column("Memory", "title", _one_line),
        Column("Type", "type", width=90),
        Column("Status", "status", width=85),
        Column("Scope", "scope", width=110),
        Column("Confidence", "confidence", lambda v: f"{v:.2f}" if v is not None else "", width=85),
        Column("Updated", "updated_at", local_time, width=130),
    ]
    KIND = "memory"


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

    def _load_page(self, ids: list[str]) -> list[dict]:  # worker thread: QImage is safe here, QPixmap is not
        rows = self._fetch(self.store, self.KIND, ids)
        for r in rows:
            frame = resolve_frame(self.store, r.get("frame_path"))
            if frame:
                img = QImage(str(frame))
                r["_thumb"] = None if img.isNull() else img.scaledToWidth(
                    THUMB_WIDTH, Qt.TransformationMode.SmoothTransformation)
        return rows

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
