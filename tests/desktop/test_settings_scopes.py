"""Settings → Scopes: rules are added, ordered and validated with real widgets, saved to config.toml, and the
running capture routes the next window by them without a restart."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from capture.window import WindowInfo
from desktop.runtime.services import Services
from desktop.ui.app import MiradorShell
from desktop.ui.settings_dialog import SettingsDialog
from desktop.ui.settings_scopes import ScopeRulesPage
from memory.config import Config, ScopeRule, load_config, save_config
from tests.desktop.conftest import wait_idle


def _fill(page: ScopeRulesPage, app="", title="", path="", scope="") -> None:
    page.app.setCurrentText(app)
    page.title.setText(title)
    page.path.setText(path)
    page.scope.setCurrentText(scope)


def _click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def _save(qtbot, dlg) -> None:
    _click(qtbot, dlg.buttons.button(dlg.buttons.StandardButton.Save))


def test_rules_are_added_ordered_validated_and_saved(qtbot, mirador_home):
    dlg = SettingsDialog(home=mirador_home)
    qtbot.addWidget(dlg)
    dlg.show()
    page = dlg.scopes
    assert dlg.tabs.tabText(dlg.tabs.indexOf(page)) == "Scopes"
    assert "capture.scope_rules" in dlg.fields and dlg.fields["capture.scope_rules"] is page

    _fill(page, app="Slack", scope="work")
    _click(qtbot, page.buttons["add"])
    _fill(page, app="Slack", title="#acme-*", scope="Work/Acme")  # typed in capitals: stored lower-case
    _click(qtbot, page.buttons["add"])
    assert page.table.rowCount() == 2
    # The precise rule must come first to win: move it up.
    page.table.selectRow(1)
    _click(qtbot, page.buttons["up"])
    assert [r["scope"] for r in page.get()] == ["work/acme", "work"]
    assert page.rules().scope_for("Slack", "#acme-eng | Acme - Slack") == "work/acme"

    # A rule that says nothing about the window, or names no valid scope, is refused on the spot.
    _fill(page, scope="work")
    _click(qtbot, page.buttons["add"])
    assert "needs an app, a title or a path/URL pattern" in page.message.text() and page.table.rowCount() == 2
    _fill(page, title="~/src/ledger", scope="work ledger")
    _click(qtbot, page.buttons["add"])
    assert "invalid scope" in page.message.text() and page.table.rowCount() == 2
    _fill(page, title="~/src/ledger", scope="work/ledger")
    _click(qtbot, page.buttons["add"])
    page.table.selectRow(2)
    _fill(page, title="~/src/ledger*", scope="work/ledger")
    _click(qtbot, page.buttons["replace"])
    _fill(page, app="Firefox", path="mybank.com", scope="personal/finance")
    _click(qtbot, page.buttons["add"])
    page.table.selectRow(3)
    _click(qtbot, page.buttons["remove"])
    assert page.table.rowCount() == 3

    _save(qtbot, dlg)
    assert not dlg.isVisible(), dlg.error.text()
    assert load_config(mirador_home).capture.scope_rules == [
        ScopeRule(app="Slack", title="#acme-*", scope="work/acme"),
        ScopeRule(app="Slack", scope="work"),
        ScopeRule(title="~/src/ledger*", scope="work/ledger"),
    ]
    again = SettingsDialog(home=mirador_home)  # reopening shows the rules in their order
    qtbot.addWidget(again)
    assert [r["scope"] for r in again.scopes.get()] == ["work/acme", "work", "work/ledger"]


def test_the_app_list_offers_the_windows_open_now(qtbot, mirador_home):
    win = QWidget()
    win.setWindowTitle("#acme-eng | Acme Corp - Slack")
    qtbot.addWidget(win)
    win.show()
    qtbot.waitExposed(win)
    from capture.scope_rules import running_apps

    apps = running_apps()
    assert apps, "xprop should list at least this test's own window"
    page = ScopeRulesPage(Config())
    qtbot.addWidget(page)
    offered = [page.app.itemText(i) for i in range(page.app.count())]
    assert set(apps) <= set(offered)


def test_a_rule_saved_in_settings_routes_the_running_capture(qtbot, mirador_home, monkeypatch):
    cfg = Config()
    cfg.capture.audio = False  # no microphone under Xvfb; the screen is real
    cfg.mcp.enabled = False
    save_config(cfg, mirador_home)
    shell = MiradorShell(lambda: Services.start(mirador_home), poll_ms=500)
    started, applied = [], []
    shell.started.connect(started.append)
    shell.settings_applied.connect(applied.append)
    shell.start()
    qtbot.waitUntil(lambda: bool(started), timeout=90_000)
    capture = started[0].capture.capture
    slack = WindowInfo(app="Slack", title="#acme-eng | Acme Corp - Slack")
    assert capture.screen._scope(slack, slack.title, "") is None  # before: the store's default scope

    dlg = shell.open("settings")
    qtbot.addWidget(dlg)
    _fill(dlg.scopes, app="Slack", title="#acme-*", scope="work/acme")
    _click(qtbot, dlg.scopes.buttons["add"])
    _save(qtbot, dlg)
    qtbot.waitUntil(lambda: bool(applied), timeout=30_000)

    assert load_config(mirador_home).capture.scope_rules == [ScopeRule(app="Slack", title="#acme-*", scope="work/acme")]
    assert started[0].capture.capture is capture  # the same running capture, no restart
    assert capture.screen._scope(slack, slack.title, "") == "work/acme"
    other = WindowInfo(app="Slack", title="#random | Acme Corp - Slack")
    assert capture.screen._scope(other, other.title, "") is None
    assert applied[0].restart == [] and applied[0].problems == []

    stopped = []
    monkeypatch.setattr(type(shell), "_finish", lambda self: self.stopped.emit())  # keep the test's event loop
    shell.stopped.connect(lambda: stopped.append(True))
    shell.quit()
    qtbot.waitUntil(lambda: bool(stopped), timeout=90_000)
    wait_idle(qtbot, shell.jobs)


def test_apply_rules_to_past_captures_moves_rows_and_their_memories_after_confirming(qtbot, store, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from desktop.ui.workers import Jobs
    from memory.consolidation.extraction import Extractor, run_extraction

    acme = store.add_evidence("We decided to use Postgres 16 for the acme billing service.", actor="capture",
                              source="screen", app="Slack", window="#acme-eng | Acme Corp - Slack")["id"]
    home = store.add_evidence("We decided to paint the kitchen walls yellow.", actor="capture", source="screen",
                              app="Signal", window="Mum")["id"]
    run_extraction(store, extractor=Extractor(engine="rules"))
    acme_mems = [m["id"] for m in store.list("memory", statuses=[], limit=100) if acme in m["provenance"]]
    assert acme_mems

    jobs = Jobs()
    page = ScopeRulesPage(store.config, apps=[])
    qtbot.addWidget(page)
    assert not page.buttons["past"].isEnabled()  # nothing to move rows in until the app attaches its store
    page.attach(jobs, store)
    _fill(page, app="Slack", title="#acme-*", scope="work/acme")
    _click(qtbot, page.buttons["add"])

    asked = []
    answer = [QMessageBox.StandardButton.No]
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: asked.append(a[2]) or answer[0])
    _click(qtbot, page.buttons["past"])
    qtbot.waitUntil(lambda: page.status.text() == "Nothing was moved.", timeout=30_000)
    assert "Moves 1 captured row (1 from personal) to work/acme" in asked[0]
    assert store.get(acme)["scope"] == "personal"  # declined: nothing moved

    answer[0] = QMessageBox.StandardButton.Yes
    _click(qtbot, page.buttons["past"])
    qtbot.waitUntil(lambda: page.status.text().startswith("Moved"), timeout=30_000)
    wait_idle(qtbot, jobs)
    assert page.status.text().startswith(f"Moved 1 captured row(s) and {len(acme_mems)} memory(ies)")
    assert store.get(acme)["scope"] == "work/acme" and store.get(home)["scope"] == "personal"
    assert {store.get(m)["scope"] for m in acme_mems} == {"work/acme"}
