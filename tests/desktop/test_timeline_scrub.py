"""The timeline you can scrub (issue 30): a large preview of the selected frame with its app, window title, time
and text; ←/→, PgUp/PgDn, Home/End and the slider move through the day; search marks the words and jumps
from match to match; one frame can be erased (after the question with counts), and only that frame."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QMessageBox

from memory.errors import NotFoundError
from tests.desktop.conftest import wait_idle

# minutes after 09:00 local, yesterday; app, window title, text
FRAMES = [
    (0, "xterm", "~/src/mirador — make test", "make test: 412 passed"),
    (10, "xterm", "~/src/mirador — git push", "git push origin main; CI started"),
    (20, "Firefox", "Pull request #88 · GitHub", "Review requested: heron-8830 budget parser"),
    (90, "Slack", "#launch — Slack", "launch moves to Friday, the heron-8830 budget is approved"),
    (165, "Calendar", "Week 49 — Calendar", "Dentist Tuesday 3pm"),
]


def _at(minutes: int) -> datetime:
    local = (datetime.now().astimezone() - timedelta(days=1)).replace(hour=9, minute=0, second=0, microsecond=0)
    return (local + timedelta(minutes=minutes)).astimezone(timezone.utc).replace(tzinfo=None)


@pytest.fixture
def day(store, mirador_home):
    rows = []
    for n, (minutes, app, window, text) in enumerate(FRAMES):
        path = mirador_home / "frames" / f"f{n}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        img = QImage(320, 200, QImage.Format.Format_RGB32)
        img.fill(QColor.fromHsv(n * 60, 200, 200))
        assert img.save(str(path))
        rows.append(store.add_evidence(text, source="screen", app=app, window=window, captured_at=_at(minutes),
                                       frame_path=str(path)))
    return rows


def _open(qtbot, jobs, store, n):
    from desktop.ui.timeline import EvidenceTimeline

    tl = EvidenceTimeline(jobs, store)
    qtbot.addWidget(tl)
    tl.show()
    qtbot.waitExposed(tl)
    qtbot.waitUntil(lambda: tl.model.rowCount() == n, timeout=30_000)
    return tl


def _showing(tl, row) -> bool:
    p = tl.preview
    return (p.row is not None and p.row["id"] == row["id"] and p.frame.pixmap() is not None
            and not p.frame.pixmap().isNull())


def test_preview_shows_the_frame_its_app_title_time_and_text_and_keys_move_through_the_day(qtbot, jobs, store, day):
    tl = _open(qtbot, jobs, store, len(day))
    # it opens on the latest frame of the day
    qtbot.waitUntil(lambda: _showing(tl, day[-1]), timeout=10_000)
    assert tl.preview.header.text() == "Calendar — Week 49 — Calendar"
    assert "Dentist Tuesday 3pm" in tl.preview.text.toPlainText()
    assert "11:45:00" in tl.preview.when.text()
    assert tl.position.text() == "5 / 5" and tl.slider.value() == 4

    tl.table.setFocus()
    qtbot.keyClick(tl.table, Qt.Key.Key_Home)
    qtbot.waitUntil(lambda: _showing(tl, day[0]), timeout=10_000)
    assert tl.preview.header.text() == "xterm — ~/src/mirador — make test"
    assert "09:00:00" in tl.preview.when.text() and "412 passed" in tl.preview.text.toPlainText()
    assert tl.model.data(tl.model.index(0, tl.model.COL_WINDOW)) == "~/src/mirador — make test"

    qtbot.keyClick(tl.table, Qt.Key.Key_Right)
    qtbot.waitUntil(lambda: _showing(tl, day[1]), timeout=10_000)
    assert [i.row() for i in tl.table.selectionModel().selectedRows()] == [1]
    qtbot.keyClick(tl.table, Qt.Key.Key_PageDown)  # 09:10 + 1 h -> the first frame at or after 10:10: 10:30
    qtbot.waitUntil(lambda: _showing(tl, day[3]), timeout=10_000)
    assert tl.preview.header.text() == "Slack — #launch — Slack"
    qtbot.keyClick(tl.table, Qt.Key.Key_PageUp)  # 10:30 - 1 h -> the last frame at or before 09:30: 09:20
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    qtbot.keyClick(tl.table, Qt.Key.Key_Left)
    qtbot.waitUntil(lambda: _showing(tl, day[1]), timeout=10_000)
    qtbot.keyClick(tl.table, Qt.Key.Key_End)
    qtbot.waitUntil(lambda: _showing(tl, day[4]), timeout=10_000)
    qtbot.keyClick(tl.table, Qt.Key.Key_Right)  # past the end: stays on the last frame
    assert tl.line == 4

    tl.slider.setValue(2)  # dragging the slider scrubs
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    assert [i.row() for i in tl.table.selectionModel().selectedRows()] == [2]
    qtbot.mouseClick(tl.slider, Qt.MouseButton.LeftButton, pos=QPoint(3, tl.slider.height() // 2))
    qtbot.waitUntil(lambda: _showing(tl, day[0]), timeout=10_000)  # a click at the left end: the first frame
    wait_idle(qtbot, jobs)


def test_search_marks_the_words_and_jumps_from_match_to_match(qtbot, jobs, store, day):
    tl = _open(qtbot, jobs, store, len(day))
    tl.go(0)
    qtbot.waitUntil(lambda: _showing(tl, day[0]), timeout=10_000)
    qtbot.keyClicks(tl.search, "heron-8830 budget")
    qtbot.keyClick(tl.search, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    assert tl.match_label.text() == "match 1 of 2"
    html = tl.preview.text.toHtml()
    assert "background-color:#ffe27a" in html.replace(" ", "")
    assert tl.preview.text.toPlainText().count("heron") == 1
    qtbot.mouseClick(tl.next_match, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _showing(tl, day[3]), timeout=10_000)
    assert tl.match_label.text() == "match 2 of 2"
    tl.search.setFocus()
    qtbot.keyClick(tl.search, Qt.Key.Key_Return)  # wraps to the first match
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    assert tl.search.text() == "heron-8830 budget", "keys typed in the search box edit it, never move frames"

    tl.search.clear()
    qtbot.keyClicks(tl.search, "zeppelin")
    qtbot.keyClick(tl.search, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "no frame of this day mentions" in tl.match_label.text(), timeout=10_000)
    assert tl.line == 2, "no match: the frame shown stays"
    wait_idle(qtbot, jobs)


def test_delete_one_frame_asks_then_erases_only_that_frame(qtbot, jobs, store, day, monkeypatch):
    derived = store.add_memory("heron-8830 review requested", provenance=[day[2]["id"]], origin="extractor")
    hand = store.add_memory("Heron budget questions for Friday")
    tl = _open(qtbot, jobs, store, len(day))
    tl.go(2)
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    frame_file = day[2]["frame_path"]

    asked = []
    monkeypatch.setattr(QMessageBox, "exec", lambda box: asked.append(box) or QMessageBox.StandardButton.Cancel)
    qtbot.mouseClick(tl.del_frame, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(asked), timeout=30_000)
    wait_idle(qtbot, jobs)
    title, details = tl.last_question
    assert title == "Erase this frame (Firefox, 09:20:00)?"
    assert details.startswith("Erases 1 captured row (screen text, transcripts, notes), 1 frame image, "
                              "1 memory derived only from them.")
    assert store.get(day[2]["id"]) and store.get(derived["id"]), "Cancel erases nothing"
    assert tl.model.rowCount() == 5 and tl.line == 2

    monkeypatch.setattr(QMessageBox, "exec", lambda box: QMessageBox.StandardButton.Yes)
    tl.table.setFocus()
    qtbot.keyClick(tl.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: tl.model.rowCount() == 4 and tl.summary.text() == "4 evidence rows over 1 day(s)",
                    timeout=30_000)
    wait_idle(qtbot, jobs)
    qtbot.waitUntil(lambda: _showing(tl, day[3]), timeout=10_000)  # its successor is shown
    for gone in (day[2]["id"], derived["id"]):
        with pytest.raises(NotFoundError):
            store.get(gone)
    from pathlib import Path

    assert not Path(frame_file).exists()
    for kept in (day[0], day[1], day[3], day[4]):
        assert store.get(kept["id"])["text"] == kept["text"]
        assert Path(kept["frame_path"]).exists()
        assert tl.model.index_of(kept["id"]) >= 0
    assert store.get(hand["id"])["text"] == hand["text"]


def test_a_new_capture_appears_while_the_timeline_is_open_and_the_frame_shown_stays(qtbot, jobs, store, day):
    tl = _open(qtbot, jobs, store, len(day))
    tl.go(1)
    qtbot.waitUntil(lambda: _showing(tl, day[1]), timeout=10_000)
    new = store.add_evidence("Notes: ship the parser", source="screen", app="gedit", window="notes.txt",
                             captured_at=_at(170))
    tl.refresh()  # what LiveViews calls on a store change (test_live_windows covers the watch itself)
    qtbot.waitUntil(lambda: tl.model.rowCount() == 6, timeout=30_000)
    wait_idle(qtbot, jobs)
    assert tl.model.index_of(new["id"]) == 5, "the newest capture is the day's last frame"
    assert tl.line == 1 and tl.preview.row["id"] == day[1]["id"]
    assert tl.position.text() == "2 / 6" and tl.slider.maximum() == 5
    qtbot.keyClick(tl.table, Qt.Key.Key_End)
    qtbot.waitUntil(lambda: tl.preview.row is not None and tl.preview.row["id"] == new["id"], timeout=10_000)
    assert tl.preview.header.text() == "gedit — notes.txt"


def _slot_ids(tl) -> list[str]:
    sm = tl.strip.strip
    return [tl.model.id_at(sm.line_of(s)) for s in range(sm.rowCount())]


def _thumb_colour(tl, slot: int) -> QColor | None:
    pm = tl.strip.strip.thumb(slot)
    if pm is None or pm.isNull():
        return None
    img = pm.toImage()
    return img.pixelColor(img.width() // 2, img.height() // 2)


def _same_colour(a: QColor, b: QColor) -> bool:
    return all(abs(x - y) <= 6 for x, y in zip(a.getRgb()[:3], b.getRgb()[:3], strict=True))


def test_the_strip_shows_each_frame_as_a_thumbnail_follows_the_frame_shown_and_a_click_jumps_there(qtbot, jobs,
                                                                                                    store, day):
    tl = _open(qtbot, jobs, store, len(day))
    qtbot.waitUntil(lambda: _showing(tl, day[-1]), timeout=10_000)
    strip = tl.strip
    assert strip.isVisible()
    assert _slot_ids(tl) == [r["id"] for r in day], "a short day: one thumbnail per frame, oldest first"
    # the thumbnails are the frames themselves (each frame file has its own colour), decoded lazily
    qtbot.waitUntil(lambda: all(_thumb_colour(tl, s) is not None for s in range(len(day))), timeout=10_000)
    for s in range(len(day)):
        assert _same_colour(_thumb_colour(tl, s), QColor.fromHsv(s * 60, 200, 200)), s
    assert strip.strip.data(strip.strip.index(3)) == "10:30:00"
    assert strip.currentIndex().row() == 4 and strip.selectionModel().isSelected(strip.strip.index(4)), \
        "the frame shown is highlighted"

    qtbot.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.visualRect(strip.strip.index(1)).center())
    qtbot.waitUntil(lambda: _showing(tl, day[1]), timeout=10_000)
    assert tl.preview.header.text() == "xterm — ~/src/mirador — git push"
    assert [i.row() for i in tl.table.selectionModel().selectedRows()] == [1] and tl.slider.value() == 1
    assert strip.currentIndex().row() == 1
    assert [i.row() for i in strip.selectionModel().selectedRows()] == [1], "one thumbnail highlighted, not two"

    tl.table.setFocus()
    qtbot.keyClick(tl.table, Qt.Key.Key_Right)
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    assert strip.currentIndex().row() == 2, "the strip follows the keys"
    strip.setFocus()
    qtbot.keyClick(strip, Qt.Key.Key_Right)  # the timeline's keys work in the strip too: a frame, not a slot
    qtbot.waitUntil(lambda: _showing(tl, day[3]), timeout=10_000)
    tl.slider.setValue(0)  # a slider jump: the right frame, list line and thumbnail
    qtbot.waitUntil(lambda: _showing(tl, day[0]), timeout=10_000)
    assert tl.preview.header.text() == "xterm — ~/src/mirador — make test"
    assert "412 passed" in tl.preview.text.toPlainText()
    assert [i.row() for i in tl.table.selectionModel().selectedRows()] == [0] and strip.currentIndex().row() == 0
    assert tl.model.rowCount() == len(day) and strip.strip.rowCount() == len(day), "moving changes no list"
    wait_idle(qtbot, jobs)


def test_every_list_line_paints_from_the_day_index_without_waiting(qtbot, jobs, store, day):
    tl = _open(qtbot, jobs, store, len(day))
    m = tl.model
    # right after the day is listed, with no row fetched: every line has its time, app, window title and text
    for n, (_minutes, app, window, text) in enumerate(FRAMES):
        assert m.data(m.index(n, m.COL_APP)) == app
        assert m.data(m.index(n, m.COL_WINDOW)) == window
        assert m.data(m.index(n, m.COL_TEXT)) == text
    assert m.data(m.index(3, m.COL_TIME)) == "10:30:00"
    wait_idle(qtbot, jobs)


def test_a_deleted_frame_leaves_the_strip_and_a_new_capture_joins_it(qtbot, jobs, store, day, monkeypatch):
    tl = _open(qtbot, jobs, store, len(day))
    tl.go(2)
    qtbot.waitUntil(lambda: _showing(tl, day[2]), timeout=10_000)
    qtbot.waitUntil(lambda: all(_thumb_colour(tl, s) is not None for s in range(len(day))), timeout=10_000)
    monkeypatch.setattr(QMessageBox, "exec", lambda box: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(tl.del_frame, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tl.model.rowCount() == 4 and tl.summary.text() == "4 evidence rows over 1 day(s)",
                    timeout=30_000)
    wait_idle(qtbot, jobs)
    qtbot.waitUntil(lambda: _showing(tl, day[3]), timeout=10_000)
    assert _slot_ids(tl) == [day[i]["id"] for i in (0, 1, 3, 4)], "the erased frame is gone from the strip"
    assert tl.strip.currentIndex().row() == 2, "its successor is highlighted"
    qtbot.waitUntil(lambda: _thumb_colour(tl, 2) is not None, timeout=10_000)
    assert _same_colour(_thumb_colour(tl, 2), QColor.fromHsv(3 * 60, 200, 200)), "and shows its own picture"
    assert not tl.model.thumbs.has(day[2]["id"]), "its thumbnail is not kept either"

    path = day[0]["frame_path"].replace("f0.png", "f9.png")
    img = QImage(320, 200, QImage.Format.Format_RGB32)
    img.fill(QColor.fromHsv(300, 200, 200))
    assert img.save(path)
    new = store.add_evidence("Notes: ship the parser", source="screen", app="gedit", window="notes.txt",
                             captured_at=_at(170), frame_path=path)
    tl.refresh()
    qtbot.waitUntil(lambda: tl.strip.strip.rowCount() == 5, timeout=30_000)
    wait_idle(qtbot, jobs)
    assert _slot_ids(tl)[-1] == new["id"] and tl.preview.row["id"] == day[3]["id"], "the frame shown stays"
    assert tl.strip.currentIndex().row() == 2
    qtbot.waitUntil(lambda: _thumb_colour(tl, 4) is not None, timeout=10_000)
    assert _same_colour(_thumb_colour(tl, 4), QColor.fromHsv(300, 200, 200))


def test_a_long_day_gets_one_thumbnail_per_few_minutes_never_more_than_the_cap():
    from desktop.ui.timeline_strip import MAX_SLOTS, slot_starts

    start = datetime(2026, 3, 2, 8, 0)
    times = [start + timedelta(seconds=7 * i) for i in range(10_000)]  # ~19.5 hours, a frame every 7 s
    starts, minutes = slot_starts(times)
    assert minutes == 5 and len(starts) <= MAX_SLOTS
    assert starts[0] == 0 and starts == sorted(set(starts))
    for a, b in zip(starts, starts[1:], strict=False):  # each slot starts at its first frame
        assert (times[b] - datetime(1970, 1, 1)) // timedelta(minutes=5) > (times[a] - datetime(1970, 1, 1)) // \
            timedelta(minutes=5)
        assert (times[b - 1] - datetime(1970, 1, 1)) // timedelta(minutes=5) == \
            (times[a] - datetime(1970, 1, 1)) // timedelta(minutes=5)
    few = times[:40]
    assert slot_starts(few) == (list(range(40)), 0), "a short day: every frame"
    assert slot_starts([]) == ([], 0)
