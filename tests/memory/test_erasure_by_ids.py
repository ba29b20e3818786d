"""plan_forget_evidence: captured rows picked one by one are erased with the evidence-delete semantics."""

from __future__ import annotations

import pytest

from memory.errors import InputError, NotFoundError
from memory.store.erasure import forget_where, plan_forget_evidence


def test_plan_by_ids_refuses_unknown_and_non_evidence_ids_and_changes_nothing(store):
    ev = store.add_evidence("standup moved to 9:30", source="screen", app="Slack")
    mem = store.add_memory("Standup is at 9:30", scope="work", provenance=[ev["id"]])
    with pytest.raises(NotFoundError, match="nothing was erased"):
        plan_forget_evidence(store, [ev["id"], "evd_doesnotexist"])
    with pytest.raises(InputError, match="captured-row ids"):
        plan_forget_evidence(store, [mem["id"]])
    with pytest.raises(InputError):
        plan_forget_evidence(store, [])
    assert store.get(ev["id"]) and store.get(mem["id"])

    plan = plan_forget_evidence(store, [ev["id"]])
    assert plan.counts() == {"evidence": 1, "frames": 0, "memories": 1, "review": 0, "vault": 0}
    assert store.get(mem["id"]), "a plan erases nothing"
    res = forget_where(store, plan=plan)
    assert res["by_kind"] == {"evidence": 1, "memory": 1}
    with pytest.raises(NotFoundError):
        store.get(mem["id"])
