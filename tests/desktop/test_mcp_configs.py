"""MCP client configs that work where the client runs: the stdio entry carries the data dir, servers refuse a
data dir without a store, and `mcp config --write` follows links, reads JSONC and reuses its own token."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from desktop.cli.main import main
from memory.mcp.auth import TokenStore
from tests.memory.mcp_support import ROOT, env_for, free_port, start_server, stop_server

# The SDK is imported here, at collection, not inside a test: stdio_client's default errlog is the
# sys.stderr of the moment `mcp` is first imported, and under capsys that is a stream without a file
# descriptor, which breaks every later stdio client in the session.


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(autouse=True)
def _own_home(tmp_path, monkeypatch):
    """Keep the client's default config paths (read for a token to reuse) inside the test."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "user" / ".config"))


def test_claude_desktop_entry_works_in_the_bare_environment_the_client_gives(capsys, store, mirador_home, tmp_path):
    """Started as Claude Desktop starts it (only PATH and the entry's env), it serves this data dir."""
    store.add_memory("The spare bike key hangs behind the kitchen door.", scope="work")
    path = tmp_path / "claude_desktop_config.json"
    code, out, _ = run(capsys, "mcp", "config", "claude-desktop", "--read", "work", "--write", "--path", str(path))
    assert code == 0 and json.loads(out) == json.loads(path.read_text())
    entry = json.loads(path.read_text())["mcpServers"]["mirador"]
    assert entry["env"]["MIRADOR_HOME"] == str(mirador_home.absolute())
    env = [f"{k}={v}" for k, v in entry["env"].items()]
    params = StdioServerParameters(command="/usr/bin/env", args=["-i", f"PATH={os.environ['PATH']}", *env,
                                                                 entry["command"], *entry["args"]], cwd=str(tmp_path))

    log = tmp_path / "server.log"

    async def call():
        with open(log, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as s:
                await s.initialize()
                return await s.call_tool("memory_search", {"query": "where is the bike key"})

    # This machine has no OS keyring, and the bare environment holds no passphrase: with no Mirador running the
    # server cannot open the data, and says what to do.
    result = anyio.run(call)
    assert result.is_error and "start Mirador" in result.content[0].text and "unlock" in result.content[0].text
    # With Mirador running and unlocked (here `mirador serve`, given the passphrase), it borrows its key.
    service = start_server(mirador_home, free_port(), tmp_path / "serve.log")
    try:
        result = anyio.run(call)
    finally:
        stop_server(service)
    assert not result.is_error, result.content[0].text + log.read_text()
    assert "spare bike key" in result.content[0].text


def _cli(home, *args, timeout=240):
    return subprocess.run([sys.executable, "-m", "desktop.cli.main", *args], cwd=ROOT, env=env_for(home),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_servers_refuse_a_data_dir_without_a_store_unless_told_to_create_one(tmp_path):
    home = tmp_path / "not-my-data"
    for args in (["mcp", "--scope", "work"], ["serve", "--port", str(free_port())]):
        p = _cli(home, *args, timeout=120)
        assert p.returncode == 2 and p.stdout == "", (args, p.stderr)
        assert f"no Mirador store at {home}" in p.stderr and "MIRADOR_HOME" in p.stderr and "--create" in p.stderr
        assert not (home / "lancedb").exists()
    p = _cli(home, "mcp", "--token", "mir_from_another_dir")
    assert p.returncode == 2 and "unknown or revoked token" in p.stderr and "no Mirador store at" in p.stderr
    p = _cli(home, "mcp", "--scope", "work", "--create")  # stdin at EOF: it creates the store, serves, and ends
    assert p.returncode == 0, p.stderr
    assert (home / "lancedb" / "memories.lance").is_dir()


def test_write_follows_a_symlinked_config(capsys, tmp_path):
    real = tmp_path / "dotfiles" / "cursor-mcp.json"
    real.parent.mkdir()
    real.write_text(json.dumps({"mcpServers": {"github": {"command": "gh-mcp"}}}))
    link = tmp_path / "cfg" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)
    code, _, err = run(capsys, "mcp", "config", "cursor", "--token", "mir_t", "--write", "--path", str(link))
    assert code == 0 and str(real) in err
    assert link.is_symlink() and link.resolve() == real.resolve()
    data = json.loads(real.read_text())
    assert set(data["mcpServers"]) == {"github", "mirador"}
    assert len(list(link.parent.glob("mcp.json.bak-*"))) == 1


JSONC = """// VS Code user MCP servers
{
  "servers": {
    /* the GitHub one */
    "github": {"type": "stdio", "command": "gh-mcp", "args": ["--url", "http://x//y"],},
  },
  "inputs": [],
}
"""


def test_write_accepts_vscode_jsonc_and_keeps_its_comments(capsys, tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(JSONC)
    code, out, err = run(capsys, "mcp", "config", "vscode", "--token", "mir_v", "--write", "--path", str(path))
    assert code == 0, err
    json.loads(out)
    text = path.read_text()
    assert "// VS Code user MCP servers" in text and "/* the GitHub one */" in text
    from memory.mcp.clients import _strip_jsonc

    data = json.loads(_strip_jsonc(text))
    assert data["servers"]["github"]["args"] == ["--url", "http://x//y"] and data["inputs"] == []
    assert data["servers"]["mirador"]["headers"] == {"Authorization": "Bearer mir_v"}
    # Run again: the entry is replaced in place, still with the comments.
    assert run(capsys, "mcp", "config", "vscode", "--token", "mir_w", "--write", "--path", str(path))[0] == 0
    text = path.read_text()
    assert text.count('"mirador"') == 1 and "/* the GitHub one */" in text and "mir_w" in text


def test_write_says_so_when_jsonc_comments_cannot_be_kept(capsys, tmp_path):
    path = tmp_path / "mcp.json"
    original = '{"servers": {}, // first\n "servers": {"github": {"command": "gh"}}}'  # last key wins in JSON
    path.write_text(original)
    code, _, err = run(capsys, "mcp", "config", "vscode", "--token", "mir_v", "--write", "--path", str(path))
    assert code == 0 and "comments" in err and "could not be kept" in err
    assert json.loads(path.read_text())["servers"] == {"github": {"command": "gh"},
                                                       "mirador": json.loads(path.read_text())["servers"]["mirador"]}
    assert [b.read_text() for b in tmp_path.glob("mcp.json.bak-*")] == [original]


@pytest.mark.parametrize("client", ["claude-code", "claude-desktop", "cursor", "vscode"])
def test_stdout_is_pure_json_and_hints_go_to_stderr(capsys, client):
    code, out, err = run(capsys, "mcp", "config", client, "--token", "mir_abc", "--port", "9123")
    assert code == 0
    json.loads(out)
    if client == "claude-code":
        assert ("claude mcp add --transport http --scope user mirador http://127.0.0.1:9123/mcp "
                '--header "Authorization: Bearer mir_abc"') in err


def test_without_a_token_it_asks_for_scopes(capsys, mirador_home):
    code, out, err = run(capsys, "mcp", "config", "cursor")
    assert code == 2 and out == "" and "--read" in err and "--token" in err
    assert TokenStore(mirador_home).list() == []


def test_a_second_run_reuses_or_rotates_its_own_token(capsys, mirador_home, tmp_path):
    path = tmp_path / "mcp.json"
    code, _, err = run(capsys, "mcp", "config", "cursor", "--read", "work", "--write", "--path", str(path))
    assert code == 0 and "created token 'cursor'" in err
    first = json.loads(path.read_text())["mcpServers"]["mirador"]["headers"]["Authorization"].split()[1]
    rec = TokenStore(mirador_home).verify(first)
    assert rec.read == ["work"] and rec.write is None  # --read alone makes a read-only token

    code, _, err = run(capsys, "mcp", "config", "cursor", "--write", "--path", str(path))
    assert code == 0 and "reusing token 'cursor'" in err
    assert json.loads(path.read_text())["mcpServers"]["mirador"]["headers"]["Authorization"] == f"Bearer {first}"

    # Printed for a file that does not hold it: the old token cannot be shown again, so it is replaced.
    code, out, err = run(capsys, "mcp", "config", "cursor", "--path", str(tmp_path / "elsewhere.json"))
    second = json.loads(out)["mcpServers"]["mirador"]["headers"]["Authorization"].split()[1]
    assert code == 0 and "replaced token 'cursor'" in err and second != first
    tokens = TokenStore(mirador_home)
    assert tokens.verify(first) is None and tokens.verify(second).read == ["work"]

    # Other grants asked for: a new token with them, written over the old entry.
    code, _, err = run(capsys, "mcp", "config", "cursor", "--read", "work", "--write-scope", "work",
                       "--write", "--path", str(path))
    third = json.loads(path.read_text())["mcpServers"]["mirador"]["headers"]["Authorization"].split()[1]
    assert code == 0 and third not in (first, second) and tokens.verify(third).write == "work"
    assert [r.name for r in tokens.list()] == ["cursor"]
