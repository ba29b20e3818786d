"""The timeline's large preview of one frame: app, window title and time above, the frame scaled to fit, and
its captured text (screen OCR or transcript) below, with the search's words marked. Header and text paint at
once from the day's index. A frame file as small as capture writes them (a 640-pixel WebP) is decoded right
there, in the GUI thread: that costs less than handing it to a worker and waiting for the answer on a busy
machine, and the frame comes with its header in one paint. A larger file is decoded in the preview's own
worker, newest request first (a scrub leaves older ones behind, unstarted). The last few frames are kept and
the neighbours of the one shown are read ahead, so stepping back and forth decodes nothing twice."""

from __future__ import annotations

from collections import OrderedDict
from datetime import timezone
from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QImage, QPainter, QPixmap
from PySide6.QtWidgets import QLabel, QSizePolicy, QSplitter, QTextBrowser, QVBoxLayout, QWidget

from desktop.ui.browser_data import fetch_rows, resolve_frame
from desktop.ui.frame_image import frame_image
from desktop.ui.timeline_model import LatestFirst, mark

if TYPE_CHECKING:
    from memory.store.core import Store

FRAME_MAX = QSize(1600, 1000)  # decoded at most this large: enough for a full-window preview
CACHE = 12
INLINE_BYTES = 256 * 1024  # frame files up to this size are decoded in the GUI thread (see above)


def load_frame(store: Store, row: dict) -> tuple[dict, QImage | None]:  # worker thread
    """The row (read when only its id is given) and its frame image, or None when it has no frame file."""
    if "captured_at" not in row:
        got = fetch_rows(store, "evidence", [row["id"]])
        if not got:
            return row, None
        row = got[0]
    return row, frame_image(store, row.get("frame_path"), FRAME_MAX)


class _Frame(QLabel):
    """A label whose frame is drawn scaled to fit when painted (no scaled copy is made per frame or resize);
    its pixmap() is the frame as decoded."""

    BACKGROUND = QColor("#202124")

    def __init__(self) -> None:
        super().__init__()
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setMinimumSize(240, 150)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Ignored)
        self.setStyleSheet("background:#202124; color:#c8c8c8;")
        self._full: QPixmap | None = None

    def show_pixmap(self, pm: QPixmap | None, empty: str = "") -> None:
        self._full = pm
        if pm is None:
            self.clear()
            self.setText(empty)
        else:
            self.setPixmap(pm)

    def paintEvent(self, e) -> None:  # noqa: N802 - Qt
        if self._full is None or self._full.isNull():
            super().paintEvent(e)
            return
        fit = self._full.size().scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio)
        target = QRect(QPoint((self.width() - fit.width()) // 2, (self.height() - fit.height()) // 2), fit)
        p = QPainter(self)
        p.fillRect(self.rect(), self.BACKGROUND)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        p.drawPixmap(target, self._full)
        p.end()


class FramePreview(QWidget):
    """Header (app — window title, time), the frame, and the text below it."""

    shown = Signal(str)  # the id now on screen, header, frame and text (tests and the bench wait on it)

    def __init__(self, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.store = store
        self.loader = LatestFirst(partial(load_frame, store), self._loaded, self, limit=6)
        self.header = QLabel("No frame selected")
        self.header.setTextFormat(Qt.TextFormat.PlainText)
        f = self.header.font()
        f.setPointSizeF(f.pointSizeF() * 1.2)
        f.setBold(True)
        self.header.setFont(f)
        self.header.setWordWrap(True)
        self.when = QLabel()
        self.frame = _Frame()
        self.text = QTextBrowser()
        self.text.setOpenLinks(False)
        tf = self.text.font()
        tf.setPointSizeF(tf.pointSizeF() * 1.1)
        self.text.setFont(tf)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.frame)
        split.addWidget(self.text)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([360, 110])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.header)
        lay.addWidget(self.when)
        lay.addWidget(split, 1)
        self.row: dict | None = None
        self.words: list[str] = []
        self._cache: OrderedDict[str, tuple[dict, QPixmap | None]] = OrderedDict()
        self._want: str | None = None
        self._text_key: tuple | None = None
        self._loading = False

    def show_row(self, row: dict | None) -> None:
        """Show this row (at least its id; app, window and time paint at once when given); None clears it."""
        if row is None:
            self._want, self.row = None, None
            self.header.setText("No frame selected")
            self.when.clear()
            self.frame.show_pixmap(None)
            self.text.clear()
            self._text_key = None
            return
        self._want = row["id"]
        hit = self._cache.get(row["id"])
        if hit is not None:
            self._cache.move_to_end(row["id"])
            self._paint(*hit)
            return
        if "captured_at" in row and self._small(row):
            res = load_frame(self.store, row)
            self._loaded(row["id"], res)
            if self.row is not None and self.row["id"] == row["id"] and not self._loading:
                return
        self._paint(row, None, loading=True)
        self.loader.ask(row["id"], row)

    def _small(self, row: dict) -> bool:
        """The row has no frame file, or one small enough to decode at once."""
        path = resolve_frame(self.store, row.get("frame_path"))
        try:
            return path is None or path.stat().st_size <= INLINE_BYTES
        except OSError:
            return True

    def prefetch(self, rows: list[dict]) -> None:
        """Read these frames after the one shown (its neighbours)."""
        for r in rows:
            if r["id"] not in self._cache and not self.loader.asked(r["id"]):
                self.loader.ask(r["id"], r, later=True)

    @property
    def waiting(self) -> bool:
        """A frame is asked for and not shown yet."""
        return self._want is not None and (self.row is None or self.row["id"] != self._want or self._loading)

    @property
    def pending(self) -> int:
        """Frames asked for and not in yet."""
        return self.loader.pending

    def _loaded(self, id_: str, res: tuple[dict, QImage | None] | None) -> None:
        if res is None:  # unreadable: shown without its image
            if id_ == self._want and self.row is not None:
                self._paint(self.row, None)
            return
        row, img = res
        entry = (row, None if img is None else QPixmap.fromImage(img))
        self._cache[id_] = entry
        while len(self._cache) > CACHE:
            self._cache.popitem(last=False)
        if id_ == self._want:
            self._paint(*entry)

    def forget(self, ids) -> None:
        """Drop cached frames (after a delete)."""
        ids = list(ids)
        self.loader.drop(ids)
        for i in ids:
            self._cache.pop(i, None)

    def set_words(self, words: list[str]) -> None:
        """Mark these words in the text (the timeline's search)."""
        self.words = words
        if self.row is not None:
            self._text(self.row)

    def _paint(self, row: dict, pm: QPixmap | None, loading: bool = False) -> None:
        self.row, self._loading = row, loading
        title = row.get("window") or ""
        app = row.get("app") or "(no app)"
        self.header.setText(f"{app} — {title}" if title else app)
        at = row.get("captured_at") or ""
        from datetime import datetime

        when = datetime.fromisoformat(at.replace("Z", "+00:00")).astimezone(timezone.utc).astimezone() if at else None
        src = {"screen": "screen", "voice": "transcript", "audio": "transcript"}.get(row.get("source") or "",
                                                                                     row.get("source") or "")
        self.when.setText((when.strftime("%A %d %B %Y, %H:%M:%S") if when else "") + (f" · {src}" if src else ""))
        if loading:
            self.frame.show_pixmap(None, "loading the frame…")
        else:
            self.frame.show_pixmap(pm, "No frame image (text only, or the image was erased)")
        self._text(row)
        if not loading:
            self.shown.emit(row["id"])

    def _text(self, row: dict) -> None:
        key = (row["id"], row.get("text"), tuple(self.words))
        if key == self._text_key:  # the same text again (the frame came in): no second layout
            return
        self._text_key = key
        body = mark(row.get("text") or "", self.words)
        self.text.setHtml(f"<div style='white-space:pre-wrap'>{body}</div>" if body else "<i>(no text)</i>")
