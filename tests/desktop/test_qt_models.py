"""The table models page lazily over the real store (no widgets)."""

from __future__ import annotations

from functools import partial

from desktop.ui.browser_data import MemoryFilter, fetch_rows, memory_keys
from desktop.ui.qt_models import ID_ROLE, ROW_ROLE, SORT_ROLE, MemoryTableModel, sort_proxy
from memory.store.core import MemorySpec, Store
from tests.desktop.conftest import FakeEmbedder, wait_idle

N = 5_000


def test_memory_model_pages_lazily_over_5k_rows(qtbot, jobs, mirador_home):
    store = Store(mirador_home, embedder=FakeEmbedder())
    store.add_memories([MemorySpec(text=f"fact number {i:05d}", scope="work") for i in range(N)])
    pages: list[int] = []

    def counting_fetch(store_, kind, ids):
        pages.append(len(ids))
        return fetch_rows(store_, kind, ids)

    model = MemoryTableModel(jobs, store, fetch=counting_fetch)
    model.reload(partial(memory_keys, store, MemoryFilter()))
    qtbot.waitUntil(lambda: model.rowCount() == model.PAGE, timeout=30_000)
    assert model.total == N
    assert pages == [model.PAGE]  # only the first page was read, not 5k rows
    assert model.canFetchMore()

    for expected in (2 * model.PAGE, 3 * model.PAGE):
        model.fetchMore()
        qtbot.waitUntil(lambda e=expected: model.rowCount() == e, timeout=30_000)
    assert pages == [model.PAGE] * 3 and sum(pages) < N

    # newest first, every row a real one, and the custom roles hand back the row and id
    first = model.index(0, MemoryTableModel.COL_TITLE)
    assert first.data(ROW_ROLE)["id"] == first.data(ID_ROLE)
    assert first.data().startswith("fact number ")
    assert model.index(0, MemoryTableModel.COL_CONFIDENCE).data(SORT_ROLE) == 1.0


def test_filters_and_removal_without_reload(qtbot, jobs, store):
    keep = store.add_memory("Postgres 16 runs the ledger", scope="work")
    cand = store.add_memory("Maybe move to SQLite", scope="work", status="candidate")
    store.add_memory("Grandma's birthday is in May", scope="personal")
    model = MemoryTableModel(jobs, store)
    proxy = sort_proxy(model)
    model.reload(partial(memory_keys, store, MemoryFilter(scopes=["work"])))
    qtbot.waitUntil(lambda: model.rowCount() == 2)
    assert {model.row_at(i)["id"] for i in range(2)} == {keep["id"], cand["id"]}

    model.reload(partial(memory_keys, store, MemoryFilter(statuses=["candidate"])))
    qtbot.waitUntil(lambda: model.total == 1 and model.rowCount() == 1)
    model.remove_ids([cand["id"]])
    assert model.rowCount() == 0 and model.total == 0 and proxy.rowCount() == 0

    model.reload(partial(memory_keys, store, MemoryFilter(text="which database runs the ledger")))
    qtbot.waitUntil(lambda: model.rowCount() > 0)
    assert model.row_at(0)["id"] == keep["id"]
    wait_idle(qtbot, jobs)


def test_source_and_app_filters_follow_provenance(store):
    ev = store.add_evidence("psql: PostgreSQL 16.2", source="screen", app="Terminal")
    talk = store.add_evidence("we should page on the fourth retry", source="audio", speaker="Sam")
    from_term = store.add_memory("Ledger runs PostgreSQL 16", provenance=[ev["id"]], scope="work")
    from_talk = store.add_memory("Page on the fourth retry", provenance=[talk["id"]], scope="work")
    store.add_memory("Typed by hand", scope="work")
    assert memory_keys(store, MemoryFilter(apps=["Terminal"])).ids == [from_term["id"]]
    assert memory_keys(store, MemoryFilter(sources=["audio"])).ids == [from_talk["id"]]
    assert memory_keys(store, MemoryFilter(apps=["Slack"])).ids == []
    assert memory_keys(store, MemoryFilter(apps=["Terminal"], scopes=["personal"])).ids == []
    hits = memory_keys(store, MemoryFilter(text="retry paging", sources=["audio"]))
    assert hits.ids == [from_talk["id"]] and hits.rows[from_talk["id"]]["text"] == "Page on the fourth retry"
