"""Forgetting evidence reaches the memories derived from it in a shared scope (real SeaweedFS): a memory of the
bound scope resting only on the erased evidence is erased from the bucket, one resting on other evidence too
loses the erased source and goes to review on every device. With the store down, the evidence goes at once and
the derived memories are dealt with when it answers again — never silently left behind."""

from __future__ import annotations

import pytest

from memory.errors import NotFoundError
from memory.store.erasure import forget_where, plan_forget_evidence, plan_forget_where
from memory.store.specs import MemorySpec
from tests.memory import seaweed as sw_fixtures
from tests.memory import test_remote
from tests.memory.test_remote import SHARED, open_home

seaweed, memory_keyring, own_seaweed = sw_fixtures.seaweed, sw_fixtures.memory_keyring, sw_fixtures.own_seaweed  # fixtures
prefix, homes = test_remote.prefix, test_remote.homes  # fixtures: a fresh bucket prefix, two homes bound to it

ONLY = "The acme deploy key rotates every ninety days"
BOTH = "Acme ships the mobile app on the first Monday"


def derived(store):
    """Evidence captured in the shared scope on this device, and two memories extracted from it into the
    shared scope (so into the bucket): one resting on the first row only, one on both rows."""
    e1 = store.add_evidence("screen: acme runbook, deploy key rotation every 90 days; mobile release first Monday",
                            scope=SHARED, app="firefox")
    e2 = store.add_evidence("chat: yes, mobile goes out on the first Monday of the month", scope=SHARED, app="slack")
    only, both = store.add_memories(
        [MemorySpec(text=ONLY, scope=SHARED, provenance=[e1["id"]], origin="extractor:statements"),
         MemorySpec(text=BOTH, scope=SHARED, provenance=[e1["id"], e2["id"]], origin="extractor:statements")],
        actor="extractor")
    return e1, e2, only, both


def test_forgetting_evidence_erases_and_reviews_the_shared_memories_derived_from_it(homes, seaweed, prefix):
    a, b = homes
    e1, e2, only, both = derived(a)
    assert seaweed.holding(ONLY, prefix) and a.remotes.pending() == {"team": 0}

    plan = plan_forget_evidence(a, [e1["id"]])
    assert [m["id"] for m in plan.memories] == [only["id"]]
    assert [m["id"] for m in plan.review] == [both["id"]]
    forget_where(a, plan=plan)

    for store in (a, b):
        with pytest.raises(NotFoundError):
            store.get(only["id"])
        kept = store.get(both["id"])
        assert kept["provenance"] == [e2["id"]] and kept["status"] == "candidate"
    assert not seaweed.holding(ONLY, prefix)  # purged from every version in the bucket
    assert a.remotes.pending() == {"team": 0}


def test_forgetting_evidence_offline_finishes_on_the_shared_memories_when_the_store_is_back(
        tmp_path, memory_keyring, own_seaweed, prefix):
    sw = own_seaweed  # stopped and started again below
    from memory.consolidation.scheduler import job_share

    a = open_home(tmp_path, "a", sw, prefix)
    e1, e2, only, both = derived(a)
    sw.stop()
    plan = plan_forget_evidence(a, [e1["id"]])
    assert plan.unchecked == [SHARED] and "does not answer now" in plan.describe()
    result = forget_where(a, plan=plan)
    assert result["unchecked_shared_scopes"] == [SHARED]
    with pytest.raises(NotFoundError):  # the evidence is gone at once, offline or not
        a.get(e1["id"])
    # Still down: the share job leaves the check waiting and changes nothing.
    assert "derived" not in job_share(a)
    # A scope forget now could not erase the scope's shared memories: the plan says so, and how to finish.
    scope_plan = plan_forget_where(a, scope=SHARED)
    assert scope_plan.unchecked == [SHARED] and "run this forget again when it is back" in scope_plan.describe()

    sw.start()
    assert job_share(a).endswith("1 derived erased, 1 to review")
    with pytest.raises(NotFoundError):
        a.get(only["id"])
    kept = a.get(both["id"])
    assert kept["provenance"] == [e2["id"]] and kept["status"] == "candidate"
    assert not sw.holding(ONLY, prefix)
    b = open_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    with pytest.raises(NotFoundError):
        b.get(only["id"])
    assert job_share(a) == "sent 0, 0 waiting"  # done once: nothing left to finish
    assert not (a.home / "derived-unchecked.json").exists()


def test_a_scope_forget_erases_the_shared_memories_of_the_scope_for_every_device(homes, seaweed, prefix):
    a, b = homes
    team = a.add_memory("The acme incident channel is #acme-fire", scope=SHARED)
    mine = b.add_memory("The acme badge reader is flaky on floor two", scope=SHARED)
    kept = b.add_memory("My dentist is on Elm Street", scope="personal")
    plan = plan_forget_where(b, scope=SHARED)
    assert {m["id"] for m in plan.memories} == {team["id"], mine["id"]} and plan.shared == 2
    assert "erased for every device sharing it" in plan.describe()
    forget_where(b, scope=SHARED)
    for store in (a, b):
        for m in (team, mine):
            with pytest.raises(NotFoundError):
                store.get(m["id"])
    assert b.get(kept["id"])["text"] == kept["text"]
    assert not seaweed.holding("acme-fire", prefix) and not seaweed.holding("badge reader", prefix)
