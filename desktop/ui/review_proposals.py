"""Dream proposals in the review window: merge, supersede or archive a memory — the person decides.

Proposals hold ids and a reason only (memory/consolidation/dream.py); the titles shown are read with them.
They are few, so the model loads them all at once (in a worker) instead of paging.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QAbstractTableModel, QItemSelectionModel, QModelIndex, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QSplitter, QVBoxLayout, QWidget

from desktop.ui.browser import make_table, selected_rows
from desktop.ui.browser_data import fetch_rows
from desktop.ui.browser_detail import DetailView, load_detail
from desktop.ui.qt_models import ROW_ROLE, Column, local_time
from desktop.ui.qt_typed import proxy_of
from desktop.ui.workers import Jobs

if TYPE_CHECKING:
    from memory.store.core import Store

KIND_LABEL = {"merge": "Merge duplicate", "supersede": "Newer version", "archive": "Archive stale candidate",
              "conflict": "Edited at the same time"}  # a shared memory two people edited at once


def load_proposals(store: Store) -> list[dict]:
    """Open dream proposals, newest first, each with its target's and other's titles (worker)."""
    from memory.consolidation.dream import list_proposals
    from memory.store.rows import iso

    props = list_proposals(store)
    ids = [i for p in props for i in (p["target_id"], p["other_id"]) if i]
    titles = {r["id"]: r["title"] for r in fetch_rows(store, "memory", list(dict.fromkeys(ids)))}
    out = []
    for p in props:
        if p["target_id"] not in titles:  # the target was deleted since: nothing left to decide
            continue
        out.append({**p, "created_at": iso(p["created_at"]), "target_title": titles[p["target_id"]],
                    "other_title": titles.get(p["other_id"] or "", "")})
    return out


def review_pending(store: Store) -> int:
    """What waits in Review, counted as the Review window counts it (the tray shows this number): candidate
    memories plus open proposals whose memory still exists (one erased since has nothing left to decide)."""
    from memory.store import filters as F
    from memory.store import tables as T

    n = store.count("memory", F.equals("status", "candidate"))  # a shared scope's candidates too
    if not store.has_table(T.PROPOSALS):  # the table arrives with the dream migration
        return n
    from memory.consolidation.dream import list_proposals

    props = list_proposals(store)
    targets = list(dict.fromkeys(p["target_id"] for p in props))
    alive = {r["id"] for r in fetch_rows(store, "memory", targets)} if targets else set()
    return n + sum(1 for p in props if p["target_id"] in alive)


def decide(store: Store, ids: list[str], accept: bool) -> list[str]:
    """Accept or dismiss proposals as the person (worker)."""
    from memory.consolidation.dream import decide_proposal

    for i in ids:
        decide_proposal(store, i, accept, actor="person")
    return ids


class ProposalModel(QAbstractTableModel):
    """Open proposals: what, about which memory, in favour of which, why, when."""

    COLUMNS = [
        Column("Proposal", "kind", lambda v: KIND_LABEL.get(v, v), width=120),
        Column("Memory", "target_title"),
        Column("In favour of", "other_title", width=170),
        Column("Why", "reason", width=150),
        Column("Proposed", "created_at", local_time, width=120),
    ]

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[dict] = []

    def set_rows(self, rows: list[dict]) -> None:
        """Replace every row (bulk reload)."""
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()

    def remove_ids(self, ids) -> None:
        """Drop decided proposals."""
        self.set_rows([r for r in self.rows if r["id"] not in set(ids)])

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return len(self.COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.COLUMNS[section].header
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, col = self.rows[index.row()], self.COLUMNS[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.fmt(row.get(col.key))
        if role == ROW_ROLE:
            return row
        return None


class ProposalsPanel(QWidget):
    """Accept or dismiss dream proposals; the detail pane shows the memory they would hide."""

    changed = Signal()
    counted = Signal(int)

    def __init__(self, jobs: Jobs, store: Store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.model = ProposalModel(self)
        self.table = make_table(self.model, self, stretch=1)
        self.detail = DetailView(self)
        self.accept_btn = QPushButton("Accept")
        self.dismiss_btn = QPushButton("Dismiss")
        self.accept_btn.clicked.connect(lambda: self.decide(True))
        self.dismiss_btn.clicked.connect(lambda: self.decide(False))
        self.header = QLabel()
        buttons = QHBoxLayout()
        buttons.addWidget(self.header, 1)
        buttons.addWidget(self.dismiss_btn)
        buttons.addWidget(self.accept_btn)
        split = QSplitter()
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setSizes([760, 440])
        lay = QVBoxLayout(self)
        lay.addWidget(split)
        lay.addLayout(buttons)
        self.table.selectionModel().selectionChanged.connect(lambda *_: self._selection_changed())
        self._gen = 0
        self._selection_changed()
        self.reload()

    def reload(self) -> None:
        """Load open proposals in a worker."""
        self.jobs.submit(load_proposals, self.store, on_done=self._loaded)

    def refresh(self) -> None:
        """Re-read the open proposals (the store changed), keeping the selection and the scroll position."""
        self._refreshing = True
        self.jobs.submit(load_proposals, self.store, on_done=self._refreshed,
                         on_error=lambda _m: setattr(self, "_refreshing", False))

    @property
    def busy(self) -> bool:
        """A refresh is still out."""
        return getattr(self, "_refreshing", False)

    def _refreshed(self, rows: list[dict]) -> None:
        self._refreshing = False
        if rows == self.model.rows:
            return
        keep = {r["id"] for r in selected_rows(self.table)}
        scroll = self.table.verticalScrollBar().value()
        self.model.set_rows(rows)
        sel = self.table.selectionModel()
        for i, r in enumerate(rows):
            if r["id"] in keep:
                sel.select(proxy_of(self.table).mapFromSource(self.model.index(i, 0)),
                           QItemSelectionModel.SelectionFlag.Select
                           | QItemSelectionModel.SelectionFlag.Rows)
        self.table.verticalScrollBar().setValue(scroll)
        self._selection_changed()
        self._count()

    def _loaded(self, rows: list[dict]) -> None:
        self.model.set_rows(rows)
        self._count()

    def _count(self) -> None:
        n = self.model.rowCount()
        self.header.setText(f"{n} {'proposal' if n == 1 else 'proposals'} from the nightly tidy-up" if n
                            else "No open proposals")
        self.counted.emit(n)

    def _selection_changed(self) -> None:
        rows = selected_rows(self.table)
        self.accept_btn.setEnabled(bool(rows))
        self.dismiss_btn.setEnabled(bool(rows))
        self._gen += 1
        if len(rows) != 1:
            self.detail.show_row(None)
            return
        gen = self._gen

        def show(row: dict | None) -> None:
            if gen == self._gen:  # not one the person has already moved past
                self.detail.show_row(row)

        self.jobs.submit(load_detail, self.store, rows[0]["target_id"], on_done=show)

    def decide(self, accept: bool) -> None:
        """Accept (the memory is superseded, or rejected for archive) or dismiss the selected proposals."""
        ids = [r["id"] for r in selected_rows(self.table)]
        if ids:
            self.jobs.submit(decide, self.store, ids, accept, on_done=self._decided)

    def _decided(self, ids: list[str]) -> None:
        self.model.remove_ids(ids)
        self._count()
        self.changed.emit()
