"""LazyRowModel.refresh: rows in place when nothing moved; otherwise every loaded row stays loaded, and
thumbnails are decoded only for rows that are new to the list."""

from __future__ import annotations

from functools import partial

from PIL import Image

from desktop.ui.browser_data import evidence_keys
from desktop.ui.qt_models import EvidenceTableModel
from tests.desktop.conftest import wait_idle


def _frame(home, name):
    path = home / "frames" / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (320, 200), "white").save(path)
    return str(path)


def test_refresh_decodes_thumbnails_only_for_new_rows(qtbot, jobs, store, mirador_home):
    rows = [store.add_evidence(f"screen {i}", source="screen", app="Editor", frame_path=_frame(mirador_home, i))
            for i in range(3)]
    model = EvidenceTableModel(jobs, store)
    decoded: list[str] = []
    real = model._decorate
    model._decorate = lambda rs: (decoded.extend(r["id"] for r in rs), real(rs))[1]
    keys = partial(evidence_keys, store)
    model.reload(keys)
    qtbot.waitUntil(lambda: model.rowCount() == 3, timeout=30_000)
    assert sorted(decoded) == sorted(r["id"] for r in rows)

    decoded.clear()
    with qtbot.waitSignal(model.refreshed, timeout=30_000) as same:
        model.refresh(keys)
    assert same.args == [False] and decoded == [], "nothing new: no image is decoded again"

    new = store.add_evidence("screen new", source="screen", app="Editor", frame_path=_frame(mirador_home, "n"))
    with qtbot.waitSignal(model.refreshed, timeout=30_000) as moved:
        model.refresh(keys)
    wait_idle(qtbot, jobs)
    assert moved.args == [True] and decoded == [new["id"]]
    assert model.rowCount() == 4 and model.row_at(0)["id"] == new["id"]
    assert all(model.row_at(i).get("_thumb") is not None for i in range(4)), "old rows keep their thumbnails"


def test_refresh_keeps_every_loaded_row_loaded_when_rows_arrive_above(qtbot, jobs, store):
    from memory.store.core import MemorySpec

    store.add_memories([MemorySpec(text=f"fact {i:03d}", scope="work") for i in range(250)])
    from desktop.ui.browser_data import MemoryFilter, memory_keys
    from desktop.ui.qt_models import MemoryTableModel

    model = MemoryTableModel(jobs, store)
    keys = partial(memory_keys, store, MemoryFilter())
    model.reload(keys)
    qtbot.waitUntil(lambda: model.rowCount() == model.PAGE, timeout=30_000)
    model.fetchMore()
    qtbot.waitUntil(lambda: model.rowCount() == 250, timeout=30_000)
    last = model.row_at(249)["id"]
    store.add_memories([MemorySpec(text=f"newer {i}", scope="work") for i in range(5)])
    with qtbot.waitSignal(model.refreshed, timeout=30_000):
        model.refresh(keys)
    wait_idle(qtbot, jobs)
    assert model.total == 255 and model.rowCount() == 255 and model.index_of(last) == 254
