"""Review queue on a real store: approve, reject (never back), edit-then-approve, in bulk."""

from __future__ import annotations

from PySide6.QtCore import Qt

from desktop.ui.browser_data import pending_count
from desktop.ui.review import ReviewQueue
from memory.store import filters as F
from tests.desktop.conftest import wait_idle


def _select(qtbot, q, ids, ctrl_first=False):
    for n, id_ in enumerate(ids):
        qtbot.waitUntil(lambda i=id_: q.model.index_of(i) >= 0, timeout=30_000)
        idx = q.table.model().mapFromSource(q.model.index(q.model.index_of(id_), 0))
        mods = Qt.KeyboardModifier.ControlModifier if n or ctrl_first else Qt.KeyboardModifier.NoModifier
        qtbot.mouseClick(q.table.viewport(), Qt.MouseButton.LeftButton, mods, q.table.visualRect(idx).center())


def test_approve_reject_and_rejected_never_reappear(qtbot, jobs, store):
    ev = store.add_evidence("Sam: let's move standup to 9:30 from Monday", source="audio", speaker="Sam")
    c1 = store.add_memory("Standup moves to 9:30 from Monday", type="episodic", status="candidate",
                          origin="extractor", provenance=[ev["id"]], confidence=0.8)
    c2 = store.add_memory("Sam prefers tabs", status="candidate", origin="extractor", confidence=0.4)
    c3 = store.add_memory("The team uses Postgres", status="candidate", origin="dream", confidence=0.7)
    c4 = store.add_memory("Sam likes spaces", status="candidate", origin="extractor", confidence=0.3)
    active = store.add_memory("Already active fact")
    q = ReviewQueue(jobs, store)
    qtbot.addWidget(q)
    q.show()
    qtbot.waitUntil(lambda: q.model.total == 4 and q.model.rowCount() == 4, timeout=30_000)
    assert q.model.index_of(active["id"]) < 0

    _select(qtbot, q, [c1["id"]])
    qtbot.waitUntil(lambda: q.detail.row is not None and q.detail.row["id"] == c1["id"])
    assert "let's move standup" in q.detail.toPlainText()  # its evidence is shown
    qtbot.mouseClick(q.approve_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q.model.index_of(c1["id"]) < 0)

    _select(qtbot, q, [c2["id"], c4["id"]])  # bulk reject
    assert q.reject_btn.text() == "Reject 2"
    qtbot.mouseClick(q.reject_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q.model.total == 1)
    wait_idle(qtbot, jobs)
    assert store.get(c1["id"])["status"] == "active"
    assert store.get(c2["id"])["status"] == "rejected" and store.get(c4["id"])["status"] == "rejected"
    assert pending_count(store) == 1

    # edit then approve
    _select(qtbot, q, [c3["id"]])
    qtbot.mouseClick(q.edit_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q.edit_dialog.isVisible())
    q.edit_dialog.text.setPlainText("The team uses Postgres 16 for the ledger")
    qtbot.mouseClick(q.edit_dialog.buttons.button(q.edit_dialog.buttons.StandardButton.Save), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q.model.total == 0)
    wait_idle(qtbot, jobs)
    row = store.get(c3["id"])
    assert row["status"] == "active" and row["user_edited"] and row["text"].endswith("for the ledger")
    actions = [(a["actor"], a["action"]) for a in store.rows("audit") if a["entity_id"] == c3["id"]]
    assert actions[-2:] == [("person", "update"), ("person", "status")]

    # a fresh queue (as after a restart) shows none of them; rejected ones are never back
    q2 = ReviewQueue(jobs, store)
    qtbot.addWidget(q2)
    qtbot.waitUntil(lambda: not q2.model.busy, timeout=30_000)
    wait_idle(qtbot, jobs)
    assert q2.model.total == 0 and q2.header.text() == "Nothing to review"


def test_dream_proposals_accept_and_dismiss(qtbot, jobs, store):
    from memory.consolidation.dream import list_proposals, run_dream

    dup_a = store.add_memory("Standup is at 9:30 every weekday", scope="work", origin="extractor")
    dup_b = store.add_memory("Standup is at 9:30 every weekday.", scope="work", origin="extractor")
    old = store.add_memory("The ledger runs on PostgreSQL 16", scope="work", details={"subject": "ledger"})
    store.add_memory("The ledger runs on PostgreSQL 17 since March", scope="work", details={"subject": "ledger"})
    run_dream(store)
    props = {p["kind"]: p for p in list_proposals(store)}
    assert set(props) == {"merge", "supersede"}
    assert pending_count(store) == 2

    q = ReviewQueue(jobs, store)
    qtbot.addWidget(q)
    q.show()
    panel = q.proposals
    qtbot.waitUntil(lambda: panel.model.rowCount() == 2, timeout=30_000)
    assert q.tabs.tabText(1) == "Tidy-up proposals (2)"
    q.tabs.setCurrentIndex(1)
    row_of = {r["kind"]: i for i, r in enumerate(panel.model.rows)}

    def pick(kind):
        idx = panel.table.model().mapFromSource(panel.model.index(row_of[kind], 0))
        qtbot.mouseClick(panel.table.viewport(), Qt.MouseButton.LeftButton, pos=panel.table.visualRect(idx).center())
        target = panel.model.rows[row_of[kind]]["target_id"]
        qtbot.waitUntil(lambda: panel.detail.row is not None and panel.detail.row["id"] == target, timeout=30_000)
        return target

    superseded = pick("supersede")
    assert superseded == old["id"]
    qtbot.mouseClick(panel.accept_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 1, timeout=30_000)
    row_of = {r["kind"]: i for i, r in enumerate(panel.model.rows)}
    merged = pick("merge")
    qtbot.mouseClick(panel.dismiss_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: panel.model.rowCount() == 0, timeout=30_000)
    wait_idle(qtbot, jobs)
    assert store.get(old["id"])["status"] == "superseded"
    assert store.get(merged)["status"] == "active" and {dup_a["id"], dup_b["id"]} >= {merged}
    assert list_proposals(store) == [] and pending_count(store) == 0


def test_edit_and_approve_picks_a_scope_in_use_or_a_new_name_normalised(qtbot, jobs, store):
    store.add_memory("The ledger runs on PostgreSQL 16", scope="work/acme")
    store.add_memory("Dentist on the 14th", scope="personal")
    c = store.add_memory("Sam prefers tabs", status="candidate", origin="extractor", scope="work")
    q = ReviewQueue(jobs, store)
    qtbot.addWidget(q)
    q.show()
    qtbot.waitUntil(lambda: q.model.rowCount() == 1, timeout=30_000)
    wait_idle(qtbot, jobs)
    _select(qtbot, q, [c["id"]])
    qtbot.mouseClick(q.edit_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q.edit_dialog.isVisible())
    box = q.edit_dialog.scope
    offered = [box.itemText(i) for i in range(box.count())]
    assert {"work", "work/acme", "personal"} <= set(offered), offered
    assert box.currentText() == "work" and box.isEditable()

    box.setCurrentText("Home / Garden Shed")  # a new name, as a person types it
    qtbot.mouseClick(q.edit_dialog.buttons.button(q.edit_dialog.buttons.StandardButton.Save),
                     Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: q.model.total == 0, timeout=30_000)
    wait_idle(qtbot, jobs)
    row = store.get(c["id"])
    assert row["scope"] == "home/garden-shed" and row["status"] == "active"
    assert store.count("memory", F.equals("scope", "Home / Garden Shed"), local=True) == 0, "never stored as typed"
