"""A restart does not store (or extract) the same screen again (issue 29, "no duplicate work").

Real Xvfb windows, real mss grabs, real tesseract, a real store in a temp dir; a restart is a new
Store and a new Capture on the same data dir, as a new process would open them.
"""

from __future__ import annotations

import pytest

from capture.runner import Capture
from capture.screen import TextDedupe
from memory.store.core import Store
from memory.store.erasure import forget

TITLE = "Standup notes - ledger.txt"
TEXT = "We decided to use PostgreSQL for the ledger service.\nDeadline for the migration is Friday 12 December."
OTHER = "The staging database moves to Frankfurt on Monday.\nAsk Priya about the billing export."


def norm(text: str) -> str:
    return " ".join(text.lower().split())


def open_store(home) -> Store:
    s = Store(home)
    s.config.extraction.engine = "rules"  # no LLM loads: the rules extractor is the scheduler's fallback
    return s


def screen_rows(store) -> list[dict]:
    return [r for r in store.list("evidence", limit=1000) if r["source"] == "screen"]


def extract(store) -> int:
    """The scheduler's extraction job, then the number of memories."""
    from memory.consolidation.scheduler import job_extract

    job_extract(store)
    return store.count("memory", local=True)


def run(store, ocr, cycles: int = 3) -> dict:
    """One capture run (a process's lifetime): start, a few cycles, stop; returns its health."""
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        cap.run_cycles(cycles)
    finally:
        cap.stop()
    return cap.health.snapshot()


def test_recapture_after_restart_adds_no_evidence_and_no_memory(display, mirador_home, ocr):
    display.window(TITLE, TEXT)
    store = open_store(mirador_home)
    run(store, ocr)
    rows = screen_rows(store)
    assert len(rows) == 1 and "postgresql" in norm(rows[0]["text"]), [r["text"] for r in rows]
    memories = extract(store)
    assert memories >= 1, "the rules extractor should keep the decision on screen"

    # Restart: a new store and a new capture over the same data dir; the same window still shows.
    store = open_store(mirador_home)
    h = run(store, ocr)
    assert h["frames_ocrd"] >= 1, "the first frame after a start is read whole"
    assert [r["id"] for r in screen_rows(store)] == [rows[0]["id"]], "the same screen was stored again"
    assert h["texts_deduped"] >= 1 and h["texts_seen_before_start"] >= 1 and h["dedupe_seeded_rows"] == 1
    assert h["frames_stored"] == 0 and h["evidence_written"] == 0
    assert extract(store) == memories, "the same screen was extracted again"

    # And a second restart changes nothing either.
    store = open_store(mirador_home)
    run(store, ocr)
    assert len(screen_rows(store)) == 1 and extract(store) == memories


def test_changed_text_after_restart_is_captured(display, mirador_home, ocr):
    display.window(TITLE, TEXT)
    store = open_store(mirador_home)
    run(store, ocr)
    before = screen_rows(store)
    assert len(before) == 1
    memories = extract(store)

    display.close_windows()
    display.window(TITLE, OTHER)  # same app and title, other text
    store = open_store(mirador_home)
    h = run(store, ocr)
    rows = screen_rows(store)
    new = [r for r in rows if r["id"] != before[0]["id"]]
    assert len(new) == 1 and "frankfurt" in norm(new[0]["text"]), [r["text"] for r in rows]
    assert h["frames_stored"] == 1
    assert extract(store) > memories


def test_forgotten_text_is_captured_again_after_restart_and_not_resurrected(display, mirador_home, ocr):
    display.window(TITLE, TEXT)
    store = open_store(mirador_home)
    run(store, ocr)
    [old] = screen_rows(store)
    extract(store)
    forget(store, [old["id"]])
    assert screen_rows(store) == []

    store = open_store(mirador_home)
    h = run(store, ocr)
    rows = screen_rows(store)
    assert len(rows) == 1 and rows[0]["id"] != old["id"], "a forgotten row must not block a new capture"
    assert "postgresql" in norm(rows[0]["text"])
    assert h["dedupe_seeded_rows"] == 0, "a forgotten row must not be loaded as already seen"
    assert store.get_many("evidence", [old["id"]]) == {}, "the forgotten row came back"
    assert extract(store) >= 1  # the new row is extracted like any new capture


def test_text_forgotten_while_capture_runs_is_captured_when_read_again(display, mirador_home, ocr):
    """Another process (`mirador forget`) deletes the row; the running capture must not treat its text as stored."""
    display.window(TITLE, TEXT)
    store = open_store(mirador_home)
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        cap.run_cycles(2)
        [old] = screen_rows(store)
        forget(open_store(mirador_home), [old["id"]])
        cap.pause()  # a pause makes the next frame count as changed, so the window is read again
        cap.resume()
        cap.run_cycles(2)
        rows = screen_rows(store)
        assert len(rows) == 1 and rows[0]["id"] != old["id"] and "postgresql" in norm(rows[0]["text"])
        assert cap.health.snapshot()["lines_recaptured"] >= 2
        # Read once more: now it is stored, so it is not stored again.
        cap.pause()
        cap.resume()
        cap.run_cycles(2)
        assert len(screen_rows(store)) == 1
    finally:
        cap.stop()


def test_dedupe_hours_zero_keeps_the_old_behaviour(display, mirador_home, ocr):
    display.window(TITLE, TEXT)
    store = open_store(mirador_home)
    run(store, ocr)
    store = open_store(mirador_home)
    store.config.capture.dedupe_hours = 0
    h = run(store, ocr)
    assert h["dedupe_seeded_rows"] == 0 and len(screen_rows(store)) == 2


# ---- the dedupe itself, without a display ----------------------------------------------------------


def test_seeded_lines_match_case_spacing_and_punctuation():
    t = TextDedupe(live=lambda ids: ids)
    t.seed([{"id": "evd_1", "app": "Slack", "window": "#acme", "text": "Ship the release on Friday.\nOK"}])
    assert t.new_text(("Slack", "#acme"), "ship  the release on friday\nok", "evd_2") == ("", False)
    assert t.last_hit_seeded
    # Another window with the same text is another view: stored.
    assert t.new_text(("Slack", "#other"), "Ship the release on Friday.", "evd_3")[0]


def test_a_row_that_is_gone_no_longer_counts_as_seen():
    live = {"evd_1"}
    t = TextDedupe(live=lambda ids: ids & live)
    t.seed([{"id": "evd_1", "app": "Term", "window": "~/src", "text": "alpha\nbeta"}])
    assert t.new_text(("Term", "~/src"), "alpha\nbeta", "evd_2") == ("", False)
    live.clear()  # evd_1 forgotten
    assert t.new_text(("Term", "~/src"), "alpha\nbeta", "evd_3") == ("alpha\nbeta", False)
    assert t.recaptured_lines == 2
    live.add("evd_3")
    assert t.new_text(("Term", "~/src"), "alpha\nbeta", "evd_4") == ("", False)
    assert not t.last_hit_seeded  # seen in this run, not before it


def test_only_hashes_are_kept():
    t = TextDedupe()
    t.new_text(("a", "w"), "a very private sentence", "evd_1")
    assert b"private" not in repr(t._seen).encode()


@pytest.mark.parametrize("hours,expected", [(0, 0), (24, 1)])
def test_recent_screen_rows_horizon(store, hours, expected):
    from datetime import timedelta

    from capture.screen import recent_screen_rows
    from memory.store.audit import utcnow

    store.add_evidence("recent text", source="screen", app="A", window="w")
    store.add_evidence("old text", source="screen", app="A", window="w", captured_at=utcnow() - timedelta(hours=48))
    store.add_evidence("a spoken note", source="audio", app="microphone")
    rows = recent_screen_rows(store, hours)
    assert [r["text"] for r in rows] == ["recent text"][:expected]


def test_seed_keeps_the_newest_views_and_lines():
    t = TextDedupe(windows=2, lines_per_window=3, live=lambda ids: ids)
    rows = [{"id": f"evd_{i}", "app": "A", "window": f"w{i % 3}", "text": f"line {i}\nshared {i % 3}"} for i in range(9)]
    t.seed(rows)  # oldest first; views w0 (rows 0,3,6), w1 (1,4,7), w2 (2,5,8): w0 is the oldest view
    assert t.new_text(("A", "w0"), "line 6\nshared 0", "evd_x")[0], "the oldest view is past the cap"
    assert t.new_text(("A", "w2"), "line 8\nshared 2\nline 5", "evd_y") == ("", False)
    assert t.new_text(("A", "w2"), "line 2", "evd_z")[0] == "line 2", "past the line cap: the oldest row was not kept"
