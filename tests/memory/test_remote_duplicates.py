"""Issue 41 audit: one id held twice in a bucket. Lance commits two concurrent inserts of one id (the kept copy of a
superseded version has the same id on every device), so a bucket can hold an id twice. On a real SeaweedFS: every
read keeps one row per id before its limit (the list, MCP memory_list, stats, `remote list`'s count), the
insert's own check and `remote maintain` leave one row per id, and three writers racing (two processes of one home
and another home) lose no edit and leave no duplicate."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pyarrow as pa
import pytest

from memory.mcp.auth import make_principal
from memory.store import filters as F
from memory.store.remote_io import fresh
from tests.memory import seaweed as sw_fixtures
from tests.memory.mcp_support import call
from tests.memory.test_remote import SHARED, open_home

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures

N = 8


@pytest.fixture
def doubled(tmp_path, seaweed, memory_keyring):
    """A adds N shared memories; then two of them are written into the bucket a second time through the binding's
    own table, one as an identical copy, one as a newer version (what two homes inserting one id at once leave)."""
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    a = open_home(tmp_path, "a", seaweed, prefix)
    b = open_home(tmp_path, "b", seaweed, prefix, embedder=a.embedder)
    ids = [a.add_memory(f"Acme fact number {k}: the deploy window is slot {k}", scope=SHARED)["id"]
           for k in range(N)]
    assert a.remotes.pending() == {"team": 0}
    t = a.remotes.shared["team"].memories()
    rows = {r["id"]: r for r in fresh(t).search().where(F.id_in(ids[:2])).limit(None).to_arrow().to_pylist()}
    same = rows[ids[0]]
    newer = {**rows[ids[1]], "text": "Acme fact number 1: the deploy window moved",
             "updated_at": rows[ids[1]]["updated_at"] + timedelta(seconds=5)}
    t.add(pa.Table.from_pylist([same, newer], schema=t.schema))
    assert fresh(t).count_rows() == N + 2
    return a, b, ids, t


def _listed(store, **kw) -> list[str]:
    return [m["id"] for m in store.list(scopes=[SHARED], statuses=[], **kw)]


def test_reads_keep_one_row_per_id(doubled):
    a, b, ids, t = doubled
    for s in (a, b):
        got = _listed(s, limit=500)
        assert sorted(got) == sorted(ids)  # each once, none left out
        for limit in (3, N - 1):
            page = _listed(s, limit=limit)
            assert len(page) == limit == len(set(page))
        # pages with an offset cover every id once
        pages = [i for off in range(0, N, 3) for i in _listed(s, limit=3, offset=off)]
        assert sorted(pages) == sorted(ids)
        assert s.count("memory", None, scopes=[SHARED]) == N
        assert set(s.get_many("memory", ids, ["id"])) == set(ids)
        assert s.get(ids[1])["text"] == "Acme fact number 1: the deploy window moved"  # the newer copy
        assert len(s.rows("memory", None, ["id"], scopes=[SHARED], limit=N)) == N
    stats = b.stats()
    assert stats["memories"] == N and stats["shared_memories"] == N
    assert b.remotes.shared["team"].probe()["memories"] == N  # `remote list`'s count

    async def steps(client):
        pages, cursor = [], None
        while True:
            r = await client.call_tool("memory_list", {"limit": 3, **({"cursor": cursor} if cursor else {})})
            doc = json.loads(r.content[0].text)
            pages.append([m["id"] for m in doc["results"]])
            cursor = doc["next_cursor"]
            if not cursor:
                break
        return pages

    # MCP memory_list pages by keyset (updated_at, id) inside the query: with identical copies (what two homes
    # inserting one kept version leave: its times come from the versions, remote_conflicts.py) every page is full
    # and each id is listed once. (A copy that differs, here the newer one, is left by the keyset filter on
    # the page after its newest copy; the bucket holds no such pair once maintained.)
    b.remotes.maintain()
    t.add(fresh(t).search().where(F.id_in(ids[2:5])).limit(None).to_arrow())
    assert fresh(t).count_rows() == N + 3
    pages = call(b, make_principal("acme-bot", [SHARED], SHARED), steps)
    assert all(len(p) == 3 for p in pages[:-1])
    listed = [i for p in pages for i in p]
    assert sorted(listed) == sorted(ids)


def test_maintain_and_the_insert_check_leave_one_row_per_id(doubled):
    from memory.store.remote_dedup import dedupe_ids

    a, b, ids, t = doubled
    out = b.remotes.maintain()
    assert out["team"]["duplicates"] == 2, out
    assert fresh(t).count_rows() == N
    kept = fresh(t).search().where(F.id_is(ids[1])).select(["text"]).limit(None).to_arrow().to_pylist()
    assert kept == [{"text": "Acme fact number 1: the deploy window moved"}]
    assert sorted(_listed(a, limit=500)) == sorted(ids)
    # What a flush does right after an insert: the ids it inserted are checked and a second row removed.
    row = fresh(t).search().where(F.id_is(ids[2])).limit(None).to_arrow()
    t.add(row)
    assert dedupe_ids(t, [ids[2], ids[3]]) == 1 and fresh(t).count_rows() == N
    assert dedupe_ids(t, ids) == 0


def test_maintain_removes_duplicate_edges(doubled):
    from memory.graph.relations import add_relation

    a, b, ids, t = doubled
    add_relation(a, ids[0], "MENTIONS", ids[1])
    assert a.remotes.pending() == {"team": 0}
    edges = a.remotes.shared["team"].relations(create=False)
    row = fresh(edges).search().limit(None).to_arrow()
    assert row.num_rows == 1
    edges.add(row)
    assert len(b.remotes.edges([SHARED], None, ["id"], None)) == 1
    out = b.remotes.maintain()
    assert out["team"]["edge_duplicates"] == 1
    assert fresh(edges).count_rows() == 1


def test_three_writers_racing_lose_no_edit_and_leave_no_duplicate(tmp_path, seaweed, monkeypatch):
    """Two processes of one home and one of another edit the same 10 shared memories in step (the audit's race
    with 20 left 74 rows for 71 ids)."""
    from memory.store.core import Store
    from memory.store.specs import MemorySpec
    from tests.memory import test_remote_races as races
    from tests.memory.mcp_support import env_for
    from tests.memory.race_worker import lost_edits, run_workers
    from tests.memory.seaweed import KEY_ID, SECRET

    monkeypatch.setenv(races.KEY_VAR, KEY_ID)
    monkeypatch.setenv(races.SECRET_VAR, SECRET)
    prefix = f"race-{uuid.uuid4().hex[:8]}"
    homes = [tmp_path / "a", tmp_path / "b"]
    for h in homes:
        races._bind(h, seaweed.endpoint, prefix)
    seed = Store(homes[0])
    n = 10
    ids = [m["id"] for m in seed.add_memories(
        [MemorySpec(text=f"Race memory {k}: as first written", scope=SHARED) for k in range(n)])]
    env = env_for(homes[0])
    env.update({"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring", races.KEY_VAR: KEY_ID,
                races.SECRET_VAR: SECRET, "MIRADOR_NO_SERVICE": "1"})
    env.pop("MIRADOR_HOME", None)
    outs = run_workers([(homes[0], "a1"), (homes[0], "a2"), (homes[1], "b1")], ids, tmp_path, rounds=1, env=env,
                       tick=1.0, lead=20.0)
    for out in outs:
        assert not out["errors"], out["errors"][:5]
        assert out["pending"] == 0
    records = [r for out in outs for r in out["records"]]
    assert len(records) == 3 * n
    shared = seed.remotes.shared["team"]
    before = lost_edits(shared, records)
    assert before["lost"] == [], json.dumps(before["lost"][:5], indent=1)
    assert before["raced"] > 0
    seed.remotes.maintain()
    got = lost_edits(shared, records)
    assert got["lost"] == [] and got["duplicates"] == 0 and got["current"] == n
    listed = [m["id"] for m in seed.list(scopes=[SHARED], statuses=[], limit=500)]
    assert len(listed) == len(set(listed)) == n + got["kept_versions"]
