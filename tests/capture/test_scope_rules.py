"""Scope rules: which scope a captured row goes to, from its app, window title and the path or URL it shows.

The matcher alone; the config's validation; and end to end under Xvfb: a Slack `#acme-*` rule routes
real screen captures to `work/acme`, their memories follow, and over a real MCP client session a token
for `work` finds them while a token for `personal` does not. Rules change while capture runs."""

from __future__ import annotations

import json

import pytest

from capture.scope_rules import Rule, ScopeRules, addresses, matches
from memory.config import CaptureConfig, Config, ScopeRule, load_config
from memory.errors import ConfigError

RULES = ScopeRules([
    Rule("work/acme", app="Slack", title="#acme-*"),
    Rule("work/ledger", title="~/src/ledger"),
    Rule("personal/finance", app="firefox", path_or_url="*mybank.com*"),
    Rule("work", app="Slack"),  # every other Slack channel: after the more precise rule above
], default="personal")


@pytest.mark.parametrize("app,title,text,want", [
    ("Slack", "#acme-general | Acme Corp - Slack", "", "work/acme"),
    ("slack", "#ACME-eng | Acme Corp - Slack", "", "work/acme"),  # case does not matter
    ("Slack", "#random | Acme Corp - Slack", "", "work"),  # first match wins: the catch-all comes later
    ("Slack", "#acme | Acme Corp - Slack", "", "work"),  # "#acme-*" needs the dash
    ("gnome-terminal", "me@box: ~/src/ledger", "", "work/ledger"),
    ("Firefox", "Accounts - Mozilla Firefox", "https://online.mybank.com/accounts\nBalance", "personal/finance"),
    ("Firefox", "Accounts - Mozilla Firefox", "Balance\nwww.example.org", "personal"),  # no rule: the default
    ("Signal", "Mum", "we talked about mybank.com", "personal"),  # the URL rule is for Firefox only
    ("Slackware installer", "#acme-x", "", "personal"),  # an app is named whole, not found inside a name
])
def test_first_match_wins_with_wildcards_case_and_default(app, title, text, want):
    assert RULES.scope_for(app, title, text) == want


def test_only_star_is_special_and_app_names_are_alternatives():
    assert matches("[draft] notes", "Editor - [draft] notes.txt")
    assert not matches("[draft] notes", "Editor - d notes.txt")  # brackets are not a character class
    assert not matches("v1.?", "v1.2")  # nor is ?
    assert matches("report*2026", "Q3 REPORT final 2026.pdf") and matches("", "anything") and matches("*", "")
    # A window goes by several names (title-bar name, X11 class, executable): any of them may match.
    assert RULES.scope_for(["Acme Chat", "slack"], "#acme-ops") == "work/acme"
    assert ScopeRules([], None).scope_for("Slack", "#acme-x") is None  # no rules, no default: the store decides


def test_a_path_or_url_pattern_looks_only_at_addresses_near_the_top():
    body = "\n".join(["header"] * 10 + ["see https://online.mybank.com/offers"])
    assert RULES.scope_for("Firefox", "Offers", body) == "personal"  # a link deep in the page is not where we are
    assert "~/src/ledger" in addresses("me@box: ~/src/ledger", "")
    assert "online.mybank.com/accounts" in addresses("", "online.mybank.com/accounts — Sign in")


def test_config_rules_are_validated_and_scopes_lower_cased(tmp_path):
    c = CaptureConfig(scope_rules=[{"app": " Slack ", "title": "#acme-*", "scope": "Work/Acme"}])
    assert c.scope_rules[0] == ScopeRule(app="Slack", title="#acme-*", scope="work/acme")
    with pytest.raises(ValueError, match="needs an app, a title or a path/URL pattern"):
        ScopeRule(app="*", scope="work")
    (tmp_path / "config.toml").write_text(
        '[[capture.scope_rules]]\napp = "Slack"\nscope = "work acme"\n'
        '[[capture.scope_rules]]\ntitle = "x"\nscope = "work"\nregex = "x.*"\n')
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    msg = str(e.value)
    assert "capture.scope_rules.0.scope" in msg and "e.g. 'work' or 'work/acme'" in msg
    assert "unknown key 'capture.scope_rules.1.regex'" in msg and "app, title, path_or_url, scope" in msg


# ---- end to end: real windows, real OCR, real store, real MCP session ----------------------------------

ACME = "We decided to use Postgres 16 for the acme billing service."
HOME = "We decided to paint the kitchen walls yellow."


def _by_text(rows, needle: str) -> list[dict]:
    key = " ".join(needle.lower().split()[:5])
    return [r for r in rows if key in " ".join(r["text"].lower().split())]


def test_slack_channel_rule_routes_evidence_and_memories_and_only_that_scope_reads_them(store, display, ocr):
    from capture.runner import Capture
    from memory.consolidation.extraction import Extractor, run_extraction
    from memory.mcp.auth import make_principal
    from tests.memory.mcp_support import call

    store.config.capture.scope_rules = [ScopeRule(app="Slack", title="#acme-*", scope="work/acme")]
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        display.window("#acme-eng | Acme Corp - Slack", ACME, klass="slack")
        cap.run_cycles(3)
        display.window("Home notes", HOME, klass="scribbler")
        cap.run_cycles(3)
    finally:
        cap.stop()
    ev = store.list("evidence", limit=1000)
    acme_ev, home_ev = _by_text(ev, ACME), _by_text(ev, HOME)
    assert acme_ev and home_ev, [r["text"] for r in ev]
    assert {r["scope"] for r in acme_ev} == {"work/acme"} and {r["app"] for r in acme_ev} == {"Slack"}
    assert {r["scope"] for r in home_ev} == {"personal"}  # no rule matches: the default scope

    run_extraction(store, extractor=Extractor(engine="rules"))
    mems = store.list("memory", statuses=[], limit=1000)
    acme_ids = {e["id"] for e in acme_ev}
    acme_mems = [m for m in mems if set(m["provenance"]) & acme_ids]
    assert acme_mems, "the Slack decision should give a memory"
    assert {m["scope"] for m in acme_mems} == {"work/acme"}  # memories inherit their evidence's scope
    assert all(set(m["provenance"]) <= acme_ids for m in acme_mems)  # never mixed with the personal row
    assert all(m["scope"] == "personal" for m in mems if set(m["provenance"]) & {e["id"] for e in home_ev})

    async def reads(c):
        out = {"search": await c.call_tool("memory_search", {"query": "Postgres billing service"}),
               "evidence": await c.call_tool("evidence_search", {"query": "Postgres billing service"}),
               "list": await c.call_tool("memory_list", {})}
        out["get"] = [await c.call_tool("memory_get", {"id": m["id"]}) for m in acme_mems]
        return out

    def text_of(out, gets: bool = True) -> str:
        parts = [out["search"], out["evidence"], out["list"], *(out["get"] if gets else [])]
        return " ".join(json.dumps(r.model_dump(mode="json")) for r in parts)

    work = call(store, make_principal("coding-assistant", ["work"], None), reads)
    seen = text_of(work)
    assert all(m["id"] in seen for m in acme_mems) and acme_ev[0]["id"] in seen
    assert not any(r.is_error for r in work["get"])
    assert "kitchen" not in seen.lower()  # and nothing of personal

    personal = call(store, make_principal("home-assistant", ["personal"], None), reads)
    hidden = text_of(personal, gets=False)  # a refused get names the id it was asked for, nothing more
    for m in acme_mems:
        assert m["id"] not in hidden and m["text"].lower() not in hidden.lower()
    assert all(r.is_error for r in personal["get"])
    assert acme_ev[0]["id"] not in hidden and acme_ev[0]["text"].lower() not in hidden.lower()


def test_rules_changed_while_capture_runs_route_the_next_capture(store, display, ocr):
    from capture.runner import Capture

    cap = Capture(store, audio=False, ocr=ocr)
    try:
        display.window("me@box: ~/src/ledger (tests)", "cargo test passed for ledger crate alpha", klass="xterm")
        cap.run_cycles(3)
        cfg: Config = store.config.model_copy(deep=True)
        cfg.capture.scope_rules = [ScopeRule(title="~/src/ledger", scope="work/ledger")]
        assert cap.apply_config(cfg) == []
        display.window("me@box: ~/src/ledger (build)", "cargo build finished for ledger crate omega", klass="xterm")
        cap.run_cycles(3)
    finally:
        cap.stop()
    ev = store.list("evidence", limit=1000)
    before, after = _by_text(ev, "cargo test passed for ledger"), _by_text(ev, "cargo build finished for ledger")
    assert before and after, [r["text"] for r in ev]
    assert {r["scope"] for r in before} == {"personal"}  # captured before the rule: left where it was
    assert {r["scope"] for r in after} == {"work/ledger"}
