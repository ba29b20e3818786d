"""The memory browser: search memories or captured evidence, filters, a lazily paged table, a detail card,
edit and delete.

A search keeps only hits about the query (the relevance floor MCP memory_search applies, in
memory/retrieval/relevance.py), marks the words it matched and shows how close each hit is; after a new
search the detail pane shows the first hit, or says nothing matched — never the previous memory.
`refresh()` re-reads the current list keeping the selection and scroll position (the app's live
refresh calls it when the store changes)."""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import QItemSelectionModel, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QCompleter,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTabBar,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.browser_data import (
    SOURCE_WORDS,
    TIME_RANGES,
    TYPE_TIPS,
    MemoryFilter,
    evidence_search_keys,
    known_scopes,
    memory_keys,
    normalise_scope,
    type_word,
)
from desktop.ui.browser_detail import DetailView, load_detail
from desktop.ui.browser_edit import EditDialog
from desktop.ui.icons import icon
from desktop.ui.qt_models import (
    ROW_ROLE,
    BrowserEvidenceModel,
    BrowserMemoryModel,
    HighlightDelegate,
    same_row,
    sort_proxy,
)
from desktop.ui.qt_typed import proxy_of, shortcut
from desktop.ui.workers import Jobs
from memory.errors import InputError
from memory.types import EVIDENCE_SOURCES, MemoryType

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

MODES = ("Memories", "Captured (evidence)")  # the two lists the search runs over
# the status filter in the table's words (browser_data.STATUS_SHORT); None = what search and recall use
STATUS_CHOICES = {"In use or needs review": None, "In use": ["active"], "Needs review": ["candidate"],
                  "Replaced": ["superseded"], "Rejected": ["rejected"], "Any status": []}


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
    """Search, filter, inspect, edit and forget memories; search captured evidence in the same window."""

    changed = Signal()  # something was edited or deleted (the tray refreshes its count)

    def __init__(self, jobs: Jobs, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setWindowTitle("Mirador — Memories")
        self.setWindowIcon(icon("capturing"))
        self.resize(1200, 720)
        self.model = BrowserMemoryModel(jobs, store, parent=self)
        self.ev_model = BrowserEvidenceModel(jobs, store, parent=self)
        self._detail_gen = 0
        self._follow = False  # after a new search: show its first hit (or nothing) once the list is in
        self._restore: tuple[list[dict], int] | None = None  # a refresh's selected rows and scroll value
        self._quiet = False  # True while a refresh puts the selection back
        self._build()
        self._shortcuts()
        for m in (self.model, self.ev_model):
            m.reloaded.connect(lambda _n, m=m: self._count_if(m))
            m.page_loaded.connect(lambda _n, m=m: self._count_if(m))
            m.page_loaded.connect(lambda _n, m=m: self._follow_first(m))
            m.modelReset.connect(lambda m=m: self._list_reset(m))
            m.refreshed.connect(lambda reset, m=m: self._refreshed(m, reset))
        jobs.error.connect(self.show_error)  # a bound slot: disconnected when this window is deleted
        self.jobs.submit(known_scopes, self.store, on_done=self._scopes_known)
        self.search.setFocus()  # typing starts a search as soon as the window opens
        self.reload()

    # ---- layout -------------------------------------------------------------------------------

    def _build(self) -> None:
        self.mode_tabs = QTabBar()
        for m in MODES:
            self.mode_tabs.addTab(m)
        self.mode_tabs.setTabToolTip(0, "What Mirador remembers: facts, events, procedures, links, your profile")
        self.mode_tabs.setTabToolTip(1, "What was captured: screen text, transcripts and notes, as they were seen")
        self.mode_tabs.setFocusPolicy(Qt.FocusPolicy.TabFocus)  # the search field has the focus when the window opens
        self.search = QLineEdit(placeholderText="Search memories — words or a question (Ctrl+F)")
        self.search.setClearButtonEnabled(True)
        self.type_box = QComboBox()
        self.type_box.addItem("Any type", None)
        for t in MemoryType:
            self.type_box.addItem(type_word(t.value), t.value)
            self.type_box.setItemData(self.type_box.count() - 1, TYPE_TIPS.get(t.value),
                                      Qt.ItemDataRole.ToolTipRole)
        self.type_box.setToolTip("Show only one kind of memory")
        self.status_box = QComboBox()
        self.status_box.addItems(list(STATUS_CHOICES))
        self.status_box.setToolTip("Needs review: proposed and waiting for you in Review · In use: found by "
                                   "search and recall · Replaced: a newer memory took its place")
        self.scope_edit = QLineEdit(placeholderText="scope, e.g. work")
        self.scope_edit.setToolTip("Only this scope and the scopes under it (work also shows work/acme)")
        self.time_box = QComboBox()
        self.time_box.addItems(list(TIME_RANGES))
        self.source_box = QComboBox()
        self.source_box.addItem("Any source", None)
        for src in EVIDENCE_SOURCES:
            self.source_box.addItem(SOURCE_WORDS.get(src, src.capitalize()), src)
        self.source_box.setToolTip("Only what came from the screen, the microphone, a typed note…")
        self.app_edit = QLineEdit(placeholderText="app, e.g. Slack")
        for edit in (self.scope_edit, self.app_edit):
            edit.setMaximumWidth(140)
        top = QHBoxLayout()
        top.addWidget(self.mode_tabs)
        top.addStretch(1)
        filters = QHBoxLayout()
        for w in (self.search, self.type_box, self.status_box, self.scope_edit, self.time_box, self.source_box,
                  self.app_edit):
            filters.addWidget(w)
        filters.setStretch(0, 3)
        self.table = make_table(self.model, self)
        self.table.setItemDelegateForColumn(BrowserMemoryModel.COL_TITLE, HighlightDelegate(self.table))
        self.ev_table = make_table(self.ev_model, self, stretch=BrowserEvidenceModel.COL_TEXT)
        self.ev_table.setItemDelegateForColumn(BrowserEvidenceModel.COL_TEXT, HighlightDelegate(self.ev_table))
        self.ev_table.setIconSize(QSize(40, 22))  # a hint of the frame; the card shows it large
        self.lists = QStackedWidget()
        self.lists.addWidget(self.table)
        self.lists.addWidget(self.ev_table)
        self.detail = DetailView(self, jobs=self.jobs, store=self.store)
        self.edit_btn = QPushButton("Edit…")
        self.delete_btn = QPushButton("Delete…")
        self.reveal_btn = QPushButton("Reveal")
        self.reveal_btn.setToolTip("Decrypt and show this vault entry's value (recorded in the audit log)")
        self.edit_btn.clicked.connect(self.edit_selected)
        self.delete_btn.clicked.connect(self.delete_selected)
        self.reveal_btn.clicked.connect(self.reveal_selected)
        self.detail.value_hidden.connect(lambda: self.reveal_btn.setEnabled(True))  # hidden again: may reveal again
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
        split.addWidget(self.lists)
        split.addWidget(right)
        split.setSizes([740, 500])
        central = QWidget()
        lay = QVBoxLayout(central)
        lay.addLayout(top)
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
        self.mode_tabs.currentChanged.connect(self._mode_changed)
        for view in (self.table, self.ev_table):
            view.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self.table.doubleClicked.connect(lambda _i: self.edit_selected())
        self._mode_changed(0)

    def _shortcuts(self) -> None:
        shortcut(QKeySequence.StandardKey.Find, self, self._focus_search)
        for view in (self.table, self.ev_table):
            shortcut(QKeySequence(Qt.Key.Key_Delete), view, self.delete_selected, Qt.ShortcutContext.WidgetShortcut)
        for key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            shortcut(QKeySequence(key), self.table, self.edit_selected, Qt.ShortcutContext.WidgetShortcut)

    def _focus_search(self) -> None:
        self.search.setFocus()
        self.search.selectAll()

    def _scopes_known(self, scopes: list[str]) -> None:
        if scopes == getattr(self, "scopes", None):
            return  # a refresh asks again: nothing new, keep the completer
        old = self.scope_edit.completer()
        if old is not None:
            old.deleteLater()
        completer = QCompleter(scopes, self.scope_edit)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.scope_edit.setCompleter(completer)
        self.scopes = scopes
        dlg = getattr(self, "edit_dialog", None)
        if dlg is not None and dlg.isVisible():
            dlg.offer_scopes(scopes)

    # ---- which list ---------------------------------------------------------------------------

    @property
    def evidence_mode(self) -> bool:
        """True while the window lists captured evidence rather than memories."""
        return self.mode_tabs.currentIndex() == 1

    def current_model(self):
        """The model of the list on show."""
        return self.ev_model if self.evidence_mode else self.model

    def current_table(self) -> QTableView:
        """The table on show."""
        return self.ev_table if self.evidence_mode else self.table

    def show_evidence(self, on: bool = True) -> None:
        """Switch to the captured-evidence list (or back to memories)."""
        self.mode_tabs.setCurrentIndex(1 if on else 0)

    def _mode_changed(self, index: int) -> None:
        ev = index == 1
        self.lists.setCurrentIndex(index)
        self.type_box.setVisible(not ev)  # evidence has no type or status
        self.status_box.setVisible(not ev)
        self.search.setPlaceholderText("Search captured screens and speech — words or a question (Ctrl+F)" if ev
                                       else "Search memories — words or a question (Ctrl+F)")
        self.edit_btn.setVisible(not ev)
        if hasattr(self, "count_label"):
            self.reload()

    # ---- loading ------------------------------------------------------------------------------

    def current_filter(self) -> MemoryFilter:
        """The filter the controls describe (a scope as typed is normalised: "Work" → "work")."""
        t = self.type_box.currentData()
        scope = self.scope_edit.text().strip()
        if scope:
            try:
                scope = normalise_scope(scope)
            except InputError:
                pass  # shown by reload(); the store refuses it with the expected form
        app = self.app_edit.text().strip()
        src = self.source_box.currentData()
        return MemoryFilter.with_range(
            self.time_box.currentText(), text=self.search.text().strip(),
            types=None if t is None else [t], statuses=STATUS_CHOICES[self.status_box.currentText()],
            scopes=[scope] if scope else None, sources=None if src is None else [src],
            apps=[app] if app else None)

    def _keys_fn(self):
        return partial(evidence_search_keys if self.evidence_mode else memory_keys, self.store, self.current_filter())

    def _scope_ok(self) -> bool:
        scope = self.scope_edit.text().strip()
        if not scope:
            return True
        try:
            normal = normalise_scope(scope)
        except InputError as e:
            self.statusBar().showMessage(f"Scope filter not applied — {e}", 10_000)
            return False
        if normal != scope:
            self.scope_edit.setText(normal)
        return True

    def reload(self) -> None:
        """Run a new search or listing in a worker. The table resets when the ids are in; the detail pane
        then shows the first hit of a search, or is cleared — never what was selected before."""
        self._debounce.stop()
        if not self._scope_ok():
            return
        self.count_label.setText("searching…" if self.search.text().strip() else "loading…")
        self._follow, self._restore = True, None
        self.table.setColumnHidden(BrowserMemoryModel.COL_RELEVANCE, not self.search.text().strip())
        self.ev_table.setColumnHidden(BrowserEvidenceModel.COL_RELEVANCE, not self.search.text().strip())
        self.current_model().reload(self._keys_fn())

    @property
    def refresh_busy(self) -> bool:
        """The list on show is still loading, or a typed search is about to run (a refresh now would be
        dropped for it; the live views try again at their next probe)."""
        return self.current_model().busy or self._debounce.isActive()

    def refresh(self) -> None:
        """Re-read the list on show with the same query and filters, keeping the selected rows and the scroll
        position (rows that no longer exist drop out). Cheap when nothing changed: no reset, no flicker."""
        if self._debounce.isActive() or not self._scope_ok():
            return
        table = self.current_table()
        self._restore = (selected_rows(table), table.verticalScrollBar().value())
        self.current_model().refresh(self._keys_fn(), keep=[r["id"] for r in self._restore[0]])
        self.jobs.submit(known_scopes, self.store, on_done=self._scopes_known)  # a scope made elsewhere

    def _refreshed(self, model, reset: bool) -> None:
        if model is not self.current_model():
            return
        keep, self._restore = self._restore, None
        before = keep[0] if keep is not None else []
        if reset and keep is not None:
            self._quiet = True  # selecting the same rows again is not a new selection
            try:
                self.select_ids([r["id"] for r in before], scroll_to=False)
            finally:
                self._quiet = False
            self.current_table().verticalScrollBar().setValue(keep[1])
        now = selected_rows(self.current_table())
        # the card is loaded again only when what it shows changed (a revealed secret or a text selection
        # in it is not reset by an unrelated capture)
        if [r["id"] for r in now] != [r["id"] for r in before]:
            self._selection_changed()
        elif len(now) == 1 and not same_row(now[0], before[0]):
            self._reload_detail(now[0])
        self._count(model)

    def _list_reset(self, model) -> None:
        # a reset clears the view's selection without a selectionChanged signal
        if model is self.current_model() and self._restore is None:
            self._selection_changed()

    def _follow_first(self, model) -> None:
        if not self._follow or model is not self.current_model():
            return
        self._follow = False
        if self.search.text().strip() and model.rowCount():
            table = self.current_table()
            self._select_index(table, table.model().index(0, 0))

    def _count_if(self, model) -> None:
        if model is self.current_model():
            self._count(model)
            if self._follow and model.total == 0:
                self._follow = False
                self._selection_changed()

    def _count(self, model=None) -> None:
        model = model if model is not None else self.current_model()
        q, total, shown = self.search.text().strip(), model.total, model.rowCount()
        what = "captured row" if model is self.ev_model else "memory"
        if q:
            text = (f"{total:,} {'match' if total == 1 else 'matches'} for “{q[:40]}”" if total
                    else f"nothing matches “{q[:40]}”")
        else:
            text = f"{total:,} {what if total == 1 else ('memories' if what == 'memory' else 'captured rows')}"
        if shown < total:
            text += f" ({shown:,} loaded — scroll for more)"
        self.count_label.setText(text)

    def _selection_changed(self) -> None:
        if self._quiet:
            return
        rows = selected_rows(self.current_table())
        ev = self.evidence_mode
        vault = len(rows) == 1 and rows[0].get("type") == "vault"
        self.edit_btn.setEnabled(len(rows) == 1 and not vault and not ev)
        self.reveal_btn.setVisible(vault)
        self.reveal_btn.setEnabled(vault)
        self.delete_btn.setEnabled(bool(rows))
        self.delete_btn.setText(f"Delete {len(rows)}…" if len(rows) > 1 else "Delete…")
        self._detail_gen += 1
        if len(rows) != 1:
            self.detail.show_row(None, hint=self._empty_hint(len(rows)))
            return
        self._reload_detail(rows[0])

    def _empty_hint(self, selected: int) -> str:
        if selected > 1:
            return f"{selected} selected."
        q = self.search.text().strip()
        model = self.current_model()
        if q and model.total == 0 and not model.busy:
            other = "memories" if self.evidence_mode else "Captured (evidence)"
            return (f"Nothing matches “{q}”. Try other words, fewer filters, or search {other} "
                    "with the tab above.")
        return ("Select a captured row to see what was on screen or said." if self.evidence_mode
                else "Select a memory to see what it says, when, and where it came from.")

    def _reload_detail(self, row: dict | None = None) -> None:
        if row is None:
            rows = selected_rows(self.current_table())
            if len(rows) != 1:
                return
            row = rows[0]
        gen = self._detail_gen
        match = row.get("_match") or []

        def show(r: dict | None) -> None:
            if gen == self._detail_gen:  # not one the person has already moved past
                self.detail.show_row(r, match=match)

        self.jobs.submit(load_detail, self.store, row["id"], on_done=show)

    def _select_index(self, table: QTableView, idx) -> None:
        sel = table.selectionModel()
        # NoUpdate: the view's setCurrentIndex would re-select just one cell, and selectedRows() wants whole rows
        sel.setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.NoUpdate)
        sel.select(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        table.scrollTo(idx)

    def select_id(self, id_: str) -> bool:
        """Select the loaded row with this id (for the tray and tests); False if not loaded."""
        return self.select_ids([id_])

    def select_ids(self, ids: list[str], scroll_to: bool = True) -> bool:
        """Select the loaded rows with these ids in the list on show; False if none is loaded."""
        model, table = self.current_model(), self.current_table()
        proxy = proxy_of(table)
        idxs = [proxy.mapFromSource(model.index(i, 0)) for i in (model.index_of(x) for x in ids) if i >= 0]
        sel = table.selectionModel()
        if not idxs:
            sel.clearSelection()
            return False
        sel.setCurrentIndex(idxs[0], QItemSelectionModel.SelectionFlag.NoUpdate)
        sel.select(idxs[0], QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        for idx in idxs[1:]:
            sel.select(idx, QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows)
        if scroll_to:
            table.scrollTo(idxs[0])
        return True

    # ---- edit and delete ----------------------------------------------------------------------

    def edit_selected(self) -> EditDialog | None:
        """Open the edit form for the one selected memory (non-blocking)."""
        rows = selected_rows(self.table)
        if len(rows) != 1 or self.evidence_mode:
            return None
        if rows[0].get("type") == "vault":
            self.statusBar().showMessage("Vault entries are changed from the command line: mirador edit", 8000)
            return None
        dlg = EditDialog(rows[0], self, scopes=getattr(self, "scopes", None))
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
            self.statusBar().showMessage("Nothing changed", 4000)
            return
        self.statusBar().showMessage("Saving…")
        self.jobs.submit(lambda: self.store.update_memory(id_, actor="person", **changes), on_done=self._saved)

    def _saved(self, row: dict) -> None:
        self.model.replace_row(row)
        self.statusBar().showMessage("Saved", 4000)
        self._selection_changed()
        self.changed.emit()

    def confirm_delete(self, rows: list[dict]) -> bool:
        """Ask before erasing memories (modal question; tests patch QMessageBox.question)."""
        one = len(rows) == 1
        what = f"“{_clip(rows[0].get('title') or rows[0].get('text') or '', 60)}”" if one else f"{len(rows)} memories"
        pron = "it" if one else "them"
        answer = QMessageBox.question(
            self, "Delete for good?",
            f"Erase {what}? {'It is' if one else 'They are'} removed everywhere Mirador keeps {pron}, old versions "
            f"and search indexes included; only a fingerprint stays, so Mirador never learns {pron} again. "
            "This cannot be undone.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel)
        return answer == QMessageBox.StandardButton.Yes

    def delete_selected(self) -> None:
        """Erase the selected rows after confirmation (memory.store.erasure, in a worker). Captured rows go
        with the memories derived only from them, as an evidence delete by app or time does; the question
        states what will be erased, with counts, before anything goes."""
        table, model = self.current_table(), self.current_model()
        rows = selected_rows(table)
        if rows and self.evidence_mode:
            from memory.store.erasure import plan_forget_evidence

            ids = [r["id"] for r in rows]
            self.statusBar().showMessage("Working out what goes with it…")
            self.jobs.submit(plan_forget_evidence, self.store, ids,
                             on_done=lambda plan: self._delete_evidence(model, ids, plan))
            return
        if not rows or not self.confirm_delete(rows):
            return
        from memory.store.erasure import forget_present

        ids = [r["id"] for r in rows]
        self.statusBar().showMessage(f"Erasing {len(ids)}…")
        # rows forgotten elsewhere meanwhile are no error: the person wanted them gone (issue 30)
        self.jobs.submit(forget_present, self.store, ids, on_done=lambda res: self._deleted(model, ids, res))

    def _delete_evidence(self, model, ids: list[str], plan) -> None:
        self.statusBar().clearMessage()
        answer = QMessageBox.question(
            self, "Delete for good?", f"{plan.describe()} This cannot be undone.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel)
        if answer != QMessageBox.StandardButton.Yes:
            return
        from memory.store.erasure import forget_where

        self.statusBar().showMessage(f"Erasing {len(ids)}…")
        self.jobs.submit(lambda: forget_where(self.store, plan=plan), on_done=lambda res: self._deleted(model, ids, res))

    def _deleted(self, model, ids: list[str], result: dict) -> None:
        # Clear first: removed one by one, a multi-selection passes through "one row selected" and the
        # detail pane would load a row that is gone ("no row with id …", issue 30).
        self.current_table().selectionModel().clearSelection()
        model.remove_ids(ids)
        self._count(model)
        self._selection_changed()
        gone = len(result.get("already_gone") or [])
        self.statusBar().showMessage(f"Erased {erased_words(result)}"
                                     + (f"; {gone} had already been erased elsewhere" if gone else ""), 6000)
        self.changed.emit()

    def show_error(self, message: str) -> None:
        """Show a background job's failure in the status bar."""
        self.statusBar().showMessage(message, 10_000)


def erased_words(result: dict) -> str:
    """What an erasure removed, in words: "2 memories and 1 secret", "3 captured rows and 1 memory"."""
    words = {"evidence": ("captured row", "captured rows"), "memory": ("memory", "memories"),
             "vault": ("secret", "secrets")}
    by_kind = result.get("by_kind") or {}
    parts = [f"{n} {words[k][n != 1]}" for k in ("evidence", "memory", "vault") if (n := by_kind.get(k, 0))]
    if not parts:
        n = result.get("deleted", 0)
        return f"{n} {'item' if n == 1 else 'items'}"
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _clip(text: str, n: int) -> str:
    """At most n characters, cut at a word boundary with "…" (never mid-word)."""
    text = " ".join(str(text).split())
    if len(text) <= n:
        return text
    cut = text[:n].rsplit(" ", 1)[0]
    return (cut or text[:n]) + "…"
