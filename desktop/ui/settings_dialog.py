"""Settings: a form generated from memory/config.py's pydantic sections, validated, saved to config.toml.

The form follows the Config model, so sections other features add appear without changes
here; the tabs below only decide the order and grouping a person sees first.
"""

from __future__ import annotations

import logging
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.runtime.live_config import RESTART_FIELDS, restart_needed
from desktop.ui.settings_scopes import ScopeRulesPage
from memory.config import REDACTION_KINDS, Config, load_config, save_config

log = logging.getLogger(__name__)

# tab title -> sections, in the order a person looks for them; unknown sections get their own tab
TABS: list[tuple[str, list[str]]] = [
    ("Capture", ["capture"]),
    ("Privacy", ["privacy"]),
    ("Models", ["models"]),
    ("Schedules", ["scheduler", "extraction", "dream"]),
    ("MCP", ["mcp"]),
    ("Storage", ["store", "vault"]),
    ("Recall", ["recall"]),
]
TITLES = {"mcp": "MCP server", "store": "Store", "scheduler": "Schedules", "extraction": "Extraction",
          "dream": "Dream (consolidation)"}


def _label(name: str) -> str:
    text = name.replace("_", " ")
    for a, b in (("ocr", "OCR"), ("mcp", "MCP"), ("llm", "LLM"), ("asr", "ASR"), ("gguf", "GGUF"), ("cron", "schedule (cron)")):
        text = text.replace(a, b)
    return text[:1].upper() + text[1:]


def _unwrap(ann) -> tuple[Any, bool]:
    """(inner type, optional?) for X | None."""
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        return (args[0] if len(args) == 1 else typing.Union[tuple(args)]), type(None) in typing.get_args(ann)  # noqa: UP007
    return ann, False


class _Field:
    """One config field bound to one widget: get() returns what goes to pydantic."""

    def __init__(self, key: str, ann, value: Any, description: str | None) -> None:
        self.key = key
        inner, self.optional = _unwrap(ann)
        self.inner = inner
        origin = typing.get_origin(inner)
        if key == "privacy.redact_kinds":
            self.kind = "checklist"
            self.widget = QListWidget()
            for k in REDACTION_KINDS:
                it = QListWidgetItem(k.replace("_", " "))
                it.setData(Qt.ItemDataRole.UserRole, k)
                it.setCheckState(Qt.CheckState.Checked if k in (value or []) else Qt.CheckState.Unchecked)
                self.widget.addItem(it)
            self.widget.setMaximumHeight(120)
        elif inner is bool and not self.optional:
            self.kind = "bool"
            self.widget = QCheckBox()
            self.widget.setChecked(bool(value))
        elif origin is Literal or (inner is bool and self.optional):
            self.kind = "choice"
            self.widget = QComboBox()
            choices = [str(c) for c in typing.get_args(inner)] if origin is Literal else ["auto", "yes", "no"]
            self.widget.addItems(choices)
            cur = "auto" if value is None else ("yes" if value is True else "no" if value is False else str(value))
            self.widget.setCurrentText(cur)
        elif origin is list:
            self.kind = "list"
            self.item_type = (typing.get_args(inner) or (str,))[0]
            self.widget = QPlainTextEdit("\n".join(str(v) for v in value or []))
            self.widget.setPlaceholderText("one per line")
            self.widget.setMaximumHeight(96)
        else:
            self.kind = "text"
            self.widget = QLineEdit("" if value is None else str(value))
            if self.optional:
                self.widget.setPlaceholderText("empty = default")
        self.widget.setObjectName(key)
        if description:
            self.widget.setToolTip(description)

    def get(self) -> Any:
        """The widget's value in the form pydantic validates."""
        w = self.widget
        if self.kind == "bool":
            return w.isChecked()
        if self.kind == "checklist":
            return [w.item(i).data(Qt.ItemDataRole.UserRole) for i in range(w.count())
                    if w.item(i).checkState() == Qt.CheckState.Checked]
        if self.kind == "choice":
            t = w.currentText()
            return {"auto": None, "yes": True, "no": False}[t] if self.inner is bool else t
        if self.kind == "list":
            lines = [ln.strip() for ln in w.toPlainText().splitlines() if ln.strip()]
            return lines
        text = w.text().strip()
        if text == "" and self.optional:
            return None
        if self.inner == (str | int) or typing.get_args(self.inner) == (str, int):
            return int(text) if text.lstrip("-").isdigit() else text  # a device index or a device name
        return text

    def set_error(self, on: bool) -> None:
        """Outline the widget red while its value is refused."""
        self.widget.setStyleSheet("border: 1px solid #b3261e;" if on else "")


class SettingsDialog(QDialog):
    """Edit config.toml. `saved(Config)` fires after a valid save; the app applies what it can live."""

    saved = Signal(object)

    def __init__(self, home: Path | None = None, config: Config | None = None, parent=None, extra_tabs=()) -> None:
        super().__init__(parent)
        self.home = home
        self.config = config or load_config(home)
        self.setWindowTitle("Mirador — Settings")
        self.resize(760, 640)
        self.fields: dict[str, Any] = {}
        # Pages that edit one field themselves (same get/set_error interface as _Field); the form skips it.
        self.scopes = ScopeRulesPage(self.config)
        self.fields[ScopeRulesPage.key] = self.scopes
        self.tabs = QTabWidget()
        placed: set[str] = set()
        for title, sections in TABS:
            present = [s for s in sections if s in Config.model_fields]
            if present:
                self.tabs.addTab(self._page(present), title)
                placed.update(present)
        self.tabs.insertTab(min(2, self.tabs.count()), self.scopes, "Scopes")  # after Capture and Privacy
        for name in Config.model_fields:  # sections added later by other features
            if name not in placed:
                self.tabs.addTab(self._page([name]), TITLES.get(name, _label(name)))
        for title, widget in extra_tabs:
            self.tabs.addTab(widget, title)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b3261e")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        hint = QLabel("↻ takes effect after a restart; everything else applies when saved. "
                      "Hover a field for what it does.")
        hint.setStyleSheet("color: #666")
        lay = QVBoxLayout(self)
        lay.addWidget(self.tabs)
        lay.addWidget(hint)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)

    def _page(self, sections: list[str]) -> QWidget:
        inner = QWidget()
        lay = QVBoxLayout(inner)
        for s in sections:
            box = QGroupBox(TITLES.get(s, _label(s)) if len(sections) > 1 else "")
            form = QFormLayout(box)
            self._add_fields(form, s, type(getattr(self.config, s)), getattr(self.config, s))
            lay.addWidget(box)
        lay.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(inner)
        return scroll

    def _add_fields(self, form: QFormLayout, prefix: str, model: type[BaseModel], value: BaseModel) -> None:
        for name, info in model.model_fields.items():
            key = f"{prefix}.{name}"
            current = getattr(value, name)
            if key in self.fields:  # edited on its own page (e.g. capture.scope_rules on Scopes)
                continue
            if isinstance(current, BaseModel):
                box = QGroupBox(_label(name))
                sub = QFormLayout(box)
                self._add_fields(sub, key, type(current), current)
                form.addRow(box)
                continue
            f = _Field(key, info.annotation, current, info.description)
            self.fields[key] = f
            label = _label(name) + (" ↻" if key in RESTART_FIELDS else "")
            if key in RESTART_FIELDS:
                f.widget.setToolTip(f"{info.description or ''}\n↻ restart needed: {RESTART_FIELDS[key]}".strip())
            form.addRow(label, f.widget)

    def values(self) -> dict:
        """The whole form as the nested dict Config validates."""
        data: dict = {}
        for key, f in self.fields.items():
            node = data
            *path, leaf = key.split(".")
            for p in path:
                node = node.setdefault(p, {})
            node[leaf] = f.get()
        return data

    def validate(self) -> Config | None:
        """A valid Config from the form, or None with every problem shown and its field outlined."""
        for f in self.fields.values():
            f.set_error(False)
        try:
            cfg = Config.model_validate(self.values())
        except ValidationError as e:
            lines = []
            for err in e.errors():
                key = ".".join(str(p) for p in err["loc"] if not isinstance(p, int))
                lines.append(f"{key}: {err['msg'].removeprefix('Value error, ')}")
                key = next((k for k in self.fields if key.startswith(k + ".")), key)  # a rule's field → its page
                if key in self.fields:
                    self.fields[key].set_error(True)
                    self._show_field(key)
            self.error.setText("Not saved — fix: " + "; ".join(lines))
            return None
        self.error.clear()
        return cfg

    def _show_field(self, key: str) -> None:
        w = self.fields[key].widget
        for i in range(self.tabs.count()):
            if self.tabs.widget(i) is w or self.tabs.widget(i).isAncestorOf(w):
                self.tabs.setCurrentIndex(i)
                return

    def save(self) -> bool:
        """Validate, write config.toml, emit saved(Config) and close; False (and stay open) if refused."""
        cfg = self.validate()
        if cfg is None:
            return False
        # A few hundred bytes of TOML: written here, not in a worker, so a failure is shown in the form.
        try:
            path = save_config(cfg, self.home)
        except OSError as e:
            self.error.setText(f"Could not write the config file: {e}")
            return False
        log.info("settings saved to %s", path)
        self.restart_needed = restart_needed(self.config, cfg)
        self.config = cfg
        self.saved.emit(cfg)
        self.accept()
        return True

