"""Live windows (issue 30): open windows follow the store when another process (the CLI) or this one changes
it, within 2 s, keeping the person's selection; the tray's pending count and Review's agree."""

from __future__ import annotations

import subprocess
import sys
import time
from functools import partial

import pytest
from PySide6.QtCore import QPoint, Qt

from desktop.ui.app import _live_tables
from desktop.ui.browser import selected_rows
from desktop.ui.browser_data import pending_count
from desktop.ui.review import ReviewQueue
from desktop.ui.review_proposals import review_pending
from desktop.ui.store_watch import LiveViews, StoreWatch, table_versions
from desktop.ui.timeline import EvidenceTimeline
from desktop.ui.tray import Tray
from tests.desktop.conftest import click_row, open_browser, wait_idle
from tests.memory.mcp_support import ROOT, env_for

LIVE_S = 2.0  # issue 30: a change shows in every open window within 2 s


def _cli(home, *args) -> str:
    out = subprocess.run([sys.executable, "-m", "desktop.cli.main", *args], cwd=ROOT, env=env_for(home),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _live(jobs, *views):
    watch = StoreWatch(jobs, views[0][1].store)
    live = LiveViews(watch)
    for name, view in views:
        live.add(view, partial(_live_tables, name, view))
    watch.start()
    return watch, live


def _select(qtbot, win, id_):
    idx = win.table.model().mapFromSource(win.model.index(win.model.index_of(id_), 0))
    qtbot.mouseClick(win.table.viewport(), Qt.MouseButton.LeftButton, pos=win.table.visualRect(idx).center())


def _ids(view) -> list[str]:
    return [r["id"] for r in selected_rows(view.table)]


def test_table_versions_see_another_store_handles_writes(store, mirador_home):
    from memory.store.core import Store

    before = table_versions(store)
    other = Store(mirador_home, embedder=store.embedder)  # another opener of the same data dir
    other.add_memory("Written by someone else")
    after = table_versions(store)
    assert after["memories"] > before["memories"]
    assert after["evidence"] == before["evidence"] and after["vault"] == before["vault"]


def test_cli_changes_show_in_open_browser_and_review_keeping_the_selection(qtbot, jobs, store, mirador_home):
    gone = store.add_memory("The quokka-ferry leaves at 7:10", scope="work")
    kept = store.add_memory("The kestrel-bridge opens at 9", scope="work")
    other = store.add_memory("The heron-tunnel closes at 22", scope="work")
    c_cli = store.add_memory("Maybe the ferry moves to 7:30", status="candidate", origin="extractor")
    c_sel = store.add_memory("Maybe the bridge opens at 8", status="candidate", origin="extractor")
    browser = open_browser(qtbot, jobs, store)
    review = ReviewQueue(jobs, store)
    qtbot.addWidget(review)
    review.show()
    qtbot.waitExposed(review)
    qtbot.waitUntil(lambda: browser.model.total == 5 and review.model.rowCount() == 2, timeout=30_000)
    click_row(qtbot, browser, kept["id"])
    _select(qtbot, review, c_sel["id"])
    qtbot.waitUntil(lambda: _ids(review) == [c_sel["id"]])
    watch, _live_views = _live(jobs, ("browser", browser), ("review", review))
    qtbot.waitUntil(lambda: watch.versions is not None)

    _cli(mirador_home, "delete", gone["id"])
    _cli(mirador_home, "edit", c_cli["id"], "--status", "rejected")
    added = _cli(mirador_home, "add", "Maybe the tunnel closes at 23", "--status", "candidate", "--json")
    t0 = time.monotonic()
    qtbot.waitUntil(lambda: browser.model.index_of(gone["id"]) < 0 and review.model.index_of(c_cli["id"]) < 0
                    and review.model.total == 2 and browser.model.total == 4, timeout=int(LIVE_S * 1000))
    waited = time.monotonic() - t0
    assert waited < LIVE_S
    new_id = next(i for i in review.model._ids if i != c_sel["id"])
    assert new_id in added and browser.model.index_of(new_id) >= 0
    # the person's selection stays where it was, and the detail pane still shows it
    assert _ids(browser) == [kept["id"]] and browser.detail.row["id"] == kept["id"]
    assert _ids(review) == [c_sel["id"]]
    assert browser.model.index_of(other["id"]) >= 0
    assert "no row" not in browser.statusBar().currentMessage()
    watch.stop()
    wait_idle(qtbot, jobs)


def test_tray_and_review_counts_agree_after_approve_and_reject(qtbot, jobs, store):
    ids = [store.add_memory(f"Candidate number {n} about the ledger", status="candidate", origin="extractor")["id"]
           for n in range(4)]
    tray = Tray(jobs, None, lambda: review_pending(store), poll_ms=60_000)  # only the store watch updates it
    review = ReviewQueue(jobs, store)
    qtbot.addWidget(review)
    review.show()
    qtbot.waitExposed(review)
    watch, _live_views = _live(jobs, ("review", review))
    watch.store_changed.connect(lambda _c: tray.refresh())
    tray.refresh()
    qtbot.waitUntil(lambda: review.model.rowCount() == 4 and tray.pending == 4 and watch.versions is not None,
                    timeout=30_000)

    def agree(n):
        tray.menu.popup(QPoint(200, 200))
        qtbot.waitUntil(tray.menu.isVisible)
        ok = tray.action(f"Review ({n} pending)") is not None
        tray.menu.hide()
        return ok and review.tabs.tabText(0) == f"Candidates ({n})" and review.pending == n

    _select(qtbot, review, ids[1])
    at = review.model.index_of(ids[1])
    qtbot.mouseClick(review.approve_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: review.model.total == 3 and tray.pending == 3, timeout=int(LIVE_S * 1000) + 2000)
    assert agree(3)
    # after an action the next item is selected, not nothing
    qtbot.waitUntil(lambda: len(_ids(review)) == 1)
    assert _ids(review) == [review.model.row_at(at)["id"]]  # the one below takes its place
    qtbot.waitUntil(lambda: review.detail.row is not None and review.detail.row["id"] == _ids(review)[0])
    qtbot.mouseClick(review.reject_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: review.model.total == 2 and tray.pending == 2, timeout=int(LIVE_S * 1000) + 2000)
    assert agree(2)
    assert len(_ids(review)) == 1, "the next candidate is selected after a reject too"
    store.set_status(review.model.row_at(0)["id"], "active")  # a decision made elsewhere (same process)
    qtbot.waitUntil(lambda: review.model.total == 1 and tray.pending == 1, timeout=int(LIVE_S * 1000) + 1000)
    assert agree(1)
    watch.stop()
    wait_idle(qtbot, jobs)


def test_new_captures_appear_in_an_open_timeline_keeping_the_selection(qtbot, jobs, store):
    first = store.add_evidence("Terminal: make test passed", source="screen", app="xterm")
    second = store.add_evidence("Terminal: git push done", source="screen", app="xterm")
    tl = EvidenceTimeline(jobs, store)
    qtbot.addWidget(tl)
    tl.show()
    qtbot.waitExposed(tl)
    qtbot.waitUntil(lambda: tl.model.rowCount() == 2, timeout=30_000)
    _select(qtbot, tl, first["id"])
    qtbot.waitUntil(lambda: _ids(tl) == [first["id"]])
    watch, _live_views = _live(jobs, ("timeline", tl))
    qtbot.waitUntil(lambda: watch.versions is not None)
    new = store.add_evidence("Browser: CI is green", source="screen", app="firefox")
    newer = store.add_evidence("Terminal: deploy started", source="screen", app="xterm")
    # new rows arrive above the selected one (newest first): it is still selected once they are in
    qtbot.waitUntil(lambda: tl.model.index_of(new["id"]) >= 0 and tl.model.index_of(newer["id"]) >= 0
                    and _ids(tl) == [first["id"]], timeout=int(LIVE_S * 1000))
    assert tl.summary.text().startswith("4 evidence rows")
    assert tl.model.index_of(second["id"]) >= 0
    watch.stop()
    wait_idle(qtbot, jobs)


@pytest.mark.parametrize("hidden", [True])
def test_a_hidden_window_catches_up_when_shown(qtbot, jobs, store, hidden):
    c = store.add_memory("Maybe the ledger moves", status="candidate", origin="extractor")
    review = ReviewQueue(jobs, store)
    qtbot.addWidget(review)
    review.show()
    qtbot.waitExposed(review)
    qtbot.waitUntil(lambda: review.model.rowCount() == 1, timeout=30_000)
    watch, live = _live(jobs, ("review", review))
    qtbot.waitUntil(lambda: watch.versions is not None)
    review.hide()
    store.set_status(c["id"], "rejected")
    qtbot.waitUntil(lambda: id(review) in live._stale, timeout=5000)
    assert review.model.total == 1, "a hidden window is not refreshed"
    review.show()
    live.shown(review)
    qtbot.waitUntil(lambda: review.model.total == 0, timeout=5000)
    watch.stop()
    wait_idle(qtbot, jobs)


def test_tray_and_review_agree_when_a_proposal_lost_its_memory(qtbot, jobs, store):
    from memory.consolidation.dream import list_proposals, run_dream
    from memory.store.erasure import forget

    store.add_memory("Standup is at 9:30 every weekday", scope="work", origin="extractor")
    store.add_memory("Standup is at 9:30 every weekday.", scope="work", origin="extractor")
    old = store.add_memory("The ledger runs on PostgreSQL 16", scope="work", details={"subject": "ledger"})
    store.add_memory("The ledger runs on PostgreSQL 17 since March", scope="work", details={"subject": "ledger"})
    store.add_memory("Maybe the ledger moves to SQLite", status="candidate", origin="extractor")
    run_dream(store)
    props = list_proposals(store)
    assert len(props) == 2
    gone = next(p for p in props if p["kind"] == "supersede")
    assert gone["target_id"] == old["id"]
    forget(store, [old["id"]])  # erased while its proposal is still open
    review = ReviewQueue(jobs, store)
    qtbot.addWidget(review)
    review.show()
    qtbot.waitUntil(lambda: review.tabs.tabText(1) == "Tidy-up proposals (1)" and review.model.total == 1,
                    timeout=30_000)
    assert review.pending == review_pending(store) == 2
    assert pending_count(store) == 3, "the raw count would disagree: it counts the orphaned proposal"
    assert review.header.text() == "2 waiting for review"
    wait_idle(qtbot, jobs)


def test_a_failing_probe_is_quiet_and_the_next_one_answers(qtbot, jobs, store, monkeypatch):
    import desktop.ui.store_watch as sw

    errors = []
    jobs.error.connect(errors.append)
    watch = StoreWatch(jobs, store, interval_ms=100)
    seen = []
    watch.store_changed.connect(seen.append)
    real = sw.table_versions
    fails = iter([True, True])
    monkeypatch.setattr(sw, "table_versions", lambda s: (_ for _ in ()).throw(OSError("manifest moved"))
                        if next(fails, False) else real(s))
    watch.start()
    qtbot.waitUntil(lambda: watch.versions is not None, timeout=5000)
    store.add_memory("Something new")
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen[-1] == frozenset({"memories"}) and errors == []
    watch.stop()
    wait_idle(qtbot, jobs)


def test_a_cli_edit_shows_in_the_open_browser_reading_only_the_changed_rows(qtbot, jobs, store, mirador_home):
    rows = [store.add_memory(f"Harbour note {n}: the ferry schedule", scope="work") for n in range(30)]
    cand = store.add_memory("Maybe the ferry moves to 7:30", status="candidate", origin="extractor")
    kept = rows[10]
    browser = open_browser(qtbot, jobs, store)
    qtbot.waitUntil(lambda: browser.model.rowCount() == 31, timeout=30_000)
    click_row(qtbot, browser, kept["id"])
    browser.table.verticalScrollBar().setValue(browser.table.verticalScrollBar().maximum())
    scroll = browser.table.verticalScrollBar().value()
    proxy = browser.table.model()

    def status_cell(id_):
        return proxy.mapFromSource(browser.model.index(browser.model.index_of(id_), 3)).data()

    assert status_cell(cand["id"]) == "Needs review"
    read_again: list[str] = []
    fetch = browser.model._fetch

    def spy(store_, kind, ids):
        read_again.extend(ids)
        return fetch(store_, kind, ids)

    browser.model._fetch = spy
    watch, _views = _live(jobs, ("browser", browser))
    qtbot.waitUntil(lambda: watch.versions is not None)

    _cli(mirador_home, "edit", cand["id"], "--status", "active")
    t0 = time.monotonic()
    qtbot.waitUntil(lambda: status_cell(cand["id"]) == "In use", timeout=int(LIVE_S * 1000))
    assert time.monotonic() - t0 < LIVE_S
    wait_idle(qtbot, jobs)
    # the person's place stays: same selection, same card, same scroll position
    assert _ids(browser) == [kept["id"]] and browser.detail.row["id"] == kept["id"]
    assert browser.table.verticalScrollBar().value() == scroll
    # only the changed row (and the selected one, whose card is shown) were read again, not all 31
    assert set(read_again) <= {cand["id"], kept["id"]} and cand["id"] in read_again
    watch.stop()
    wait_idle(qtbot, jobs)
