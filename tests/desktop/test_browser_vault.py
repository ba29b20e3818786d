"""Vault entries in the memory browser: listed by label, value hidden until Reveal, deletable for good."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from desktop.ui.browser import MemoryBrowser
from desktop.ui.browser_data import MemoryFilter, fetch_rows, memory_keys
from memory.errors import NotFoundError
from tests.conftest import files_containing
from tests.desktop.conftest import wait_idle

SECRET = "hunter2-otter-55917"
LABEL = "staging database password"


def _cells(browser) -> list[str]:
    m = browser.model
    roles = (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole)
    return [str(m.index(r, c).data(role))
            for r in range(m.rowCount()) for c in range(m.columnCount()) for role in roles]


def _select(qtbot, browser, id_):
    qtbot.waitUntil(lambda: browser.model.index_of(id_) >= 0, timeout=30_000)
    assert browser.select_id(id_)
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == id_, timeout=30_000)


def test_vault_entry_listed_hidden_until_reveal_and_deleted(qtbot, jobs, store, mirador_home, monkeypatch):
    note = store.add_memory("Staging runs on db-stg-2", scope="work")
    entry = store.add_memory(LABEL, type="vault", value=SECRET, scope="work")
    browser = MemoryBrowser(jobs, store)
    qtbot.addWidget(browser)
    browser.show()
    qtbot.waitExposed(browser)

    qtbot.waitUntil(lambda: browser.model.index_of(entry["id"]) >= 0 and browser.model.index_of(note["id"]) >= 0,
                    timeout=30_000)
    row = browser.model.row_at(browser.model.index_of(entry["id"]))
    assert (row["title"], row["type"], row["scope"]) == (LABEL, "vault", "work") and row["updated_at"]
    assert "value" not in row and "value_enc" not in row
    cells = _cells(browser)
    assert LABEL in cells and "Secret (vault)" in cells
    assert not any(SECRET in c for c in cells), "the value must not be in any table cell"

    _select(qtbot, browser, entry["id"])
    assert browser.reveal_btn.isVisible() and browser.reveal_btn.isEnabled()
    assert not browser.edit_btn.isEnabled()
    text = browser.detail.toPlainText()
    assert LABEL in text and "hidden" in text and SECRET not in text
    assert SECRET not in browser.detail.toHtml()
    reveals = lambda: [a for a in store.rows("audit") if a["action"] == "reveal"]  # noqa: E731
    assert reveals() == [], "selecting an entry must not decrypt it"

    qtbot.mouseClick(browser.reveal_btn, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: SECRET in browser.detail.toPlainText(), timeout=30_000)
    assert [(a["actor"], a["entity_id"]) for a in reveals()] == [("person", entry["id"])]
    assert not any(SECRET in c for c in _cells(browser))

    _select(qtbot, browser, note["id"])  # moving on hides the value again
    assert SECRET not in browser.detail.toPlainText() and not browser.reveal_btn.isVisible()
    _select(qtbot, browser, entry["id"])
    assert SECRET not in browser.detail.toPlainText()

    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    browser.table.setFocus()
    qtbot.keyClick(browser.table, Qt.Key.Key_Delete)
    qtbot.waitUntil(lambda: browser.model.index_of(entry["id"]) < 0, timeout=60_000)
    wait_idle(qtbot, jobs)
    with pytest.raises(NotFoundError):
        store.get(entry["id"])
    assert store.count("vault", local=True) == 0
    assert store.get(note["id"])["text"] == "Staging runs on db-stg-2"
    assert files_containing(mirador_home, LABEL) == [], "the label is erased from disk too"


def test_vault_filters_and_search(store):
    store.add_memory("Ledger runs on Postgres 16", scope="work")
    entry = store.add_memory("ledger deploy token", type="vault", value=SECRET, scope="work")
    store.add_memory("home wifi password", type="vault", value="x-9", scope="personal")

    def ids(**kw):
        return memory_keys(store, MemoryFilter(**kw)).ids

    assert entry["id"] in ids() and entry["id"] in ids(types=["vault"]) and entry["id"] in ids(statuses=[])
    assert entry["id"] not in ids(types=["semantic"]) and entry["id"] not in ids(statuses=["candidate"])
    assert entry["id"] not in ids(scopes=["personal"]), "scope filters vault entries too"
    assert entry["id"] not in ids(sources=["screen"]), "vault entries have no evidence source"
    hits = memory_keys(store, MemoryFilter(text="ledger token", scopes=["work"]))
    assert entry["id"] in hits.ids and hits.rows[entry["id"]]["title"] == "ledger deploy token"
    rows = fetch_rows(store, "memory", ids())
    assert {r["type"] for r in rows} == {"semantic", "vault"} and not any(SECRET in str(r) for r in rows)
