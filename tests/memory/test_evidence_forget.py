"""Evidence deletes by app or time range (issue 30): over MCP with a dry-run plan first, least privilege on
every scope the delete touches; and the person's edited memories survive their evidence, in review."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from memory.errors import NotFoundError
from memory.mcp.auth import make_principal
from memory.store.audit import utcnow
from memory.store.erasure import forget_where, plan_forget_where
from tests.conftest import files_containing
from tests.memory.mcp_support import call

WRITER = make_principal("writer", ["work"], "work")


def _tool(store, principal, name: str, args: dict):
    async def steps(c):
        return await c.call_tool(name, args)

    r = call(store, principal, steps)
    return r.is_error, (r.content[0].text if r.is_error else json.loads(r.content[0].text))


def _snapshot(store) -> dict:
    return store.tables_state()


@pytest.fixture
def slack_day(store):
    ids = {
        "slack": store.add_evidence("Slack: the otterquill launch moves to Friday", source="screen", app="Slack",
                                    scope="work")["id"],
        "code": store.add_evidence("Code: the build uses Python 3.11", source="screen", app="Code",
                                   scope="work")["id"],
        "pslack": store.add_evidence("Slack: family dinner at eight", source="screen", app="Slack",
                                     scope="personal")["id"],
    }
    ids["derived"] = store.add_memory("The otterquill launch moves to Friday", provenance=[ids["slack"]],
                                      origin="extractor", scope="work")["id"]
    ids["both"] = store.add_memory("Launch and build are on track", provenance=[ids["slack"], ids["code"]],
                                   origin="extractor", scope="work")["id"]
    ids["hand"] = store.add_memory("Call the otterquill venue about parking", scope="work")["id"]
    ids["vault"] = store.add_memory("Slack admin password", type="vault", value="pw-otter", scope="work")["id"]
    return ids


def test_mcp_evidence_forget_plans_first_then_erases_on_confirm(store, mirador_home, slack_day):
    before = _snapshot(store)
    err, plan = _tool(store, WRITER, "evidence_forget", {"app": "Slack"})
    assert not err, plan
    assert plan["dry_run"] is True and plan["scope"] == "work"
    assert plan["counts"] == {"evidence": 1, "frames": 0, "memories": 1, "review": 1}
    assert "1 memory derived only from them" in plan["description"] and "confirm=true" in plan["hint"]
    assert _snapshot(store) == before, "a dry run changes nothing"

    err, done = _tool(store, WRITER, "evidence_forget", {"app": "Slack", "confirm": True})
    assert not err, done
    assert done["dry_run"] is False and done["by_kind"] == {"evidence": 1, "memory": 1} and done["reviewed"] == 1
    with pytest.raises(NotFoundError):
        store.get(slack_day["derived"])
    both = store.get(slack_day["both"])
    assert both["status"] == "candidate" and both["provenance"] == [slack_day["code"]]
    # never touched: the hand-written memory, the vault, the other scope's Slack evidence
    assert store.get(slack_day["hand"])["text"] == "Call the otterquill venue about parking"
    assert store.reveal(slack_day["vault"]) == "pw-otter"
    assert store.get(slack_day["pslack"])["app"] == "Slack"
    assert files_containing(mirador_home, "moves to Friday") == []
    actors = {a["actor"] for a in store.rows("audit") if a["action"] == "delete"}
    assert actors == {"mcp:writer"}


def test_mcp_evidence_forget_by_time_range_keeps_hand_made_and_vault(store, slack_day):
    err, done = _tool(store, WRITER, "evidence_forget",
                      {"since": (utcnow() - timedelta(hours=1)).isoformat() + "Z", "confirm": True})
    assert not err, done
    assert done["by_kind"] == {"evidence": 2, "memory": 2}  # both work captures; derived and "both" go
    assert store.get(slack_day["hand"]) and store.reveal(slack_day["vault"]) == "pw-otter"
    assert store.get(slack_day["pslack"]), "outside the client's write scope"


def test_mcp_evidence_forget_refuses_what_it_may_not_touch(store, slack_day):
    before = _snapshot(store)
    reader = make_principal("reader", ["work"], None)
    outsider = make_principal("outsider", ["personal"], "personal")
    cases = [
        (reader, {"app": "Slack", "confirm": True}, "read-only"),
        (outsider, {"app": "Slack", "scope": "work", "confirm": True}, "scope"),
        (WRITER, {"confirm": True}, "give app, since or until"),
        (WRITER, {"app": "Slack", "scope": "personal", "confirm": True}, "scope"),
        (WRITER, {"since": "2030-01-02", "until": "2030-01-01", "confirm": True}, "not before"),
        (WRITER, {"since": "yesterday", "confirm": True}, "ISO 8601"),
    ]
    for who, args, msg in cases:
        err, text = _tool(store, who, "evidence_forget", args)
        assert err and msg in text, (args, text)
    assert _snapshot(store) == before


def test_mcp_evidence_forget_refuses_when_a_memory_outside_the_write_scope_would_change(store):
    w = store.add_evidence("Slack: shared standup at 9:30", source="screen", app="Slack", scope="work")
    p = store.add_evidence("Calendar: standup 9:30", source="screen", app="Calendar", scope="personal")
    store.add_memory("Standup at 9:30", provenance=[w["id"], p["id"]], origin="extractor", scope="personal")
    before = _snapshot(store)
    err, text = _tool(store, WRITER, "evidence_forget", {"app": "Slack", "confirm": True})
    assert err and "'personal'" in text and "nothing was deleted" in text
    assert _snapshot(store) == before


def test_edited_memory_whose_only_evidence_is_erased_goes_to_review(store, mirador_home):
    ev = store.add_evidence("Slack: the heronvale demo is on Monday", source="screen", app="Slack")
    edited = store.add_memory("The heronvale demo is on Monday", provenance=[ev["id"]], origin="extractor")
    store.update_memory(edited["id"], text="The heronvale demo moved to Tuesday, my call")
    pinned = store.add_memory("Heronvale room is Kestrel", provenance=[ev["id"]], origin="extractor")
    store.update_memory(pinned["id"], pinned=True)
    plain = store.add_memory("Heronvale demo prep list exists", provenance=[ev["id"]], origin="extractor")

    plan = plan_forget_where(store, app="Slack")
    assert plan.counts() == {"evidence": 1, "frames": 0, "memories": 1, "review": 2, "vault": 0}
    assert "2 memories you edited keep your words" in plan.describe()
    r = forget_where(store, app="Slack")
    assert r["by_kind"] == {"evidence": 1, "memory": 1} and r["reviewed"] == 2
    kept = store.get(edited["id"])
    assert kept["text"] == "The heronvale demo moved to Tuesday, my call"
    assert kept["status"] == "candidate" and kept["provenance"] == []
    assert store.get(pinned["id"])["provenance"] == [] and store.get(pinned["id"])["pinned"]
    with pytest.raises(NotFoundError):
        store.get(plain["id"])
    audit = [a for a in store.rows("audit") if a["entity_id"] == edited["id"]]
    assert audit[-1]["action"] == "update" and audit[-1]["actor"] == "person"
    assert ev["id"] not in (audit[-1]["after"] or "")
    assert files_containing(mirador_home, "is on Monday") == [], "the evidence itself is gone"
