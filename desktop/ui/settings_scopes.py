"""Settings → Scopes: the ordered rules that decide where captured rows (and their memories) go.

The page stands in for the `capture.scope_rules` field of the generated form (settings_dialog.py):
it has the same small interface (key, widget, get, set_error), so the dialog validates and saves
the rules with everything else and the running capture takes them when the settings are saved.
A person picks an app from the windows open now (or types one), types a title as plain text with
`*` for "anything", and picks or types a scope; the first matching rule wins (capture/scope_rules.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from capture.scope_rules import ScopeRules, running_apps
from desktop.ui.qt_typed import line_edit
from memory.config import Config, ScopeRule

if TYPE_CHECKING:
    from desktop.ui.workers import Jobs
    from memory.store.core import Store

COLUMNS = ("App", "Window title contains", "Path or web address", "Scope")
FIELDS = ("app", "title", "path_or_url", "scope")


class ScopeRulesPage(QWidget):
    """Edit capture.scope_rules: a table in rule order, a form below it, add/replace/remove/move."""

    key = "capture.scope_rules"

    def __init__(self, config: Config, apps: list[str] | None = None, parent=None) -> None:
        super().__init__(parent)
        self.widget = self
        self.setObjectName(self.key)
        default = config.capture.scope or config.store.default_scope
        intro = QLabel(
            "Where captured screen text and speech go, and the memories drawn from them. Rules are tried "
            f"from the top; the first that matches decides. Nothing matches: <b>{default}</b> (the capture "
            "scope, else the store's default scope). Title and address are plain text found anywhere in "
            "them; <b>*</b> stands for anything, e.g. <tt>#acme-*</tt>. Saved rules apply to what is "
            "captured from then on; <tt>mirador evidence rescope --by-rules</tt> applies them to past captures.")
        intro.setWordWrap(True)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("scope_rules_table")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.verticalHeader().setVisible(True)  # the row numbers are the order
        self.table.itemSelectionChanged.connect(self._load_selected)

        self.app = QComboBox()
        self.app.setObjectName("scope_rule_app")
        self.app.setEditable(True)
        names = apps if apps is not None else running_apps()
        names = sorted({*names, *(r.app for r in config.capture.scope_rules if r.app)}, key=str.lower)
        self.app.addItems(["", *names])
        line_edit(self.app).setPlaceholderText("any app — pick one open now or type its name")
        self.title = QLineEdit()
        self.title.setObjectName("scope_rule_title")
        self.title.setPlaceholderText("any title — e.g. #acme-*  or  ~/src/ledger")
        self.path = QLineEdit()
        self.path.setObjectName("scope_rule_path")
        self.path.setPlaceholderText("any — e.g. mybank.com  (shown in the title or the address bar)")
        self.scope = QComboBox()
        self.scope.setObjectName("scope_rule_scope")
        self.scope.setEditable(True)
        known = {config.store.default_scope, "work", "personal", *(r.scope for r in config.capture.scope_rules)}
        known |= set(config.hooks.allowed_scopes) | ({config.capture.scope} if config.capture.scope else set())
        self.scope.addItems(sorted(known))
        self.scope.setCurrentText("")
        line_edit(self.scope).setPlaceholderText("e.g. work/acme")
        form = QFormLayout()
        form.addRow("App", self.app)
        form.addRow("Window title contains", self.title)
        form.addRow("Path or web address", self.path)
        form.addRow("Goes to scope", self.scope)

        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        for name, label, slot in (("add", "Add rule", self.add), ("replace", "Replace selected", self.replace),
                                  ("remove", "Remove", self.remove), ("up", "Move up", lambda: self.move_rule(-1)),
                                  ("down", "Move down", lambda: self.move_rule(1))):
            b = QPushButton(label)
            b.setObjectName(f"scope_rule_{name}")
            b.clicked.connect(slot)
            self.buttons[name] = b
            row.addWidget(b)
        row.addStretch(1)
        past = QPushButton("Apply rules to past captures…")
        past.setObjectName("scope_rule_past")
        past.setToolTip("Move rows captured before, and the memories drawn only from them, to where the rules "
                        "listed here send them (you confirm first)")
        past.setEnabled(False)  # until attach(): it needs the app's store and workers
        past.clicked.connect(self.apply_to_past)
        self.buttons["past"] = past
        row.addWidget(past)
        self.jobs: Jobs | None = None
        self.store: Store | None = None
        self.status = QLabel()
        self.status.setObjectName("scope_rule_status")
        self.status.setWordWrap(True)
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #b3261e")

        lay = QVBoxLayout(self)
        lay.addWidget(intro)
        lay.addWidget(self.table, 1)
        lay.addLayout(form)
        lay.addLayout(row)
        lay.addWidget(self.message)
        lay.addWidget(self.status)
        for r in config.capture.scope_rules:
            self._append(r)
        self._update_buttons()

    # ---- the _Field interface the dialog uses ---------------------------------------------------------

    def get(self) -> list[dict]:
        """The rules in order, as config.toml holds them."""
        out = []
        for i in range(self.table.rowCount()):
            cells = [self.table.item(i, c) for c in range(len(FIELDS))]
            rule = {f: (cell.text() if cell else "") for f, cell in zip(FIELDS, cells, strict=True)}
            out.append({k: v for k, v in rule.items() if v or k == "scope"})
        return out

    def set_error(self, on: bool) -> None:
        """Outline the table red while the dialog refuses the rules."""
        self.table.setStyleSheet("border: 1px solid #b3261e;" if on else "")

    # ---- editing ----------------------------------------------------------------------------------

    def rules(self) -> ScopeRules:
        """The rules as the capture matcher sees them (for a preview or a test)."""
        return ScopeRules([ScopeRule(**r) for r in self.get()])

    def _from_form(self) -> ScopeRule | None:
        try:
            rule = ScopeRule(app=self.app.currentText(), title=self.title.text(), path_or_url=self.path.text(),
                             scope=self.scope.currentText())
        except ValidationError as e:
            self.message.setText("Not added — " + "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or 'rule'}: {err['msg'].removeprefix('Value error, ')}"
                for err in e.errors()))
            return None
        self.message.clear()
        return rule

    def _append(self, rule: ScopeRule, at: int | None = None) -> None:
        i = self.table.rowCount() if at is None else at
        self.table.insertRow(i)
        self._fill(i, rule)

    def _fill(self, i: int, rule: ScopeRule) -> None:
        for c, f in enumerate(FIELDS):
            self.table.setItem(i, c, QTableWidgetItem(getattr(rule, f)))

    def _selected(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def add(self) -> bool:
        """Append the form as a new rule (last: more precise rules belong above broader ones)."""
        rule = self._from_form()
        if rule is None:
            return False
        self._append(rule)
        self.table.selectRow(self.table.rowCount() - 1)
        return True

    def replace(self) -> bool:
        """Overwrite the selected rule with the form."""
        i = self._selected()
        if i is None:
            return False
        rule = self._from_form()
        if rule is None:
            return False
        self._fill(i, rule)
        return True

    def remove(self) -> None:
        """Delete the selected rule."""
        i = self._selected()
        if i is not None:
            self.table.removeRow(i)
        self._update_buttons()

    def move_rule(self, step: int) -> None:  # not move(): that is QWidget.move, which this would hide
        """Move the selected rule up (-1) or down (+1): order decides which rule wins."""
        i = self._selected()
        if i is None or not 0 <= i + step < self.table.rowCount():
            return
        rows = self.get()
        rows[i], rows[i + step] = rows[i + step], rows[i]
        for r, rule in enumerate(rows):
            self._fill(r, ScopeRule(**rule))
        self.table.selectRow(i + step)

    def _load_selected(self) -> None:
        i = self._selected()
        if i is not None:
            rule = self.get()[i]
            self.app.setCurrentText(rule.get("app", ""))
            self.title.setText(rule.get("title", ""))
            self.path.setText(rule.get("path_or_url", ""))
            self.scope.setCurrentText(rule["scope"])
        self._update_buttons()

    # ---- past captures ----------------------------------------------------------------------------

    def attach(self, jobs: Jobs, store: Store) -> None:
        """Give the page the app's workers and store: enables "Apply rules to past captures"."""
        self.jobs, self.store = jobs, store
        self.buttons["past"].setEnabled(True)

    def apply_to_past(self) -> None:
        """Work out (in a worker) what the rules listed here would move, ask, then move it (in a worker)."""
        store = self.store
        if self.jobs is None or store is None:  # until attach()
            return
        rules = self.rules()
        if not rules.rules:
            self.status.setText("There are no rules to apply: add one first.")
            return
        self.status.setText("Looking at past captures…")
        self.buttons["past"].setEnabled(False)

        def plan():
            from capture.scope_rules import plan_by_rules
            from memory.store.rescope import select_evidence

            return plan_by_rules(store, rules, select_evidence(store, keep=lambda r: True))

        self.jobs.submit(plan, on_done=self._confirm_past, on_error=self._past_failed)

    def _confirm_past(self, plans: list) -> None:
        if not plans:
            self.status.setText("Nothing to move: past captures already sit where these rules send them.")
            self.buttons["past"].setEnabled(True)
            return
        text = "\n\n".join(p.describe() for p in plans)
        ask = QMessageBox.question(self, "Move past captures?",
                                   f"{text}\n\nRows no rule matches stay where they are. Memories you wrote and "
                                   "vault entries are not touched.")
        if ask != QMessageBox.StandardButton.Yes:
            self.status.setText("Nothing was moved.")
            self.buttons["past"].setEnabled(True)
            return
        self.status.setText("Moving…")
        from memory.store.rescope import rescope

        store, jobs = self.store, self.jobs
        if jobs is None or store is None:  # attach() came first: apply_to_past needs them
            return
        jobs.submit(lambda: [rescope(store, p) for p in plans], on_done=self._moved, on_error=self._past_failed)

    def _moved(self, results: list[dict]) -> None:
        rows, mems, review = (sum(r[k] for r in results) for k in ("evidence", "memories", "review"))
        text = f"Moved {rows:,} captured row(s) and {mems:,} memory(ies)"
        text += f"; {review:,} memory(ies) resting on evidence of two scopes sent to review." if review else "."
        self.status.setText(text)
        self.buttons["past"].setEnabled(True)

    def _past_failed(self, message: str) -> None:
        self.message.setText(f"Past captures were not moved: {message}")
        self.status.clear()
        self.buttons["past"].setEnabled(True)

    def _update_buttons(self) -> None:
        i = self._selected()
        for name in ("replace", "remove"):
            self.buttons[name].setEnabled(i is not None)
        self.buttons["up"].setEnabled(i is not None and i > 0)
        self.buttons["down"].setEnabled(i is not None and i < self.table.rowCount() - 1)
