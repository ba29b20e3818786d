"""Edit a memory: a form with the fields of its type (an event's time and people, a procedure's steps, a
link's address, a fact's subject) instead of JSON; only changed fields go to store.update_memory.

The type-specific rules are memory/types.py's (the same pydantic models build_details validates); a
refused value is explained in words next to its field. The scope is picked from the scopes in use or
typed as a new name, and normalised ("Work / Acme" → "work/acme").
"""

from __future__ import annotations

import typing
from datetime import datetime, timezone

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from desktop.ui.browser_data import normalise_scope
from memory.types import DETAILS, MAX_MEMORY_CHARS, TEXT_FIELD, MemoryType

# Each type's own fields as a person names them; (label, placeholder).
FIELD_WORDS: dict[str, tuple[str, str]] = {
    "when": ("When", "e.g. 2026-12-03 14:05 (your local time); empty = not known"),
    "who": ("People", "names, separated by commas"),
    "where": ("Where", "a place, a room, a call"),
    "subject": ("About", "what the fact is about, e.g. ledger"),
    "steps": ("Steps", "one step per line"),
    "uri": ("Link", "https://…"),
    "path": ("File", "/path/to/file"),
    "kind": ("Kind", "e.g. doc, repo, video"),
    "block": ("Profile section", "user, persona, preferences…"),
}
MAIN_WORDS = {"episodic": "What happened", "semantic": "The fact", "procedural": "What it is for",
              "resource": "What it is", "core": "About you", "vault": "Label"}
DATE_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d", "%d %b %Y %H:%M", "%d %b %Y", "%d %B %Y %H:%M",
                "%d %B %Y", "%d.%m.%Y %H:%M", "%d.%m.%Y")
DATE_HELP = "write it like 2026-12-03 14:05 (your local time), or leave it empty"


class MemoryEdit(BaseModel):
    """What the edit form may change; a bad value names its field."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field(max_length=200)
    text: str = Field(min_length=1, max_length=MAX_MEMORY_CHARS)
    scope: str
    confidence: float = Field(ge=0, le=1)
    pinned: bool
    details: dict

    @field_validator("text")
    @classmethod
    def _text(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("empty text: write what the memory says")
        return v

    @field_validator("scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        from memory.errors import InputError

        try:
            return normalise_scope(v)
        except InputError as e:
            raise ValueError(str(e)) from None

    @field_validator("details", mode="before")
    @classmethod
    def _details(cls, v):
        from memory.errors import InputError
        from memory.types import parse_details

        if isinstance(v, dict):
            return v
        try:
            return parse_details(v if isinstance(v, str) else "null")
        except InputError as e:
            raise ValueError(str(e)) from None


CONFIDENCE_HELP = "a percentage from 0 to 100, e.g. 80%"


def percent_text(value) -> str:
    """A 0-1 confidence as the table shows it: 0.72 → "72%", 0.7234 → "72.34%"."""
    return f"{round(float(value if value is not None else 1.0) * 100, 2):g}%"


def parse_confidence(text: str) -> float:
    """ "80%", "80" or "0.8" → 0.8; ValueError for anything else or outside 0-100%."""
    t = text.strip()
    pct = t.endswith("%")
    value = float(t.rstrip("%").strip().replace(",", "."))  # ValueError for words
    if pct or value > 1:
        value /= 100
    if not 0 <= value <= 1:
        raise ValueError(f"{text!r} is outside 0-100%")
    return round(value, 4)  # as public rows give it


def explain(err: ValidationError) -> str:
    """One line per problem, each naming the field."""
    return "\n".join(f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {e['msg'].removeprefix('Value error, ')}"
                     for e in err.errors())


def parse_when(text: str) -> datetime | None:
    """A local date and time as typed → naive UTC (what the store holds); None for empty; ValueError in words."""
    text = " ".join(text.split())
    if not text:
        return None
    dt = None
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        for fmt in DATE_FORMATS:
            try:
                dt = datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
    if dt is None:
        raise ValueError(f"“{text}” is not a date and time: {DATE_HELP}")
    if dt.tzinfo is None:
        dt = dt.astimezone()  # typed in local time
    return dt.astimezone(timezone.utc).replace(tzinfo=None)


def _local_text(v) -> str:
    if not v:
        return ""
    dt = datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.astimezone().strftime("%Y-%m-%d %H:%M")


class _TypeField:
    """One field of a memory type's details, bound to a widget, with its error label beside it."""

    def __init__(self, name: str, annotation, value) -> None:
        self.name = name
        label, hint = FIELD_WORDS.get(name, (name.replace("_", " ").capitalize(), ""))
        self.label = label
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        self.is_list = origin is list
        self.is_time = annotation is datetime or datetime in args
        self.widget: QPlainTextEdit | QLineEdit | QComboBox
        if self.is_list and name == "steps":
            self.widget = QPlainTextEdit("\n".join(value or []))
            self.widget.setPlaceholderText(hint)
            self.widget.setMaximumHeight(110)
        elif self.is_list:
            self.widget = QLineEdit(", ".join(value or []))
            self.widget.setPlaceholderText(hint)
        elif name == "block":
            box = QComboBox()
            box.setEditable(True)
            box.addItems(["user", "persona", "preferences"])
            box.setCurrentText(value or "user")
            self.widget = box
        else:
            self.widget = QLineEdit(_local_text(value) if self.is_time else (value or ""))
            self.widget.setPlaceholderText(hint)
        self.widget.setObjectName(f"details.{name}")
        self.error = QLabel()
        self.error.setObjectName(f"details.{name}.error")
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b3261e")
        self.error.hide()
        self.box = QWidget()
        lay = QVBoxLayout(self.box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.widget)
        lay.addWidget(self.error)

    def raw(self) -> str:
        w = self.widget
        if isinstance(w, QPlainTextEdit):
            return w.toPlainText()
        if isinstance(w, QComboBox):
            return w.currentText()
        return w.text()

    def value(self):
        """The typed value in the form the type's model takes; ValueError (in words) for a bad date."""
        raw = self.raw()
        if self.is_list:
            parts = raw.splitlines() if self.name == "steps" else raw.split(",")
            return [p.strip() for p in parts if p.strip()]
        if self.is_time:
            return parse_when(raw)
        return raw.strip() or None

    def show_error(self, message: str | None) -> None:
        self.error.setText(message or "")
        self.error.setVisible(bool(message))
        self.widget.setStyleSheet("border: 1px solid #b3261e;" if message else "")


def _same(a, b) -> bool:
    def norm(v):
        if v in (None, "", []):
            return None
        if isinstance(v, datetime):
            return v.replace(tzinfo=None).isoformat(timespec="minutes")
        if isinstance(v, str) and len(v) >= 16 and v[4:5] == "-" and v[10:11] == "T":
            try:
                return datetime.fromisoformat(v.replace("Z", "+00:00")).replace(tzinfo=None).isoformat(timespec="minutes")
            except ValueError:
                return v
        return v

    return norm(a) == norm(b)


class EditDialog(QDialog):
    """The edit form. `changes` holds the validated changed fields once accepted."""

    def __init__(self, row: dict, parent=None, approve: bool = False, scopes: list[str] | None = None) -> None:
        super().__init__(parent)
        self.row = row
        self.changes: dict[str, typing.Any] = {}
        self.mtype = MemoryType(row["type"])
        self.setWindowTitle("Edit and approve memory" if approve else "Edit memory")
        main = TEXT_FIELD.get(self.mtype, "")
        details = row.get("details") or {}
        self.title = QLineEdit(row.get("title") or "")
        self.title.setPlaceholderText("a short name; empty = the first words of the text")
        self.text = QPlainTextEdit(row.get("text") or "")
        self.text.setMaximumHeight(120)
        self.scope = QComboBox()
        self.scope.setEditable(True)
        self.scope.setObjectName("scope")
        choices = sorted(set(scopes or []) | {row.get("scope") or ""} - {""})
        self.scope.addItems(choices)
        self.scope.setCurrentText(row.get("scope") or "")
        self.scope.setToolTip("Pick a scope in use or type a new name (work, personal, work/acme); "
                              "capitals and spaces are turned into the stored form")
        self._confidence_shown = percent_text(row.get("confidence", 1.0))
        self.confidence = QLineEdit(self._confidence_shown)
        self.confidence.setToolTip("How sure Mirador is that it is right, as the table shows it: 100% = certain. "
                                   "Type 80% (or 0.8)")
        self.pinned = QCheckBox("Pinned — automatic tidying never changes it")
        self.pinned.setChecked(bool(row.get("pinned")))
        self.type_fields: dict[str, _TypeField] = {}
        model = DETAILS[self.mtype]
        for name, info in model.model_fields.items():
            if name != main:
                self.type_fields[name] = _TypeField(name, info.annotation, details.get(name))
        self.error = QLabel()
        self.error.setStyleSheet("color: #b3261e")
        self.error.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Title", self.title)
        form.addRow(MAIN_WORDS.get(self.mtype.value, "Text"), self.text)
        for f in self.type_fields.values():
            form.addRow(f.label, f.box)
        form.addRow("Scope", self.scope)
        form.addRow("Confidence", self.confidence)
        form.addRow("", self.pinned)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        if approve:
            self.buttons.button(QDialogButtonBox.StandardButton.Save).setText("Save and approve")
        self.buttons.accepted.connect(self.try_accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addStretch(1)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)
        self.resize(600, self.sizeHint().height())  # as tall as the type's fields need

    def offer_scopes(self, scopes: list[str]) -> None:
        """Add scopes in use that the list lacks (they arrive from a worker, maybe after the form opened),
        keeping what the person picked or typed."""
        have = {self.scope.itemText(i) for i in range(self.scope.count())}
        typed = self.scope.currentText()
        for s in sorted(set(scopes) - have):
            self.scope.addItem(s)
        self.scope.setCurrentText(typed)

    def field(self, name: str) -> QWidget:
        """The widget of one of the type's fields (when, who, steps, uri, subject…)."""
        return self.type_fields[name].widget

    def values(self) -> dict:
        """The raw form values (strings as typed; details as typed per field)."""
        return {"title": self.title.text().strip(), "text": self.text.toPlainText().strip(),
                "scope": self.scope.currentText().strip(), "confidence": self._confidence(),
                "pinned": self.pinned.isChecked(), "details": {n: f.raw() for n, f in self.type_fields.items()}}

    def _details(self, text: str) -> dict | None:
        """The type's fields, validated by memory/types.py's model; None with each problem beside its field."""
        values, ok = {}, True
        for name, f in self.type_fields.items():
            f.show_error(None)
            try:
                values[name] = f.value()
            except ValueError as e:
                f.show_error(str(e))
                ok = False
        if not ok:
            return None
        main = TEXT_FIELD[self.mtype]
        try:
            DETAILS[self.mtype].model_validate({**values, main: text or "-"})
        except ValidationError as e:
            for err in e.errors():
                name = str(err["loc"][0]) if err["loc"] else ""
                target = self.type_fields.get(name)
                msg = err["msg"].removeprefix("Value error, ")
                if target is not None:
                    target.show_error(msg)
                else:
                    self.error.setText(f"{MAIN_WORDS.get(self.mtype.value, 'text')}: {msg}")
            return None
        return values

    def _confidence(self):
        """The typed confidence as 0-1 (the row's own value while the text is as shown), or the text itself
        when it is not a percentage (try_accept says so)."""
        text = self.confidence.text().strip()
        if text == self._confidence_shown:
            return self.row.get("confidence", 1.0)
        try:
            return parse_confidence(text)
        except ValueError:
            return text

    def try_accept(self) -> None:
        """Validate; on success keep only what changed and accept, else show the message and stay open."""
        self.error.clear()
        raw = self.values()
        if isinstance(raw["confidence"], str):
            self.error.setText(f"Confidence: “{raw['confidence']}” is not {CONFIDENCE_HELP}.")
            return
        details = self._details(raw["text"])
        try:
            edit = MemoryEdit.model_validate({**raw, "details": details or {}})
        except ValidationError as e:
            self.error.setText(explain(e))
            return
        if details is None:
            self.error.setText("Not saved — fix the field marked in red.")
            return
        if edit.scope != self.scope.currentText().strip():
            self.scope.setCurrentText(edit.scope)  # show the stored form of what was typed
        changes = {}
        for key in ("title", "text", "scope", "confidence", "pinned"):
            if getattr(edit, key) != self.row.get(key):
                changes[key] = getattr(edit, key)
        old = self.row.get("details") or {}
        if any(not _same(v, old.get(k)) for k, v in details.items()):
            changes["details"] = {k: (v.isoformat() if isinstance(v, datetime) else v) for k, v in details.items()}
        self.changes = changes
        self.accept()
