"""Evidence timeline: a day you can scrub. Days → apps on the left; on the right the selected frame large
(app, window title and time above it, its captured text below), a slider across the day, a search over the
day's text that marks the words and jumps from match to match, and the day's frames as rows (time,
thumbnail, app, window title, text). Keys: ←/→ previous/next frame, PgUp/PgDn one hour back/forward,
Home/End first/last frame of the day, Delete erases the frame shown (after saying what goes).
Delete a time range, a day, an app or one frame (memory/store/erasure.py: the evidence and the memories
derived only from it; the dialog says what goes first). It follows the store (`refresh()`, called by
desktop/ui/store_watch.py LiveViews): new captures appear in the open day, counts follow deletes made
anywhere, and the selected day, app and frame stay.

A filmstrip of thumbnails across the day sits over the slider (desktop/ui/timeline_strip.py): the frame
shown is highlighted in it, a click jumps there.

Only what is shown is read: one narrow scan of the day brings everything a list line shows (all but the
full text, desktop/ui/timeline_model.py), so any part of the day paints at once; thumbnails are decoded off
the GUI thread, newest first, and kept; the large frame is decoded from its path, with its text read as
one row, in the preview's own worker, a few kept (desktop/ui/timeline_preview.py)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, QItemSelectionModel, QObject, QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSlider,
    QSplitter,
    QStyle,
    QStyleOptionSlider,
    QTableView,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.browser_data import evidence_groups
from desktop.ui.icons import icon
from desktop.ui.qt_models import now_utc
from desktop.ui.timeline_model import DayFramesModel, DayIndex, day_index, query_words, search_day
from desktop.ui.timeline_preview import FramePreview
from desktop.ui.timeline_strip import ThumbStrip
from desktop.ui.workers import Jobs

if TYPE_CHECKING:
    from memory.store.core import Store

DAY_ROLE = Qt.ItemDataRole.UserRole + 10
APP_ROLE = Qt.ItemDataRole.UserRole + 11
ROW_HEIGHT = 36
SETTLE_MS = 40  # after a move, background decoding waits this long for the next move
HOLD_MS = 250  # and then at most this long for a large frame being shown


def _day_bounds_utc(day: str) -> datetime:
    """Local midnight of 'YYYY-MM-DD' as naive UTC (how captured_at is stored)."""
    local = datetime.strptime(day, "%Y-%m-%d").astimezone()  # naive -> local wall clock, with its offset
    return local.astimezone(timezone.utc).replace(tzinfo=None)


class _Scrubber(QSlider):
    """The day as a slider (oldest frame left): a click jumps straight to where it lands, a drag scrubs."""

    def mousePressEvent(self, e) -> None:  # noqa: N802 - Qt
        if e.button() == Qt.MouseButton.LeftButton:
            opt = QStyleOptionSlider()
            self.initStyleOption(opt)
            handle = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                                 QStyle.SubControl.SC_SliderHandle, self)
            if not handle.contains(e.position().toPoint()):
                groove = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                                     QStyle.SubControl.SC_SliderGroove, self)
                x = int(e.position().x()) - groove.x() - handle.width() // 2
                span = groove.width() - handle.width()
                self.setValue(QStyle.sliderValueFromPosition(self.minimum(), self.maximum(), x, max(span, 1)))
        super().mousePressEvent(e)


class _Keys(QObject):
    """The timeline's keys wherever the focus is (the list, the slider, the preview), except in text fields."""

    def __init__(self, timeline: EvidenceTimeline) -> None:
        super().__init__(timeline)
        self.tl = timeline

    def eventFilter(self, obj, e) -> bool:  # noqa: N802 - Qt
        if e.type() == QEvent.Type.KeyPress and e.modifiers() in (Qt.KeyboardModifier.NoModifier,
                                                                  Qt.KeyboardModifier.KeypadModifier):
            return self.tl.key(e.key())
        return False


class EvidenceTimeline(QMainWindow):
    """Days → apps on the left; the selected day's frame preview, slider, search and rows on the right."""

    changed = Signal()
    current_changed = Signal(int)  # the line (frame) now selected

    def __init__(self, jobs: Jobs, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setWindowTitle("Mirador — Evidence timeline")
        self.setWindowIcon(icon("capturing"))
        self.resize(1280, 860)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Day / app", "Rows"])
        self.tree.setColumnWidth(0, 170)
        self.model = DayFramesModel(jobs, store, parent=self)
        self.table = QTableView()
        # The model itself, not a proxy: through a proxy, each None that data() returns (most roles of most
        # cells) costs None a reference in this PySide6, and the interpreter aborts once it runs out.
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        vh = self.table.verticalHeader()
        vh.setVisible(False)
        vh.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)  # fixed heights: 10,000 lines are never measured
        vh.setDefaultSectionSize(ROW_HEIGHT)
        self.table.setIconSize(QSize(56, ROW_HEIGHT - 4))
        header = self.table.horizontalHeader()
        for i, col in enumerate(self.model.COLUMNS):
            header.resizeSection(i, col.width)
        header.setSectionResizeMode(DayFramesModel.COL_TEXT, QHeaderView.ResizeMode.Stretch)
        self.preview = FramePreview(store, self)
        self.strip = ThumbStrip(self.model)
        self.strip.jump.connect(self.go)
        self.slider = _Scrubber(Qt.Orientation.Horizontal)
        self.slider.setRange(0, 0)
        self.slider.setTracking(True)
        self.slider.setToolTip("Drag or click to scrub through the day (←/→ frame, PgUp/PgDn hour, Home/End)")
        self.start_label, self.end_label, self.position = QLabel(), QLabel(), QLabel()
        self.prev_btn = QPushButton("◀")
        self.next_btn = QPushButton("▶")
        self.prev_btn.setToolTip("Previous frame (←)")
        self.next_btn.setToolTip("Next frame (→)")
        self.prev_btn.clicked.connect(lambda: self.step(-1))
        self.next_btn.clicked.connect(lambda: self.step(1))
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search this day's screens and transcripts — Enter jumps to the next match")
        self.search.setClearButtonEnabled(True)
        self.next_match = QPushButton("Next match")
        self.match_label = QLabel()
        self.search.returnPressed.connect(self.find_next)
        self.next_match.clicked.connect(self.find_next)
        self.search.textChanged.connect(self._query_edited)
        self.del_frame = QPushButton("Delete this frame…")
        self.del_frame.clicked.connect(self.delete_frame)
        self.last_hour = QPushButton("Delete last hour…")
        self.last_day = QPushButton("Delete last 24 hours…")
        self.del_app = QPushButton("Delete this app's evidence…")
        self.del_day = QPushButton("Delete this day…")
        self.last_hour.clicked.connect(lambda: self.delete_range(timedelta(hours=1)))
        self.last_day.clicked.connect(lambda: self.delete_range(timedelta(days=1)))
        self.del_app.clicked.connect(self.delete_app)
        self.del_day.clicked.connect(self.delete_day)
        self.summary = QLabel()

        scrub = QHBoxLayout()
        for w in (self.prev_btn, self.start_label):
            scrub.addWidget(w)
        scrub.addWidget(self.slider, 1)
        for w in (self.end_label, self.next_btn, self.position):
            scrub.addWidget(w)
        find = QHBoxLayout()
        find.addWidget(self.search, 1)
        find.addWidget(self.next_match)
        find.addWidget(self.match_label)
        lower = QWidget()
        low = QVBoxLayout(lower)
        low.setContentsMargins(0, 0, 0, 0)
        low.addWidget(self.strip)
        low.addLayout(scrub)
        low.addLayout(find)
        low.addWidget(self.table, 1)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.preview)
        right.addWidget(lower)
        right.setStretchFactor(0, 3)
        right.setStretchFactor(1, 2)
        right.setSizes([470, 390])  # the preview, then the strip, slider, search and about five lines
        split = QSplitter()
        split.addWidget(self.tree)
        split.addWidget(right)
        split.setSizes([230, 1050])
        buttons = QHBoxLayout()
        buttons.addWidget(self.summary, 1)
        for b in (self.del_frame, self.last_hour, self.last_day, self.del_day, self.del_app):
            buttons.addWidget(b)
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.addWidget(split)
        lay.addLayout(buttons)
        self.setCentralWidget(central)

        self._keys = _Keys(self)
        for widget in (self.table, self.slider, self.strip, self.preview.text, self.preview.frame, self.prev_btn,
                       self.next_btn, self.next_match, self.del_frame):
            widget.installEventFilter(self._keys)
        self.tree.currentItemChanged.connect(lambda *_: self._show_selection())
        self.table.selectionModel().currentRowChanged.connect(lambda cur, _prev: self._current(cur.row()))
        self.slider.valueChanged.connect(self.go)
        self._settle = QTimer(self)
        self._settle.setSingleShot(True)
        self._settle.setInterval(SETTLE_MS)
        self._settle.timeout.connect(self._settled)
        self.preview.shown.connect(self._release_thumbs)
        self.model.reloaded.connect(self._listed)
        self.model.refreshed.connect(self._rows_refreshed)
        jobs.error.connect(self.show_error)  # a bound slot: disconnected when this window is deleted
        self._groups: list[tuple[str, str, int]] | None = None
        self._regrouping = False
        self._keep: str | None = None  # the frame to select again after the list changed
        self.line = -1
        self._matches: list[str] = []
        self._matched_query: str | None = None
        self._searching = False
        self._buttons()
        self.reload()

    # ---- the day and its frames ----------------------------------------------------------------

    def reload(self) -> None:
        """Recount evidence by day and app (worker) and show the newest day."""
        self.jobs.submit(evidence_groups, self.store, on_done=self._fill_tree)

    @property
    def refresh_busy(self) -> bool:
        """A recount or a load of the day's list is still running."""
        return self._regrouping or self.model.busy

    def refresh(self) -> None:
        """Re-read the counts and the day's frames (the store changed), keeping the selected day/app and
        frame; new captures appear at the end of today."""
        self._regrouping = True
        self.jobs.submit(evidence_groups, self.store, on_done=self._regrouped,
                         on_error=lambda _m: setattr(self, "_regrouping", False))

    def _keys_fn(self, day: str, app: str | None):
        return partial(day_index, self.store, day=_day_bounds_utc(day), app=app)

    def _regrouped(self, groups: list[tuple[str, str, int]]) -> None:
        self._regrouping = False
        day, app = self._selected()
        it = self.tree.currentItem()
        raw_app = it.data(0, APP_ROLE) if it else None
        if groups != self._groups:
            tops = [self.tree.topLevelItem(i) for i in range(self.tree.topLevelItemCount())]
            expanded = {top.data(0, DAY_ROLE) for top in tops if top is not None and top.isExpanded()}
            self.tree.blockSignals(True)  # a rebuilt tree is not a new choice of day: no reload, no reset
            try:
                found = self._fill_tree(groups, keep=(day, raw_app), expanded=expanded)
            finally:
                self.tree.blockSignals(False)
            if not found:  # the day or app shown is gone (deleted): show the newest day
                self._show_selection()
                return
            self._buttons()
        if day:
            self._keep = self.current_id()
            self.model.refresh(self._keys_fn(day, app))

    def _rows_refreshed(self, reset: bool) -> None:
        keep, self._keep = self._keep, None
        if reset:
            self._after_list(keep)

    def _listed(self, _n: int) -> None:
        if not self.model.busy:  # a reload (not a refresh, which calls _rows_refreshed)
            keep, self._keep = self._keep, None
            self._after_list(keep)

    def _after_list(self, keep: str | None) -> None:
        """The list changed: set up the slider, then select `keep` again (or the latest frame)."""
        n = self.model.total
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(n - 1, 0))
        self.slider.setPageStep(max(n // 24, 1))
        self.slider.blockSignals(False)
        self.start_label.setText(self._clock(0) if n else "")
        self.end_label.setText(self._clock(n - 1) if n else "")
        self._matches, self._matched_query = [], None
        self.line = -1
        if not n:
            self.preview.show_row(None)
            self.position.setText("no frames")
            self._buttons()
            return
        at = self.model.index_of(keep) if keep else -1
        self.go(at if at >= 0 else n - 1)

    def _clock(self, line: int) -> str:
        return self.model.time_at(line).replace(tzinfo=timezone.utc).astimezone().strftime("%H:%M")

    def _fill_tree(self, groups: list[tuple[str, str, int]], keep: tuple | None = None,
                   expanded: set | None = None) -> bool:
        """Rebuild the day/app tree; select `keep` (day, app item) if it is still there, else the newest day.
        Returns whether `keep` was found."""
        self._groups = groups
        self.tree.clear()
        days: dict[str, QTreeWidgetItem] = {}
        for day, app, n in groups:
            if day not in days:
                days[day] = QTreeWidgetItem(self.tree, [day, "0"])
                days[day].setData(0, DAY_ROLE, day)
            child = QTreeWidgetItem(days[day], [app, str(n)])
            child.setData(0, DAY_ROLE, day)
            child.setData(0, APP_ROLE, app)
            days[day].setText(1, str(int(days[day].text(1)) + n))
        total = sum(n for *_, n in groups)
        self.summary.setText(f"{total:,} evidence rows over {len(days)} day(s)")
        for day, item in days.items():
            item.setExpanded(day in (expanded or ()))
        target = None
        if keep is not None and keep[0] in days:
            item = days[keep[0]]
            children = [item.child(i) for i in range(item.childCount())]
            target = item if keep[1] is None else next(
                (c for c in children if c is not None and c.data(0, APP_ROLE) == keep[1]), None)
        if target is not None:
            self.tree.setCurrentItem(target)
        elif days:
            first = next(iter(days.values()))
            first.setExpanded(True)
            self.tree.setCurrentItem(first)
        else:
            self.model.reload(lambda: DayIndex())
        self._buttons()
        return target is not None

    def _selected(self) -> tuple[str | None, str | None]:
        it = self.tree.currentItem()
        if not it:
            return None, None
        app = it.data(0, APP_ROLE)
        return it.data(0, DAY_ROLE), (None if app in (None, "(no app)") else app)

    def _buttons(self) -> None:
        day, app = self._selected()
        self.del_app.setEnabled(bool(app))
        self.del_app.setText(f"Delete all from {app}…" if app else "Delete this app's evidence…")
        self.del_day.setEnabled(bool(day))
        self.del_frame.setEnabled(self.line >= 0)

    def _show_selection(self) -> None:
        day, app = self._selected()
        self._buttons()
        if day:
            self._keep = None
            self.model.reload(self._keys_fn(day, app))

    # ---- moving through the day --------------------------------------------------------------

    def current_id(self) -> str | None:
        """The id of the frame shown, if any."""
        return self.model.id_at(self.line) if 0 <= self.line < self.model.total else None

    def go(self, line: int) -> None:
        """Select frame `line` (0 = the day's first) and show it."""
        n = self.model.total
        if not n:
            return
        line = max(0, min(line, n - 1))
        idx = self.table.model().index(line, 0)
        if self.table.currentIndex().row() != line:
            self.table.selectionModel().setCurrentIndex(
                idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        else:
            self._current(line)
        self.table.scrollTo(idx)

    def _current(self, line: int) -> None:
        if line < 0 or line >= self.model.total or line == self.line and self.preview.row is not None \
                and self.preview.row["id"] == self.model.id_at(line):
            return
        self.line = line
        self.slider.blockSignals(True)
        self.slider.setValue(line)
        self.slider.blockSignals(False)
        self.position.setText(f"{line + 1:,} / {self.model.total:,}")
        self.strip.follow(line)
        self.preview.show_row(self._row(line))
        # The frame and the lines first: background decoding (thumbnails, the neighbours' frames) waits until
        # the person stops moving for a moment, so it never competes with what they are waiting for.
        self.model.thumbs.loader.hold(True)
        self._settle.start()
        self._buttons()
        self.current_changed.emit(line)

    def _settled(self) -> None:
        line = self.line
        if 0 <= line < self.model.total:
            self.preview.prefetch([self._row(i) for i in (line + 1, line - 1) if 0 <= i < self.model.total])
        if self.preview.waiting:  # a large frame still decoding: thumbnails after it (or after HOLD_MS)
            QTimer.singleShot(HOLD_MS, self._release_thumbs)
        else:
            self._release_thumbs()

    def _release_thumbs(self, *_a) -> None:
        if not self._settle.isActive():
            self.model.thumbs.loader.hold(False)

    def _row(self, line: int) -> dict:
        return self.model.row_at(line)

    def step(self, by: int) -> None:
        """Move `by` frames (negative: back)."""
        if self.model.total:
            self.go(max(self.line, 0) + by)

    def hour(self, by: int) -> None:
        """Move one hour forward (by=1) or back (by=-1) from the frame shown."""
        if not self.model.total:
            return
        t = self.model.time_at(max(self.line, 0)) + timedelta(hours=by)
        self.go(self.model.line_at_or_after(t) if by > 0 else self.model.line_at_or_before(t))

    def key(self, k: int) -> bool:
        """Handle a timeline key; False when it is not one."""
        moves = {Qt.Key.Key_Left: lambda: self.step(-1), Qt.Key.Key_Right: lambda: self.step(1),
                 Qt.Key.Key_PageUp: lambda: self.hour(-1), Qt.Key.Key_PageDown: lambda: self.hour(1),
                 Qt.Key.Key_Home: lambda: self.go(0), Qt.Key.Key_End: lambda: self.go(self.model.total - 1),
                 Qt.Key.Key_Delete: self.delete_frame}
        act = moves.get(Qt.Key(k))
        if act is None:
            return False
        act()
        return True

    # ---- search ------------------------------------------------------------------------------

    def _query_edited(self, text: str) -> None:
        words = query_words(text)
        self.preview.set_words(words)
        if not words:
            self.match_label.clear()
            self._matches, self._matched_query = [], None

    def find_next(self) -> None:
        """Jump to the next frame (after the one shown, wrapping) whose text holds every word searched."""
        query = self.search.text().strip()
        if not query or not self.model.total:
            return
        if query != self._matched_query:
            if self._searching:
                return
            self._searching = True
            self.match_label.setText("searching…")
            ids = list(self.model.index_.ids)
            self.jobs.submit(search_day, self.store, ids, query,
                             on_done=lambda found: self._found(query, found, first=True),
                             on_error=lambda _m: setattr(self, "_searching", False))
            return
        self._jump_match(first=False)

    def _found(self, query: str, found: list[str], first: bool) -> None:
        self._searching = False
        self._matched_query, self._matches = query, found
        if not found:
            self.match_label.setText(f"no frame of this day mentions “{query}”")
            return
        self._jump_match(first=first)

    def _jump_match(self, first: bool) -> None:
        lines = sorted(x for x in (self.model.index_of(i) for i in self._matches) if x >= 0)
        if not lines:
            self.match_label.setText("no match left")
            return
        after = [x for x in lines if (x >= self.line if first else x > self.line)]
        target = after[0] if after else lines[0]
        self.go(target)
        self.match_label.setText(f"match {lines.index(target) + 1} of {len(lines)}")

    # ---- deleting -----------------------------------------------------------------------------

    def confirm_box(self, what: str, plan) -> QMessageBox:
        """The question before an erase: what the person picked, then exactly what goes (with counts)
        and what stays. Plain text in word-wrapped labels, so no line is cut mid-word."""
        box = QMessageBox(QMessageBox.Icon.Question, "Delete evidence for good?", f"Erase {what}?",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, self)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setInformativeText(f"{plan.describe()} This cannot be undone.")
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.button(QMessageBox.StandardButton.Yes).setText("Erase")
        return box

    def _ask(self, what: str, **kw) -> None:
        """Work out what the delete would take (worker), then ask; erase only on a yes."""
        from memory.store.erasure import plan_forget_where

        self.statusBar().showMessage("counting what would be erased…")
        self.jobs.submit(plan_forget_where, self.store, **kw, on_done=partial(self._planned, what, kw))

    def _planned(self, what: str, kw: dict, plan) -> None:
        self.statusBar().clearMessage()
        self.last_plan = plan
        if plan.empty():
            self.statusBar().showMessage("Nothing to erase: no captured evidence matches.", 8000)
            return
        box = self.confirm_box(what, plan)
        self.last_question = (box.text(), box.informativeText())
        if box.exec() == QMessageBox.StandardButton.Yes:
            self._forget(**kw)

    def _forget(self, **kw) -> None:
        from memory.store.erasure import forget_where

        self.statusBar().showMessage("erasing…")
        self.jobs.submit(forget_where, self.store, **kw, on_done=self._deleted)

    def delete_range(self, back: timedelta) -> None:
        """Erase what was captured in the last `back` (like Recall's 'delete last hour'), with the
        memories derived only from it; memories the person wrote and the vault stay."""
        label = "the last hour" if back == timedelta(hours=1) else f"the last {back.total_seconds() / 3600:g} hours"
        self._ask(f"everything captured in {label}", since=now_utc() - back)

    def delete_app(self) -> None:
        """Erase all evidence captured from the selected app, with the memories derived only from it."""
        _day, app = self._selected()
        if app:
            self._ask(f"all evidence captured from {app}", app=app)

    def delete_day(self) -> None:
        """Erase everything captured on the selected day, with the memories derived only from it."""
        day, _app = self._selected()
        if day:
            start = _day_bounds_utc(day)
            self._ask(f"everything captured on {day}", since=start, until=start + timedelta(days=1))

    def delete_frame(self) -> None:
        """Erase the frame shown (its row, image and the memories derived only from it; memories resting on
        other evidence too go to review), after the same question with counts as the other deletes."""
        from memory.store.erasure import plan_forget_evidence

        id_ = self.current_id()
        if id_ is None:
            return
        row = self.preview.row if self.preview.row and self.preview.row["id"] == id_ else self._row(self.line)
        when = self.model.time_at(self.line).replace(tzinfo=timezone.utc).astimezone().strftime("%H:%M:%S")
        what = f"this frame ({row.get('app') or 'no app'}, {when})" if row.get("app") else f"this frame ({when})"
        self.statusBar().showMessage("counting what would be erased…")
        self.jobs.submit(plan_forget_evidence, self.store, [id_], on_done=partial(self._frame_planned, what, id_))

    def _frame_planned(self, what: str, id_: str, plan) -> None:
        self.statusBar().clearMessage()
        self.last_plan = plan
        box = self.confirm_box(what, plan)
        self.last_question = (box.text(), box.informativeText())
        if box.exec() != QMessageBox.StandardButton.Yes:
            return
        from memory.store.erasure import forget_where

        self.statusBar().showMessage("erasing…")
        self.jobs.submit(forget_where, self.store, plan=plan, on_done=partial(self._frame_deleted, id_))

    def _frame_deleted(self, id_: str, result: dict) -> None:
        """The frame is gone: show its successor (or the one before it at the end of the day) at once."""
        line = self.model.index_of(id_)
        self.preview.forget([id_])
        self.model.remove_ids([id_])
        self._after_list(None)
        if line >= 0 and self.model.total:
            self.go(min(line, self.model.total - 1))
        self._report(result)
        self.refresh()
        self.changed.emit()

    def _report(self, result: dict) -> None:
        msg = f"erased {result['deleted']} row(s), {result['frames_removed']} frame(s)"
        if result.get("reviewed"):
            msg += (f"; {result['reviewed']} memory(ies) sent to review (they rest on other evidence too, "
                    "or you edited them)")
        self.statusBar().showMessage(msg, 8000)

    def _deleted(self, result: dict) -> None:
        self._report(result)
        self.reload()
        self.changed.emit()

    def show_error(self, message: str) -> None:
        """Show a background job's failure in the status bar."""
        self.statusBar().showMessage(message, 10_000)

    def closeEvent(self, e) -> None:  # noqa: N802 - Qt
        # Decoding waiting for a closed window is dropped (a quit would otherwise wait for it); what is on
        # screen when the window opens again is asked for again.
        self.model.thumbs.loader.drop()
        self.preview.loader.drop()
        super().closeEvent(e)
