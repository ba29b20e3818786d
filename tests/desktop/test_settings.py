"""Settings round-trip through config.toml; invalid values are refused with a message naming the field."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt

from desktop.ui.settings_dialog import SettingsDialog
from desktop.ui.settings_tokens import TokensPanel
from memory.config import config_path, load_config
from tests.desktop.conftest import wait_idle


def _set(dlg, key, text):
    w = dlg.fields[key].widget
    w.setPlainText(text) if hasattr(w, "setPlainText") else w.setText(text)


def test_settings_round_trip(qtbot, mirador_home):
    dlg = SettingsDialog(home=mirador_home)
    qtbot.addWidget(dlg)
    dlg.show()
    saved = []
    dlg.saved.connect(saved.append)
    _set(dlg, "capture.interval_seconds", "5")
    _set(dlg, "capture.monitors", "1\n2")
    _set(dlg, "capture.ocr_language", "eng+deu")
    _set(dlg, "capture.input_device", "3")
    dlg.fields["capture.audio"].widget.setChecked(False)
    _set(dlg, "privacy.excluded_apps", "KeePassXC\nSignal")
    kinds = dlg.fields["privacy.redact_kinds"].widget
    kinds.item(next(i for i in range(kinds.count()) if kinds.item(i).text() == "jwt")).setCheckState(Qt.CheckState.Unchecked)
    _set(dlg, "models.llm_path", "/models/bigger.gguf")
    if "scheduler.dream_cron" in dlg.fields:
        _set(dlg, "scheduler.dream_cron", "0 2 * * *")
    if "mcp.port" in dlg.fields:
        _set(dlg, "mcp.port", "9001")
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    assert not dlg.isVisible() and len(saved) == 1

    cfg = load_config(mirador_home)
    assert cfg == saved[0]
    assert cfg.capture.interval_seconds == 5.0 and cfg.capture.monitors == [1, 2] and cfg.capture.audio is False
    assert cfg.capture.ocr_language == "eng+deu" and cfg.capture.input_device == 3
    assert cfg.privacy.excluded_apps == ["KeePassXC", "Signal"] and "jwt" not in cfg.privacy.redact_kinds
    assert cfg.models.llm_path == Path("/models/bigger.gguf")
    if hasattr(cfg, "scheduler"):
        assert cfg.scheduler.dream_cron == "0 2 * * *"
    if hasattr(cfg, "mcp"):
        assert cfg.mcp.port == 9001
    # audio, device, OCR language... apply live; of what changed only the MCP port waits for a restart
    assert dlg.restart_needed == ["mcp.port"]

    again = SettingsDialog(home=mirador_home)  # reopening shows what was saved
    qtbot.addWidget(again)
    assert again.fields["capture.interval_seconds"].widget.text() == "5.0"
    assert again.fields["privacy.excluded_apps"].widget.toPlainText() == "KeePassXC\nSignal"


def test_invalid_values_refused_with_message(qtbot, mirador_home):
    dlg = SettingsDialog(home=mirador_home)
    qtbot.addWidget(dlg)
    dlg.show()
    saved = []
    dlg.saved.connect(saved.append)
    _set(dlg, "capture.interval_seconds", "0.01")
    _set(dlg, "privacy.excluded_title_patterns", "(?i)bank\n([unclosed")
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    assert dlg.isVisible() and saved == []
    msg = dlg.error.text()
    assert msg.startswith("Not saved")
    assert "capture.interval_seconds" in msg and "greater than or equal to 0.25" in msg
    assert "privacy.excluded_title_patterns" in msg and "not a valid regular expression" in msg
    assert "b3261e" in dlg.fields["capture.interval_seconds"].widget.styleSheet()
    assert not config_path(mirador_home).exists(), "nothing may be written when a value is refused"

    _set(dlg, "capture.interval_seconds", "abc")
    _set(dlg, "privacy.excluded_title_patterns", "(?i)bank")
    assert not dlg.save() and "capture.interval_seconds" in dlg.error.text() and "number" in dlg.error.text()
    _set(dlg, "capture.interval_seconds", "3")
    assert dlg.save() and load_config(mirador_home).capture.interval_seconds == 3.0


def test_mcp_token_created_once_and_revocable(qtbot, jobs, mirador_home, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    panel = TokensPanel(jobs, mirador_home)
    qtbot.addWidget(panel)
    panel.name.setText("claude-code")
    panel.read.setText("work, personal")
    panel.write.setText("work")
    panel.create_token()
    qtbot.waitUntil(lambda: panel.new_token.text() != "" and panel.list.count() == 1, timeout=20_000)
    token = panel.new_token.text()
    assert "claude-code" in panel.list.item(0).text()
    from memory.mcp.auth import TOKENS_FILE

    assert token[4:] not in (mirador_home / TOKENS_FILE).read_text(), "only the hash is stored"
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    panel.list.setCurrentRow(0)
    panel.revoke()
    qtbot.waitUntil(lambda: panel.list.count() == 0, timeout=20_000)
    wait_idle(qtbot, jobs)
