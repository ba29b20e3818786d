"""Config snippets for MCP clients (Claude Code, Claude Desktop, Cursor, VS Code) and a safe merge into their files.

HTTP clients get the URL and a bearer header; Claude Desktop's config file only starts stdio
servers, so it gets `mirador mcp` with the token in the environment. Merging keeps every other
server in the file, replaces only our own entry, and backs the original up first.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Literal

from memory.errors import InputError
from memory.store.atomic import write_atomic
from memory.store.audit import utcnow

Client = Literal["claude-code", "claude-desktop", "cursor", "vscode"]
CLIENTS: tuple[str, ...] = ("claude-code", "claude-desktop", "cursor", "vscode")
ENTRY = "mirador"
TOKEN_ENV = "MIRADOR_MCP_TOKEN"


def mirador_command() -> list[str]:
    """How a client should start `mirador`: the console script if installed, else this Python with -m."""
    exe = shutil.which("mirador") or next(
        (str(p) for p in (Path(sys.executable).parent / n for n in ("mirador", "mirador.exe")) if p.exists()), None)
    if exe:
        return [str(Path(exe).absolute())]
    return [sys.executable, "-m", "desktop.cli.main"]


def server_entry(client: str, url: str, token: str) -> tuple[str, dict]:
    """(top-level key, our entry) for a client's config file."""
    headers = {"Authorization": f"Bearer {token}"}
    if client == "claude-code":
        return "mcpServers", {"type": "http", "url": url, "headers": headers}
    if client == "cursor":
        return "mcpServers", {"url": url, "headers": headers}
    if client == "vscode":
        return "servers", {"type": "http", "url": url, "headers": headers}
    if client == "claude-desktop":
        cmd = mirador_command()
        return "mcpServers", {"command": cmd[0], "args": cmd[1:] + ["mcp"], "env": {TOKEN_ENV: token}}
    raise InputError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")


def snippet(client: str, url: str, token: str) -> str:
    """The exact JSON to paste (plus, for Claude Code, the one-line CLI alternative)."""
    key, entry = server_entry(client, url, token)
    text = json.dumps({key: {ENTRY: entry}}, indent=2)
    if client == "claude-code":
        text += (f"\n\n# or, with the Claude Code CLI:\nclaude mcp add --transport http {ENTRY} {url} "
                 f"--header \"Authorization: Bearer {token}\"")
    return text


def config_file(client: str, home: Path | None = None) -> Path:
    """Where the client keeps its user-level MCP config on this OS."""
    home = Path(home) if home else Path.home()
    if client == "claude-code":
        return home / ".claude.json"
    if client == "cursor":
        return home / ".cursor" / "mcp.json"
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform.startswith("win"):
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    if client == "claude-desktop":
        return base / "Claude" / "claude_desktop_config.json"
    if client == "vscode":
        return base / "Code" / "User" / "mcp.json"
    raise InputError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")


def merge_into(path: Path, client: str, url: str, token: str) -> dict:
    """Add or replace our entry in the client's file, keeping everything else; backs up the original."""
    key, entry = server_entry(client, url, token)
    data: dict = {}
    backup = None
    if path.exists():
        raw = path.read_text(encoding="utf-8")
        if raw.strip():
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as e:
                raise InputError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}); fix it or paste the "
                                 "snippet by hand — the file was not changed") from None
        if not isinstance(data, dict):
            raise InputError(f"{path} does not hold a JSON object; the file was not changed")
        backup = path.with_name(path.name + ".bak-" + utcnow().strftime("%Y%m%d%H%M%S"))
        shutil.copy2(path, backup)
    servers = data.setdefault(key, {})
    if not isinstance(servers, dict):
        raise InputError(f"{path}: '{key}' is not an object; the file was not changed")
    replaced = ENTRY in servers
    servers[ENTRY] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(data, indent=2) + "\n", mode=0o600)  # it holds a token
    return {"path": str(path), "backup": str(backup) if backup else None, "replaced": replaced,
            "servers": sorted(servers)}
