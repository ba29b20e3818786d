"""Shared scopes on a real SeaweedFS (tests/memory/seaweed.py): two Mirador homes bound to one scope share
its memories, and nothing else; forget is gone from every object in the bucket; concurrent writers lose
nothing and double nothing; with the store down, local work goes on and the outbox drains afterwards."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

from memory.errors import NotFoundError
from memory.store import filters as F
from memory.store.erasure import forget
from memory.store.remote import Remotes, fresh
from tests.memory import seaweed as sw_fixtures
from tests.memory.seaweed import BUCKET, KEY_ID, SECRET, SeaweedFS

seaweed, memory_keyring, own_seaweed = sw_fixtures.seaweed, sw_fixtures.memory_keyring, sw_fixtures.own_seaweed  # fixtures

SHARED = "work/acme"


def bind(home: Path, sw: SeaweedFS, prefix: str, name: str = "team", scope: str = SHARED) -> None:
    """Write a config binding `scope` to the bucket prefix, and the credentials to the (test) keyring."""
    from memory.config import Config, save_config
    from memory.store.remote import save_credentials

    cfg = Config.model_validate({"remote": {"bindings": [{
        "name": name, "scope": scope, "url": f"s3://{BUCKET}/{prefix}", "endpoint": sw.endpoint}],
        "timeout_seconds": 5, "flush_interval_seconds": 1}})
    save_config(cfg, home)
    save_credentials(name, KEY_ID, SECRET)


def open_home(tmp_path: Path, who: str, sw: SeaweedFS, prefix: str, embedder=None):
    from memory.store.core import Store

    home = tmp_path / who
    home.mkdir()
    bind(home, sw, prefix)
    return Store(home, embedder=embedder)


def texts(hits) -> list[str]:
    return [h.text for h in hits]


@pytest.fixture
def prefix() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def homes(tmp_path, seaweed, memory_keyring, prefix):
    a = open_home(tmp_path, "a", seaweed, prefix)
    b = open_home(tmp_path, "b", seaweed, prefix, embedder=a.embedder)
    return a, b


def test_two_homes_share_one_scope_and_nothing_else(homes, seaweed, prefix):
    from memory.retrieval.search import search_memories

    a, b = homes
    shared = a.add_memory("The acme deploy freeze starts on Thursday at noon", scope=SHARED)
    below = a.add_memory("The acme billing team owns the invoice exporter", scope="work/acme/billing")
    a_private = a.add_memory("My quokkabanana dentist appointment is on Monday", scope="personal")
    b_private = b.add_memory("My zebrafinch passport is in the blue drawer", scope="personal")
    b_work = b.add_memory("The internal wiki moved to a new host", scope="work")
    assert a.remotes.pending() == {"team": 0}

    # B finds what A shared (search, get, list), under the scope filter; never A's personal memories.
    hits = search_memories(b, "when does the acme deploy freeze start", scopes=[SHARED])
    assert hits and hits[0].id == shared["id"] and hits[0].scope == SHARED
    assert b.get(shared["id"])["text"] == shared["text"]
    assert {m["id"] for m in b.list(scopes=["work"])} == {shared["id"], below["id"], b_work["id"]}
    assert {m["id"] for m in b.list(scopes=["work/acme/billing"])} == {below["id"]}
    assert search_memories(b, "dentist appointment quokkabanana", scopes=None)[0].id != a_private["id"]
    assert not [h for h in search_memories(b, "deploy freeze acme", scopes=["personal"]) if h.scope == SHARED]
    with pytest.raises(NotFoundError):
        b.get(shared["id"], scopes=["personal"])
    # Local and shared rows in one ranking: B's own `work` memory and A's shared one.
    both = search_memories(b, "wiki host deploy freeze", scopes=["work"], limit=5)
    assert {shared["id"], b_work["id"]} <= {h.id for h in both}

    # Only the shared scope's rows are in the bucket; personal and plain `work` never are.
    assert seaweed.holding("deploy freeze starts on Thursday", prefix)  # the check can see text at all
    for text in ("zebrafinch passport", "quokkabanana dentist", "internal wiki moved"):
        assert not seaweed.holding(text, prefix), text
    # ...and the shared memory is not in the local memories table of either home.
    for s in (a, b):
        assert s.count("memory", F.id_is(shared['id']), local=True) == 0
    assert b.count("memory", F.id_is(b_private['id']), local=True) == 1

    # An edit on B is what A reads.
    b.update_memory(shared["id"], text="The acme deploy freeze starts on Friday at noon")
    assert a.get(shared["id"])["text"] == "The acme deploy freeze starts on Friday at noon"

    # B forgets it: A cannot find it, and no object in the bucket holds its text (any version).
    forget(b, [shared["id"]])
    with pytest.raises(NotFoundError):
        a.get(shared["id"])
    assert shared["id"] not in {h.id for h in search_memories(a, "acme deploy freeze noon", scopes=[SHARED])}
    assert shared["id"] not in {m["id"] for m in a.list(scopes=[SHARED])}
    assert not seaweed.holding("deploy freeze starts on", prefix)
    assert seaweed.holding("invoice exporter", prefix)  # what was not forgotten is still there
    # Only its tombstone names it now: the edit log of who wrote it went too, old versions included.
    tables = {k.split(f"/{prefix}/", 1)[1].split("/")[0] for k in seaweed.holding(shared["id"], prefix)}
    assert tables == {"tombstones.lance"}, tables
    # A local forget does not touch the bucket's other rows.
    forget(a, [a_private["id"]])
    assert a.get(below["id"])["id"] == below["id"]


def test_concurrent_writers_lose_nothing_and_double_nothing(tmp_path, seaweed, memory_keyring, prefix):
    first = open_home(tmp_path, "w0", seaweed, prefix)
    stores = [first] + [open_home(tmp_path, f"w{i}", seaweed, prefix, embedder=first.embedder) for i in (1, 2, 3)]
    first.add_memory("the shared table exists before the race", scope=SHARED)
    errors: list[BaseException] = []

    def write(i, s):
        try:
            for n in range(25):
                s.add_memory(f"writer {i} note {n} about the acme rollout", scope=SHARED)
        except BaseException as e:  # surfaced below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i, s)) for i, s in enumerate(stores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    for s in stores:
        s.remotes.flush()
        assert sum(s.remotes.pending().values()) == 0
    table = fresh(first.remotes.shared["team"].memories())
    ids = table.to_arrow().column("id").to_pylist()
    assert len(ids) == 101 and len(set(ids)) == 101
    texts_ = table.to_arrow().column("text").to_pylist()
    assert sorted(t for t in texts_ if t.startswith("writer")) == sorted(
        f"writer {i} note {n} about the acme rollout" for i in range(4) for n in range(25))


def test_offline_remote_local_work_goes_on_and_the_outbox_drains(tmp_path, memory_keyring, own_seaweed, prefix):
    sw = own_seaweed  # stopped and started again below
    from memory.retrieval.search import search_memories

    a = open_home(tmp_path, "a", sw, prefix)
    a.add_memory("The acme standup is at nine thirty", scope=SHARED)
    sw.stop()
    local = a.add_memory("The espresso machine needs descaling monthly", scope="personal")
    queued = a.add_memory("The acme release train leaves every second Tuesday", scope=SHARED)
    # Local work goes on; the shared write waits in the outbox.
    assert search_memories(a, "espresso descaling", scopes=["personal"])[0].id == local["id"]
    assert a.remotes.pending() == {"team": 1}
    assert a.remotes.flush()["errors"]
    assert a.remotes.pending() == {"team": 1}
    health = a.remotes.health()[0]
    assert not health["online"] and health["pending"] == 1
    # A search over the shared scope still answers with what is local.
    search_memories(a, "acme release train", scopes=None)

    sw.start()
    # The scheduler's job drains it, with nothing new written.
    from memory.consolidation.scheduler import job_share

    assert job_share(a) == "sent 1, 0 waiting"
    assert sum(a.remotes.pending().values()) == 0
    again = a.remotes.flush()
    assert again["sent"] == 0
    b = open_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    assert b.get(queued["id"])["text"] == queued["text"]
    rows = fresh(a.remotes.shared["team"].memories()).to_arrow().column("id").to_pylist()
    assert sorted(rows) == sorted(set(rows)) and len(rows) == 2
    assert search_memories(b, "when does the acme release train leave", scopes=[SHARED])[0].id == queued["id"]


def test_forget_while_offline_is_never_undone(tmp_path, memory_keyring, own_seaweed, prefix):
    """A shared write queued, then forgotten before the store came back: the flush never sends its text."""
    sw = own_seaweed  # stopped and started again below
    a = open_home(tmp_path, "a", sw, prefix)
    kept = a.add_memory("The acme office wifi is called acme-guest", scope=SHARED)
    sw.stop()
    gone = a.add_memory("The acme vendor margin is eleven percent", scope=SHARED)
    forget(a, [gone["id"]])
    sw.start()
    a.remotes.flush()
    assert a.remotes.pending() == {"team": 0}
    assert not sw.holding("vendor margin is eleven", prefix)
    assert sw.holding("acme-guest", prefix)
    assert a.get(kept["id"])["id"] == kept["id"]


def test_a_shared_memory_while_its_store_is_down_is_offline_not_not_found(tmp_path, memory_keyring, own_seaweed,
                                                                          prefix):
    """Reading, editing or relating a shared memory B does not hold while the store is down says the store is
    offline — never "no such memory", which an agent would take as forgotten — and changes nothing."""
    from memory.errors import SharedOfflineError
    from memory.graph.relations import add_relation, related

    sw = own_seaweed  # stopped and started again below
    a = open_home(tmp_path, "a", sw, prefix)
    shared = a.add_memory("The acme on-call rota changes on Mondays", scope=SHARED)
    b = open_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    mine = b.add_memory("My bike lock code is in the password manager", scope="personal")
    sw.stop()
    for call in (lambda: b.get(shared["id"]),
                 lambda: b.update_memory(shared["id"], text="The acme on-call rota changes on Fridays"),
                 lambda: add_relation(b, mine["id"], "MENTIONS", shared["id"]),
                 lambda: related(b, shared["id"])):
        with pytest.raises(SharedOfflineError, match="shared scope work/acme, whose store does not answer"):
            call()
    # A read that cannot reach the shared scope still says "not found"; local rows answer as ever.
    with pytest.raises(NotFoundError):
        b.get(shared["id"], scopes=["personal"])
    assert b.get(mine["id"])["text"] == mine["text"]
    assert b.remotes.pending() == {"team": 0}  # nothing was queued by the refused edit
    sw.start()
    assert b.get(shared["id"])["text"] == shared["text"]


def test_scoped_token_sees_the_teams_shared_memories_and_nothing_else(homes):
    from memory.mcp.auth import make_principal
    from tests.memory.mcp_support import call

    a, b = homes
    shared = a.add_memory("The acme on-call rota flips on Mondays", scope=SHARED)
    b.add_memory("My bank pin hint is the old street name", scope="personal")
    b.add_memory("The work laptop refresh is in March", scope="work")

    async def steps(client):
        r = await client.call_tool("memory_search", {"query": "acme on-call rota"})
        got = await client.call_tool("memory_get", {"id": shared["id"]})
        listed = await client.call_tool("memory_list", {})
        return r, got, listed

    r, got, listed = call(b, make_principal("acme-bot", [SHARED], None), steps)
    doc = json.loads(r.content[0].text)
    found = [h["id"] for h in doc["results"]]
    assert shared["id"] in found
    everything = r.content[0].text + got.content[0].text + listed.content[0].text
    assert "bank pin" not in everything and "laptop refresh" not in everything
    assert shared["text"] in got.content[0].text

    async def outsider(client):
        return await client.call_tool("memory_get", {"id": shared["id"]})

    refused = call(b, make_principal("other", ["personal"], None), outsider)
    assert shared["text"] not in refused.content[0].text


def test_no_binding_no_remote_work(store):
    from memory.consolidation.scheduler import job_share

    assert isinstance(store.remotes, Remotes) and not store.remotes.shared
    assert job_share(store) == "no shared scopes"
    store.add_memory("plain local memory", scope="work/acme")
    assert store.remotes.pending() == {}
    assert OUTBOX_ABSENT(store)


def OUTBOX_ABSENT(store) -> bool:  # noqa: N802 - reads as a claim
    from memory.store.remote import OUTBOX

    return not store.has_table(OUTBOX)


def test_a_window_delete_erases_a_shared_memory_instead_of_calling_it_gone(homes):
    from memory.store.erasure import forget_present

    a, b = homes
    shared = a.add_memory("The acme on-call handover is on Mondays at ten", scope=SHARED)
    assert b.get(shared["id"])["text"] == shared["text"]
    report = forget_present(b, [shared["id"], "mem_doesnotexist00000000"])
    assert report["deleted"] == 1 and report["already_gone"] == ["mem_doesnotexist00000000"]
    assert shared["id"] not in a.get_many("memory", [shared["id"]], ["id"])


def test_tombstones_are_shared_so_no_device_recreates_a_forgotten_memory(tmp_path, memory_keyring, own_seaweed, prefix):
    """B forgets a shared memory while A holds an edit of it in its outbox (A was offline): A's flush never
    sends the edit back, A pulls B's tombstone (audited), its extraction cannot write that content again,
    and a race (an automated write of it queued before the pull) is dropped at the flush too."""
    sw = own_seaweed  # stopped and started again below
    from memory.consolidation.write_policy import tombstoned_fps
    from memory.store.fingerprint import fingerprint
    from memory.store.specs import MemorySpec

    a = open_home(tmp_path, "a", sw, prefix)
    b = open_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    text = "The acme staging password rotates every ninety days"
    m = a.add_memory(text, scope=SHARED)
    # A's newer version of it waits in A's outbox (written while the bucket did not answer).
    from memory.store import tables as T

    row = a.remotes.rows(None, F.id_is(m['id']), T.memories_schema(1).names, 1)[0]
    sw.stop()
    a.remotes.divert([{**row, "text": text + " and on every offboarding"}])
    assert a.remotes.pending() == {"team": 1}
    sw.start()
    forget(b, [m["id"]])
    # The bucket's tombstone carries no text.
    stones = b.remotes.shared["team"].stones()
    assert [s["id"] for s in stones] == [m["id"]] and stones[0]["fingerprint"] == fingerprint(text)
    assert not sw.holding("staging password rotates", prefix)

    # A race: A's extraction writes the same content under a new id before A has pulled.
    raced = a.add_memories([MemorySpec(text=text, scope=SHARED, origin="extractor:statements")],
                           actor="extractor")[0]
    # ...and a person on A deliberately writes it again: that is theirs to make.
    mine = a.add_memory(text, scope=SHARED)
    report = a.remotes.flush()
    assert report["pending"] == 0 and not report["errors"]
    assert not sw.holding("every offboarding", prefix)  # the queued edit was never sent
    with pytest.raises(NotFoundError):
        b.get(m["id"])
    with pytest.raises(NotFoundError):
        a.get(m["id"])
    with pytest.raises(NotFoundError):
        b.get(raced["id"])
    assert b.get(mine["id"])["text"] == text
    # A now holds B's tombstone: extraction's write policy sees it.
    assert tombstoned_fps(a, [fingerprint(text)]) == {fingerprint(text)}
    who = {(r["actor"], r["entity_id"]) for r in a.rows("audit", F.equals("action", "delete"), ["actor", "entity_id"])}
    assert ("shared:team", m["id"]) in who and ("shared:team", raced["id"]) in who
    # Pulling again adds nothing twice; while the bucket's tombstones are unchanged, nothing is read at all.
    shared_a = a.remotes.shared["team"]
    reads = []
    real_stones = shared_a.stones
    shared_a.stones = lambda where=None: reads.append(where) or real_stones(where)
    assert a.remotes.pull(shared_a) == 0
    assert a.count("tombstones", F.id_is(m['id']), local=True) == 1
    assert reads == []
    forget(b, [mine["id"]])  # a new tombstone: the next pull reads them again and takes it
    assert a.remotes.pull(shared_a) == 1 and reads == [None]
    with pytest.raises(NotFoundError):
        a.get(mine["id"])


def test_concurrent_edits_settle_predictably_and_are_audited(homes):
    """Two devices edit one shared memory from the same version: between two people the later edit wins and
    the earlier is kept as a superseded version; a person's edit beats an automated one whichever came
    later; each device's audit names the other device and person."""
    from datetime import timedelta

    from memory.store import tables as T
    from memory.types import utcnow

    a, b = homes
    cols = T.memories_schema(1).names

    def stale_edit(store, id_, actor, **change):
        """An edit made from the version this device read before the other device's edit landed."""
        row = store.remotes.rows(None, F.id_is(id_), cols, 1)[0]
        return row, lambda: store.remotes.divert([{**row, **change, "updated_at": utcnow() + timedelta(seconds=1)}],
                                                 actor=actor, base=row["updated_at"])

    # Two people: B's edit is later, so it wins; A's is kept as a superseded version.
    m = a.add_memory("The acme retro is on Fridays", scope=SHARED)
    _, b_edit = stale_edit(b, m["id"], "person", text="The acme retro is on Thursdays")
    a.update_memory(m["id"], text="The acme retro is on Wednesdays")
    b_edit()
    assert b.remotes.pending() == {"team": 0}
    assert a.get(m["id"])["text"] == "The acme retro is on Thursdays"
    kept = a.remotes.rows(None, F.id_is(m['id'], "superseded_by"), cols, 5)
    assert [r["text"] for r in kept] == ["The acme retro is on Wednesdays"]
    assert kept[0]["status"] == "superseded"
    [note] = b.rows("audit", F.and_(F.equals("action", "conflict"), F.id_is(m['id'], "entity_id")), ["actor", "before", "after"])
    before, after = json.loads(note["before"]), json.loads(note["after"])
    assert note["actor"] == "shared:team" and after["kept"] == "this device's edit"
    assert before["other"]["actor"] == "person" and before["other"]["device"] and before["other"]["person"]
    assert after["earlier_version"] == kept[0]["id"]

    # An automated edit loses to a person's, even when it is the later one; nothing of it is kept.
    n = a.add_memory("The acme design review needs two approvals", scope=SHARED)
    _, b_auto = stale_edit(b, n["id"], "extractor", confidence=0.99)
    a.update_memory(n["id"], text="The acme design review needs three approvals")
    b_auto()
    assert a.get(n["id"])["text"] == "The acme design review needs three approvals"
    assert not a.remotes.rows(None, F.id_is(n['id'], "superseded_by"), cols, 5)
    [note] = b.rows("audit", F.and_(F.equals("action", "conflict"), F.id_is(n['id'], "entity_id")), ["after"])
    assert json.loads(note["after"])["kept"] == "the other edit"

    # A person's edit made from an older version still wins over a later automated one.
    o = a.add_memory("The acme pager rotation is weekly", scope=SHARED)
    _, b_person = stale_edit(b, o["id"], "person", text="The acme pager rotation is fortnightly")
    a.update_memory(o["id"], confidence=0.9, actor="extractor")
    b_person()
    assert a.get(o["id"])["text"] == "The acme pager rotation is fortnightly"
    assert not a.remotes.rows(None, F.id_is(o['id'], "superseded_by"), cols, 5)

    # No edit in between: an ordinary edit is no conflict.
    b.update_memory(o["id"], text="The acme pager rotation is monthly")
    assert a.get(o["id"])["text"] == "The acme pager rotation is monthly"
    assert not [r for r in b.rows("audit", F.and_(F.equals("action", "conflict"), F.id_is(o['id'], "entity_id")), ["after"])
                if "monthly" in (r["after"] or "")]  # (the audit is sealed at rest: matched once opened)
    # The edit log in the bucket names who wrote each version, and holds no text.
    log_rows = fresh(b.remotes.shared["team"].edits()).to_arrow().to_pylist()
    assert {r["id"] for r in log_rows} >= {m["id"], n["id"], o["id"]}
    assert all(set(r) == {"id", "updated_at", "actor", "device", "person", "sent_at"} for r in log_rows)


def test_one_device_at_a_time_maintains_the_shared_store(homes):
    """The scheduled maintenance runs on the device holding the bucket's lease; another device skips it until
    the lease expires; the full-text index is there afterwards and search still finds the memory."""
    import time

    from memory.consolidation.scheduler import job_share_maintain
    from memory.retrieval.search import search_memories
    from memory.store.indexes import has_index

    a, b = homes
    m = a.add_memory("The acme incident review template lives in the wiki", scope=SHARED)
    assert job_share_maintain(a) == "team: 1 rows"
    assert job_share_maintain(b) == "team: another device maintains it"
    assert job_share_maintain(a) == "team: 1 rows"  # the holder renews its lease
    assert has_index(fresh(a.remotes.shared["team"].memories()), "search_text")
    a.remotes.lease_minutes = 0.001  # a device that stopped: its lease runs out
    assert job_share_maintain(a) == "team: 1 rows"
    time.sleep(0.3)
    assert job_share_maintain(b) == "team: 1 rows"
    assert job_share_maintain(a) == "team: another device maintains it"
    assert search_memories(b, "where is the acme incident review template", scopes=[SHARED])[0].id == m["id"]
