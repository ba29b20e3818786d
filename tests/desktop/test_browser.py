"""Memory browser flows on a real store: search → select → edit → save; delete erases for good."""

from __future__ import annotations

import json

import pytest
from PIL import Image, ImageDraw
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from memory.errors import NotFoundError
from tests.conftest import files_containing
from tests.desktop.conftest import click_row, open_browser, wait_idle

PHRASE = "zanzibar-quokka-7731"


def _frame(home, name="f1.png", keys=None):
    """A frame file: plain PNG as older versions left them, or (keys given) sealed as capture writes them now."""
    img = Image.new("RGB", (800, 500), "white")
    ImageDraw.Draw(img).text((20, 20), "psql ledger -c 'select version()'  PostgreSQL 16.2", fill="black")
    if keys is not None:
        from datetime import datetime

        from capture.frames import save_thumbnail

        return home / save_thumbnail(img, home, datetime(2026, 1, 1), name.split(".")[0], keys=keys)
    path = home / "frames" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def test_search_select_edit_save(qtbot, jobs, store, mirador_home):
    ev = store.add_evidence("psql ledger: PostgreSQL 16.2 on x86_64", source="screen", app="Terminal",
                            window="ledger — psql", frame_path=str(_frame(mirador_home, keys=store.keys)))
    target = store.add_memory("The ledger service runs on PostgreSQL 16", scope="work", provenance=[ev["id"]],
                              details={"subject": "ledger"})
    store.add_memory("Lunch on Fridays is at the Thai place", scope="personal")
    browser = open_browser(qtbot, jobs, store)

    qtbot.keyClick(browser, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(browser.search.hasFocus)
    qtbot.keyClicks(browser.search, "which database does the ledger use")
    qtbot.keyClick(browser.search, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: browser.model.rowCount() > 0 and browser.model.row_at(0)["id"] == target["id"],
                    timeout=30_000)
    click_row(qtbot, browser, target["id"])
    detail = browser.detail.row
    assert [e["id"] for e in detail["_evidence"]] == [ev["id"]]
    assert detail["_evidence"][0]["_thumb"] is not None  # the frame's thumbnail is in the pane
    assert "PostgreSQL 16.2 on x86_64" in browser.detail.toPlainText()

    browser.table.setFocus()
    qtbot.keyClick(browser.table, Qt.Key.Key_Return)  # Enter edits
    qtbot.waitUntil(lambda: getattr(browser, "edit_dialog", None) is not None and browser.edit_dialog.isVisible())
    dlg = browser.edit_dialog
    dlg.text.setPlainText("")  # invalid first: refused with a message naming the field
    dlg.try_accept()
    assert dlg.isVisible() and dlg.error.text().startswith("text:")
    dlg.text.setPlainText("The ledger service runs on PostgreSQL 17 since the March upgrade")
    dlg.confidence.setText("0.9")
    qtbot.mouseClick(dlg.buttons.button(dlg.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: store.get(target["id"])["text"].endswith("March upgrade"), timeout=30_000)
    wait_idle(qtbot, jobs)

    row = store.get(target["id"])
    assert row["user_edited"] is True and row["confidence"] == 0.9 and row["provenance"] == [ev["id"]]
    assert browser.model.row_at(browser.model.index_of(target["id"]))["text"] == row["text"]  # shown in place
    audits = [a for a in store.rows("audit") if a["entity_id"] == target["id"]]
    assert [(a["actor"], a["action"]) for a in audits] == [("person", "create"), ("person", "update")]
    assert "PostgreSQL 17" in json.loads(audits[-1]["after"])["text"]


def test_delete_from_browser_erases(qtbot, jobs, store, mirador_home, monkeypatch):
    keep = store.add_memory("Unrelated fact about coffee", scope="work")
    gone = store.add_memory(f"We decided the {PHRASE} ledger migration happens in May", scope="work")
    a = store.add_memory("Standup moved to 9:30", scope="work")
    b = store.add_memory("Standup notes go to the wiki", scope="work")
    store.optimize()
    assert files_containing(mirador_home, PHRASE), "precondition: the phrase is on disk"
    browser = open_browser(qtbot, jobs, store)

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Cancel)
    click_row(qtbot, browser, gone["id"])
    qtbot.keyClick(browser.table, Qt.Key.Key_Delete)
    wait_idle(qtbot, jobs)
    assert store.get(gone["id"])["id"] == gone["id"], "cancel must delete nothing"

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    qtbot.keyClick(browser.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: browser.model.index_of(gone["id"]) < 0, timeout=60_000)
    wait_idle(qtbot, jobs)
    with pytest.raises(NotFoundError):
        store.get(gone["id"])
    assert files_containing(mirador_home, PHRASE) == []
    assert files_containing(mirador_home, "quokka") == []

    # multi-select: both standup memories at once
    click_row(qtbot, browser, a["id"])
    idx_b = browser.table.model().mapFromSource(browser.model.index(browser.model.index_of(b["id"]), 0))
    qtbot.mouseClick(browser.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                     browser.table.visualRect(idx_b).center())
    assert browser.delete_btn.text() == "Delete 2…"
    qtbot.mouseClick(browser.delete_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: browser.model.total == 1, timeout=60_000)
    wait_idle(qtbot, jobs)
    assert store.count("memory", local=True) == 1 and store.get(keep["id"])["text"] == "Unrelated fact about coffee"


def test_timeline_groups_by_day_and_app_and_deletes_last_hour_and_app(qtbot, jobs, store, mirador_home, monkeypatch):
    from datetime import timedelta

    from desktop.ui.qt_models import now_utc
    from desktop.ui.timeline import EvidenceTimeline

    old = now_utc() - timedelta(days=2)
    frame = _frame(mirador_home, "slack.png", keys=store.keys)  # sealed, as capture writes it
    recent = store.add_evidence("slack: deploy window is 3pm pelican-4410", source="screen", app="Slack",
                                frame_path=str(frame))
    store.add_evidence("terminal: git push origin main", source="screen", app="Terminal")
    store.add_evidence("Slack two days ago: heron-2207 retro notes", source="screen", app="Slack", captured_at=old)
    store.add_evidence("Firefox two days ago: docs for lancedb", source="screen", app="Firefox", captured_at=old)
    tl = EvidenceTimeline(jobs, store)
    qtbot.addWidget(tl)
    tl.show()
    qtbot.waitUntil(lambda: tl.tree.topLevelItemCount() == 2 and tl.model.rowCount() == 2, timeout=30_000)
    assert tl.summary.text() == "4 evidence rows over 2 day(s)"
    def thumbs():
        return [tl.model.index(i, 0).data(Qt.ItemDataRole.DecorationRole) for i in range(2)]

    # Thumbnails are decoded lazily, for the rows on screen: the Slack frame's comes, the other row has none.
    qtbot.waitUntil(lambda: sum(t is not None for t in thumbs()) == 1, timeout=30_000)

    monkeypatch.setattr(QMessageBox, "exec", lambda *a, **k: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(tl.last_hour, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tl.summary.text() == "2 evidence rows over 1 day(s)", timeout=60_000)
    assert not frame.exists() and files_containing(mirador_home, "pelican-4410") == []
    with pytest.raises(NotFoundError):
        store.get(recent["id"])

    older_day = tl.tree.topLevelItem(0)
    slack = next(older_day.child(i) for i in range(older_day.childCount()) if older_day.child(i).text(0) == "Slack")
    tl.tree.setCurrentItem(slack)
    assert tl.del_app.text() == "Delete all from Slack…"
    qtbot.mouseClick(tl.del_app, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tl.summary.text() == "1 evidence rows over 1 day(s)", timeout=60_000)
    wait_idle(qtbot, jobs)
    assert files_containing(mirador_home, "heron-2207") == []
    assert [r["app"] for r in store.list("evidence")] == ["Firefox"]


def _column(browser, header: str) -> list[str]:
    """The text of one column as the person sees it, top to bottom."""
    proxy = browser.table.model()
    col = next(c for c in range(proxy.columnCount()) if proxy.headerData(c, Qt.Orientation.Horizontal) == header)
    return [proxy.index(r, col).data() for r in range(proxy.rowCount())]


def test_type_and_status_columns_speak_plainly_sort_and_filter(qtbot, jobs, store):
    from desktop.ui.browser_data import TYPE_TIPS

    store.add_memory("Dentist on the 14th at 08:15", type="episodic", scope="personal")
    store.add_memory("The ledger runs on PostgreSQL 16", type="semantic", scope="work")
    store.add_memory("Deploy: tag, push, watch the pipeline", type="procedural", scope="work",
                     details={"steps": ["tag", "push", "watch the pipeline"]})
    store.add_memory("Maybe standup moves to 9:30", status="candidate", origin="extractor")
    store.add_memory("Wi-Fi password", type="vault", value="hunter2", scope="personal")
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 5, timeout=30_000)

    types, statuses = _column(browser, "Type"), _column(browser, "Status")
    assert sorted(types) == ["Event", "Fact", "Fact", "How-to", "Secret (vault)"]
    assert sorted(statuses) == ["", "In use", "In use", "In use", "Needs review"]
    raw = {"episodic", "semantic", "procedural", "vault", "candidate", "active"}
    assert not raw & (set(types) | set(statuses)), "no stored value shows as is"
    # the tooltips explain the words
    proxy = browser.table.model()
    assert proxy.index(types.index("Event"), 2).data(Qt.ItemDataRole.ToolTipRole) == TYPE_TIPS["episodic"]
    assert "Review" in proxy.headerData(3, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole)

    # sorting follows the words shown, not the stored values ("Event" < "Fact" < "How-to" < "Secret")
    browser.table.sortByColumn(2, Qt.SortOrder.AscendingOrder)
    assert _column(browser, "Type") == ["Event", "Fact", "Fact", "How-to", "Secret (vault)"]

    # the filters use the same words, and still filter by the stored value
    assert browser.type_box.itemText(0) == "Any type" and "episodic" not in [
        browser.type_box.itemText(i) for i in range(browser.type_box.count())]
    browser.type_box.setCurrentText("How-to")
    qtbot.waitUntil(lambda: _column(browser, "Type") == ["How-to"], timeout=30_000)
    browser.type_box.setCurrentText("Any type")
    browser.status_box.setCurrentText("Needs review")
    qtbot.waitUntil(lambda: _column(browser, "Status") == ["Needs review"], timeout=30_000)
    assert _column(browser, "Memory") == ["Maybe standup moves to 9:30"]
    wait_idle(qtbot, jobs)


def test_confidence_is_edited_as_the_percentage_the_table_shows(qtbot, jobs, store):
    from desktop.ui.browser_edit import EditDialog

    m = store.add_memory("Sam prefers pairing on Thursdays", scope="work", confidence=0.7234)
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 1, timeout=30_000)
    assert _column(browser, "Confidence") == ["72%"]
    row = browser.model.row_at(0)

    dlg = EditDialog(row, browser)
    qtbot.addWidget(dlg)
    assert dlg.confidence.text() == "72.34%"
    dlg.try_accept()
    assert dlg.result() == dlg.DialogCode.Accepted and dlg.changes == {}, "an untouched field changes nothing"

    for typed, stored in (("80%", 0.8), ("80", 0.8), ("0.8", 0.8), ("5.5 %", 0.055)):
        dlg = EditDialog(row, browser)
        qtbot.addWidget(dlg)
        dlg.confidence.setText(typed)
        dlg.try_accept()
        assert dlg.changes == {"confidence": stored}, typed

    for bad in ("150%", "very", "-3"):
        dlg = EditDialog(row, browser)
        qtbot.addWidget(dlg)
        dlg.show()
        dlg.confidence.setText(bad)
        dlg.try_accept()
        assert dlg.isVisible() and dlg.changes == {} and "percentage from 0 to 100" in dlg.error.text(), bad
        dlg.reject()
    assert store.get(m["id"])["confidence"] == 0.7234, "nothing was saved"
    wait_idle(qtbot, jobs)
