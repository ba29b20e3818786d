"""The review queue: candidates from extraction and proposals from dream, with their evidence.

Approve makes a candidate active, reject makes it rejected (it never comes back to the queue,
and extraction skips rejected fingerprints), edit-then-approve saves the person's edit first.
Every action works on the whole selection; afterwards the next candidate is selected. The window
follows the store (`refresh()`, called by desktop/ui/store_watch.py LiveViews): a candidate approved in
the CLI or over MCP leaves the list within seconds, the selection and scroll position stay. Its counts
are the tray's (candidates plus open dream proposals: browser_data.pending_count).
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from PySide6.QtCore import QItemSelectionModel, Qt, Signal
from PySide6.QtGui import QGuiApplication, QKeySequence
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.browser import make_table, selected_rows
from desktop.ui.browser_data import MemoryFilter, known_scopes, memory_keys
from desktop.ui.browser_detail import DetailView, load_detail
from desktop.ui.browser_edit import EditDialog
from desktop.ui.icons import icon
from desktop.ui.qt_models import Column, MemoryTableModel, confidence_column, local_time, type_column
from desktop.ui.qt_typed import proxy_of, shortcut
from desktop.ui.review_proposals import ProposalsPanel
from desktop.ui.store_watch import restore_selection
from desktop.ui.workers import Jobs

if TYPE_CHECKING:
    from memory.store.core import Store

ORIGIN_LABEL = {"extractor": "Your captures", "extraction": "Your captures", "dream": "Nightly tidy-up",
                "person": "You", "mcp": "An assistant"}
ORIGIN_TIP = ("Where the proposal came from: read out of what you saw and heard (your captures), the nightly "
              "tidy-up that merges and updates memories, you, or an assistant connected to Mirador")


class ReviewTableModel(MemoryTableModel):
    """Candidates: what, type, where it came from, confidence, scope, when."""

    COL_TITLE, COL_TYPE, COL_ORIGIN, COL_CONFIDENCE, COL_SCOPE, COL_CREATED = range(6)
    COLUMNS = [
        Column("Proposed memory", "title", lambda v: " ".join(str(v or "").split())[:200]),
        type_column(90),
        Column("From", "origin", lambda v: ORIGIN_LABEL.get(str(v), str(v or "")), width=105, header_tip=ORIGIN_TIP,
               by_shown=True),
        confidence_column(85),
        Column("Scope", "scope", width=100),
        Column("Proposed", "created_at", local_time, width=130),
    ]


def _set_statuses(store: Store, ids: list[str], status: str) -> list[dict]:
    return [store.set_status(i, status, actor="person") for i in ids]


def _edit_and_approve(store: Store, id_: str, changes: dict) -> list[dict]:
    if changes:
        store.update_memory(id_, actor="person", **changes)
    return [store.set_status(id_, "active", actor="person")]


class ReviewQueue(QMainWindow):
    """Approve, reject or edit-then-approve candidate memories, one or many at a time."""

    changed = Signal()

    def __init__(self, jobs: Jobs, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.setWindowTitle("Mirador — Review")
        self.setWindowIcon(icon("capturing"))
        self.resize(1100, 650)
        self.model = ReviewTableModel(jobs, store, parent=self)
        self.table = make_table(self.model, self)
        self.detail = DetailView(self)
        self.approve_btn = QPushButton("Approve")
        self.reject_btn = QPushButton("Reject")
        self.edit_btn = QPushButton("Edit and approve…")
        self.approve_btn.clicked.connect(lambda: self.decide("active"))
        self.reject_btn.clicked.connect(lambda: self.decide("rejected"))
        self.edit_btn.clicked.connect(self.edit_and_approve)
        self.header = QLabel()
        buttons = QHBoxLayout()
        buttons.addWidget(self.header, 1)
        for b in (self.edit_btn, self.reject_btn, self.approve_btn):
            buttons.addWidget(b)
        split = QSplitter()
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setSizes([620, 480])
        candidates = QWidget()
        lay = QVBoxLayout(candidates)
        lay.addWidget(split)
        lay.addLayout(buttons)
        self.proposals = ProposalsPanel(jobs, store, self)
        self.proposals.changed.connect(self.changed)
        self.tabs = QTabWidget()
        self.tabs.addTab(candidates, "Candidates")
        self.tabs.addTab(self.proposals, "Tidy-up proposals")
        self.tabs.setTabToolTip(1, "What the nightly tidy-up (the dream pass) found: duplicates to merge, newer "
                                   "versions, stale candidates to archive — nothing changes until you accept")
        self.proposals.counted.connect(self._proposals_counted)
        self.setCentralWidget(self.tabs)
        shortcut(QKeySequence("A"), self.table, lambda: self.decide("active"), Qt.ShortcutContext.WidgetShortcut)
        shortcut(QKeySequence("R"), self.table, lambda: self.decide("rejected"), Qt.ShortcutContext.WidgetShortcut)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self.model.reloaded.connect(self._counted)
        self.model.refreshed.connect(self._refreshed)
        jobs.error.connect(self.show_error)  # a bound slot: disconnected when this window is deleted
        self._detail_gen = 0
        self._proposal_count = 0
        self._restore: tuple[list[str], int] | None = None  # a refresh's selected ids and scroll value
        self._centred = False
        self.scopes: list[str] = []  # the scopes in use, offered by the edit form (as in the browser)
        self._selection_changed()
        self.reload()

    def _load_scopes(self) -> None:
        self.jobs.submit(known_scopes, self.store, on_done=lambda scopes: setattr(self, "scopes", scopes))

    def showEvent(self, event) -> None:  # noqa: N802 - Qt name
        """The first time it opens: in the middle of the screen, not wherever the tray icon is."""
        if not self._centred:
            self._centred = True
            centre_on_screen(self)
        super().showEvent(event)

    def reload(self) -> None:
        """Load every candidate, newest first."""
        self._load_scopes()
        self.model.reload(self._keys_fn())

    def _keys_fn(self):
        return partial(memory_keys, self.store, MemoryFilter(statuses=["candidate"]))

    @property
    def refresh_busy(self) -> bool:
        """A load or refresh of the candidates is still running."""
        return self.model.busy or self.proposals.busy

    def refresh(self) -> None:
        """Re-read the candidates and proposals (the store changed), keeping the selection and the scroll
        position; candidates decided elsewhere drop out."""
        self._restore = ([r["id"] for r in selected_rows(self.table)], self.table.verticalScrollBar().value())
        self.model.refresh(self._keys_fn(), keep=self._restore[0])
        self.proposals.refresh()
        self._load_scopes()

    def _refreshed(self, reset: bool) -> None:
        keep, self._restore = self._restore, None
        if reset and keep is not None:
            restore_selection(self.model, self.table, *keep)
            self._selection_changed()
        self._counted(self.model.total)

    def _selection_changed(self) -> None:
        rows = selected_rows(self.table)
        n = len(rows)
        self.approve_btn.setEnabled(n > 0)
        self.reject_btn.setEnabled(n > 0)
        self.edit_btn.setEnabled(n == 1)
        self.approve_btn.setText(f"Approve {n}" if n > 1 else "Approve")
        self.reject_btn.setText(f"Reject {n}" if n > 1 else "Reject")
        self._detail_gen += 1
        if n != 1:
            self.detail.show_row(None)
            return
        gen = self._detail_gen

        def show(row: dict | None) -> None:
            if gen == self._detail_gen:  # not one the person has already moved past
                self.detail.show_row(row)

        self.jobs.submit(load_detail, self.store, rows[0]["id"], on_done=show)

    def decide(self, status: str) -> None:
        """Approve (status active) or reject every selected candidate, in a worker."""
        ids = [r["id"] for r in selected_rows(self.table)]
        if ids:
            self.jobs.submit(_set_statuses, self.store, ids, status, on_done=lambda rows: self._decided(rows, status))

    def edit_and_approve(self) -> EditDialog | None:
        """Open the edit form; saving it stores the edit and approves."""
        rows = selected_rows(self.table)
        if len(rows) != 1:
            return None
        dlg = EditDialog(rows[0], self, approve=True, scopes=self.scopes)
        dlg.accepted.connect(lambda: self.jobs.submit(_edit_and_approve, self.store, rows[0]["id"], dlg.changes,
                                                      on_done=lambda r: self._decided(r, "active")))
        dlg.open()
        self.edit_dialog = dlg
        return dlg

    def _decided(self, rows: list[dict], status: str) -> None:
        # The next item takes the place of the first one decided (the person works down the list).
        done = {r["id"] for r in rows}
        proxy = proxy_of(self.table)
        positions = [proxy.mapFromSource(self.model.index(i, 0)).row() for i in range(self.model.rowCount())
                     if self.model.row_at(i)["id"] in done]
        at = min(positions) if positions else -1
        self.table.selectionModel().clearSelection()  # no passing "one selected" state while rows go one by one
        self.model.remove_ids(list(done))
        if at >= 0 and proxy.rowCount():
            idx = proxy.index(min(at, proxy.rowCount() - 1), 0)
            sel = self.table.selectionModel()
            sel.setCurrentIndex(idx, QItemSelectionModel.SelectionFlag.NoUpdate)
            sel.select(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
            self.table.scrollTo(idx)
        self._selection_changed()
        verb = "Approved" if status == "active" else "Rejected"
        what = "memory" if len(rows) == 1 else "memories"
        self.statusBar().showMessage(f"{verb} {len(rows)} {what}" + (" — now in use" if status == "active" else ""),
                                     5000)
        self._counted(self.model.total)
        self.changed.emit()

    def _counted(self, n: int) -> None:
        total = n + self._proposal_count  # what the tray's "Review (N pending)" counts
        self.header.setText(f"{total} waiting for review" if total else "Nothing to review")
        self.tabs.setTabText(0, f"Candidates ({n})")
        self.setWindowTitle(f"Mirador — Review ({total} pending)" if total else "Mirador — Review")

    def _proposals_counted(self, n: int) -> None:
        self._proposal_count = n
        self.tabs.setTabText(1, f"Tidy-up proposals ({n})")
        self._counted(self.model.total)

    @property
    def pending(self) -> int:
        """Candidates plus open proposals, as shown (the tray's pending count)."""
        return self.model.total + self._proposal_count

    def show_error(self, message: str) -> None:
        """Show a background job's failure in the status bar."""
        self.statusBar().showMessage(message, 10_000)


def centre_on_screen(win) -> None:
    """Move a top-level window to the middle of the screen it is on (the primary one before it is shown)."""
    screen = win.screen() or QGuiApplication.primaryScreen()
    if screen is None:
        return
    area = screen.availableGeometry()
    frame = win.frameGeometry()
    frame.moveCenter(area.center())
    win.move(frame.topLeft())
