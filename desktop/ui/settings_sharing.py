"""Settings → Sharing: the scopes bound to a shared store (docs/sharing.md), where they are kept, whether the
store answers and how many changes wait to be sent. Network work runs in workers; bindings are added and
removed with `mirador remote` (credentials go to the OS keyring, which a settings form should not handle)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.workers import Jobs

NOTHING_SHARED = ("Nothing is shared: every memory stays on this computer. To share a scope with your other "
                  "devices or your team, bind it to a shared store with <code>mirador remote add</code> "
                  "(see docs/sharing.md); it then appears here.")
COLUMNS = ("Shared scope", "Stored at", "Status", "Waiting to send")


def status_text(h: dict[str, Any]) -> str:
    """A binding's health as a person reads it."""
    if h["online"]:
        return "Online"
    if h["last_error"]:
        return "Offline — " + h["last_error"][:120]
    return "Not checked yet"


def intro_text(health: list[dict[str, Any]]) -> str:
    """What the bindings keep in their shared stores, and what stays on this computer."""
    with_evidence = [h["scope"] for h in health if h.get("evidence")]
    text = "Memories of these scopes (and the scopes below them) are kept in a shared store. "
    if with_evidence:
        return text + (f"So is the captured text (screen text, transcripts, notes) of {', '.join(with_evidence)}. "
                       "Screenshots, audio, the vault and every other scope stay on this computer.")
    return text + "Screens, transcripts, the vault and every other scope stay on this computer."


def offline_scopes(health: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The bindings that did not answer the last time they were asked."""
    return [h for h in health if h["last_error"]]


class SharingPanel(QWidget):
    """Bindings and their health; "Check now" asks every store, "Send now" drains the outbox."""

    def __init__(self, jobs: Jobs, store, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.store = jobs, store
        self.intro = QLabel(wordWrap=True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.message = QLabel(wordWrap=True)
        self.check_button, self.send_button = QPushButton("Check now"), QPushButton("Send waiting changes now")
        self.check_button.setToolTip("Ask every shared store whether it answers")
        self.send_button.setToolTip("Send the changes waiting on this computer to the shared stores that answer")
        self.check_button.clicked.connect(lambda: self.refresh(force=True))
        self.send_button.clicked.connect(self.send)
        buttons = QHBoxLayout()
        buttons.addWidget(self.check_button)
        buttons.addWidget(self.send_button)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.intro)
        lay.addWidget(self.table)
        lay.addLayout(buttons)
        lay.addWidget(self.message)
        self.refresh()

    def refresh(self, force: bool = False) -> None:
        """Re-read the bindings' health (in a worker; a store that answered recently is not asked again)."""
        remotes = self.store.remotes
        self.jobs.submit(lambda: remotes.check(max_age=0 if force else 30), on_done=self.show_health,
                         on_error=self.message.setText)

    def send(self) -> None:
        remotes = self.store.remotes

        def done(report: dict[str, Any]) -> None:
            if report["errors"]:
                names = ", ".join(report["errors"])
                self.message.setText(f"Sent {report['sent']}; {report['pending']} still waiting — {names} did not "
                                     "answer. They are sent when the store is back.")
            else:
                self.message.setText(f"Sent {report['sent']}; nothing waiting.")
            self.show_health(remotes.health())

        self.jobs.submit(remotes.flush, on_done=done, on_error=self.message.setText)

    def show_health(self, health: list[dict[str, Any]]) -> None:
        shared = bool(health)
        self.intro.setText(intro_text(health) if shared else NOTHING_SHARED)
        self.table.setVisible(shared)
        self.check_button.setEnabled(shared)
        self.send_button.setEnabled(shared)
        self.table.setRowCount(len(health))
        for row, h in enumerate(health):
            where = h["url"] + (f" ({h['endpoint']})" if h["endpoint"] else "")
            for col, text in enumerate((h["scope"], where, status_text(h), str(h["pending"]))):
                self.table.setItem(row, col, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
