"""Edit a memory: a form validated with pydantic; only changed fields go to store.update_memory."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
)

from memory.scopes import scope_field
from memory.types import MAX_MEMORY_CHARS, TEXT_FIELD, MemoryType


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
        return scope_field(v)

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


def explain(err: ValidationError) -> str:
    """One line per problem, each naming the field."""
    return "\n".join(f"{'.'.join(str(p) for p in e['loc']) or 'form'}: {e['msg'].removeprefix('Value error, ')}"
                     for e in err.errors())


class EditDialog(QDialog):
    """The edit form. `changes` holds the validated changed fields once accepted."""

    def __init__(self, row: dict, parent=None, approve: bool = False) -> None:
        super().__init__(parent)
        self.row, self.changes = row, {}
        self.setWindowTitle("Edit and approve memory" if approve else "Edit memory")
        self.resize(560, 460)
        main = TEXT_FIELD.get(MemoryType(row["type"]), "")
        extra = {k: v for k, v in (row.get("details") or {}).items() if k != main}
        self.title = QLineEdit(row.get("title") or "")
        self.text = QPlainTextEdit(row.get("text") or "")
        self.scope = QLineEdit(row.get("scope") or "")
        self.confidence = QLineEdit(f"{row.get('confidence', 1.0):g}")
        self.pinned = QCheckBox("Pinned (automated passes never change it)")
        self.pinned.setChecked(bool(row.get("pinned")))
        self.details = QPlainTextEdit(json.dumps(extra, ensure_ascii=False, indent=1) if extra else "{}")
        self.details.setMaximumHeight(90)
        self.error = QLabel()
        self.error.setStyleSheet("color: #b3261e")
        self.error.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Title", self.title)
        form.addRow("Text", self.text)
        form.addRow("Scope", self.scope)
        form.addRow("Confidence (0–1)", self.confidence)
        form.addRow("", self.pinned)
        form.addRow(f"Details ({row['type']}, JSON)", self.details)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        if approve:
            self.buttons.button(QDialogButtonBox.StandardButton.Save).setText("Save and approve")
        self.buttons.accepted.connect(self.try_accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)

    def values(self) -> dict:
        """The raw form values (strings as typed)."""
        return {"title": self.title.text().strip(), "text": self.text.toPlainText().strip(),
                "scope": self.scope.text().strip(), "confidence": self.confidence.text().strip() or "nan",
                "pinned": self.pinned.isChecked(), "details": self.details.toPlainText()}

    def try_accept(self) -> None:
        """Validate; on success keep only what changed and accept, else show the message and stay open."""
        try:
            edit = MemoryEdit.model_validate(self.values())
        except ValidationError as e:
            self.error.setText(explain(e))
            return
        main = TEXT_FIELD.get(MemoryType(self.row["type"]), "")
        old_extra = {k: v for k, v in (self.row.get("details") or {}).items() if k != main}
        changes = {}
        for key in ("title", "text", "scope", "confidence", "pinned"):
            if getattr(edit, key) != self.row.get(key):
                changes[key] = getattr(edit, key)
        if edit.details != old_extra:
            changes["details"] = edit.details
        self.changes = changes
        self.error.clear()
        self.accept()
