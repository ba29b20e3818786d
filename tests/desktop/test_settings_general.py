"""Settings → General: pause, apps and window titles never captured (plain text, no regular expressions),
retention, microphone; Advanced in plain words. Saved to config.toml and shown again on reopening."""

from __future__ import annotations

from PySide6.QtCore import Qt

from capture.privacy import PrivacyFilter
from capture.window import WindowInfo
from desktop.ui.settings_dialog import SettingsDialog, describe_cron, pattern_to_plain, plain_to_pattern
from memory.config import DEFAULT_EXCLUDED_TITLES, load_config


def _form_label(dlg, widget) -> str:
    from PySide6.QtWidgets import QFormLayout

    for form in dlg.findChildren(QFormLayout):
        label = form.labelForField(widget)
        if label is not None:
            return label.text()
    return ""


def test_general_page_saves_pause_exclusions_and_retention(qtbot, mirador_home):
    dlg = SettingsDialog(home=mirador_home)
    qtbot.addWidget(dlg)
    dlg.show()
    assert [dlg.tabs.tabText(i) for i in range(3)] == ["General", "Scopes", "Advanced"]
    assert dlg.tabs.currentIndex() == 0
    general = dlg.tabs.widget(0)
    paused = dlg.fields["capture.enabled"].widget
    assert general.isAncestorOf(paused) and paused.text() == "Pause capture" and not paused.isChecked()
    for key in ("privacy.excluded_apps", "capture.retention_days", "capture.input_device"):
        assert general.isAncestorOf(dlg.fields[key].widget), f"{key} is on the first page"
    assert general.isAncestorOf(dlg.plain_titles)
    assert not general.isAncestorOf(dlg.fields["capture.min_changed_fraction"].widget), "details go to Advanced"

    paused.setChecked(True)
    dlg.running.setCurrentText("Signal")  # an app picked from the open windows (or typed)
    qtbot.mouseClick(dlg.findChild(type(dlg.buttons.button(dlg.buttons.StandardButton.Save)), "excluded_app_add"),
                     Qt.MouseButton.LeftButton)
    dlg.running.setCurrentText("signal")  # the same app again is not added twice
    dlg.add_excluded_app()
    apps = dlg.fields["privacy.excluded_apps"].widget.toPlainText().splitlines()
    assert apps[-1] == "Signal" and sum(a.lower() == "signal" for a in apps) == 1
    dlg.plain_titles.setPlainText("Quarterly payroll*\na.b (c)")
    dlg.fields["capture.retention_days"].widget.setText("14")
    dlg.fields["scheduler.evidence_retention_days"].widget.setText("90")
    dlg.fields["capture.input_device"].widget.setText("USB Mic")
    saved = []
    dlg.saved.connect(saved.append)
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    assert saved and not dlg.isVisible(), dlg.error.text()

    cfg = load_config(mirador_home)
    assert cfg.capture.enabled is False and "Signal" in cfg.privacy.excluded_apps
    assert cfg.capture.retention_days == 14 and cfg.scheduler.evidence_retention_days == 90
    assert cfg.capture.input_device == "USB Mic"
    pats = cfg.privacy.excluded_title_patterns
    assert set(DEFAULT_EXCLUDED_TITLES) <= set(pats), "the built-in patterns stay"
    privacy = PrivacyFilter.from_config(cfg.privacy)
    assert privacy.excluded(WindowInfo(app="Calc", title="Budget — QUARTERLY PAYROLL 2026.ods")) is not None
    assert privacy.excluded(WindowInfo(app="Calc", title="see a.b (c) here")) is not None
    # plain text, not a regular expression: "." and "(" are literal
    assert privacy.excluded(WindowInfo(app="Calc", title="axb c")) is None
    assert privacy.excluded(WindowInfo(app="Calc", title="Quarterly report")) is None

    again = SettingsDialog(home=mirador_home)
    qtbot.addWidget(again)
    assert again.fields["capture.enabled"].widget.isChecked()
    assert again.plain_titles.toPlainText() == "Quarterly payroll*\na.b (c)"
    expert = again.fields["privacy.excluded_title_patterns"].widget.toPlainText().splitlines()
    assert expert == list(DEFAULT_EXCLUDED_TITLES), "plain entries are not repeated among the expert patterns"
    assert again.fields["capture.retention_days"].widget.text() == "14"
    assert again.fields["capture.input_device"].widget.text() == "USB Mic"


def test_advanced_page_speaks_plainly(qtbot, mirador_home):
    dlg = SettingsDialog(home=mirador_home)
    qtbot.addWidget(dlg)
    dlg.show()
    fraction = dlg.fields["capture.min_changed_fraction"].widget
    assert _form_label(dlg, fraction).startswith("Ignore screen changes smaller than")
    assert fraction.text() == "0.05", "0.0005 of the screen shown as a percentage"
    assert "capture.min_changed_fraction" in fraction.toolTip(), "the config name is still findable"
    bulk = dlg.fields["models.embedder_bulk_threads"].widget
    assert "Embedder bulk threads" not in _form_label(dlg, bulk) and _form_label(dlg, bulk)
    words = dlg.findChild(type(dlg.error), "scheduler.dream_cron.words")
    assert words.text() == "every night at 03:30"
    dlg.fields["scheduler.dream_cron"].widget.setText("15 9 * * 1")
    assert words.text() == "every Monday at 09:15"
    fraction.setText("0.1")
    assert dlg.save(), dlg.error.text()
    cfg = load_config(mirador_home)
    assert cfg.capture.min_changed_fraction == 0.001 and cfg.scheduler.dream_cron == "15 9 * * 1"


def test_plain_title_conversion_is_safe():
    for text in ("bank", "*— Private*", "a.b (c) [x] $1 ^", "C:\\Users\\me"):
        pattern = plain_to_pattern(text)
        assert pattern_to_plain(pattern) == text
    assert pattern_to_plain(r"(?i)\bkeepass(xc)?\b") is None
    assert describe_cron("*/15 * * * *") == "every 15 minutes"
    assert describe_cron("0 4 * * *") == "every night at 04:00"


def test_pause_capture_setting_applies_to_the_running_capture_at_once():
    from types import SimpleNamespace

    from desktop.runtime.services import Services
    from memory.config import Config

    calls = []
    capture = SimpleNamespace(health=SimpleNamespace(state="capturing"), apply_config=lambda *a, **k: [],
                              pause=lambda: calls.append("pause"), resume=lambda: calls.append("resume"),
                              start=lambda: calls.append("start"))
    svc = Services.__new__(Services)
    svc.store, svc.capture, svc.scheduler = SimpleNamespace(config=Config(), embedder=None), capture, None
    off = Config()
    off.capture.enabled = False
    svc.apply_config(off)
    assert calls == ["pause"]
    svc.apply_config(Config())
    assert calls == ["pause", "resume"]
    svc.apply_config(Config())  # unchanged: the tray's own pause or resume is left alone
    assert calls == ["pause", "resume"]


def test_token_scopes_are_normalised_and_a_bad_one_explained(qtbot, jobs, mirador_home):
    from desktop.ui.settings_tokens import TokensPanel
    from memory.mcp.auth import TokenStore
    from tests.desktop.conftest import wait_idle

    panel = TokensPanel(jobs, mirador_home)
    qtbot.addWidget(panel)
    panel.name.setText("claude-code")
    panel.read.setText("Work/Acme, bad scope!")
    panel.create_token()
    assert panel.message.text().startswith("Not created — invalid scope")
    wait_idle(qtbot, jobs)
    assert TokenStore(mirador_home).list() == []
    panel.read.setText("Work / Acme,  Personal")
    panel.write.setText("WORK")
    panel.create_token()
    qtbot.waitUntil(lambda: panel.list.count() == 1, timeout=20_000)
    wait_idle(qtbot, jobs)
    rec = TokenStore(mirador_home).list()[0].public()
    assert set(rec["read"]) >= {"work/acme", "personal"} and rec["write"] == "work"
    assert panel.read.text() == "work/acme, personal"
