"""`mirador mcp token …` and `mirador mcp config …`: tokens shown once and stored hashed; config merged safely."""

from __future__ import annotations

import json
import stat

import pytest

from desktop.cli.main import main
from memory.mcp.auth import TOKENS_FILE, TokenStore


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_token_add_prints_once_and_stores_only_a_hash(capsys, mirador_home):
    code, out, err = run(capsys, "mcp", "token", "add", "claude-code", "--read", "work,work/acme", "--write", "work")
    token = out.strip()
    assert code == 0 and token.startswith("mir_") and "shown only now" in err
    path = mirador_home / TOKENS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token not in path.read_text()
    rec = TokenStore(mirador_home).verify(token)
    assert rec.name == "claude-code" and rec.read == ["work", "work/acme"] and rec.write == "work"
    assert TokenStore(mirador_home).verify(token[:-1] + "x") is None

    code, out, _ = run(capsys, "mcp", "token", "list", "--json")
    listed = json.loads(out)
    assert listed == [{"name": "claude-code", "read": ["work", "work/acme"], "write": "work", "allow_vault": False,
                       "created_at": listed[0]["created_at"]}]
    assert token not in out

    code, _, err = run(capsys, "mcp", "token", "add", "claude-code", "--read", "work")
    assert code == 2 and "exists" in err
    assert run(capsys, "mcp", "token", "revoke", "claude-code")[0] == 0
    assert TokenStore(mirador_home).verify(token) is None
    code, _, err = run(capsys, "mcp", "token", "revoke", "claude-code")
    assert code == 2 and "no token named" in err


def test_token_add_validates_names_and_scopes(capsys):
    assert run(capsys, "mcp", "token", "add", "Bad Name", "--read", "work")[0] == 2
    assert run(capsys, "mcp", "token", "add", "ok", "--read", "Not/Valid Scope")[0] == 2
    code, _, err = run(capsys, "mcp", "token", "add", "ok")
    assert code == 2 and "read scope" in err
    code, out, _ = run(capsys, "mcp", "token", "add", "ro", "--read", "work", "--json")
    assert code == 0 and json.loads(out)["write"] is None


@pytest.mark.parametrize("client,key", [("claude-code", "mcpServers"), ("cursor", "mcpServers"),
                                        ("vscode", "servers"), ("claude-desktop", "mcpServers")])
def test_config_prints_the_exact_snippet(capsys, mirador_home, client, key):
    code, out, err = run(capsys, "mcp", "config", client, "--token", "mir_abc", "--port", "9123")
    assert code == 0
    doc = json.loads(out)  # stdout is the snippet alone; hints go to stderr
    entry = doc[key]["mirador"]
    if client == "claude-desktop":
        assert entry["args"][-1] == "mcp"
        assert entry["env"] == {"MIRADOR_HOME": str(mirador_home.absolute()), "MIRADOR_MCP_TOKEN": "mir_abc"}
    else:
        assert entry["url"] == "http://127.0.0.1:9123/mcp"
        assert entry["headers"] == {"Authorization": "Bearer mir_abc"}
    if client == "claude-code":
        assert "claude mcp add --transport http --scope user mirador http://127.0.0.1:9123/mcp" in err


def test_config_without_token_creates_one_for_the_client(capsys, mirador_home):
    code, out, err = run(capsys, "mcp", "config", "cursor", "--read", "work", "--write-scope", "work")
    token = json.loads(out)["mcpServers"]["mirador"]["headers"]["Authorization"].split()[1]
    rec = TokenStore(mirador_home).verify(token)
    assert code == 0 and rec.name == "cursor" and rec.read == ["work"] and "created token" in err


def test_config_write_merges_without_clobbering_and_backs_up(capsys, tmp_path):
    path = tmp_path / "mcp.json"
    original = {"mcpServers": {"github": {"command": "gh-mcp"}, "mirador": {"url": "old"}}, "theme": "dark"}
    path.write_text(json.dumps(original))
    code, _, err = run(capsys, "mcp", "config", "cursor", "--token", "mir_new", "--write", "--path", str(path))
    assert code == 0 and "merged into" in err
    merged = json.loads(path.read_text())
    assert merged["theme"] == "dark" and merged["mcpServers"]["github"] == {"command": "gh-mcp"}
    assert merged["mcpServers"]["mirador"]["headers"]["Authorization"] == "Bearer mir_new"
    backups = list(tmp_path.glob("mcp.json.bak-*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text()) == original
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_config_write_refuses_a_broken_file_and_leaves_it(capsys, tmp_path):
    path = tmp_path / "claude_desktop_config.json"
    path.write_text("{ not json")
    code, _, err = run(capsys, "mcp", "config", "claude-desktop", "--token", "mir_x", "--write", "--path", str(path))
    assert code == 2 and "not valid JSON" in err and path.read_text() == "{ not json"


def test_config_write_default_paths(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    for client, rel in (("claude-code", ".claude.json"), ("cursor", ".cursor/mcp.json"),
                        ("vscode", ".config/Code/User/mcp.json"),
                        ("claude-desktop", ".config/Claude/claude_desktop_config.json")):
        assert run(capsys, "mcp", "config", client, "--token", "mir_t", "--write")[0] == 0
        assert "mirador" in json.loads((tmp_path / rel).read_text())["servers" if client == "vscode" else "mcpServers"]


def test_serve_rejects_a_bad_port(capsys):
    code, _, err = run(capsys, "serve", "--port", "80")
    assert code == 2 and "1024" in err
