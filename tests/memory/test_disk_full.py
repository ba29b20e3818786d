"""A full disk (and a read-only one) under a real store on a real small filesystem (tests/memory/small_disk.py).

Every write is either stored and reported ok, or not stored and reported failed with one clear line; a retry
with the write's idempotency key once space is back stores it exactly once; optimize and purge work again
once there is room, and a failed pass leaves no partial index behind.
"""

from __future__ import annotations

import errno
import json
import os
import re
import uuid

import pytest

from memory.errors import DiskFullError, InputError, StorageError
from memory.mcp import tools as T
from memory.mcp.auth import make_principal
from memory.store import audit_hold, io_faults
from memory.store import filters as F
from memory.store.idempotency import keyed_id
from tests.memory.mcp_support import call
from tests.memory.small_disk import fill, free, remount, small_disk

WORK = make_principal("tester", ["work"], "work")
LEAVE = 400_000  # bytes left free: a handful of writes fit, then the disk is full


def one_liner(message: str, home) -> None:
    """What every disk-full error must be: one line naming the folder and what to do, nothing of LanceDB's."""
    assert "\n" not in message and str(home) in message and " is full (" in message
    assert "MIRADOR_HOME" in message and "mirador purge" in message
    assert not re.search(r"\.rs:\d+|cargo|LanceError|report it|Traceback", message), message


@pytest.fixture
def disk(tmp_path, monkeypatch):
    with small_disk(tmp_path, 24) as mnt:
        monkeypatch.setenv("MIRADOR_HOME", str(mnt / "home"))
        yield mnt


@pytest.fixture
def home(disk):
    return disk / "home"


@pytest.fixture
def small(home):
    from memory.store.core import Store

    s = Store(home)
    s.config.store.optimize_after_writes = 10**6  # compaction is tested on its own below
    return s


def evidence_ids(store) -> list[str]:
    return [r["id"] for r in store.rows("evidence", None, ["id"])]


def test_each_write_on_a_filling_disk_is_stored_and_ok_or_not_stored_and_failed(small, home, disk):
    filler = fill(disk, LEAVE)
    ok, failed = [], []
    for i in range(40):
        try:
            ok.append(small.add_evidence(f"note {i} from a filling disk")["id"])
        except DiskFullError as e:
            one_liner(str(e), home)
            failed.append(i)
        if len(failed) >= 5:
            break
    assert ok and len(failed) == 5, (len(ok), failed)
    stored = evidence_ids(small)
    assert sorted(stored) == sorted(ok)  # exactly the writes reported ok: none lost, none extra
    texts = [r["text"] for r in small.rows("evidence", None, ["text"])]
    assert sorted(texts) == sorted(f"note {i} from a filling disk" for i in range(len(ok)))

    os.remove(filler)
    small.add_evidence("after space came back")
    # Audit rows the full disk held back went in with the next audit write: every stored row is audited once.
    assert audit_hold.held(small) == 0
    audited = [i for r in small.rows("audit", F.equals("entity_kind", "evidence"), ["after"])
               for i in json.loads(r["after"])["ids"]]
    assert sorted(audited) == sorted(evidence_ids(small))


def test_mcp_adds_retried_with_their_keys_are_stored_once(small, home, disk):
    keys = [str(uuid.uuid4()) for _ in range(12)]

    def add_all(kinds):
        async def steps(c):
            out = []
            for i, (k, kind) in enumerate(zip(keys, kinds, strict=True)):
                if kind == "evidence":
                    out.append(await c.call_tool("evidence_add", {"text": f"pasted thread {i}", "idempotency_key": k}))
                else:
                    out.append(await c.call_tool("memory_add", {"text": f"The build box is bx-{i}",
                                                                "idempotency_key": k}))
            return out
        return call(small, WORK, steps)

    kinds = ["evidence" if i % 3 else "memory" for i in range(len(keys))]
    filler = fill(disk, LEAVE // 2)
    first = add_all(kinds)
    ok = [i for i, r in enumerate(first) if not r.is_error]
    bad = [i for i, r in enumerate(first) if r.is_error]
    assert ok and bad, "the disk should take some writes and refuse the rest"
    for i in bad:
        message = first[i].content[0].text
        one_liner(message.split(" — tell the person")[0], home)
        assert "internal error" not in message and "idempotency_key" in message
    for i, kind in enumerate(kinds):  # stored exactly when reported stored, found by the id its key gives
        rows = small.get_many(kind, [keyed_id(kind, WORK.actor, keys[i])], ["id"])
        assert bool(rows) == (i in ok), (i, kind)

    os.remove(filler)
    again = add_all(kinds)  # every call retried with its key, the ones that went through included
    assert not any(r.is_error for r in again)
    for i, r in enumerate(again):
        body = json.loads(r.content[0].text)
        assert body["created"]["id"] == keyed_id(kinds[i], WORK.actor, keys[i])
        assert body.get("replayed", False) == (i in ok)
    n_evd, n_mem = kinds.count("evidence"), kinds.count("memory")
    assert small.count("evidence", local=True) == n_evd and len(set(evidence_ids(small))) == n_evd
    assert small.count("memory", local=True) == n_mem  # no duplicate memory either


def test_a_key_names_one_write(small):
    async def steps(c):
        a = await c.call_tool("evidence_add", {"text": "first text", "idempotency_key": "k-1"})
        b = await c.call_tool("evidence_add", {"text": "other text", "idempotency_key": "k-1"})
        other_client = await c.call_tool("evidence_add", {"text": "other text", "idempotency_key": "k-2"})
        return a, b, other_client

    a, b, c2 = call(small, WORK, steps)
    assert not a.is_error and b.is_error and "was used for a different evidence" in b.content[0].text
    assert not c2.is_error and small.count("evidence", local=True) == 2
    from memory.store.erasure import forget

    forget(small, [json.loads(a.content[0].text)["created"]["id"]])
    with pytest.raises(InputError, match="was erased since"):
        T.evidence_add(small, WORK, "first text", idempotency_key="k-1")  # an erased row never comes back
    with pytest.raises(InputError, match="1 to 200 printable"):
        keyed_id("evidence", "person", " ")

    # A memory the key made and the person moved to a scope this client cannot read is not handed back.
    made = T.memory_add(small, WORK, "The deploy key lives in the safe", idempotency_key="m-1").created
    assert made is not None
    small.update_memory(made.id, scope="personal")
    with pytest.raises(InputError, match="moved out of your scopes"):
        T.memory_add(small, WORK, "The deploy key lives in the safe", idempotency_key="m-1")
    assert small.count("memory", local=True) == 1


def test_a_commit_that_went_through_before_its_error_is_reported_ok(small):
    # The one fault a real filesystem cannot be made to give on cue: the new version is in place, then the
    # write raises (LanceDB's text, as on a full disk). A retry would store the row twice if it were reported failed.
    table = small.evidence

    class RaisesAfterCommit:
        def __getattr__(self, name):
            return getattr(table, name)

        def add(self, data):
            table.add(data)
            raise RuntimeError("lance error: LanceError(IO): No space left on device (os error 28), "
                               "/root/.cargo/registry/src/lance-file-13.0.0/src/writer/structural.rs:258:9")

    small.evidence = RaisesAfterCommit()
    try:
        row = small.add_evidence("stored although the write raised")
    finally:
        small.evidence = table
    assert evidence_ids(small) == [row["id"]]


class _MergeThenRaise:
    """A memories table whose merges raise as a full disk does: after their commit (went=True) or before it."""

    def __init__(self, table, went: bool):
        self._table, self._went = table, went

    def __getattr__(self, name):
        return getattr(self._table, name)

    def merge_insert(self, on):
        outer = self

        class Builder:
            def __init__(self, real):
                self.real = real

            def when_matched_update_all(self):
                return Builder(self.real.when_matched_update_all())

            def when_not_matched_insert_all(self):
                return Builder(self.real.when_not_matched_insert_all())

            def execute(self, data):
                if outer._went:
                    self.real.execute(data)
                raise OSError(errno.ENOSPC, "No space left on device")

        return Builder(self._table.merge_insert(on))


@pytest.mark.parametrize("went", [True, False])
def test_an_edit_is_reported_failed_only_if_it_did_not_commit(small, went):
    # An edit is a merge on a row that was there already, so "is the id there" proves nothing: the sealed text
    # read back exactly as written (its nonce is this write's) does.
    row = small.add_memory("The staging database is on port 5433", scope="work")
    table = small.memories
    small.memories = _MergeThenRaise(table, went)
    try:
        if went:
            small.update_memory(row["id"], text="The staging database moved to port 6543")
        else:
            with pytest.raises(DiskFullError):
                small.update_memory(row["id"], text="The staging database moved to port 6543")
    finally:
        small.memories = table
    assert small.get(row["id"])["text"] == ("The staging database moved to port 6543" if went
                                             else "The staging database is on port 5433")


def test_an_audit_row_the_disk_refuses_waits_and_the_change_is_reported_ok(small):
    audit = small.audit

    class FullAudit:
        def __getattr__(self, name):
            return getattr(audit, name)

        def add(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    small.audit = FullAudit()
    try:
        row = small.add_evidence("the row is stored; its audit row waits")
    finally:
        small.audit = audit
    assert evidence_ids(small) == [row["id"]] and audit_hold.held(small) == 1
    second = small.add_evidence("the next write takes the held audit row along")
    assert audit_hold.held(small) == 0
    audited = {json.loads(r["after"])["ids"][0] for r in small.rows("audit", F.equals("entity_kind", "evidence"), ["after"])}
    assert audited == {row["id"], second["id"]}


def test_a_read_only_disk_is_said_plainly_and_writes_resume_when_writable(small, home, disk):
    small.add_evidence("before")
    remount(disk, "ro")
    try:
        with pytest.raises(StorageError, match="is read-only") as e:
            small.add_evidence("refused")
        assert not isinstance(e.value, DiskFullError) and str(home) in str(e.value)
        assert "MIRADOR_HOME" in str(e.value) and ".rs:" not in str(e.value)
    finally:
        remount(disk, "rw")
    small.add_evidence("after")
    assert small.count("evidence", local=True) == 2


def test_optimize_and_purge_work_again_once_there_is_room(small, home, disk):
    from memory.store.erasure import purge
    from memory.store.leftovers import index_dirs

    for b in range(10):  # ten fragments: compaction has work to do
        small.add_evidence_batch([_spec(b, i) for i in range(30)])
    before = {t: index_dirs(getattr(small, t)) for t in ("memories", "evidence", "vault")}
    filler = fill(disk, 20_000)
    with pytest.raises(DiskFullError) as e:
        small.optimize()
    one_liner(str(e.value), home)
    assert _unreferenced_new_indexes(small, before) == {}  # a failed pass leaves no partial index behind
    os.remove(filler)
    report = small.optimize()
    assert report["evidence"]["compacted"] > 0 and small.count("evidence", local=True) == 300

    # Full to the last byte: purge drops the old versions first (deleting only), which frees what it needs.
    fill(disk, 0)
    assert free(disk) < 4096
    assert purge(small) is True
    assert free(disk) > 0 and small.count("evidence", local=True) == 300


def test_disk_faults_are_worded_and_other_errors_left_alone(tmp_path):
    lance = "lance error: LanceError(IO): {} (os error {}), /root/.cargo/registry/src/x/structural.rs:191:9"
    quota = io_faults.storage_error(RuntimeError(lance.format("Disk quota exceeded", errno.EDQUOT)), tmp_path)
    assert isinstance(quota, DiskFullError) and "quota" in str(quota) and ".rs" not in str(quota)
    eio = io_faults.storage_error(OSError(lance.format("Input/output error", errno.EIO)), tmp_path)
    assert type(eio) is StorageError and "I/O error" in str(eio) and eio.exit_code == 5
    wrapped = RuntimeError("commit failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert isinstance(io_faults.storage_error(wrapped, tmp_path), DiskFullError)
    assert io_faults.storage_error(RuntimeError("Commit conflict for version 7"), tmp_path) is None
    assert io_faults.storage_error(InputError("no space left on device is just text here"), tmp_path) is None


def test_the_sweep_removes_only_unreferenced_folders_a_failed_step_left(small):
    # Lance leaves a partial full-text index when the disk fills while it is written; whether a given pass
    # hits that moment depends on sizes, so the leftover is made here, next to a real index the step commits.
    from memory.store.indexes import ensure_fts
    from memory.store.leftovers import index_dirs, swept

    small.add_evidence("indexed text")
    table = small.evidence
    before = index_dirs(table)
    with pytest.raises(OSError), swept(small, table, locked=True):
        ensure_fts(table, "fts_terms", replace=True)  # committed: its folder is in use and stays
        partial = table.uri + "/_indices/" + str(uuid.uuid4())
        os.makedirs(partial)
        with open(partial + "/part_0_invert.lance", "wb") as f:
            f.write(b"\0" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device")
    assert not os.path.exists(partial)
    new = index_dirs(table) - before
    assert new and new <= {str(ix["uuid"]) for ix in table.to_lance().list_indices()}
    from memory.retrieval.search import search_evidence

    assert [h.text for h in search_evidence(small, "indexed text")] == ["indexed text"]


def _spec(b: int, i: int):
    from memory.store.specs import EvidenceSpec

    return EvidenceSpec(text=f"batch {b} line {i}: " + " ".join(f"word{b}x{i}x{k}" for k in range(30)), source="screen")


def _unreferenced_new_indexes(store, before: dict) -> dict:
    from memory.store.leftovers import index_dirs

    out = {}
    for name, had in before.items():
        table = getattr(store, name)
        used = {str(ix["uuid"]) for ix in table.to_lance().list_indices()}
        left = index_dirs(table) - had - used
        if left:
            out[name] = left
    return out
