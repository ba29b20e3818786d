"""The timeline's large preview of one frame: app, window title and time above, the frame scaled to fit, and
its captured text (screen OCR or transcript) below, with the search's words marked. The frame is decoded in
its own worker (so a block of thumbnails never delays it) and the last few are kept, so stepping back and
forth between neighbours decodes nothing twice."""

from __future__ import annotations

from collections import OrderedDict
from datetime import timezone

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QLabel, QSizePolicy, QSplitter, QTextBrowser, QVBoxLayout, QWidget

from desktop.ui.browser_data import fetch_rows, resolve_frame
from desktop.ui.timeline_model import mark
from desktop.ui.workers import Jobs

FRAME_MAX = QSize(1600, 1000)  # decoded at most this large: enough for a full-window preview
CACHE = 12


def load_frame(store, row: dict) -> tuple[dict, QImage | None]:  # worker thread
    """The row (fetched if only its id is known) and its frame image, or None when it has no frame file."""
    if "captured_at" not in row:
        got = fetch_rows(store, "evidence", [row["id"]])
        if not got:
            return row, None
        row = got[0]
    path = resolve_frame(store, row.get("frame_path"))
    if path is None:
        return row, None
    img = QImage(str(path))
    if img.isNull():
        return row, None
    if img.width() > FRAME_MAX.width() or img.height() > FRAME_MAX.height():
        img = img.scaled(FRAME_MAX, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    return row, img


class _Frame(QLabel):
    """A label that shows its pixmap scaled to fit, re-scaled when the pane is resized."""

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
            self._fit()

    def _fit(self) -> None:
        if self._full is not None:
            self.setPixmap(self._full.scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                             Qt.TransformationMode.SmoothTransformation))

    def resizeEvent(self, e) -> None:  # noqa: N802 - Qt
        super().resizeEvent(e)
        self._fit()


class FramePreview(QWidget):
    """Header (app — window title, time), the frame, and the text below it."""

    shown = Signal(str)  # the id now on screen, header, frame and text (tests and the bench wait on it)

    def __init__(self, store, parent=None) -> None:
        super().__init__(parent)
        self.store = store
        self.jobs = Jobs(self, max_threads=1)
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
        split.setSizes([420, 150])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.header)
        lay.addWidget(self.when)
        lay.addWidget(split, 1)
        self.row: dict | None = None
        self.words: list[str] = []
        self._cache: OrderedDict[str, tuple[dict, QPixmap | None]] = OrderedDict()
        self._want: str | None = None
        self._asked: set[str] = set()

    def show_row(self, row: dict | None) -> None:
        """Show this row (a loaded row, or {"id": …} to fetch); None clears the preview."""
        if row is None:
            self._want, self.row = None, None
            self.header.setText("No frame selected")
            self.when.clear()
            self.frame.show_pixmap(None)
            self.text.clear()
            return
        self._want = row["id"]
        hit = self._cache.get(row["id"])
        if hit is not None:
            self._cache.move_to_end(row["id"])
            self._paint(*hit)
            return
        if "captured_at" in row:  # header and text now; the frame when decoded
            self._paint(row, None, loading=True)
        self._request(row)

    def prefetch(self, rows: list[dict]) -> None:
        """Decode these frames ahead (the neighbours of the one shown)."""
        for r in rows:
            if r["id"] not in self._cache:
                self._request(r)

    def _request(self, row: dict) -> None:
        if row["id"] in self._asked:
            return
        self._asked.add(row["id"])
        self.jobs.submit(load_frame, self.store, row, on_done=self._loaded,
                         on_error=lambda _m, i=row["id"]: self._asked.discard(i))

    def _loaded(self, res: tuple[dict, QImage | None]) -> None:
        row, img = res
        self._asked.discard(row["id"])
        entry = (row, None if img is None else QPixmap.fromImage(img))
        self._cache[row["id"]] = entry
        while len(self._cache) > CACHE:
            self._cache.popitem(last=False)
        if row["id"] == self._want:
            self._paint(*entry)

    def forget(self, ids) -> None:
        """Drop cached frames (after a delete)."""
        for i in ids:
            self._cache.pop(i, None)

    def set_words(self, words: list[str]) -> None:
        """Mark these words in the text (the timeline's search)."""
        self.words = words
        if self.row is not None:
            self._text(self.row)

    def _paint(self, row: dict, pm: QPixmap | None, loading: bool = False) -> None:
        self.row = row
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
        body = mark(row.get("text") or "", self.words)
        self.text.setHtml(f"<div style='white-space:pre-wrap'>{body}</div>" if body else "<i>(no text)</i>")
