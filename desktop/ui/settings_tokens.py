"""MCP client tokens in Settings: list, create (shown once), revoke — file work runs in workers."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.workers import Jobs


def _tokens(home: Path):
    from memory.mcp.auth import TokenStore

    return TokenStore(home)


class TokensPanel(QWidget):
    """Per-client MCP tokens; a new token is shown once, in a selectable field, never stored."""

    def __init__(self, jobs: Jobs, home: Path, parent=None) -> None:
        super().__init__(parent)
        self.jobs, self.home = jobs, Path(home)
        self.list = QListWidget()
        self.name = QLineEdit(placeholderText="client name, e.g. claude-code")
        self.read = QLineEdit(placeholderText="scopes it may read, e.g. work, personal")
        self.write = QLineEdit(placeholderText="scope it writes to (empty = read only)")
        self.vault = QCheckBox("May reveal vault secrets")
        self.new_token = QLineEdit(readOnly=True, placeholderText="a new token appears here once")
        self.message = QLabel(wordWrap=True)
        add, revoke = QPushButton("Create token"), QPushButton("Revoke selected")
        add.clicked.connect(self.create_token)
        revoke.clicked.connect(self.revoke)
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("Read", self.read)
        form.addRow("Write", self.write)
        form.addRow("", self.vault)
        row = QHBoxLayout()
        row.addWidget(add)
        row.addWidget(revoke)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Clients allowed to use the MCP endpoint:"))
        lay.addWidget(self.list)
        lay.addLayout(form)
        lay.addLayout(row)
        lay.addWidget(self.new_token)
        lay.addWidget(self.message)
        self.refresh()

    def refresh(self) -> None:
        """Reload the token list (in a worker)."""
        self.jobs.submit(lambda: [r.public() for r in _tokens(self.home).list()], on_done=self._show,
                         on_error=self.message.setText)

    def _show(self, records: list[dict]) -> None:
        self.list.clear()
        for r in records:
            grants = f"read {', '.join(r['read']) or '—'}; write {r['write'] or '—'}" + ("; vault" if r["allow_vault"] else "")
            self.list.addItem(f"{r['name']} — {grants} (since {r['created_at']})")

    def create_token(self) -> None:  # not create(): that is QWidget.create, which this would hide
        """Create a token with the form's grants and show it once."""
        from desktop.ui.browser_data import normalise_scope
        from memory.errors import InputError

        try:  # scopes as a person types them ("Work, Personal") in their stored form
            read = [normalise_scope(s) for s in self.read.text().split(",") if s.strip()]
            write = normalise_scope(self.write.text()) if self.write.text().strip() else None
        except InputError as e:
            self.message.setText(f"Not created — {e}")
            return
        self.read.setText(", ".join(read))
        self.write.setText(write or "")
        name, vault = self.name.text().strip(), self.vault.isChecked()

        def done(result):
            self.new_token.setText(result[0])
            self.message.setText(f"Token for {name}: copy it now — it is not shown again.")
            self.refresh()

        self.jobs.submit(lambda: _tokens(self.home).add(name, read, write, vault), on_done=done,
                         on_error=self.message.setText)

    def revoke(self) -> None:
        """Revoke the selected client's token after confirmation."""
        item = self.list.currentItem()
        if not item:
            return
        name = item.text().split(" — ")[0]
        if QMessageBox.question(self, "Revoke token?", f"Revoke {name}'s token? Its next request is refused.") \
                != QMessageBox.StandardButton.Yes:
            return
        self.jobs.submit(lambda: _tokens(self.home).revoke(name), on_done=lambda _r: self.refresh(),
                         on_error=self.message.setText)


