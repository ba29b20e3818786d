"""Secrets are redacted on every write path before anything is stored — memories as well as evidence, audit included.

Each test writes secrets through one path (Store, a real MCP session, the CLI in a subprocess, an edit), then
reads every file of the data folder as raw bytes: no secret may be in any of them, in any table version.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from memory.mcp.auth import make_principal
from memory.store import filters as F
from tests.conftest import sealed_terms
from tests.memory.mcp_support import ROOT, call, env_for

AWS = "AKIAZ7QW3ERTY5UIOPAS"
GHP = "ghp_" + "Q8w7e6r5t4y3u2i1o0pLkJhGfDsAzXcVbN12"
PASSWORD = "Tr0ub4dor&3xyzzy"
CARD = "4111 1111 1111 1111"
SECRETS = [AWS, GHP, PASSWORD, CARD, CARD.replace(" ", "")]
WORK = make_principal("tester", ["work"], "work")


def _leaks(home: Path) -> dict[str, list[str]]:
    """Which secrets appear in which files under home (raw bytes, every file): as they are, or as the keyed
    search terms of the row that stored them (text is sealed at rest, so a secret that was stored shows there)."""
    forms = {s: [s.encode(), *sealed_terms(home, s)] for s in SECRETS}
    found: dict[str, list[str]] = {}
    for p in home.rglob("*"):
        if p.is_file():
            blob = p.read_bytes()
            hits = [s for s, fs in forms.items() if any(f in blob for f in fs)]
            if hits:
                found[str(p.relative_to(home))] = hits
    return found


def _secret_text(label: str) -> str:
    return f"{label}: the AWS key is {AWS}, token {GHP}, password: {PASSWORD}, card {CARD}"


def test_store_add_redacts_memory_text_title_details_and_the_audit(store, mirador_home):
    row = store.add_memory(_secret_text("deploy"), title=f"key {AWS}", scope="work",
                           details={"subject": f"token {GHP}"})
    proc = store.add_memory("Rotate the signing key", type="procedural", scope="work",
                            details={"steps": [f"export AWS_ACCESS_KEY_ID={AWS}", f"password: {PASSWORD}"]})
    got = store.get(row["id"])
    assert "[REDACTED:aws_key]" in got["text"] and "[REDACTED:github_token]" in got["text"]
    assert "[REDACTED:password]" in got["text"] and "[REDACTED:card_number]" in got["text"]
    assert AWS not in got["title"] and GHP not in json.dumps(got["details"])
    assert AWS not in json.dumps(store.get(proc["id"])["details"])
    store.optimize()
    assert _leaks(mirador_home) == {}


def test_edits_are_redacted_and_the_audit_diff_holds_no_secret(store, mirador_home):
    row = store.add_memory("The staging host is pg-staging-3", scope="work")
    store.update_memory(row["id"], text=_secret_text("edited"), details={"subject": f"pin: {PASSWORD}"})
    got = store.get(row["id"])
    assert "[REDACTED:aws_key]" in got["text"] and PASSWORD not in json.dumps(got)
    audit = store.rows("audit", F.id_is(row['id'], "entity_id"), ["action", "after"])
    assert [a["action"] for a in audit] == ["create", "update"]
    assert all(s not in str(a["after"]) for a in audit for s in SECRETS)
    assert _leaks(mirador_home) == {}


def test_evidence_added_raw_is_redacted_and_counted(store, mirador_home):
    ev = store.add_evidence(_secret_text("terminal"), source="manual", window=f"export {AWS}", scope="work",
                            meta={"cmd": f"curl -H 'Authorization: token {GHP}'"})
    assert ev["redactions"] >= 5
    again = store.add_evidence("already [REDACTED:aws_key] once", source="manual", redactions=1, scope="work")
    assert again["redactions"] == 1 and again["text"] == "already [REDACTED:aws_key] once"  # no double count
    assert _leaks(mirador_home) == {}


def test_vault_keeps_the_secret_sealed_and_nothing_else_does(store, mirador_home):
    v = store.add_memory("prod db", type="vault", scope="work", value=PASSWORD)
    assert store.reveal(v["id"]) == PASSWORD  # the vault is the one place a secret lives
    store.add_memory(f"prod db password: {PASSWORD}", scope="work")
    assert _leaks(mirador_home) == {}


def test_redaction_off_in_config_is_respected(store, mirador_home):
    store.config.privacy.redact = False  # the person turned it off (Settings → Privacy); the store follows live
    row = store.add_memory(f"the key is {AWS}", scope="work")
    assert AWS in store.get(row["id"])["text"]
    assert _leaks(mirador_home)  # the scan the other tests rely on does see a stored secret on disk


def test_mcp_memory_add_and_update_redact_and_say_so(store, mirador_home):
    async def steps(c):
        added = json.loads((await c.call_tool("memory_add", {"text": _secret_text("mcp")})).content[0].text)
        again = json.loads((await c.call_tool("memory_add", {"text": _secret_text("mcp")})).content[0].text)
        mid = added["created"]["id"]
        upd = await c.call_tool("memory_update", {"id": mid, "text": f"now {GHP}", "details": {"subject": f"{AWS}"}})
        return added, again, upd

    added, again, upd = call(store, WORK, steps)
    assert not upd.is_error
    assert "vault" in added["hint"] and "[REDACTED:aws_key]" in added["created"]["text"]
    assert again["created"] is None and again["existing"]["id"] == added["created"]["id"]  # a retry adds nothing
    got = store.get(added["created"]["id"])
    assert GHP not in got["text"] and AWS not in json.dumps(got["details"])
    assert _leaks(mirador_home) == {}


def test_cli_add_and_evidence_add_redact(mirador_home):
    env = env_for(mirador_home)
    for args in (["add", _secret_text("cli"), "--scope", "work"],
                 ["evidence", "add", _secret_text("cli evidence"), "--scope", "work"]):
        r = subprocess.run([sys.executable, "-m", "desktop.cli.main", *args], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert all(s not in r.stdout for s in SECRETS)
    assert _leaks(mirador_home) == {}
