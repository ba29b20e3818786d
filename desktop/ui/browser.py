"""The memory browser: hybrid search, filters, a lazily paged table, details, edit and delete."""

from __future__ import annotations

import logging
from functools import partial

from PySide6.QtCore import QItemSelectionModel, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.browser_data import TIME_RANGES, MemoryFilter, memory_keys
from desktop.ui.browser_detail import DetailView, load_detail
from desktop.ui.browser_edit import EditDialog
from desktop.ui.icons import icon
from desktop.ui.qt_models import ROW_ROLE, MemoryTableModel, sort_proxy
from desktop.ui.workers import Jobs
from memory.types import EVIDENCE_SOURCES, MemoryType

log = logging.getLogger(__name__)

STATUS_CHOICES = {"Active and candidates": None, "Active": ["active"], "Candidates": ["candidate"],
                  "Superseded": ["superseded"], "Rejected": ["rejected"], "Every status": []}


def make_table(model, parent=None, stretch: int = 0) -> QTableView:
    """A row-selecting, multi-select table over a sort proxy of model; column `stretch` takes the slack."""
    view = QTableView(parent)
    view.setModel(sort_proxy(model, view))
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
    view.setSortingEnabled(True)
    view.sortByColumn(-1, Qt.SortOrder.AscendingOrder)  # keep the store's order until a header is clicked
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(24)  # fixed row height: scrolling never measures rows
    view.setAlternatingRowColors(True)
    view.setWordWrap(False)
    header = view.horizontalHeader()
    for i, col in enumerate(model.COLUMNS):
        header.resizeSection(i, col.width)
    header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    header.setStretchLastSection(False)
    return view


def selected_rows(view: QTableView) -> list[dict]:
    """The public rows of the selected lines, in view order."""
    idxs = sorted(view.selectionModel().selectedRows(), key=lambda i: i.row())
    return [i.data(ROW_ROLE) for i in idxs]


class MemoryBrowser(QMainWindow):
    """Search, filter, inspect, edit and forget memories."""

    changed = Signal()  # something was edited or deleted (the tray refreshes its count)

    def __init__(self, jobs: Jobs, store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setWindowTitle("Mirador — Memories")
        self.setWindowIcon(icon("capturing"))
        self.resize(1200, 720)
        self.model = MemoryTableModel(jobs, store, parent=self)
        self._detail_gen = 0
        self._build()
        self._shortcuts()
        self.model.reloaded.connect(self._count)
        self.model.page_loaded.connect(lambda _n: self._count(self.model.total))
        jobs.error.connect(self.show_error)  # a bound slot: disconnected when this window is deleted
        self.reload()

    # ---- layout -------------------------------------------------------------------------------

    def _build(self) -> None:
        self.search = QLineEdit(placeholderText="Search memories — words or a question (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.type_box = QComboBox()
        self.type_box.addItems(["All types"] + [t.value for t in MemoryType])
        self.status_box = QComboBox()
        self.status_box.addItems(list(STATUS_CHOICES))
        self.scope_edit = QLineEdit(placeholderText="scope, e.g. work")
        self.time_box = QComboBox()
        self.time_box.addItems(list(TIME_RANGES))
        self.source_box = QComboBox()
        self.source_box.addItems(["Any source"] + list(EVIDENCE_SOURCES))
        self.app_edit = QLineEdit(placeholderText="app, e.g. Slack")
        for w in (self.scope_edit, self.app_edit):
            w.setMaximumWidth(140)
        filters = QHBoxLayout()
        for w in (self.search, self.type_box, self.status_box, self.scope_edit, self.time_box, self.source_box,
                  self.app_edit):
            filters.addWidget(w)
        filters.setStretch(0, 3)
        self.table = make_table(self.model, self)
        self.detail = DetailView(self, jobs=self.jobs, store=self.store)
        self.edit_btn = QPushButton("Edit…")
        self.delete_btn = QPushButton("Delete…")
        self.reveal_btn = QPushButton("Reveal")
        self.reveal_btn.setToolTip("Decrypt and show this vault entry's value (recorded in the audit log)")
        self.edit_btn.clicked.connect(self.edit_selected)
        self.delete_btn.clicked.connect(self.delete_selected)
        self.reveal_btn.clicked.connect(self.reveal_selected)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.reveal_btn)
        buttons.addWidget(self.edit_btn)
        buttons.addWidget(self.delete_btn)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.detail)
        rl.addLayout(buttons)
        split = QSplitter()
        split.addWidget(self.table)
        split.addWidget(right)
        split.setSizes([700, 500])
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.addLayout(filters)
        lay.addWidget(split)
        self.setCentralWidget(central)
        self.count_label = QLabel()
        self.statusBar().addPermanentWidget(self.count_label)
        self._debounce = QTimer(self, singleShot=True, interval=300)
        self._debounce.timeout.connect(self.reload)
        self.search.textChanged.connect(lambda _t: self._debounce.start())
        self.search.returnPressed.connect(self.reload)
        for box in (self.type_box, self.status_box, self.time_box, self.source_box):
            box.currentIndexChanged.connect(lambda _i: self.reload())
        for edit in (self.scope_edit, self.app_edit):
            edit.editingFinished.connect(self.reload)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self.table.doubleClicked.connect(lambda _i: self.edit_selected())
        self._selection_changed()

    def _shortcuts(self) -> None:
        QShortcut(QKeySequence.StandardKey.Find, self, activated=self._focus_search)
        QShortcut(QKeySequence(Qt.Key.Key_Delete), self.table, activated=self.delete_selected,
                  context=Qt.ShortcutContext.WidgetShortcut)
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            QShortcut(QKeySequence(key), self.table, activated=self.edit_selected,
                      context=Qt.ShortcutContext.WidgetShortcut)

    def _focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    # ---- loading ------------------------------------------------------------------------------

    def current_filter(self) -> MemoryFilter:
        """The filter the controls describe."""
        t = self.type_box.currentText()
        scope = self.scope_edit.text().strip()
        app = self.app_edit.text().strip()
        src = self.source_box.currentText()
        return MemoryFilter.with_range(
            self.time_box.currentText(), text=self.search.text().strip(),
            types=None if t == "All types" else [t], statuses=STATUS_CHOICES[self.status_box.currentText()],
            scopes=[scope] if scope else None, sources=None if src == "Any source" else [src],
            apps=[app] if app else None)

    def reload(self) -> None:
        """Re-run the search or listing in a worker; the table resets when the ids are in."""
        self._debounce.stop()
        self.count_label.setText("loading…")
        self.model.reload(partial(memory_keys, self.store, self.current_filter()))

    def _count(self, total: int) -> None:
        what = "matches" if self.search.text().strip() else "memories"
        self.count_label.setText(f"{self.model.rowCount():,} of {total:,} {what} shown")

    def _selection_changed(self) -> None:
        rows = selected_rows(self.table)
        vault = len(rows) == 1 and rows[0].get("type") == "vault"
        self.edit_btn.setEnabled(len(rows) == 1 and not vault)
        self.reveal_btn.setVisible(vault)
        self.reveal_btn.setEnabled(vault)
        self.delete_btn.setEnabled(bool(rows))
        self.delete_btn.setText(f"Delete {len(rows)}…" if len(rows) > 1 else "Delete…")
        self._detail_gen += 1
        if len(rows) != 1:
            self.detail.show_row(None)
            return
        gen = self._detail_gen
        self.jobs.submit(load_detail, self.store, rows[0]["id"],
                         on_done=lambda row: gen == self._detail_gen and self.detail.show_row(row))

    def select_id(self, id_: str) -> bool:
        """Select the loaded row with this id (for the tray and tests); False if not loaded."""
        i = self.model.index_of(id_)
        if i < 0:
            return False
        proxy = self.table.model()
        idx = proxy.mapFromSource(self.model.index(i, 0))
        sel = self.table.selectionModel()
        # NoUpdate: the view's setCurrentIndex would re-select just one cell, and selectedRows() wants whole rows
        sel.setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.NoUpdate)
        sel.select(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        self.table.scrollTo(idx)
        return True

    # ---- edit and delete ----------------------------------------------------------------------

    def edit_selected(self) -> EditDialog | None:
        """Open the edit form for the one selected memory (non-blocking)."""
        rows = selected_rows(self.table)
        if len(rows) != 1:
            return None
        if rows[0].get("type") == "vault":
            self.statusBar().showMessage("vault entries are edited with `mirador edit`", 8000)
            return None
        dlg = EditDialog(rows[0], self)
        dlg.accepted.connect(lambda: self._save(rows[0]["id"], dlg.changes))
        dlg.open()
        self.edit_dialog = dlg
        return dlg

    def reveal_selected(self) -> None:
        """Decrypt the selected vault entry's value in a worker and show it in the detail pane."""
        rows = selected_rows(self.table)
        if len(rows) != 1 or rows[0].get("type") != "vault":
            return
        id_ = rows[0]["id"]
        self.reveal_btn.setEnabled(False)  # one reveal (and one audit row) per press
        self.jobs.submit(self.store.reveal, id_, actor="person",
                         on_done=lambda value: self.detail.show_value(id_, value))

    def _save(self, id_: str, changes: dict) -> None:
        if not changes:
            self.statusBar().showMessage("nothing changed", 4000)
            return
        self.statusBar().showMessage("saving…")
        self.jobs.submit(lambda: self.store.update_memory(id_, actor="person", **changes), on_done=self._saved)

    def _saved(self, row: dict) -> None:
        self.model.replace_row(row)
        self.statusBar().showMessage("saved", 4000)
        self._selection_changed()
        self.changed.emit()

    def confirm_delete(self, rows: list[dict]) -> bool:
        """Ask before erasing (modal question; tests patch QMessageBox.question)."""
        what = f"“{(rows[0].get('title') or '')[:60]}”" if len(rows) == 1 else f"{len(rows)} memories"
        answer = QMessageBox.question(
            self, "Delete for good?",
            f"Erase {what}? It is removed from every table, old version and index; only a tombstone "
            "remains so it is never re-extracted. This cannot be undone.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Yes

    def delete_selected(self) -> None:
        """Erase the selected memories after confirmation (memory.store.erasure.forget, in a worker)."""
        rows = selected_rows(self.table)
        if not rows or not self.confirm_delete(rows):
            return
        from memory.store.erasure import forget

        ids = [r["id"] for r in rows]
        self.statusBar().showMessage(f"erasing {len(ids)}…")
        self.jobs.submit(forget, self.store, ids, on_done=lambda res: self._deleted(ids, res))

    def _deleted(self, ids: list[str], result: dict) -> None:
        self.model.remove_ids(ids)
        self._count(self.model.total)
        self.statusBar().showMessage(f"erased {result['deleted']} row(s)", 6000)
        self.changed.emit()

    def show_error(self, message: str) -> None:
        """Show a background job's failure in the status bar."""
        self.statusBar().showMessage(message, 10_000)
