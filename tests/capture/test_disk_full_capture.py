"""Capture on a full disk (a real small tmpfs): the writer keeps every row and holds, capture pauses with the
reason in health (status, tray), and both resume by themselves once space is freed."""

from __future__ import annotations

import os
import time

import pytest

from capture import writer as writer_mod
from capture.health import Health, read_health
from capture.writer import EvidenceWriter
from memory.store.core import EvidenceSpec
from tests.memory.small_disk import fill, small_disk

HELD = "disk full: capture paused until space is freed — the disk holding "


@pytest.fixture
def home(tmp_path, monkeypatch):
    with small_disk(tmp_path, 24) as mnt:
        monkeypatch.setenv("MIRADOR_HOME", str(mnt / "home"))
        monkeypatch.setattr(writer_mod, "HOLD_RETRY_S", 0.1)  # look for room every 0.1 s, not every 5 s
        yield mnt / "home"


@pytest.fixture
def store(home):
    from memory.store.core import Store

    s = Store(home)
    s.config.store.optimize_after_writes = 10**6
    return s


def wait_for(cond, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)  # polling a condition another thread changes


def spec(text: str) -> EvidenceSpec:
    return EvidenceSpec(text=text, source="screen", app="term")


def test_writer_holds_every_row_on_a_full_disk_and_resumes_by_itself(store, home):
    h = Health()
    w = EvidenceWriter(store, h, flush_seconds=0.2, flush_rows=50)
    w.start()
    try:
        w.submit(spec("written before the disk filled"))
        wait_for(lambda: h.evidence_written == 1)
        filler = fill(home.parent)
        for i in range(20):
            w.submit(spec(f"captured while full {i}"))
        wait_for(lambda: w.held is not None)
        assert h.held == w.held and h.held.startswith(HELD + str(home)) and "MIRADOR_HOME" in h.held
        time.sleep(1.0)  # ten retry periods: still one error, not one per attempt
        assert w.pending == 20 and h.errors == 1 and ".rs:" not in h.recent_errors[-1]
        assert store.count("evidence", local=True) == 1

        os.remove(filler)
        wait_for(lambda: w.held is None and w.pending == 0)
    finally:
        w.stop()
    assert h.held is None and h.evidence_written == 21
    texts = sorted(r["text"] for r in store.rows("evidence", None, ["text"]))
    assert texts == sorted(["written before the disk filled"] + [f"captured while full {i}" for i in range(20)])


def test_capture_pauses_with_the_reason_in_status_and_tray_then_resumes(store, home, capsys):
    from capture.runner import Capture
    from desktop.cli.main import main
    from desktop.runtime.ports import read_health as tray_view

    cap = Capture(store, screen=False, audio=False)
    cap.start()
    try:
        cap.writer.submit(spec("before"))
        wait_for(lambda: cap.health.evidence_written == 1)
        filler = fill(home.parent)
        cap.writer.submit(spec("kept while full"))
        wait_for(lambda: read_health(home).get("held"))  # the health file is written even on the full disk
        assert cap.step() == "held"
        on_disk = read_health(home)
        assert on_disk["state"] == "paused" and on_disk["held"].startswith(HELD)
        view = tray_view(on_disk)
        assert view.state == "problem" and view.problem.startswith(HELD)
        assert main(["status"]) == 2
        assert f"WARNING: {HELD}" in capsys.readouterr().out

        os.remove(filler)
        wait_for(lambda: cap.writer.pending == 0 and read_health(home).get("held") is None)
        wait_for(lambda: read_health(home)["state"] == "capturing")
        assert cap.step() == "off"  # no screen source in this test: nothing holds it back any more
        assert main(["status"]) == 0
    finally:
        cap.stop()
    assert store.count("evidence", local=True) == 2


def test_screen_capture_on_a_full_disk_keeps_the_text_and_holds(store, home, display, ocr):
    # End to end under Xvfb: the thumbnail cannot be written, the frame's text is kept and waits in the writer,
    # capture grabs nothing while held, and the text is stored once the disk has room.
    from capture.runner import Capture

    cap = Capture(store, audio=False, ocr=ocr)
    try:
        filler = fill(home.parent)
        display.window("notes while the disk is full", "violet harbor lantern meadow copper falcon")
        assert cap.run_cycles(1) == ["queued"]
        assert cap.writer.held and cap.writer.pending == 1
        health = cap.health.snapshot()
        assert health["thumbnails_skipped"] == 1 and any("thumbnail not kept: the disk holding" in e
                                                         for e in health["recent_errors"])
        assert cap.run_cycles(3) == ["held"] * 3  # nothing grabbed, nothing OCR'd while held
        assert cap.health.frames_ocrd == 1

        os.remove(filler)
        cap.drain()
        assert cap.writer.held is None and cap.writer.pending == 0
    finally:
        cap.stop()
    rows = store.list("evidence", limit=10)
    assert len(rows) == 1 and "violet harbor" in rows[0]["text"].lower() and rows[0]["frame_path"] is None
