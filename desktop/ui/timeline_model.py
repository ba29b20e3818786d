"""The timeline's day of frames. One scan of the day reads all a line and the preview show (id, time, app,
window title, source, frame path and the text, which stays in Arrow memory rather than as Python strings), so
any line of a 10,000-frame day paints at once, wherever the person jumps, and showing a frame reads no row. Thumbnails are decoded off the GUI thread, newest
request first, and kept (ThumbCache); a line paints without its thumbnail and gets it when it is decoded."""

from __future__ import annotations

import bisect
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QRunnable, QSize, Qt, QThreadPool, Signal
from PySide6.QtGui import QImage, QPixmap

from desktop.ui.browser_data import MARK_STYLE
from desktop.ui.frame_image import frame_image
from desktop.ui.qt_models import ID_ROLE, ROW_ROLE, Column, _one_line
from desktop.ui.workers import Jobs
from memory.store.rows import iso

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1)
_COLS = ("apps", "windows", "sources", "frames")


@dataclass
class DayIndex:
    """The frames of one day (and app), oldest first (a timeline reads left to right, top to bottom): ids,
    naive-UTC capture times and what a list line shows, one list per column, same order."""

    ids: list[str] = field(default_factory=list)
    times: list[datetime] = field(default_factory=list)
    apps: list[str | None] = field(default_factory=list)
    windows: list[str | None] = field(default_factory=list)
    sources: list[str | None] = field(default_factory=list)
    frames: list[str | None] = field(default_factory=list)  # frame_path as stored
    texts: pa.Array | None = None  # the captured text, one string a line

    def __post_init__(self) -> None:
        for name in _COLS:  # DayIndex(ids, times): the other columns unknown
            if len(getattr(self, name)) != len(self.ids):
                setattr(self, name, [None] * len(self.ids))
        if self.texts is None or len(self.texts) != len(self.ids):
            self.texts = pa.nulls(len(self.ids), pa.string())

    @property
    def text_column(self) -> pa.Array:
        """texts, which __post_init__ fills with nulls when not given."""
        if self.texts is None:
            raise ValueError("DayIndex.texts is set in __post_init__")
        return self.texts

    def __eq__(self, other) -> bool:
        return (isinstance(other, DayIndex) and all(getattr(self, k) == getattr(other, k) for k in
                                                    ("ids", "times", *_COLS))
                and self.text_column.equals(other.text_column))

    def text(self, n: int) -> str | None:
        return self.text_column[n].as_py()

    def row(self, n: int) -> dict:
        """Line n as an evidence row with what the preview shows (the public row has more fields)."""
        return {"id": self.ids[n], "captured_at": iso(self.times[n]), "app": self.apps[n],
                "window": self.windows[n], "source": self.sources[n], "frame_path": self.frames[n],
                "text": self.text(n)}

    def without(self, drop: set[str]) -> DayIndex:
        keep = [n for n, i in enumerate(self.ids) if i not in drop]
        return DayIndex(_pick(self.ids, keep), _pick(self.times, keep), _pick(self.apps, keep),
                        _pick(self.windows, keep), _pick(self.sources, keep), _pick(self.frames, keep),
                        texts=self.text_column.take(pa.array(keep, pa.int64())))


_T = TypeVar("_T")


def _pick(col: list[_T], keep: list[int]) -> list[_T]:
    return [col[n] for n in keep]


def day_index(store: Store, *, day: datetime | None = None, app: str | None = None) -> DayIndex:  # worker thread
    """Every evidence line of one local day (naive UTC bounds given) and/or app, oldest first."""
    since, until = (day, day + timedelta(days=1)) if day else (None, None)
    where = store.where("evidence", apps=[app] if app else None, since=since, until=until)
    # This device's capture (its frames): another device's shared copies are not lines of its day.
    t = store.scan("evidence", where, ["id", "captured_at", "app", "window", "source", "frame_path", "text"],
                   local=True)
    if not t.num_rows:
        return DayIndex()
    # Sorted in Arrow; the texts stay there (a Python string each only when a line or the preview shows it),
    # and times go through integers (Arrow's own datetime conversion is far slower at this size).
    t = t.take(pc.sort_indices(t["captured_at"]))
    micros = pc.cast(pc.cast(t["captured_at"], pa.timestamp("us")), pa.int64()).to_pylist()
    return DayIndex(t["id"].to_pylist(), [_EPOCH + timedelta(microseconds=u) for u in micros],
                    t["app"].to_pylist(), t["window"].to_pylist(), t["source"].to_pylist(),
                    t["frame_path"].to_pylist(), t["text"].combine_chunks())


def search_day(store: Store, ids: list[str], query: str) -> list[str]:  # worker thread
    """The ids (of those given, in their order) whose captured text holds every word of the query."""
    words = query_words(query)
    if not words or not ids:
        return []
    found: set[str] = set()
    for start in range(0, len(ids), 2000):
        chunk = ids[start:start + 2000]
        for r in store.get_many("evidence", chunk, ["id", "text", "window", "app"], local=True).values():
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


class _Drain(QRunnable):
    def __init__(self, owner: LatestFirst) -> None:
        super().__init__()
        self.owner = owner

    def run(self) -> None:  # worker thread
        batch: list[tuple[Hashable, Any]] = []
        since = 0.0
        while True:
            item = self.owner._take()
            if item is not None:
                key, arg = item
                try:
                    result = self.owner.fn(arg)
                except Exception:  # a frame that cannot be read is shown as missing, never stops the queue
                    log.warning("timeline: loading %s failed", key, exc_info=True)
                    result = None
                if not batch:
                    since = time.monotonic()
                batch.append((key, result))
            # Results go back in batches: one wake-up of the GUI thread (and one repaint) for many thumbnails.
            if batch and (item is None or time.monotonic() - since > self.owner.batch_s):
                try:
                    self.owner._out.emit(batch)
                except RuntimeError:  # the owner was deleted (window closed)
                    return
                batch = []
            if item is None:
                return


class LatestFirst(QObject):
    """One worker thread that runs the newest request first and drops requests it has not started once more
    than `limit` wait: scrubbing leaves many requests behind for frames the person has already moved past.
    on_done(key, result) runs in the GUI thread; result is None when fn raised."""

    _out = Signal(object)

    def __init__(self, fn: Callable[[Any], Any], on_done: Callable[[Any, Any], None], parent=None,
                 limit: int = 400, batch_s: float = 0.0) -> None:
        super().__init__(parent)
        self.fn, self.on_done, self.limit, self.batch_s = fn, on_done, limit, batch_s
        self._held = False
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self._lock = threading.Lock()
        self._queue: OrderedDict[Hashable, Any] = OrderedDict()
        self._draining = False
        self._running: Hashable | None = None
        self._out.connect(self._done)

    @property
    def pending(self) -> int:
        """Requests waiting or running."""
        with self._lock:
            return len(self._queue) + (self._running is not None)

    def asked(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._queue or key == self._running

    def ask(self, key: Hashable, arg: Any, later: bool = False) -> None:
        """Run fn(arg) next (or, `later`, after everything asked so far)."""
        with self._lock:
            if key == self._running:
                return
            self._queue[key] = arg
            self._queue.move_to_end(key, last=not later)
            while len(self._queue) > self.limit:
                self._queue.popitem(last=False)
            start = not self._draining and not self._held
            self._draining = self._draining or start
        if start:
            self.pool.start(_Drain(self))

    def hold(self, on: bool) -> None:
        """Start nothing new while held (something more urgent runs elsewhere); then go on where it was."""
        with self._lock:
            self._held = on
            start = not on and bool(self._queue) and not self._draining
            if start:
                self._draining = True
        if start:
            self.pool.start(_Drain(self))

    def drop(self, keys=None) -> None:
        """Forget requests not started yet (all of them when keys is None)."""
        with self._lock:
            if keys is None:
                self._queue.clear()
            for k in keys or ():
                self._queue.pop(k, None)

    def _take(self):  # worker thread
        with self._lock:
            if not self._queue or self._held:
                self._draining, self._running = False, None
                return None
            key, arg = self._queue.popitem(last=True)
            self._running = key
            return key, arg

    def _done(self, batch: list[tuple[Hashable, Any]]) -> None:
        for key, result in batch:
            with self._lock:
                if self._running == key:
                    self._running = None
            self.on_done(key, result)


class ThumbCache(QObject):
    """Frame thumbnails for the list and the strip: decoded off the GUI thread (newest request first), the
    last LIMIT kept. get() never waits: it returns None and asks; `ready(id)` says when it is in."""

    SIZE = QSize(112, 70)  # the strip's
    SMALL = QSize(56, 32)  # the list's
    LIMIT = 3000
    ready = Signal(str)

    def __init__(self, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.store = store
        self.loader = LatestFirst(self._decode, self._decoded, self, batch_s=0.03)
        self._big: OrderedDict[str, QPixmap] = OrderedDict()
        self._small: dict[str, QPixmap] = {}
        self._none: set[str] = set()  # ids without a readable frame

    def _decode(self, arg: tuple[str, str]) -> QImage | None:  # worker thread
        return frame_image(self.store, arg[1], self.SIZE)

    def has(self, id_: str) -> bool:
        """The thumbnail is decoded (or known to be missing)."""
        return id_ in self._big or id_ in self._none

    def get(self, id_: str, path: str | None, small: bool = False) -> QPixmap | None:
        """The thumbnail if decoded, else None (and it is asked for, unless the frame has no image)."""
        pm = self._big.get(id_)
        if pm is None:
            if path and id_ not in self._none:
                self.loader.ask(id_, (id_, path))
            return None
        self._big.move_to_end(id_)
        if not small:
            return pm
        sm = self._small.get(id_)
        if sm is None:
            sm = self._small[id_] = pm.scaled(self.SMALL, Qt.AspectRatioMode.KeepAspectRatio,
                                              Qt.TransformationMode.SmoothTransformation)
        return sm

    def _decoded(self, id_: str, img: QImage | None) -> None:
        if img is None:
            self._none.add(id_)
        else:  # a QPixmap only in the GUI thread
            self._big[id_] = QPixmap.fromImage(img)
            while len(self._big) > self.LIMIT:
                old, _ = self._big.popitem(last=False)
                self._small.pop(old, None)
        self.ready.emit(id_)

    def forget(self, ids) -> None:
        """Drop these frames' thumbnails (erased)."""
        ids = list(ids)
        self.loader.drop(ids)
        for i in ids:
            self._big.pop(i, None)
            self._small.pop(i, None)
            self._none.discard(i)


_DISPLAY, _DECORATION, _TOOLTIP = (int(r) for r in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.DecorationRole,
                                                      Qt.ItemDataRole.ToolTipRole))
_ROLES = frozenset({_DISPLAY, _DECORATION, _TOOLTIP, int(ID_ROLE), int(ROW_ROLE)})


def local_clock(v: datetime | None, seconds: bool = True) -> str:
    """'HH:MM:SS' (or 'HH:MM') on the local clock of a naive-UTC time; through time.localtime, several
    times quicker than datetime.astimezone, which a repaint of many lines feels."""
    if v is None:
        return ""
    lt = time.localtime((v - _EPOCH).total_seconds())
    return f"{lt.tm_hour:02d}:{lt.tm_min:02d}:{lt.tm_sec:02d}" if seconds else f"{lt.tm_hour:02d}:{lt.tm_min:02d}"


def _utc_iso_local(v) -> str:
    return local_clock(v)


class DayFramesModel(QAbstractTableModel):
    """One line per frame of the day, every line painted from the day's index; thumbnails come when decoded."""

    COLUMNS = [Column("Time", "captured_at", _utc_iso_local, width=150), Column("App", "app", width=110),
               Column("Window", "window", _one_line, width=240), Column("Source", "source", width=70),
               Column("Text", "text", _one_line)]
    COL_TIME, COL_APP, COL_WINDOW, COL_SOURCE, COL_TEXT = range(5)
    KIND = "evidence"
    loading_changed = Signal(bool)
    reloaded = Signal(int)
    refreshed = Signal(bool)  # a refresh() is in: True when the list changed (the model was reset)

    def __init__(self, jobs: Jobs, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.index_ = DayIndex()
        self._pos: dict[str, int] = {}
        self._cells: dict[tuple[int, int], str] = {}  # (line, column) -> the string shown
        self.thumbs = ThumbCache(store, self)
        self.thumbs.ready.connect(self._thumb_in)
        self._fetching = False
        self._generation = 0
        self._columns = {self.COL_APP: "apps", self.COL_WINDOW: "windows", self.COL_SOURCE: "sources"}

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
        """Read the day's index in a worker, then show it."""
        self._generation += 1
        gen = self._generation
        self._set_fetching(True)
        self.jobs.submit(keys_fn, on_done=lambda ix: self._on_index(gen, ix),
                         on_error=lambda _m: self._set_fetching(False))

    def refresh(self, keys_fn: Callable[[], DayIndex]) -> None:
        """Re-read the day's index; no reset when the same frames are there (changed lines update in place),
        else a reset and `refreshed(True)` so the view puts its selection back."""
        self._generation += 1
        gen = self._generation
        self._set_fetching(True)
        self.jobs.submit(keys_fn, on_done=lambda ix: self._on_refreshed(gen, ix),
                         on_error=lambda _m: self._set_fetching(False))

    def _set_index(self, ix: DayIndex) -> None:
        gone = set(self.index_.ids) - set(ix.ids)
        if gone:
            self.thumbs.forget(gone)
        self.index_ = ix
        self._pos = {i: n for n, i in enumerate(ix.ids)}
        self._cells = {}

    def _on_index(self, gen: int, ix: DayIndex) -> None:
        if gen != self._generation:
            return
        self.beginResetModel()
        self.index_ = DayIndex()  # another day: its thumbnails may still serve when the person comes back
        self._set_index(ix)
        self.endResetModel()
        self._set_fetching(False)
        self.reloaded.emit(self.total)

    def _on_refreshed(self, gen: int, ix: DayIndex) -> None:
        if gen != self._generation:
            return
        self._set_fetching(False)
        if ix.ids == self.index_.ids:
            if ix != self.index_ and self.total:
                self.index_, self._cells = ix, {}
                self.dataChanged.emit(self.index(0, 0), self.index(self.total - 1, self.columnCount() - 1))
            self.refreshed.emit(False)
            return
        self.beginResetModel()
        self._set_index(ix)
        self.endResetModel()
        self.refreshed.emit(True)

    def _thumb_in(self, id_: str) -> None:
        n = self._pos.get(id_)
        if n is not None:
            at = self.index(n, self.COL_TIME)
            self.dataChanged.emit(at, at, [Qt.ItemDataRole.DecorationRole])

    # ---- lookups ----------------------------------------------------------------------------

    def index_of(self, id_: str) -> int:
        """Line of an id in the day, or -1."""
        return self._pos.get(id_, -1)

    def id_at(self, i: int) -> str:
        return self.index_.ids[i]

    def time_at(self, i: int) -> datetime:
        return self.index_.times[i]

    def row_at(self, i: int) -> dict:
        """Line i as a row (what the index holds: all but the full text)."""
        return self.index_.row(i)

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
        self._set_index(self.index_.without(drop))
        self.endResetModel()

    def mapFromSource(self, index):  # noqa: N802 - a view's model is itself (what code written for a proxy asks)
        return index

    def mapToSource(self, index):  # noqa: N802
        return index

    # ---- Qt model API -----------------------------------------------------------------------

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self.total

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.COLUMNS)

    def headerData(self, section: int, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section].header
        return None

    def data(self, index, role=_DISPLAY):
        # Called for every role of every visible cell on each repaint: unhandled roles leave first, and the
        # strings shown are made once per line.
        if role not in _ROLES or not index.isValid():
            return None
        n, col = index.row(), index.column()
        ix = self.index_
        if n >= len(ix.ids):
            return None
        if role == _DISPLAY:
            key = (n, col)
            got = self._cells.get(key)
            if got is None:
                if col == self.COL_TIME:
                    got = _utc_iso_local(ix.times[n])
                elif col == self.COL_TEXT:
                    got = _one_line((ix.text(n) or "")[:400])
                else:
                    got = self.COLUMNS[col].fmt(getattr(ix, self._columns[col])[n])
                self._cells[key] = got
            return got
        if role == _DECORATION:
            return self.thumbs.get(ix.ids[n], ix.frames[n], small=True) if col == self.COL_TIME else None
        if role == ID_ROLE:
            return ix.ids[n]
        if role == ROW_ROLE:
            return ix.row(n)
        if col == self.COL_WINDOW:  # the tooltip
            return ix.windows[n]
        if col == self.COL_TEXT:
            return ix.text(n)
        return None
