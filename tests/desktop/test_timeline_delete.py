"""Timeline deletes (issue 30): the dialog states what goes, with counts, before anything is erased; an
evidence delete takes the memories derived only from it and never what the person wrote or the vault."""

from __future__ import annotations

from datetime import timedelta

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QMessageBox

from desktop.ui.qt_models import now_utc
from memory.errors import NotFoundError
from tests.conftest import files_containing
from tests.desktop.conftest import wait_idle


def _timeline(qtbot, jobs, store, rows: int):
    from desktop.ui.timeline import EvidenceTimeline

    tl = EvidenceTimeline(jobs, store)
    qtbot.addWidget(tl)
    tl.show()
    qtbot.waitUntil(lambda: tl.model.rowCount() == rows, timeout=30_000)
    return tl


def test_delete_last_hour_says_what_goes_and_keeps_hand_written_memories_and_the_vault(qtbot, jobs, store,
                                                                                       mirador_home, monkeypatch):
    checklist = store.add_memory("Release checklist: tag, build, sign, upload", scope="work")
    dentist = store.add_memory("Dentist appointment Tuesday 3pm", scope="personal")
    secret = store.add_memory("Staging database password", type="vault", value="osprey-vault-77", scope="work")
    a = store.add_evidence("slack: launch moves to Friday pelican-5512", source="screen", app="Slack")
    b = store.add_evidence("calendar: launch Friday", source="screen", app="Calendar",
                           captured_at=now_utc() - timedelta(days=2))
    only = store.add_memory("The launch code word is pelican-5512", provenance=[a["id"]], origin="extractor")
    both = store.add_memory("The launch is on Friday", provenance=[a["id"], b["id"]], origin="extractor")
    tl = _timeline(qtbot, jobs, store, 1)

    asked = []
    monkeypatch.setattr(QMessageBox, "exec", lambda box: asked.append(box) or QMessageBox.StandardButton.Cancel)
    qtbot.mouseClick(tl.last_hour, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(asked), timeout=30_000)
    wait_idle(qtbot, jobs)
    title, details = tl.last_question
    assert title == "Erase everything captured in the last hour?"
    assert details.startswith("Erases 1 captured row (screen text, transcripts, notes), 0 frame images, "
                              "1 memory derived only from them.")
    assert "1 memory that also rest on other evidence" in details and "vault entries are kept" in details
    assert store.get(only["id"]) and store.get(a["id"]), "Cancel erases nothing"

    monkeypatch.setattr(QMessageBox, "exec", lambda box: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(tl.last_hour, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tl.summary.text() == "1 evidence rows over 1 day(s)", timeout=60_000)
    wait_idle(qtbot, jobs)
    for gone in (a["id"], only["id"]):
        with pytest.raises(NotFoundError):
            store.get(gone)
    kept = store.get(both["id"])
    assert kept["status"] == "candidate" and kept["provenance"] == [b["id"]]
    assert store.get(checklist["id"])["text"] == checklist["text"]
    assert store.get(dentist["id"])["text"] == dentist["text"]
    assert store.reveal(secret["id"]) == "osprey-vault-77"
    assert files_containing(mirador_home, "pelican-5512") == []


def test_delete_app_erases_every_memory_derived_only_from_it(qtbot, jobs, store, mirador_home, monkeypatch):
    s1 = store.add_evidence("slack: heron-8830 budget approved", source="screen", app="Slack")
    s2 = store.add_evidence("slack: heron-8830 kickoff Monday", source="screen", app="Slack")
    store.add_evidence("terminal: make test", source="screen", app="Terminal")
    for text, prov in (("heron-8830 budget is approved", [s1["id"]]), ("heron-8830 kicks off Monday", [s2["id"]]),
                       ("heron-8830 budget and kickoff", [s1["id"], s2["id"]])):
        store.add_memory(text, provenance=prov, origin="extractor")
    hand = store.add_memory("Ask about heron-8830 parking")
    tl = _timeline(qtbot, jobs, store, 3)
    day = tl.tree.topLevelItem(0)
    slack = next(day.child(i) for i in range(day.childCount()) if day.child(i).text(0) == "Slack")
    tl.tree.setCurrentItem(slack)
    monkeypatch.setattr(QMessageBox, "exec", lambda box: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(tl.del_app, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tl.summary.text() == "1 evidence rows over 1 day(s)", timeout=60_000)
    wait_idle(qtbot, jobs)
    assert tl.last_question[0] == "Erase all evidence captured from Slack?"
    assert "2 captured rows" in tl.last_question[1] and "3 memories derived only from them" in tl.last_question[1]
    assert [m["id"] for m in store.list("memory", statuses=[])] == [hand["id"]]
    assert files_containing(mirador_home, "budget approved") == []


def test_the_question_is_wrapped_at_word_boundaries(qtbot, jobs, store):
    from memory.store.erasure import plan_forget_where

    ev = store.add_evidence("slack: a note", source="screen", app="Slack")
    store.add_memory("derived note", provenance=[ev["id"]], origin="extractor")
    tl = _timeline(qtbot, jobs, store, 1)
    box = tl.confirm_box("all evidence captured from Slack", plan_forget_where(store, app="Slack"))
    qtbot.addWidget(box)
    box.show()
    qtbot.waitExposed(box)
    labels = [w for w in box.findChildren(QLabel) if w.text() and w.isVisible()]
    details = next(w for w in labels if w.text().startswith("Erases"))
    assert details.wordWrap()
    for w in labels:  # every line fits: wrapped lines at word boundaries, a short line on one line
        if w.wordWrap():
            assert w.heightForWidth(w.width()) <= w.height(), f"clipped: {w.text()!r}"
        else:
            assert w.fontMetrics().horizontalAdvance(w.text()) <= w.contentsRect().width(), f"cut: {w.text()!r}"
    assert details.text().endswith("This cannot be undone.")
    box.close()
