"""Issue 30's smaller items in the tray, the review window and `mirador status`: each as the person sees it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from datetime import timezone

from PySide6.QtCore import QPoint
from PySide6.QtGui import QGuiApplication

from desktop.runtime.ports import HealthView
from desktop.runtime.services import Services
from desktop.ui.app import MiradorShell
from desktop.ui.tray import Tray, audio_label
from tests.desktop.conftest import wait_idle
from tests.desktop.fakes import RecordingCapture
from tests.memory.mcp_support import ROOT, env_for


def _menu_texts(qtbot, tray) -> list[str]:
    tray.menu.popup(QPoint(200, 200))
    qtbot.waitUntil(tray.menu.isVisible)
    texts = [a.text() for a in tray.menu.actions()]
    tray.menu.hide()
    return texts


def test_menu_says_until_when_paused_and_audio_off_without_a_microphone(qtbot, jobs, monkeypatch):
    import desktop.runtime.platform as platform

    monkeypatch.setattr(platform, "has_microphone", lambda device=None: False)
    capture = RecordingCapture()
    capture.start()
    tray = Tray(jobs, capture, None, poll_ms=100)
    tray.show()
    qtbot.waitUntil(lambda: tray.health.state == "capturing" and tray.microphone is False, timeout=20_000)
    texts = _menu_texts(qtbot, tray)
    assert "Audio: unavailable (no microphone)" in texts and "Audio: on" not in texts
    capture.pause_for(30)
    qtbot.waitUntil(lambda: tray.health.state == "paused", timeout=20_000)
    until = capture.paused_until.replace(tzinfo=timezone.utc).astimezone()
    texts = _menu_texts(qtbot, tray)
    assert f"❚❚ Paused until {until:%H:%M}" in texts, texts
    capture.resume()  # paused without an end: no "until"
    capture.pause()
    qtbot.waitUntil(lambda: tray.health.state == "paused" and tray.health.paused_until is None, timeout=20_000)
    assert "❚❚ Paused" in _menu_texts(qtbot, tray)
    tray.timer.stop()
    wait_idle(qtbot, jobs)


def test_audio_label_is_on_only_while_a_voice_source_runs():
    capturing = HealthView(state="capturing", details={"audio": "microphone"})
    assert audio_label(capturing, True) == "Audio: on"
    assert audio_label(HealthView(state="capturing", details={"audio": "off"}), False) == \
        "Audio: unavailable (no microphone)"
    assert audio_label(HealthView(state="capturing", details={"audio": "off"}), True) == "Audio: off"
    assert audio_label(HealthView(state="capturing", details={"audio": "unavailable: no input device"}), True) == \
        "Audio: unavailable (no input device)"
    assert audio_label(HealthView(state="stopped", details={"audio": "microphone"}), True) == "Audio: off"


def test_tray_restores_a_minimised_browser_and_review_opens_centred(qtbot, store):
    shell = MiradorShell(lambda: Services(store=store), poll_ms=60_000)
    started = []
    shell.started.connect(started.append)
    shell.start()
    qtbot.waitUntil(lambda: bool(started), timeout=60_000)
    browser = shell.open("browser")
    qtbot.addWidget(browser)
    qtbot.waitExposed(browser)
    browser.showMinimized()
    qtbot.waitUntil(browser.isMinimized, timeout=5000)
    shell.tray.open_browser.emit()  # what "Open memory browser" and a click on the icon do
    qtbot.waitUntil(lambda: not browser.isMinimized() and browser.isVisible(), timeout=5000)
    assert shell.open("browser") is browser

    review = shell.open("review")
    qtbot.addWidget(review)
    qtbot.waitExposed(review)
    area = QGuiApplication.primaryScreen().availableGeometry()
    centre = review.frameGeometry().center()
    assert abs(centre.x() - area.center().x()) <= 40 and abs(centre.y() - area.center().y()) <= 40, \
        (review.frameGeometry(), area)
    # the shell watches the store: a change made now shows in the open review window
    store.add_memory("Maybe the ledger moves to Postgres", status="candidate", origin="extractor")
    qtbot.waitUntil(lambda: review.model.total == 1 and shell.tray.pending == 1, timeout=5000)
    shell.watch.stop()
    shell.tray.timer.stop()
    shell.jobs.shutdown()


def _health_file(home, **kw):
    from capture.health import HEALTH_FILE, Health

    h = Health(state="capturing", pid=os.getpid(), screen="on", audio="off", started_at=time.time() - 60,
               updated_at=time.time(), last_frame_at=time.time() - 2, last_write_at=time.time() - 5)
    for k, v in kw.items():
        setattr(h, k, v)
    home.mkdir(parents=True, exist_ok=True)
    (home / HEALTH_FILE).write_text(json.dumps(h.snapshot()), encoding="utf-8")


def test_status_into_a_closed_pipe_and_a_pause_end_ahead(mirador_home):
    _health_file(mirador_home, state="paused", paused_until=time.time() + 1790)
    cmd = [sys.executable, "-m", "desktop.cli.main", "status"]
    full = subprocess.run(cmd, cwd=ROOT, env=env_for(mirador_home), capture_output=True, text=True, timeout=120)
    assert "paused until" in full.stdout and not re.search(r"\(-\d", full.stdout), full.stdout
    assert re.search(r"paused until \d\d:\d\d:\d\d \(in 29 min\)", full.stdout) or "(in 30 min)" in full.stdout
    for reader in ("head -1", "true"):  # a reader that stops early, or reads nothing at all
        piped = subprocess.run(f"{' '.join(cmd)} | {reader}", shell=True, cwd=ROOT, env=env_for(mirador_home),
                               capture_output=True, text=True, timeout=120)
        assert "error" not in piped.stderr and "BrokenPipe" not in piped.stderr, piped.stderr
        assert not re.search(r"\(-\d", piped.stdout)


def test_revealed_vault_value_hides_again_and_a_multi_delete_of_rows_gone_elsewhere_is_no_error(
        qtbot, jobs, store, monkeypatch):
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    from desktop.ui.browser_detail import DetailView
    from memory.store.erasure import forget
    from tests.desktop.conftest import click_row, open_browser

    monkeypatch.setattr(DetailView, "REVEAL_SECONDS", 0.5)
    entry = store.add_memory("Staging database password", type="vault", value="hunter2-quokka", scope="work")
    mems = [store.add_memory(f"Fact number {n} about the ferry") for n in range(3)]
    errors = []
    jobs.error.connect(errors.append)
    browser = open_browser(qtbot, jobs, store)
    click_row(qtbot, browser, entry["id"])
    qtbot.mouseClick(browser.reveal_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "hunter2-quokka" in browser.detail.toPlainText(), timeout=30_000)
    qtbot.waitUntil(lambda: "hunter2-quokka" not in browser.detail.toPlainText(), timeout=5000)
    assert browser.reveal_btn.isEnabled(), "hidden again: Reveal works again"
    assert browser.detail.row["id"] == entry["id"]

    click_row(qtbot, browser, mems[0]["id"])
    for m in mems[1:]:
        idx = browser.table.model().mapFromSource(browser.model.index(browser.model.index_of(m["id"]), 0))
        qtbot.mouseClick(browser.table.viewport(), Qt.MouseButton.LeftButton, Qt.KeyboardModifier.ControlModifier,
                         browser.table.visualRect(idx).center())
    assert browser.delete_btn.text() == "Delete 3…"
    forget(store, [mems[2]["id"]])  # gone elsewhere (the CLI, an MCP client) before the person confirms
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(browser.delete_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: browser.model.total == 1, timeout=60_000)
    wait_idle(qtbot, jobs)
    assert errors == [] and "no row" not in browser.statusBar().currentMessage()
    assert "Erased 2 memories; 1 had already been erased elsewhere" in browser.statusBar().currentMessage()
    assert store.count("memory", local=True) == 0 and store.reveal(entry["id"]) == "hunter2-quokka"
