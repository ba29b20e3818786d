"""Settings: a simple General page first, then Scopes and an Advanced page generated from memory/config.py.

General holds what a person changes: pause capture, apps and window titles never captured (picked
from the windows open now; titles as plain text with `*`, turned into safe patterns), how long
captures are kept, the microphone, and a link to the scope rules. Advanced is the form generated
from the Config model, so sections other features add appear without changes here; its labels are
plain words with the config name and its description in the tooltip. Everything is validated by
pydantic and saved to config.toml.
"""

from __future__ import annotations

import logging
import re
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
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from desktop.runtime.live_config import RESTART_FIELDS, restart_needed
from desktop.ui.qt_typed import line_edit
from desktop.ui.settings_scopes import ScopeRulesPage, running_apps
from memory.config import REDACTION_KINDS, Config, load_config, save_config
from memory.cron import describe as describe_cron  # the scheduler's own reading of the line, in words

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


# Plain words for the fields a person may look for on the Advanced page; the rest use their config
# description. The config name stays in every tooltip (docs/configuration.md lists it).
LABELS: dict[str, str] = {
    "capture.enabled": "Capture when Mirador starts",
    "capture.screen": "Read the text on screen",
    "capture.audio": "Transcribe the microphone",
    "capture.input_device": "Microphone",
    "capture.retention_days": "Keep screenshots for (days)",
    "scheduler.evidence_retention_days": "Keep captured text for (days, 0 = forever)",
    "capture.interval_seconds": "Look at the screen every (seconds)",
    "capture.min_changed_fraction": "Ignore screen changes smaller than (% of the screen)",
    "capture.prefer_active_window": "Read only the window in front",
    "capture.monitors": "Screens to capture (1 = first; empty = all)",
    "capture.ocr_language": "Languages to read (e.g. eng+deu)",
    "capture.thumbnails": "Keep a small picture of each captured screen",
    "capture.thumbnail_width": "Width of those pictures (pixels)",
    "capture.keep_audio": "Keep recordings of what was said",
    "capture.dedupe_hours": "Skip text already seen in the same window within (hours)",
    "capture.scope": "Scope for captures no rule matches",
    "privacy.excluded_apps": "Never capture these apps",
    "privacy.excluded_title_patterns": "Never capture windows whose title matches (regular expressions, for experts)",
    "privacy.redact": "Hide passwords, keys and card numbers before storing",
    "privacy.redact_kinds": "Kinds of secret to hide",
    "models.embedder_bulk_threads": "Processor threads for large imports",
    "models.embedder_threads": "Processor threads for search",
    "models.llm_path": "Language model file for extraction",
    "models.whisper_dir": "Speech-to-text model folder",
    "scheduler.enabled": "Work in the background (extract, tidy, clean up)",
    "scheduler.extract_interval_minutes": "Read new captures every (minutes)",
    "scheduler.dream_cron": "Tidy memories (Dream)",
    "scheduler.purge_cron": "Delete old captures",
    "recall.redundancy_penalty": "Avoid repeating near-identical items (0–1)",
    "recall.recency_floor": "Weight very old items keep (0–1)",
    "store.default_scope": "Scope for things added without one",
    "mcp.enabled": "Let AI assistants connect (MCP)",
    "mcp.port": "Port for assistants",
    "extraction.active_min_confidence": "Ask me to review memories less sure than (0–1)",
    "extraction.engine": "How memories are drawn from captures",
    "extraction.llm_context": "Language model context (tokens)",
    "extraction.llm_timeout_seconds": "Give up on one extraction after (seconds)",
    "extraction.llm_instruct": "Use the model's chat format",
    "extraction.llm_isolated": "Run the language model in a separate process",
    "extraction.statement_max_chars": "Read at most this many characters of one capture",
    "extraction.active_sources": "Sources that may create memories without review",
    "scheduler.optimize_interval_minutes": "Tidy the search index every (minutes)",
    "scheduler.evidence_storage_cap_mb": "Limit captured data to (MB, 0 = no limit)",
    "capture.asr_threads": "Processor threads for speech to text (0 = automatic)",
    "capture.ocr_queue_size": "Screens waiting to be read (then the oldest is dropped)",
    "capture.flush_seconds": "Save captures at least every (seconds)",
    "capture.flush_rows": "…or as soon as this many wait",
    "models.embedder_dir": "Search model folder (empty = built in)",
    "models.embedder_batch_size": "Texts embedded at once in large imports",
    "models.embedder_onnx": "Use the faster search engine (onnxruntime)",
    "models.onnx_dir": "Where that engine's files are kept",
    "models.embedder_tuning": "Use the search model tuned for recall",
    "models.reranker": "Re-order the best captured hits with the re-ordering model",
    "models.reranker_path": "Re-ordering model file (empty = none; see docs/models.md)",
    "recall.duplicate_overlap": "Skip an item this similar to one already chosen (0–1)",
    "recall.max_candidates": "Hits considered from memories and from captures",
    "recall.full_share": "Largest share of the budget one full item may take (0–1)",
    "store.optimize_after_writes": "Tidy the tables after this many writes",
    "vault.key_store": "What unwraps the data key (keyring or passphrase)",
    "mcp.allowed_origins": "Web pages allowed to call Mirador (besides localhost)",
    "hooks.allowed_scopes": "Scopes that may be sent to an assistant in a prompt",
    "hooks.budget_tokens": "Size of what is added to a prompt (tokens)",
    "reinforcement.rank_weight": "How much being used lifts a memory in search (0 = not at all)",
    "reinforcement.count_search_as_use": "Count appearing in an assistant's search as a use",
    "reinforcement.search_step": "Strength an appearance adds",
}
PERCENT_FIELDS = {"capture.min_changed_fraction"}  # shown as % of the screen, stored as a fraction
CRON_FIELDS = {"scheduler.dream_cron", "scheduler.purge_cron"}
DEFAULT_DEVICE = "System default"


def plain_to_pattern(text: str) -> str:
    """A window title as a person types it, `*` for anything, found anywhere in the title and in any
    case → a safe regular expression (every other character is literal)."""
    return "(?i)" + ".*".join(re.escape(part) for part in text.strip().split("*"))


def pattern_to_plain(pattern: str) -> str | None:
    """The plain text plain_to_pattern() made this pattern from, or None for a hand-written expression."""
    if not pattern.startswith("(?i)"):
        return None
    body = pattern[4:]
    plain = "*".join(re.sub(r"\\(.)", r"\1", part) for part in body.split(".*"))
    return plain if plain and plain_to_pattern(plain) == pattern else None


def input_devices() -> list[str]:
    """Names of the microphones PortAudio sees (empty when there is none or no PortAudio)."""
    try:
        import sounddevice as sd

        return [d["name"] for d in sd.query_devices() if d.get("max_input_channels", 0) > 0]
    except Exception:  # no PortAudio or no sound server: the person can still type a device
        return []


def field_label(key: str, description: str | None) -> str:
    """What a person reads for a config field."""
    if key in LABELS:
        return LABELS[key]
    if description and len(description) <= 60 and not any(c in description for c in "=(×*`;_"):
        return description[:1].upper() + description[1:]
    return _label(key.rsplit(".", 1)[-1])


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
        # Its class follows `kind` (QListWidget, QCheckBox, QComboBox, DeviceBox, QPlainTextEdit or QLineEdit), and
        # the form calls each kind's own methods: one static type would not describe it.
        self.widget: Any
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
        elif key in PERCENT_FIELDS:
            self.kind = "percent"
            self.widget = QLineEdit(f"{float(value) * 100:g}")
        elif key == "capture.input_device":
            self.kind = "device"
            self.widget = DeviceBox(value)
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
        self.widget.setToolTip(f"{description}\n(setting {key})" if description else f"(setting {key})")

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
        if self.kind == "percent":
            text = w.text().strip().rstrip("%").strip()
            try:
                return float(text) / 100
            except ValueError:
                return text  # pydantic refuses it and names the field
        if self.kind == "device":
            text = w.text().strip()
            if text in ("", DEFAULT_DEVICE):
                return None
            return int(text) if text.lstrip("-").isdigit() else text
        text = w.text().strip()
        if text == "" and self.optional:
            return None
        if self.inner == (str | int) or typing.get_args(self.inner) == (str, int):
            return int(text) if text.lstrip("-").isdigit() else text  # a device index or a device name
        return text

    def set_error(self, on: bool) -> None:
        """Outline the widget red while its value is refused."""
        self.widget.setStyleSheet("border: 1px solid #b3261e;" if on else "")


class _Paused(_Field):
    """capture.enabled shown the way round a person thinks of it: "Pause capture"."""

    def __init__(self, value: bool) -> None:
        super().__init__("capture.enabled", bool, not value, None)
        self.widget.setText("Pause capture")
        self.widget.setToolTip("Nothing is recorded from the screen or the microphone until you turn this off "
                               "again, also after a restart (the tray's Pause is for a while).\n(setting capture.enabled)")

    def get(self) -> bool:
        return not self.widget.isChecked()


class DeviceBox(QComboBox):
    """The microphones found, "System default", or a typed device name or number (text()/setText() like a
    line edit, so the form reads every field the same way)."""

    def __init__(self, value) -> None:
        super().__init__()
        self.setEditable(True)
        self.addItems([DEFAULT_DEVICE, *input_devices()])
        self.setText("" if value is None else str(value))

    def text(self) -> str:
        return self.currentText()

    def setText(self, text: str) -> None:  # noqa: N802 - mirrors QLineEdit
        self.setCurrentText(text or DEFAULT_DEVICE)


class PlainTitles(QPlainTextEdit):
    """Window titles never captured, as plain text (one per line, `*` = anything, any case); saved as
    safe patterns next to the expert ones."""

    def __init__(self, patterns: list[str]) -> None:
        super().__init__("\n".join(p for p in (pattern_to_plain(x) for x in patterns) if p))
        self.setObjectName("privacy.excluded_titles_plain")
        self.setPlaceholderText("one per line, e.g.  bank   or   *— Private*")
        self.setMaximumHeight(90)

    def patterns(self) -> list[str]:
        return [plain_to_pattern(ln) for ln in self.toPlainText().splitlines() if ln.strip().strip("*")]


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
        patterns = self.config.privacy.excluded_title_patterns
        # the plain ones are edited on General; the Advanced field holds only hand-written expressions
        self._expert_patterns = [p for p in patterns if pattern_to_plain(p) is None]
        self.tabs = QTabWidget()
        self.tabs.addTab(self._general(), "General")
        self.tabs.addTab(self.scopes, "Scopes")
        self.advanced = QTabWidget()
        self.advanced.setDocumentMode(True)
        placed: set[str] = set()
        for title, sections in TABS:
            present = [s for s in sections if s in Config.model_fields]
            if present:
                self.advanced.addTab(self._page(present), title)
                placed.update(present)
        for name in Config.model_fields:  # sections added later by other features
            if name not in placed:
                self.advanced.addTab(self._page([name]), TITLES.get(name, _label(name)))
        self.tabs.addTab(self.advanced, "Advanced")
        for title, widget in extra_tabs:
            self.tabs.addTab(widget, title)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #b3261e")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        hint = QLabel("Changes apply when you save (↻: after a restart). Hover a field for what it does.")
        hint.setStyleSheet("color: #666")
        lay = QVBoxLayout(self)
        lay.addWidget(self.tabs)
        lay.addWidget(hint)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)

    def _general(self) -> QWidget:
        """The first page: what a person comes to Settings for."""
        cfg = self.config
        page = QWidget()
        lay = QVBoxLayout(page)

        capture = QGroupBox("Capture")
        form = QFormLayout(capture)
        self.fields["capture.enabled"] = paused = _Paused(cfg.capture.enabled)
        form.addRow(paused.widget)
        for key in ("capture.screen", "capture.audio"):
            f = self._field(key)
            f.widget.setText(LABELS[key])
            form.addRow(f.widget)
        form.addRow(LABELS["capture.input_device"], self._field("capture.input_device").widget)
        lay.addWidget(capture)

        never = QGroupBox("Never capture")
        form = QFormLayout(never)
        apps = self._field("privacy.excluded_apps")
        apps.widget.setPlaceholderText("one app per line, e.g. KeePassXC")
        self.running = QComboBox()
        self.running.setObjectName("excluded_app_pick")
        self.running.setEditable(True)
        self.running.addItems(running_apps())
        self.running.setCurrentText("")
        line_edit(self.running).setPlaceholderText("pick an app that is open now, or type its name")
        add = QPushButton("Add")
        add.setObjectName("excluded_app_add")
        add.clicked.connect(self.add_excluded_app)
        pick = QHBoxLayout()
        pick.addWidget(self.running, 1)
        pick.addWidget(add)
        box = QVBoxLayout()
        box.addLayout(pick)
        box.addWidget(apps.widget)
        form.addRow("Apps", box)
        self.plain_titles = PlainTitles(cfg.privacy.excluded_title_patterns)
        self.plain_titles.setToolTip("A window whose title contains one of these is never captured. Plain text, "
                                     "any case; * stands for anything. Hand-written regular expressions are "
                                     "under Advanced → Privacy.")
        form.addRow("Windows whose title contains", self.plain_titles)
        if self._expert_patterns:
            note = QLabel(f"Also {len(self._expert_patterns)} built-in or expert pattern(s) under "
                          "Advanced → Privacy (password managers, private browsing…).")
            note.setWordWrap(True)
            note.setStyleSheet("color: #666")
            form.addRow("", note)
        lay.addWidget(never)

        keep = QGroupBox("How long captures are kept")
        form = QFormLayout(keep)
        for key in ("capture.retention_days", "scheduler.evidence_retention_days"):
            if key.split(".")[0] in Config.model_fields:
                form.addRow(LABELS[key], self._field(key).widget)
        lay.addWidget(keep)

        rules = QLabel("Captures go to a scope (work, personal…) by rules you set: "
                       "<a href='scopes'>Scope rules…</a>")
        rules.setObjectName("scope_rules_link")
        rules.linkActivated.connect(lambda _l: self.tabs.setCurrentWidget(self.scopes))
        lay.addWidget(rules)
        lay.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(page)
        return scroll

    def _field(self, key: str) -> _Field:
        """A _Field for a dotted config key, registered in self.fields (so the Advanced form skips it)."""
        section, name = key.split(".", 1)
        model = type(getattr(self.config, section))
        info = model.model_fields[name]
        value = getattr(getattr(self.config, section), name)
        f = _Field(key, info.annotation, value, info.description)
        if isinstance(value, float) and f.kind == "text":
            f.widget.setText(f"{value:g}")  # "7", not "7.0"
        self.fields[key] = f
        return f

    def add_excluded_app(self) -> None:
        """Add the picked (or typed) app to the list of apps never captured."""
        name = self.running.currentText().strip()
        w = self.fields["privacy.excluded_apps"].widget
        have = [ln.strip() for ln in w.toPlainText().splitlines() if ln.strip()]
        if name and name.lower() not in {h.lower() for h in have}:
            w.setPlainText("\n".join([*have, name]))
        self.running.setCurrentText("")

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
            if key == "privacy.excluded_title_patterns":
                current = self._expert_patterns
            f = _Field(key, info.annotation, current, info.description)
            self.fields[key] = f
            label = field_label(key, info.description) + (" ↻" if key in RESTART_FIELDS else "")
            if key in RESTART_FIELDS:
                f.widget.setToolTip(f"{f.widget.toolTip()}\n↻ restart needed: {RESTART_FIELDS[key]}")
            if key in CRON_FIELDS:
                form.addRow(label, self._cron_row(f))
            else:
                form.addRow(label, f.widget)

    def _cron_row(self, f: _Field) -> QWidget:
        """A schedule field with what it means in words beside it ("every night at 03:30")."""
        words = QLabel()
        words.setObjectName(f"{f.key}.words")
        words.setStyleSheet("color: #666")
        f.widget.textChanged.connect(lambda t: words.setText(describe_cron(t)))
        words.setText(describe_cron(f.widget.text()))
        f.widget.setMaximumWidth(140)
        f.widget.setToolTip(f.widget.toolTip() + "\nminute hour day month weekday, e.g. 30 3 * * * = every night "
                            "at 03:30")
        row = QWidget()
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(f.widget)
        lay.addWidget(words, 1)
        return row

    def values(self) -> dict:
        """The whole form as the nested dict Config validates."""
        data: dict = {}
        for key, f in self.fields.items():
            node = data
            *path, leaf = key.split(".")
            for p in path:
                node = node.setdefault(p, {})
            node[leaf] = f.get()
        privacy = data.setdefault("privacy", {})
        expert = privacy.get("excluded_title_patterns", [])
        privacy["excluded_title_patterns"] = [*self.plain_titles.patterns(),
                                              *[p for p in expert if p not in self.plain_titles.patterns()]]
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
                name = self._plain_name(key)
                lines.append(f"{name + ' (' + key + ')' if name else key}: {err['msg'].removeprefix('Value error, ')}")
                key = next((k for k in self.fields if key.startswith(k + ".")), key)  # a rule's field → its page
                if key in self.fields:
                    self.fields[key].set_error(True)
                    self._show_field(key)
            self.error.setText("Not saved — fix: " + "; ".join(lines))
            return None
        self.error.clear()
        return cfg

    def _plain_name(self, key: str) -> str:
        if key in LABELS:
            return LABELS[key]
        section, _, name = key.partition(".")
        model = Config.model_fields.get(section)
        info = getattr(model.annotation, "model_fields", {}).get(name) if model else None
        return field_label(key, info.description) if info else ""

    def _show_field(self, key: str) -> None:
        w = self.fields[key].widget
        for tabs in (self.tabs, self.advanced):
            for i in range(tabs.count()):
                page = tabs.widget(i)
                if page is not None and (page is w or page.isAncestorOf(w)):
                    tabs.setCurrentIndex(i)
                    break

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

