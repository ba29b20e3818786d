"""Settings → Sharing and the tray with a shared scope on a real SeaweedFS: the bindings and their health as
a person reads them, "shared scope offline" when the store stops answering, and the waiting change sent
when it is back. Nothing shared: the page says so and offers nothing to click."""

from __future__ import annotations

import uuid

from PySide6.QtCore import QPoint, Qt

from desktop.ui.settings_sharing import NOTHING_SHARED, SharingPanel
from desktop.ui.tray import Tray
from tests.desktop.conftest import wait_idle
from tests.desktop.fakes import RecordingCapture
from tests.memory import seaweed as sw_fixtures
from tests.memory.test_remote import SHARED, open_home

memory_keyring, own_seaweed = sw_fixtures.memory_keyring, sw_fixtures.own_seaweed  # fixtures


def _cells(panel: SharingPanel) -> list[list[str]]:
    t = panel.table
    return [[t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())]


def test_nothing_shared_says_so(qtbot, jobs, store):
    panel = SharingPanel(jobs, store)
    qtbot.addWidget(panel)
    panel.show()
    wait_idle(qtbot, jobs)
    assert panel.intro.text() == NOTHING_SHARED
    assert not panel.table.isVisible() and not panel.check_button.isEnabled()


def test_sharing_page_and_tray_follow_the_shared_store(qtbot, jobs, tmp_path, memory_keyring, own_seaweed, monkeypatch):
    sw = own_seaweed  # stopped and started again below
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    store = open_home(tmp_path, "a", sw, f"t-{uuid.uuid4().hex[:10]}")
    store.add_memory("The acme deploy freeze starts on Thursday", scope=SHARED)
    panel = SharingPanel(jobs, store)
    qtbot.addWidget(panel)
    panel.show()
    wait_idle(qtbot, jobs)
    [row] = _cells(panel)
    assert row[0] == SHARED and row[1].startswith("s3://") and sw.endpoint in row[1]
    assert row[2:] == ["Online", "0"]

    capture = RecordingCapture()
    capture.start()
    tray = Tray(jobs, capture, lambda: 0, poll_ms=600_000)  # polled by hand below
    tray.sharing_fn = lambda: store.remotes.check(max_age=0)
    tray.show()
    wait_idle(qtbot, jobs)
    assert tray.health.state == "capturing" and not tray.offline_lines()

    sw.stop()
    store.add_memory("The acme release train leaves on Tuesdays", scope=SHARED)  # waits in the outbox
    qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
    wait_idle(qtbot, jobs)
    [row] = _cells(panel)
    assert row[2].startswith("Offline — ") and row[3] == "1"
    tray.refresh()
    wait_idle(qtbot, jobs)
    assert tray.offline_lines() == [f"Shared scope {SHARED} offline (1 waiting)"]
    assert f"Shared scope {SHARED} offline (1 waiting)" in tray.icon.toolTip()
    tray.menu.popup(QPoint(200, 200))
    qtbot.waitUntil(tray.menu.isVisible)
    assert tray.action(f"⚠ Shared scope {SHARED} offline") is not None
    tray.menu.hide()
    # Local work goes on meanwhile.
    assert capture.state == "capturing"

    sw.start()
    qtbot.mouseClick(panel.send_button, Qt.MouseButton.LeftButton)
    wait_idle(qtbot, jobs)
    assert panel.message.text() == "Sent 1; nothing waiting."
    assert _cells(panel)[0][2:] == ["Online", "0"]
    tray.refresh()
    wait_idle(qtbot, jobs)
    assert not tray.offline_lines() and "offline" not in tray.icon.toolTip()
    tray.timer.stop()
    wait_idle(qtbot, jobs)


def test_memories_made_before_the_scope_was_shared_are_offered_and_sent_on_confirm(
        qtbot, jobs, tmp_path, memory_keyring, own_seaweed, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from memory.store.core import Store
    from tests.memory.test_remote import bind

    sw = own_seaweed
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    home = tmp_path / "early"
    early = Store(home)
    made = early.add_memory("The acme on-site is in the Lisbon office", scope=SHARED)
    early.add_memory("My passport expires in 2031", scope="personal")
    bind(home, sw, prefix)
    store = Store(home)
    panel = SharingPanel(jobs, store)
    qtbot.addWidget(panel)
    panel.show()
    wait_idle(qtbot, jobs)
    assert panel.push_button.isVisible()
    assert panel.message.text().startswith(f"1 memory of {SHARED} was made on this computer before the scope was "
                                           "shared and is kept here only.")

    # Cancel: nothing leaves the computer.
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Cancel)
    qtbot.mouseClick(panel.push_button, Qt.MouseButton.LeftButton)
    wait_idle(qtbot, jobs)
    assert store.remotes.made_before() == {"team": 1} and store.remotes.pending() == {"team": 0}

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    qtbot.mouseClick(panel.push_button, Qt.MouseButton.LeftButton)
    wait_idle(qtbot, jobs)
    qtbot.waitUntil(lambda: not panel.push_button.isVisible(), timeout=20_000)
    assert sw.holding("Lisbon office", prefix) and not sw.holding("passport", prefix)
    assert store.get(made["id"])["text"] == made["text"]
    assert store.remotes.made_before() == {"team": 0}


def test_rejected_credentials_show_as_an_error_not_offline(qtbot, jobs, tmp_path, memory_keyring, own_seaweed,
                                                            monkeypatch):
    """Issue 41: the store answers and refuses this device's secret (rotated on the store): Settings → Sharing
    and the tray say "credentials refused" — the writes waiting will not go until the binding is fixed —
    never "offline", which would read as "wait"."""
    from memory.store.core import Store
    from memory.store.remote import save_credentials
    from tests.memory.seaweed import KEY_ID
    from tests.memory.test_remote import bind

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    home = tmp_path / "rotated"
    bind(home, own_seaweed, f"t-{uuid.uuid4().hex[:10]}")
    save_credentials("team", KEY_ID, "an-old-secret")
    store = Store(home)
    store.add_memory("The acme deploy freeze starts on Thursday", scope=SHARED)  # waits in the outbox
    panel = SharingPanel(jobs, store)
    qtbot.addWidget(panel)
    panel.show()
    qtbot.mouseClick(panel.check_button, Qt.MouseButton.LeftButton)
    wait_idle(qtbot, jobs)
    [row] = _cells(panel)
    assert row[2].startswith("Credentials refused — ") and "SignatureDoesNotMatch" in row[2] and row[3] == "1"
    tray = Tray(jobs, RecordingCapture(), lambda: 0, poll_ms=600_000)
    tray.sharing_fn = lambda: store.remotes.check(max_age=0)
    tray.show()
    wait_idle(qtbot, jobs)
    tray.refresh()
    wait_idle(qtbot, jobs)
    assert tray.offline_lines() == [f"Shared scope {SHARED}: credentials refused (1 waiting)"]
    assert "offline" not in tray.icon.toolTip()
    tray.timer.stop()
    wait_idle(qtbot, jobs)
