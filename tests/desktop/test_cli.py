"""The CLI contract: commands, --json shapes, exit codes and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from desktop.cli.main import main
from tests.conftest import files_containing

TYPES = {
    "episodic": ("Met Sam to plan the launch", '{"who": ["Sam"]}'),
    "semantic": ("Ledger service uses PostgreSQL 16", '{"subject": "ledger"}'),
    "procedural": ("Rotate the signing key", '{"steps": ["generate", "upload", "revoke old"]}'),
    "resource": ("Runbook for on-call", '{"uri": "https://wiki.example/runbook"}'),
    "core": ("Works in Berlin, prefers TypeScript", '{"block": "user"}'),
}


def run(capsys, *args, stdin=None, monkeypatch=None):
    if stdin is not None:
        import io

        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def jrun(capsys, *args, **kw):
    code, out, err = run(capsys, *args, **kw)
    assert code == 0, err
    return json.loads(out)


def test_round_trip_every_type(capsys, monkeypatch, tmp_path, mirador_home):
    ids = {}
    for t, (text, details) in TYPES.items():
        code, out, _ = run(capsys, "add", text, "--type", t, "--scope", "work", "--details", details)
        assert code == 0
        ids[t] = out.strip()
    ids["vault"] = run(capsys, "add", "Deploy token", "--type", "vault", "--value-stdin", "--scope", "work",
                       stdin="tok-123-secret", monkeypatch=monkeypatch)[1].strip()

    for t, (text, _) in TYPES.items():
        hits = jrun(capsys, "search", text, "--type", t, "--json")
        assert hits[0]["id"] == ids[t]
        assert {"id", "type", "scope", "text", "score"} <= hits[0].keys()
        shown = jrun(capsys, "show", ids[t], "--json")
        assert shown["type"] == t and shown["text"] == text
    assert jrun(capsys, "search", "deploy token", "--json")[0]["id"] == ids["vault"]
    assert jrun(capsys, "show", ids["vault"], "--reveal", "--json")["value"] == "tok-123-secret"

    edited = jrun(capsys, "edit", ids["semantic"], "--text", "Ledger service uses PostgreSQL 17", "--json")
    assert edited["user_edited"] and edited["details"]["fact"].endswith("17")

    out_file = tmp_path / "export.jsonl"
    assert run(capsys, "export", "--out", str(out_file), "--include-secrets")[0] == 0
    lines = [json.loads(x) for x in out_file.read_text().splitlines()]
    assert len(lines) == 6

    # import into a fresh home: every type comes back, with the edit and the secret
    monkeypatch.setenv("MIRADOR_HOME", str(tmp_path / "other"))
    res = jrun(capsys, "import", str(out_file), "--json")
    assert res["imported"] == 6
    for t in TYPES:
        assert jrun(capsys, "show", ids[t], "--json")["type"] == t
    assert jrun(capsys, "show", ids["semantic"], "--json")["text"].endswith("17")
    assert jrun(capsys, "show", ids["vault"], "--reveal", "--json")["value"] == "tok-123-secret"
    again = jrun(capsys, "import", str(out_file), "--json")
    assert again["imported"] == 0 and again["skipped_existing"] == 6


def test_evidence_add_and_search(capsys):
    row = jrun(capsys, "evidence", "add", "Sam said the release slips to June", "--source", "audio",
               "--app", "zoom", "--at", "2024-05-08T13:56:00+00:00", "--scope", "work", "--json")
    assert row["captured_at"] == "2024-05-08T13:56:00Z"
    hits = jrun(capsys, "search", "release date", "--evidence", "--json")
    assert hits[0]["id"] == row["id"] and hits[0]["source"] == "audio"
    assert jrun(capsys, "search", "release date", "--evidence", "--scope", "personal", "--json") == []
    assert jrun(capsys, "search", "release", "--evidence", "--app", "slack", "--json") == []


def test_delete_and_list(capsys, mirador_home):
    a = run(capsys, "add", "orchid-nebula-55 is the codename")[1].strip()
    b = run(capsys, "add", "keep this one")[1].strip()
    assert run(capsys, "delete", a)[0] == 0
    assert [r["id"] for r in jrun(capsys, "list", "--json")] == [b]
    assert files_containing(mirador_home, "orchid-nebula-55") == []
    code, _, err = run(capsys, "show", a)
    assert code == 2 and "was forgotten" in err


@pytest.mark.parametrize("args,needle", [
    (["show", "mem_nope00000000000000000000"], "no row with id"),
    (["show", "banana"], "ids start with"),
    (["add", "x", "--type", "gossip"], "unknown memory type"),
    (["add", "   "], "empty text"),
    (["add", "x" * 10_001], "limit is 10,000"),
    (["add", "x", "--details", "{not json"], "--details is not valid JSON"),
    (["add", "x", "--scope", "Bad Scope"], "invalid scope"),
    (["search", ""], "empty query"),
    (["edit", "mem_nope00000000000000000000"], "nothing to change"),
    (["delete", "--app", "Slack"], "--yes"),
    (["evidence", "add", "x", "--at", "yesterday-ish"], "ISO 8601"),
])
def test_bad_input_is_one_line_nonzero_and_changes_nothing(capsys, mirador_home, args, needle):
    run(capsys, "add", "pre-existing memory")
    before = jrun(capsys, "stats", "--json")
    code, out, err = run(capsys, *args)
    assert code != 0
    assert needle in err and err.count("\n") == 1 and err.startswith("error: ")
    after = jrun(capsys, "stats", "--json")
    assert (after["memories"], after["evidence"], after["vault"]) == (before["memories"], before["evidence"], before["vault"])


def test_malformed_jsonl_names_the_line_and_imports_nothing(capsys, tmp_path):
    f = tmp_path / "bad.jsonl"
    f.write_text('{"text": "good line one", "type": "semantic"}\n{"text": "good line two"}\n{oops\n')
    code, _, err = run(capsys, "import", str(f))
    assert code == 2 and "bad.jsonl:3" in err and "nothing was imported" in err
    assert jrun(capsys, "stats", "--json")["memories"] == 0
    f.write_text('{"text": "ok"}\n{"text": "bad type", "type": "gossip"}\n')
    code, _, err = run(capsys, "import", str(f))
    assert code == 2 and "bad.jsonl:2" in err
    f.write_text('{"text": "ok", "colour": "red"}\n')
    code, _, err = run(capsys, "import", str(f))
    assert code == 2 and "colour" in err
    assert jrun(capsys, "stats", "--json")["memories"] == 0


def test_bad_config_is_reported(capsys, mirador_home):
    mirador_home.mkdir(parents=True, exist_ok=True)
    (mirador_home / "config.toml").write_text("[store]\nbogus = 1\n")
    code, _, err = run(capsys, "stats")
    assert code == 3 and "unknown key 'store.bogus'" in err


def test_console_script_version_and_doctor(mirador_home):
    exe = [sys.executable, "-m", "desktop.cli.main"]
    out = subprocess.run(exe + ["--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("mirador ")
    doc = subprocess.run(exe + ["doctor", "--json"], capture_output=True, text=True)
    checks = {c["name"]: c for c in json.loads(doc.stdout)}
    assert checks["data dir"]["status"] == "ok" and checks["embedder"]["status"] == "ok"
    assert checks["store"]["status"] == "ok"
    # The default install ships no reranker (docs/models.md): doctor says so, as a fact, not a fault.
    assert checks["reranker"]["status"] == "ok" and checks["reranker"]["detail"].startswith("none")
    assert all(c["fix"] for c in checks.values() if c["status"] != "ok")


def test_import_does_not_resurrect_forgotten_rows(capsys, tmp_path):
    keep = run(capsys, "add", "kept memory")[1].strip()
    gone = run(capsys, "add", "memory that will be forgotten")[1].strip()
    f = tmp_path / "backup.jsonl"
    assert run(capsys, "export", "--out", str(f))[0] == 0
    assert run(capsys, "delete", gone)[0] == 0
    res = jrun(capsys, "import", str(f), "--json")
    assert res["imported"] == 0 and res["skipped_forgotten"] == 1 and res["skipped_existing"] == 1
    ids = [r["id"] for r in jrun(capsys, "list", "--json")]
    assert ids == [keep]


def test_delete_last_hour_states_what_goes_and_keeps_hand_written_memories_and_the_vault(capsys, monkeypatch,
                                                                                         mirador_home):
    from datetime import datetime, timedelta, timezone

    note = run(capsys, "add", "Dentist appointment Tuesday 3pm")[1].strip()
    secret = run(capsys, "add", "Home wifi", "--type", "vault", "--value-stdin", stdin="wifi-pass-9\n",
                 monkeypatch=monkeypatch)[1].strip()
    run(capsys, "evidence", "add", "slack says heron-lantern-42 ships", "--app", "Slack")
    since = (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()
    code, _, err = run(capsys, "delete", "--since", since)
    assert code == 2 and err.count("\n") == 1
    assert "1 captured row" in err and "0 memories derived only from them" in err and "--yes" in err
    assert "vault entries are kept" in err
    code, out, _ = run(capsys, "delete", "--since", since, "--yes")
    assert code == 0 and out.startswith("erased 1 row(s)")
    assert jrun(capsys, "show", note, "--json")["text"] == "Dentist appointment Tuesday 3pm"
    assert jrun(capsys, "show", secret, "--reveal", "--json")["value"] == "wifi-pass-9"
    assert files_containing(mirador_home, "heron-lantern-42") == []


def test_status_says_why_capture_grabs_nothing_now(capsys, mirador_home):
    """A running capture that grabs nothing (no focused window, an excluded one showing) says so, without
    naming the window: the reason is from capture/screen.py, never an app name or title."""
    import os

    from capture.health import Health

    mirador_home.mkdir(parents=True, exist_ok=True)
    h = Health()
    h.set(state="running", pid=os.getpid(), screen="on", window_probe="sway (IPC)", excluded_reason="no focused window")
    h.save(mirador_home)
    code, out, err = run(capsys, "status")
    assert "not grabbing now: no focused window" in out, out + err
    h.set(excluded_reason="")
    h.save(mirador_home)
    code, out, err = run(capsys, "status")
    assert "not grabbing now" not in out, out


def test_json_errors_carry_the_code_and_hint(capsys, mirador_home):
    """With --json an error is also a JSON document on stdout (code, message, hint, exit code); stderr keeps the
    one line a person reads."""
    code, out, err = run(capsys, "show", "mem_nope", "--json")
    doc = json.loads(out)["error"]
    assert code == 2 and doc["code"] == "not_found" and doc["exit_code"] == 2 and "mem_nope" in doc["message"]
    assert err.startswith("error: ") and doc["message"] in err
    code, out, err = run(capsys, "show", "mem_nope")
    assert code == 2 and out == ""
