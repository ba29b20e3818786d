"""The memory browser as a person uses it: a search that filters and marks its words, captured evidence in
the same window, a detail card that follows the result, per-type editing, scopes in their stored form, and
a refresh that keeps the selection."""

from __future__ import annotations

import re
from datetime import datetime, timezone

from PIL import Image, ImageDraw
from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QMessageBox, QPlainTextEdit

from desktop.ui.browser_data import MARK_STYLE
from desktop.ui.qt_models import HTML_ROLE, BrowserMemoryModel
from tests.desktop.conftest import click_row, open_browser, wait_idle

UNRELATED = [
    "The ledger service runs on PostgreSQL 16",
    "Lunch on Fridays is at the Thai place",
    "Standup moves to 9:30 from Monday",
    "Rotate the signing key every quarter",
    "The CI cache lives in an S3 bucket",
    "Bike tyres need four bar of pressure",
    "Sam prefers pairing on Thursdays",
    "Invoices go out on the first of the month",
    "The on-call rotation changes on Mondays",
    "Release notes are drafted in the wiki",
    "The office plants are watered on Wednesdays",
]


def _marked(html: str) -> list[str]:
    """The words shown with the highlighter style."""
    return re.findall(rf"<span style='{re.escape(MARK_STYLE)}'>([^<]*)</span>", html)


def _marked_in_pane(html: str) -> list[str]:
    """The words the detail pane shows with the highlighter colour (Qt rewrites the style it was given)."""
    return re.findall(r"background-color:#ffe27a;?\"?>([^<]+)<", html)


def _cells(browser) -> list[str]:
    m = browser.model
    return [m.index(r, BrowserMemoryModel.COL_TITLE).data() for r in range(m.rowCount())]


def _search(qtbot, browser, text: str) -> None:
    browser.search.setText(text)
    browser.reload()
    qtbot.waitUntil(lambda: not browser.current_model().busy and browser.count_label.text() not in
                    ("searching…", "loading…"), timeout=30_000)


def test_unrelated_word_does_not_match_everything_and_matches_are_marked(qtbot, jobs, store):
    for text in UNRELATED:
        store.add_memory(text, scope="work")
    dentist = store.add_memory("Dentist appointment is on the 14th at 08:15", type="episodic", scope="personal")
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 12, timeout=30_000)

    _search(qtbot, browser, "dentist")
    qtbot.waitUntil(lambda: browser.detail.row is not None, timeout=30_000)
    assert browser.model.total == 1 and _cells(browser) == ["Dentist appointment is on the 14th at 08:15"]
    assert browser.count_label.text() == "1 match for “dentist”", "not “12 of 12 matches”"
    assert not any(u in _cells(browser) for u in UNRELATED)
    idx = browser.model.index(0, BrowserMemoryModel.COL_TITLE)
    assert _marked(idx.data(HTML_ROLE)) == ["Dentist"]
    relevance = browser.model.index(0, BrowserMemoryModel.COL_RELEVANCE).data()
    assert relevance.count("●") >= 3 and not browser.table.isColumnHidden(BrowserMemoryModel.COL_RELEVANCE)
    # the detail pane follows the result and marks the word too
    assert browser.detail.row["id"] == dentist["id"]
    assert _marked_in_pane(browser.detail.toHtml()) == ["Dentist"]

    _search(qtbot, browser, "")  # no query: every memory, no relevance column
    qtbot.waitUntil(lambda: browser.model.rowCount() == 12, timeout=30_000)
    assert browser.table.isColumnHidden(BrowserMemoryModel.COL_RELEVANCE)
    assert all(browser.model.index(r, 0).data(HTML_ROLE) is None for r in range(12))
    wait_idle(qtbot, jobs)


def test_detail_follows_a_new_search_never_the_old_memory(qtbot, jobs, store):
    dentist = store.add_memory("Dentist appointment is on the 14th at 08:15", type="episodic", scope="personal")
    ledger = store.add_memory("The ledger service runs on PostgreSQL 16", scope="work")
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 2, timeout=30_000)

    _search(qtbot, browser, "dentist")
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == dentist["id"],
                    timeout=30_000)
    _search(qtbot, browser, "ledger database")
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == ledger["id"],
                    timeout=30_000)
    assert "Dentist" not in browser.detail.toPlainText()
    _search(qtbot, browser, "volcano eruption forecast")
    qtbot.waitUntil(lambda: browser.detail.row is None, timeout=30_000)
    assert browser.model.total == 0
    shown = browser.detail.toPlainText()
    assert "Nothing matches “volcano eruption forecast”" in shown and "ledger" not in shown.lower()
    assert browser.count_label.text() == "nothing matches “volcano eruption forecast”"
    wait_idle(qtbot, jobs)


def test_evidence_tab_finds_captured_screen_text(qtbot, jobs, store):
    invoice = store.add_evidence("Billing portal\nInvoice INV-20931 for Acme is due on Friday, 2,400 EUR",
                                 source="screen", app="Firefox", window="Billing — Acme")
    store.add_evidence("git push origin main", source="screen", app="Terminal", window="ledger")
    store.add_memory("Lunch on Fridays is at the Thai place", scope="work")
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 1, timeout=30_000)

    browser.show_evidence()
    assert browser.lists.currentWidget() is browser.ev_table and not browser.type_box.isVisible()
    _search(qtbot, browser, "invoice")
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == invoice["id"],
                    timeout=30_000)
    ids = [browser.ev_model.row_at(i)["id"] for i in range(browser.ev_model.rowCount())]
    assert ids == [invoice["id"]], "the terminal capture is about something else"
    text_col = browser.ev_model.COL_TEXT
    assert _marked(browser.ev_model.index(0, text_col).data(HTML_ROLE)) == ["Invoice"]
    shown = browser.detail.toPlainText()
    assert "Seen on screen in Firefox — Billing — Acme" in shown and "INV-20931" in shown
    assert not browser.edit_btn.isVisible(), "captured rows are evidence: deleted, never edited"

    browser.show_evidence(False)  # back to memories: the search runs over memories again
    qtbot.waitUntil(lambda: not browser.model.busy and browser.model.total == 0, timeout=30_000)
    assert browser.lists.currentWidget() is browser.table
    wait_idle(qtbot, jobs)


def _frame(home):
    path = home / "frames" / "slack.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", (800, 500), "white")
    ImageDraw.Draw(img).text((20, 20), "Maya: standup moves to 9:30", fill="black")
    img.save(path)
    return path


def test_card_hides_technical_fields_until_expanded(qtbot, jobs, store, mirador_home):
    ev = store.add_evidence("Maya Chen: Standup moves to 9:30 from Monday", source="screen", app="Slack",
                            window="#ledger-team", frame_path=str(_frame(mirador_home)))
    m = store.add_memory("Standup moves to 9:30 from Monday", type="episodic", scope="work",
                         provenance=[ev["id"]], details={"who": ["Maya Chen"]})
    row = store.get(m["id"])
    browser = open_browser(qtbot, jobs, store)
    click_row(qtbot, browser, m["id"])

    shown = browser.detail.toPlainText()
    assert "Standup moves to 9:30 from Monday" in shown and "With: Maya Chen" in shown
    assert "Seen on screen in Slack — #ledger-team" in shown and "Maya Chen: Standup moves" in shown
    assert re.search(r"Noted \w+day \d{1,2} \w{3}", shown), "when, in plain words"
    for hidden in ("fingerprint", row["fingerprint"], "salience", m["id"], ev["id"], '"who"', "{"):
        assert hidden not in shown, f"{hidden!r} belongs behind Technical details"
    assert "mirador relate" not in shown and "Technical details" in shown
    assert f"frame:{ev['id']}" in browser.detail.toHtml(), "the frame is a link to its full size"

    browser.detail.anchorClicked.emit(QUrl("technical:show"))  # what clicking "▸ Technical details" sends
    shown = browser.detail.toPlainText()
    assert "fingerprint" in shown and row["fingerprint"] in shown and m["id"] in shown and "salience" in shown

    browser.detail.anchorClicked.emit(QUrl(f"frame:{ev['id']}"))
    qtbot.waitUntil(lambda: browser.detail.viewer is not None and browser.detail.viewer.isVisible())
    assert browser.detail.viewer.image.pixmap().width() == 800, "full size, not the thumbnail"
    browser.detail.viewer.close()
    wait_idle(qtbot, jobs)


def test_edit_an_event_by_its_fields_refuses_a_bad_date_and_normalises_scope(qtbot, jobs, store):
    store.add_memory("Invoices go out on the first", scope="personal")
    m = store.add_memory("Dentist appointment", type="episodic", scope="work", details={"who": ["Dr Lee"]})
    browser = open_browser(qtbot, jobs, store)
    # The scope list arrives from a worker; on a busy machine it can come after the row.
    qtbot.waitUntil(lambda: {"work", "personal"} <= set(getattr(browser, "scopes", None) or []), timeout=30_000)
    click_row(qtbot, browser, m["id"])
    dlg = browser.edit_selected()
    qtbot.waitUntil(dlg.isVisible)
    assert not any(w.toPlainText().lstrip().startswith("{") for w in dlg.findChildren(QPlainTextEdit)), "no JSON box"
    assert dlg.field("who").text() == "Dr Lee"
    assert {dlg.scope.itemText(i) for i in range(dlg.scope.count())} >= {"work", "personal"}
    browser._scopes_known(["personal", "team", "work"])  # a scope made elsewhere while the form is open
    assert dlg.scope.findText("team") >= 0 and dlg.scope.currentText() == "work", "offered, choice kept"

    dlg.field("when").setText("31/31/2026 25:00")
    dlg.try_accept()
    error = dlg.type_fields["when"].error
    assert dlg.isVisible() and error.isVisible() and "is not a date and time" in error.text()
    assert "2026-12-03 14:05" in error.text(), "says how to write it"
    assert store.get(m["id"])["details"].get("when") is None, "nothing saved"

    dlg.field("when").setText("2026-12-03 14:05")
    dlg.field("who").setText("Dr Lee,  Maya Chen ,")
    dlg.scope.setCurrentText("Work / Acme")
    dlg.buttons.button(dlg.buttons.StandardButton.Save).click()
    qtbot.waitUntil(lambda: store.get(m["id"])["scope"] == "work/acme", timeout=30_000)
    wait_idle(qtbot, jobs)
    row = store.get(m["id"])
    assert row["details"]["who"] == ["Dr Lee", "Maya Chen"]
    when = datetime.fromisoformat(str(row["details"]["when"])).replace(tzinfo=None)
    typed_local = datetime(2026, 12, 3, 14, 5).astimezone()  # the person types local time; the store holds UTC
    assert when == typed_local.astimezone(timezone.utc).replace(tzinfo=None)
    assert row["text"] == "Dentist appointment" and row["user_edited"] is True
    qtbot.waitUntil(lambda: browser.detail.row is not None and "When:" in browser.detail.toPlainText(),
                    timeout=30_000)
    assert re.search(r"When: Thursday 3 Dec( 2026)?, 14:05", browser.detail.toPlainText())


def test_procedure_steps_edited_as_a_list(qtbot, jobs, store):
    m = store.add_memory("Rotate the signing key", type="procedural", scope="work",
                         details={"steps": ["generate a new key", "upload it to CI"]})
    browser = open_browser(qtbot, jobs, store)
    click_row(qtbot, browser, m["id"])
    assert "generate a new key" in browser.detail.toPlainText()
    dlg = browser.edit_selected()
    qtbot.waitUntil(dlg.isVisible)
    assert dlg.field("steps").toPlainText() == "generate a new key\nupload it to CI"
    dlg.field("steps").setPlainText("generate a new key\nupload it to CI\n\nrevoke the old key\n")
    dlg.buttons.button(dlg.buttons.StandardButton.Save).click()
    qtbot.waitUntil(lambda: len(store.get(m["id"])["details"]["steps"]) == 3, timeout=30_000)
    wait_idle(qtbot, jobs)
    assert store.get(m["id"])["details"]["steps"][-1] == "revoke the old key"


def test_scope_filter_is_normalised(qtbot, jobs, store):
    work = store.add_memory("The ledger service runs on PostgreSQL 16", scope="work/acme")
    store.add_memory("Grandma's birthday is in May", scope="personal")
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 2, timeout=30_000)
    browser.scope_edit.setText("Work/ACME")
    browser.reload()
    qtbot.waitUntil(lambda: not browser.model.busy and browser.model.total == 1, timeout=30_000)
    assert browser.scope_edit.text() == "work/acme" and browser.model.row_at(0)["id"] == work["id"]
    browser.scope_edit.setText("no such/…scope!")
    browser.reload()
    assert "Scope filter not applied" in browser.statusBar().currentMessage()
    wait_idle(qtbot, jobs)


def test_refresh_keeps_selection_and_scroll_and_drops_gone_rows(qtbot, jobs, store):
    from memory.store.erasure import forget

    rows = [store.add_memory(f"Note number {i:02d} about the garden", scope="work") for i in range(60)]
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 60, timeout=30_000)
    target = rows[5]  # newest first: near the bottom of the list
    assert browser.select_id(target["id"])
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == target["id"],
                    timeout=30_000)
    bar = browser.table.verticalScrollBar()
    assert bar.maximum() > 0
    bar.setValue(bar.maximum() - 2)
    scroll = bar.value()

    with qtbot.waitSignal(browser.model.refreshed, timeout=30_000) as nothing_changed:
        browser.refresh()
    assert nothing_changed.args == [False], "nothing changed: rows updated in place, no reset"

    forget(store, [rows[40]["id"], rows[41]["id"]])  # erased elsewhere (the CLI, an assistant)
    with qtbot.waitSignal(browser.model.refreshed, timeout=30_000):
        browser.refresh()
    wait_idle(qtbot, jobs)
    assert browser.model.total == 58 and browser.model.index_of(rows[40]["id"]) < 0
    selected = [i.data(0) for i in browser.table.selectionModel().selectedRows()]
    assert selected == [target["text"]], "the selection survives the refresh"
    assert browser.detail.row["id"] == target["id"]
    assert abs(bar.value() - scroll) <= 2, "the scroll position survives the refresh"

    # a selected row that is gone after a refresh clears the card instead of showing a stale memory
    forget(store, [target["id"]])
    with qtbot.waitSignal(browser.model.refreshed, timeout=30_000):
        browser.refresh()
    wait_idle(qtbot, jobs)
    assert browser.detail.row is None and browser.table.selectionModel().selectedRows() == []


def test_deleting_a_captured_row_takes_the_memories_drawn_only_from_it(qtbot, jobs, store, monkeypatch,
                                                                        mirador_home):
    import pytest

    from memory.errors import NotFoundError
    from tests.conftest import files_containing

    frame = _frame(mirador_home)
    slack = store.add_evidence("Maya Chen: the launch code word is heliotrope-5521", source="screen", app="Slack",
                               window="#launch", frame_path=str(frame))
    other = store.add_evidence("Launch checklist reviewed with Sam", source="audio", speaker="Sam")
    only = store.add_memory("The launch code word is heliotrope-5521", scope="work", provenance=[slack["id"]])
    both = store.add_memory("The launch was reviewed with Maya and Sam", scope="work",
                            provenance=[slack["id"], other["id"]])
    typed = store.add_memory("Launch party is on Friday", scope="work")
    browser = open_browser(qtbot, jobs, store)
    browser.show_evidence()
    qtbot.waitUntil(lambda: browser.ev_model.rowCount() == 2, timeout=30_000)
    browser.select_id(slack["id"])
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == slack["id"],
                    timeout=30_000)
    assert "Memories drawn from it — 2" in browser.detail.toPlainText()

    asked = []

    def answer(_parent, _title, text, *a, **k):
        asked.append(text)
        return QMessageBox.StandardButton.Cancel if len(asked) == 1 else QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QMessageBox, "question", answer)
    browser.delete_selected()
    qtbot.waitUntil(lambda: len(asked) == 1, timeout=30_000)
    wait_idle(qtbot, jobs)
    assert store.get(slack["id"])["id"] == slack["id"], "cancel erases nothing"
    assert "1 captured row" in asked[0] and "1 frame image" in asked[0] and "1 memory derived only" in asked[0]
    assert "1 memory that also rest" in asked[0] and "Memories you wrote yourself" in asked[0]

    browser.delete_selected()
    qtbot.waitUntil(lambda: browser.ev_model.index_of(slack["id"]) < 0, timeout=60_000)
    wait_idle(qtbot, jobs)
    for gone in (slack["id"], only["id"]):
        with pytest.raises(NotFoundError):
            store.get(gone)
    assert not frame.exists() and files_containing(mirador_home, "heliotrope-5521") == []
    kept = store.get(both["id"])
    assert kept["provenance"] == [other["id"]] and kept["status"] == "candidate", "rests on other evidence: review"
    assert store.get(typed["id"])["text"] == "Launch party is on Friday", "hand-written memories are never touched"
    assert "Erased 1 captured row and 1 memory" in browser.statusBar().currentMessage(), "said in words"
