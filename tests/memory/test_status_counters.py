"""`status` answers from kept counts (memory/store/tallies.py): right after every kind of write, per scope,
from any process, and without telling a client anything about scopes it may not read."""

from __future__ import annotations

import json
from datetime import timedelta

from memory.mcp.auth import make_principal
from memory.store.audit import utcnow
from memory.store.core import Store
from memory.store.erasure import forget
from memory.store.rows import iso
from tests.memory.mcp_support import call

WORK = make_principal("work-client", ["work"], "work")
PERSONAL = make_principal("personal-client", ["personal"], None)
BOTH = make_principal("both", ["work", "personal"], "work")


def status(store, principal) -> dict:
    async def steps(c):
        r = await c.call_tool("status", {})
        assert not r.is_error, r.content[0].text
        return json.loads(r.content[0].text)

    return call(store, principal, steps)


def truth(store, scopes: list[str]) -> dict:
    """What a scan says: the counts and newest time status must report."""
    ewhere = store.where("evidence", scopes=scopes)
    times = [r["captured_at"] for r in store.rows("evidence", ewhere, ["captured_at"])]
    return {"visible": {"memories": store.count("memory", store.where("memory", scopes=scopes), local=True),
                        "evidence": len(times),
                        "vault_entries": store.count("vault", store.where("vault", scopes=scopes), local=True)},
            "last_evidence_at": iso(max(times)) if times else None}


def check(store, principal) -> dict:
    got = status(store, principal)
    want = truth(store, list(principal.read))
    assert {"visible": got["visible"], "last_evidence_at": got["last_evidence_at"]} == want
    return got


def test_counts_follow_adds_status_changes_and_forgets_per_scope(store):
    assert check(store, WORK)["visible"] == {"memories": 0, "evidence": 0, "vault_entries": 0}
    assert check(store, WORK)["last_evidence_at"] is None

    now = utcnow()
    work_ev = store.add_evidence("deploy log", app="kitty", scope="work", captured_at=now - timedelta(hours=2))
    store.add_evidence("acme ticket", app="firefox", scope="work/acme", captured_at=now - timedelta(hours=1))
    store.add_evidence("a private note", app="notes", scope="personal", captured_at=now)  # the newest of all
    kept = store.add_memory("We deploy on Tuesdays", scope="work")
    dropped = store.add_memory("Acme uses pg-staging-3", scope="work/acme")
    store.add_memory("Dentist on Friday", scope="personal")
    store.add_memory("staging password", type="vault", scope="work", value="s3cret")

    w = check(store, WORK)
    assert w["visible"] == {"memories": 2, "evidence": 2, "vault_entries": 1}
    # The personal row is newer, but a work client must not learn when it was captured.
    assert w["last_evidence_at"] == iso(now - timedelta(hours=1))
    p = check(store, PERSONAL)
    assert p["visible"] == {"memories": 1, "evidence": 1, "vault_entries": 0} and p["last_evidence_at"] == iso(now)
    assert check(store, BOTH)["visible"]["evidence"] == 3

    store.set_status(dropped["id"], "rejected")  # rejected memories are not counted, as in every read path
    store.update_memory(kept["id"], text="We deploy on Tuesdays and Thursdays")  # an upsert is still one memory
    assert check(store, WORK)["visible"]["memories"] == 1

    forget(store, [work_ev["id"]], actor="person")
    w = check(store, WORK)
    assert w["visible"]["evidence"] == 1 and w["last_evidence_at"] == iso(now - timedelta(hours=1))
    assert check(store, PERSONAL)["visible"]["evidence"] == 1


def test_writes_of_another_process_and_compaction_show_up(store, mirador_home):
    store.add_evidence("first", app="kitty", scope="work")
    assert check(store, WORK)["visible"]["evidence"] == 1
    other = Store(mirador_home)  # e.g. capture or `mirador evidence add` in another process
    later = utcnow() + timedelta(seconds=1)
    for i in range(3):
        other.add_evidence(f"row {i}", app="kitty", scope="work/acme", captured_at=later)
    other.add_memory("a fact from elsewhere", scope="work")
    w = check(store, WORK)
    assert w["visible"]["evidence"] == 4 and w["visible"]["memories"] == 1 and w["last_evidence_at"] == iso(later)
    store.optimize()  # compaction replaces the fragments; the counts stay the same
    assert check(store, WORK)["visible"] == w["visible"]
