"""Settings → Sharing: the scopes bound to a shared store (docs/sharing.md), where they are kept, whether the
store answers and how many changes wait to be sent. Network work runs in workers; bindings are added and
removed with `mirador remote` (credentials go to the OS keyring, which a settings form should not handle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.workers import Jobs

if TYPE_CHECKING:
    from memory.store.core import Store

NOTHING_SHARED = ("Nothing is shared: every memory stays on this computer. To share a scope with your other "
                  "devices or your team, bind it to a shared store with <code>mirador remote add</code> "
                  "(see docs/sharing.md); it then appears here.")
COLUMNS = ("Shared scope", "Stored at", "Status", "Waiting to send")


def status_text(h: dict[str, Any]) -> str:
    """A binding's health as a person reads it."""
    if h["online"]:
        return "Online"
    if h["last_error"] and h.get("settings"):  # the store answered and refused: fix the binding, not the network
        return f"{h['headline'].capitalize()} — " + h["last_error"][:200]
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


class SharingPanel(QWidget):
    """Bindings and their health; "Check now" asks every store, "Send now" drains the outbox."""

    def __init__(self, jobs: Jobs, store: Store, parent=None) -> None:
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
        self.push_button = QPushButton("Share earlier memories…")
        self.push_button.setToolTip("Send the memories made on this computer before their scope was shared")
        self.push_button.clicked.connect(self.push)
        self.push_button.setVisible(False)
        self.earlier: dict[str, int] = {}  # binding -> memories of its scope made here before it was bound
        self.health: list[dict[str, Any]] = []  # as last shown
        self.check_button.setToolTip("Ask every shared store whether it answers")
        self.send_button.setToolTip("Send the changes waiting on this computer to the shared stores that answer")
        self.check_button.clicked.connect(lambda: self.refresh(force=True))
        self.send_button.clicked.connect(self.send)
        buttons = QHBoxLayout()
        buttons.addWidget(self.check_button)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.push_button)
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

        def ask() -> list[dict[str, Any]]:
            health = remotes.check(max_age=0 if force else 30)
            self.earlier = remotes.made_before()
            return health

        self.jobs.submit(ask, on_done=self.show_health, on_error=self.message.setText)

    def earlier_text(self) -> str:
        """Memories of the shared scopes still only on this computer, as a person reads it ('' when none)."""
        scopes = {h["name"]: h["scope"] for h in self.health}
        parts = [f"{n} {'memory' if n == 1 else 'memories'} of {scopes.get(name, name)}"
                 for name, n in self.earlier.items() if n]
        if not parts:
            return ""
        one = sum(self.earlier.values()) == 1
        return (f"{' and '.join(parts)} {'was' if one else 'were'} made on this computer before the scope was shared "
                f"and {'is' if one else 'are'} kept here only.")

    def push(self) -> None:
        """Share the memories made here before their scope was bound, after the person confirms."""
        said = self.earlier_text()
        if not said:
            return
        ask = QMessageBox.question(
            self, "Share earlier memories?",
            f"{said} Share them? Everyone who shares the scope will see them, with the links between them.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Cancel)
        if ask != QMessageBox.StandardButton.Yes:
            return
        remotes, names = self.store.remotes, [n for n, c in self.earlier.items() if c]

        def run() -> int:
            return sum(remotes.push(n)["memories"] for n in names)

        def done(n: int) -> None:
            waiting = sum(remotes.pending().values())
            self.message.setText(f"Shared {n} earlier {'memory' if n == 1 else 'memories'}"
                                 + (f"; {waiting} wait until the store answers." if waiting else "."))
            self.refresh()

        self.jobs.submit(run, on_done=done, on_error=self.message.setText)

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
        self.health = health
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
        earlier = self.earlier_text() if shared else ""
        self.push_button.setVisible(bool(earlier))
        if earlier:
            self.message.setText(earlier + " Share earlier memories… sends them, after asking.")
