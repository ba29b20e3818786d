"""Evidence timeline: what was captured, by day and app, with thumbnails; delete a time range, a day or an app
(memory/store/erasure.py: the evidence and the memories derived only from it; the dialog says what goes first).
It follows the store (`refresh()`, called by desktop/ui/store_watch.py LiveViews): new captures appear in the open
day, counts follow deletes made anywhere, and the selected day, app, rows and scroll position stay."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import partial

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.browser import make_table, selected_rows
from desktop.ui.browser_data import KeyList, evidence_groups, evidence_keys
from desktop.ui.icons import icon
from desktop.ui.qt_models import THUMB_WIDTH, EvidenceTableModel, now_utc
from desktop.ui.store_watch import restore_selection
from desktop.ui.workers import Jobs

DAY_ROLE = Qt.ItemDataRole.UserRole + 10
APP_ROLE = Qt.ItemDataRole.UserRole + 11


def _day_bounds_utc(day: str) -> datetime:
    """Local midnight of 'YYYY-MM-DD' as naive UTC (how captured_at is stored)."""
    local = datetime.strptime(day, "%Y-%m-%d").astimezone()  # naive -> local wall clock, with its offset
    return local.astimezone(timezone.utc).replace(tzinfo=None)


class EvidenceTimeline(QMainWindow):
    """Days → apps on the left, the captured rows (with frame thumbnails) on the right."""

    changed = Signal()

    def __init__(self, jobs: Jobs, store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setWindowTitle("Mirador — Evidence timeline")
        self.setWindowIcon(icon("capturing"))
        self.resize(1200, 720)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Day / app", "Rows"])
        self.tree.setColumnWidth(0, 200)
        self.model = EvidenceTableModel(jobs, store, parent=self)
        self.table = make_table(self.model, self)
        self.table.verticalHeader().setDefaultSectionSize(THUMB_WIDTH * 10 // 16)
        self.table.setIconSize(QSize(THUMB_WIDTH, THUMB_WIDTH * 10 // 16))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, header.ResizeMode.Interactive)  # thumbnail + time; the text column stretches
        header.setSectionResizeMode(EvidenceTableModel.COL_TEXT, header.ResizeMode.Stretch)
        self.last_hour = QPushButton("Delete last hour…")
        self.last_day = QPushButton("Delete last 24 hours…")
        self.del_app = QPushButton("Delete this app's evidence…")
        self.del_day = QPushButton("Delete this day…")
        self.last_hour.clicked.connect(lambda: self.delete_range(timedelta(hours=1)))
        self.last_day.clicked.connect(lambda: self.delete_range(timedelta(days=1)))
        self.del_app.clicked.connect(self.delete_app)
        self.del_day.clicked.connect(self.delete_day)
        self.summary = QLabel()
        buttons = QHBoxLayout()
        buttons.addWidget(self.summary, 1)
        for b in (self.last_hour, self.last_day, self.del_day, self.del_app):
            buttons.addWidget(b)
        split = QSplitter()
        split.addWidget(self.tree)
        split.addWidget(self.table)
        split.setSizes([260, 940])
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.addWidget(split)
        lay.addLayout(buttons)
        self.setCentralWidget(central)
        self.tree.currentItemChanged.connect(lambda *_: self._show_selection())
        self.model.refreshed.connect(self._rows_refreshed)
        jobs.error.connect(self.show_error)  # a bound slot: disconnected when this window is deleted
        self._groups: list[tuple[str, str, int]] | None = None
        self._regrouping = False
        self._restore: tuple[list[str], int] | None = None
        self.reload()

    def reload(self) -> None:
        """Recount evidence by day and app (worker) and show the newest day."""
        self.jobs.submit(evidence_groups, self.store, on_done=self._fill_tree)

    @property
    def refresh_busy(self) -> bool:
        """A recount or a load of the rows is still running."""
        return self._regrouping or self.model.busy

    def refresh(self) -> None:
        """Re-read the counts and the rows on show (the store changed), keeping the selected day/app, the
        selected rows and the scroll position; new captures appear at the top of today."""
        self._regrouping = True
        self.jobs.submit(evidence_groups, self.store, on_done=self._regrouped,
                         on_error=lambda _m: setattr(self, "_regrouping", False))

    def _regrouped(self, groups: list[tuple[str, str, int]]) -> None:
        self._regrouping = False
        day, app = self._selected()
        it = self.tree.currentItem()
        raw_app = it.data(0, APP_ROLE) if it else None
        if groups != self._groups:
            expanded = {self.tree.topLevelItem(i).data(0, DAY_ROLE) for i in range(self.tree.topLevelItemCount())
                        if self.tree.topLevelItem(i).isExpanded()}
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
            table = self.table
            self._restore = ([r["id"] for r in selected_rows(table)], table.verticalScrollBar().value())
            self.model.refresh(partial(evidence_keys, self.store, day=_day_bounds_utc(day), app=app))

    def _rows_refreshed(self, reset: bool) -> None:
        keep, self._restore = self._restore, None
        if reset and keep:
            restore_selection(self.model, self.table, *keep)

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
            target = item if keep[1] is None else next(
                (item.child(i) for i in range(item.childCount()) if item.child(i).data(0, APP_ROLE) == keep[1]), None)
        if target is not None:
            self.tree.setCurrentItem(target)
        elif days:
            first = next(iter(days.values()))
            first.setExpanded(True)
            self.tree.setCurrentItem(first)
        else:
            self.model.reload(lambda: KeyList([]))
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

    def _show_selection(self) -> None:
        day, app = self._selected()
        self._buttons()
        if day:
            self.model.reload(partial(evidence_keys, self.store, day=_day_bounds_utc(day), app=app))

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

    def _deleted(self, result: dict) -> None:
        msg = f"erased {result['deleted']} row(s), {result['frames_removed']} frame(s)"
        if result.get("reviewed"):
            msg += (f"; {result['reviewed']} memory(ies) sent to review (they rest on other evidence too, "
                    "or you edited them)")
        self.statusBar().showMessage(msg, 8000)
        self.reload()
        self.changed.emit()

    def show_error(self, message: str) -> None:
        """Show a background job's failure in the status bar."""
        self.statusBar().showMessage(message, 10_000)
