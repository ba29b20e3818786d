"""The timeline's day of frames: every id and capture time of the day is known at once (one narrow scan), the
rows themselves and their thumbnails are fetched a small block at a time, only for the lines a view asks for.
So a jump to any hour of a 10,000-frame day is one block fetch, not a walk through every page above it."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QImage, QPixmap

from desktop.ui.browser_data import MARK_STYLE, fetch_rows, resolve_frame
from desktop.ui.qt_models import ID_ROLE, ROW_ROLE, THUMB_WIDTH, Column, _one_line, local_time
from desktop.ui.workers import Jobs
from memory.store.rows import sql_id_list


@dataclass
class DayIndex:
    """The frames of one day (and app), oldest first (a timeline reads left to right, top to bottom):
    ids and naive-UTC capture times, same order."""

    ids: list[str] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)


def day_index(store, *, day: datetime | None = None, app: str | None = None) -> DayIndex:  # worker thread
    """Every evidence id of one local day (naive UTC bounds given) and/or app with its time, oldest first."""
    since, until = (day, day + timedelta(days=1)) if day else (None, None)
    where = store.where("evidence", apps=[app] if app else None, since=since, until=until)
    t = store.scan(store.evidence, where, ["id", "captured_at"])
    pairs = sorted(zip(t["id"].to_pylist(), t["captured_at"].to_pylist(), strict=True),
                   key=lambda p: p[1])
    return DayIndex([i for i, _ in pairs], [at for _, at in pairs])


def search_day(store, ids: list[str], query: str) -> list[str]:  # worker thread
    """The ids (of those given, in their order) whose captured text holds every word of the query."""
    words = query_words(query)
    if not words or not ids:
        return []
    found: set[str] = set()
    for start in range(0, len(ids), 2000):
        chunk = ids[start:start + 2000]
        for r in store.rows(store.evidence, f"id IN {sql_id_list(chunk)}", ["id", "text", "window", "app"], limit=None):
            hay = " ".join(str(r.get(k) or "") for k in ("text", "window", "app")).lower()
            if all(w in hay for w in words):
                found.add(r["id"])
    return [i for i in ids if i in found]


def query_words(query: str) -> list[str]:
    """The lower-case words of a search box's text."""
    return [w for w in re.split(r"\W+", (query or "").lower()) if w]


def mark(text: str, words: list[str]) -> str:
    """HTML of text (escaped, line breaks kept) with every occurrence of the words marked like a highlighter."""
    import html

    text = text or ""
    if not words:
        return html.escape(text).replace("\n", "<br>")
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)), re.IGNORECASE)
    out, last = [], 0
    for m in pattern.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        out.append(f"<span style='{MARK_STYLE}'>{html.escape(m.group())}</span>")
        last = m.end()
    out.append(html.escape(text[last:]))
    return "".join(out).replace("\n", "<br>")


def _utc_iso_local(v) -> str:
    return local_time(v)[11:] if v else ""


class DayFramesModel(QAbstractTableModel):
    """One line per frame of the day; rows load in blocks of BLOCK when a view shows (asks data for) them."""

    BLOCK = 50
    COLUMNS = [Column("Time", "captured_at", _utc_iso_local, width=150), Column("App", "app", width=110),
               Column("Window", "window", _one_line, width=240), Column("Source", "source", width=70),
               Column("Text", "text", _one_line)]
    COL_TIME, COL_APP, COL_WINDOW, COL_SOURCE, COL_TEXT = range(5)
    KIND = "evidence"
    loading_changed = Signal(bool)
    reloaded = Signal(int)
    refreshed = Signal(bool)  # a refresh() is in: True when the list changed (the model was reset)
    rows_loaded = Signal()  # a block of rows came in

    def __init__(self, jobs: Jobs, store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.index_ = DayIndex()
        self._pos: dict[str, int] = {}
        self._rows: dict[str, dict] = {}
        self._asked: set[int] = set()  # blocks requested or loaded for this generation
        self._pixmaps: dict[str, QPixmap] = {}
        self._fetching = False
        self._generation = 0

    # ---- the list ---------------------------------------------------------------------------

    @property
    def total(self) -> int:
        return len(self.index_.ids)

    @property
    def busy(self) -> bool:
        """True while the day's list is being read."""
        return self._fetching

    def _set_fetching(self, on: bool) -> None:
        if on != self._fetching:
            self._fetching = on
            self.loading_changed.emit(on)

    def reload(self, keys_fn: Callable[[], DayIndex]) -> None:
        """Read the day's ids and times in a worker, then show them (rows load as they are shown)."""
        self._generation += 1
        gen = self._generation
        self._set_fetching(True)
        self.jobs.submit(keys_fn, on_done=lambda ix: self._on_index(gen, ix, reset=True),
                         on_error=lambda _m: self._set_fetching(False))

    def refresh(self, keys_fn: Callable[[], DayIndex]) -> None:
        """Re-read the list and the rows already loaded; no reset when nothing moved (rows update in place),
        else a reset and `refreshed(True)` so the view puts its selection back."""
        self._generation += 1
        gen = self._generation
        loaded = list(self._rows)
        self._set_fetching(True)

        def work():
            ix = keys_fn()
            keep = set(ix.ids)
            rows = fetch_rows(self.store, self.KIND, [i for i in loaded if i in keep])
            return ix, rows

        self.jobs.submit(work, on_done=lambda res: self._on_refreshed(gen, *res),
                         on_error=lambda _m: self._set_fetching(False))

    def _on_index(self, gen: int, ix: DayIndex, reset: bool) -> None:
        if gen != self._generation:
            return
        self.beginResetModel()
        self.index_ = ix
        self._pos = {i: n for n, i in enumerate(ix.ids)}
        self._rows, self._asked = {}, set()
        self._pixmaps = {}
        self.endResetModel()
        self._set_fetching(False)
        self.reloaded.emit(self.total)

    def _on_refreshed(self, gen: int, ix: DayIndex, rows: list[dict]) -> None:
        if gen != self._generation:
            return
        self._set_fetching(False)
        fresh = {r["id"]: r for r in rows}
        if ix.ids == self.index_.ids:
            changed = []
            for i, r in fresh.items():
                old = self._rows.get(i)
                if old is not None and {k: v for k, v in old.items() if not k.startswith("_")} != r:
                    self._rows[i] = {**{k: v for k, v in old.items() if k.startswith("_")}, **r}
                    changed.append(self._pos[i])
            if changed:
                self.dataChanged.emit(self.index(min(changed), 0), self.index(max(changed), self.columnCount() - 1))
            self.refreshed.emit(False)
            return
        old = self._rows
        self.beginResetModel()
        self.index_ = ix
        self._pos = {i: n for n, i in enumerate(ix.ids)}
        # rows already shown stay loaded (with their thumbnails); new ones load when shown
        self._rows = {i: {**{k: v for k, v in old[i].items() if k.startswith("_")}, **r} for i, r in fresh.items()}
        self._asked = set()
        self._pixmaps = {i: p for i, p in self._pixmaps.items() if i in fresh}
        self.endResetModel()
        self.refreshed.emit(True)

    def ensure(self, first: int, last: int | None = None) -> None:
        """Load the blocks holding lines first..last (a worker each; a block asked once is not asked again)."""
        last = first if last is None else last
        for block in range(max(first, 0) // self.BLOCK, max(last, 0) // self.BLOCK + 1):
            if block in self._asked or block * self.BLOCK >= self.total:
                continue
            self._asked.add(block)
            ids = self.index_.ids[block * self.BLOCK:(block + 1) * self.BLOCK]
            gen = self._generation
            self.jobs.submit(self._load, ids, on_done=lambda rows, g=gen: self._on_block(g, rows))

    def _load(self, ids: list[str]) -> list[dict]:  # worker thread
        rows = fetch_rows(self.store, self.KIND, ids)
        for r in rows:  # QImage may be made in a worker, QPixmap only in the GUI thread
            frame = resolve_frame(self.store, r.get("frame_path"))
            if frame:
                img = QImage(str(frame))
                r["_thumb"] = None if img.isNull() else img.scaled(
                    THUMB_WIDTH // 2, THUMB_WIDTH // 3, Qt.AspectRatioMode.KeepAspectRatio,
                    Qt.TransformationMode.SmoothTransformation)
        return rows

    def _on_block(self, gen: int, rows: list[dict]) -> None:
        if gen != self._generation:
            return
        at = [self._pos[r["id"]] for r in rows if r["id"] in self._pos]
        for r in rows:
            self._rows[r["id"]] = r
        if at:
            self.dataChanged.emit(self.index(min(at), 0), self.index(max(at), self.columnCount() - 1))
        self.rows_loaded.emit()

    # ---- lookups ----------------------------------------------------------------------------

    def index_of(self, id_: str) -> int:
        """Line of an id in the day, or -1."""
        return self._pos.get(id_, -1)

    def id_at(self, i: int) -> str:
        return self.index_.ids[i]

    def time_at(self, i: int) -> datetime:
        return self.index_.times[i]

    def row_at(self, i: int) -> dict | None:
        """The loaded row at line i (None while its block is loading)."""
        return self._rows.get(self.index_.ids[i])

    def row_for(self, id_: str) -> dict | None:
        return self._rows.get(id_)

    def line_at_or_after(self, at: datetime) -> int:
        """The first line captured at or after `at` (naive UTC), or the last line."""
        return min(bisect.bisect_left(self.index_.times, at), self.total - 1)

    def line_at_or_before(self, at: datetime) -> int:
        """The last line captured at or before `at` (naive UTC), or the first line."""
        return max(bisect.bisect_right(self.index_.times, at) - 1, 0)

    def remove_ids(self, ids) -> None:
        """Drop lines (after a delete) at once; the next refresh confirms."""
        drop = set(ids) & set(self._pos)
        if not drop:
            return
        self.beginResetModel()
        keep = [(i, t) for i, t in zip(self.index_.ids, self.index_.times, strict=True) if i not in drop]
        self.index_ = DayIndex([i for i, _ in keep], [t for _, t in keep])
        self._pos = {i: n for n, i in enumerate(self.index_.ids)}
        for i in drop:
            self._rows.pop(i, None)
        self._asked = set()
        self.endResetModel()

    def mapFromSource(self, index):  # noqa: N802 - a view's model is itself (what code written for a proxy asks)
        return index

    def mapToSource(self, index):  # noqa: N802
        return index

    # ---- Qt model API -----------------------------------------------------------------------

    def canFetchMore(self, parent=QModelIndex()) -> bool:  # noqa: B008 - every line is there; rows load on show
        return False

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.total

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section].header
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or index.row() >= self.total:
            return None
        n = index.row()
        id_ = self.index_.ids[n]
        if role == ID_ROLE:
            return id_
        row = self._rows.get(id_)
        if row is None:
            if role in (Qt.ItemDataRole.DisplayRole, ROW_ROLE):
                self.ensure(n)
            if role == ROW_ROLE:
                return {"id": id_}
            if role == Qt.ItemDataRole.DisplayRole and index.column() == self.COL_TIME:
                return self.index_.times[n].replace(tzinfo=timezone.utc).astimezone().strftime("%H:%M:%S")
            return None
        col = self.COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            if index.column() == self.COL_TIME:
                return self.index_.times[n].replace(tzinfo=timezone.utc).astimezone().strftime("%H:%M:%S")
            return col.fmt(row.get(col.key))
        if role == ROW_ROLE:
            return row
        if role == Qt.ItemDataRole.DecorationRole and index.column() == self.COL_TIME:
            img = row.get("_thumb")
            if img is None:
                return None
            if id_ not in self._pixmaps:
                self._pixmaps[id_] = QPixmap.fromImage(img)
            return self._pixmaps[id_]
        if role == Qt.ItemDataRole.ToolTipRole and col.key in ("text", "window"):
            return row.get(col.key)
        return None
