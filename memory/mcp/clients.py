"""Config snippets for MCP clients (Claude Code, Claude Desktop, Cursor, VS Code) and a safe merge into their files.

HTTP clients get the URL and a bearer header; Claude Desktop's config file only starts stdio
servers, so it gets `mirador mcp` with the token and the data dir in the environment: the client
starts it with an environment of its own, where neither is set. Merging keeps every other server in
the file, replaces only our own entry, backs the original up first, writes through a symlink (a
dotfiles link stays a link) and reads VS Code's JSONC (comments kept where the edit allows).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any, Literal

from memory.config import data_dir
from memory.errors import InputError
from memory.store.atomic import write_atomic
from memory.store.audit import utcnow

Client = Literal["claude-code", "claude-desktop", "cursor", "vscode"]
CLIENTS: tuple[str, ...] = ("claude-code", "claude-desktop", "cursor", "vscode")
ENTRY = "mirador"
TOKEN_ENV = "MIRADOR_MCP_TOKEN"
HOME_ENV = "MIRADOR_HOME"


def mirador_command() -> list[str]:
    """How a client should start `mirador`: the console script if installed, else this Python with -m."""
    exe = shutil.which("mirador") or next(
        (str(p) for p in (Path(sys.executable).parent / n for n in ("mirador", "mirador.exe")) if p.exists()), None)
    if exe:
        return [str(Path(exe).absolute())]
    return [sys.executable, "-m", "desktop.cli.main"]


def server_entry(client: str, url: str, token: str, home: Path | None = None) -> tuple[str, dict[str, Any]]:
    """(top-level key, our entry) for a client's config file; home: the data dir a stdio server must use."""
    headers = {"Authorization": f"Bearer {token}"}
    if client == "claude-code":
        return "mcpServers", {"type": "http", "url": url, "headers": headers}
    if client == "cursor":
        return "mcpServers", {"url": url, "headers": headers}
    if client == "vscode":
        return "servers", {"type": "http", "url": url, "headers": headers}
    if client == "claude-desktop":
        cmd = mirador_command()
        env = {HOME_ENV: str(Path(home or data_dir()).expanduser().absolute()), TOKEN_ENV: token}
        return "mcpServers", {"command": cmd[0], "args": cmd[1:] + ["mcp"], "env": env}
    raise InputError(f"unknown client {client!r}: use one of {', '.join(CLIENTS)}")


def snippet(client: str, url: str, token: str, home: Path | None = None) -> str:
    """The exact JSON to paste: pure JSON, so it can be piped (the CLI alternative is cli_line)."""
    key, entry = server_entry(client, url, token, home)
    return json.dumps({key: {ENTRY: entry}}, indent=2)


def cli_line(client: str, url: str, token: str) -> str | None:
    """The client's own one-line alternative to the snippet, if it has one. User scope, as --write writes
    ~/.claude.json's top-level mcpServers (Claude Code's user scope)."""
    if client != "claude-code":
        return None
    return (f"claude mcp add --transport http --scope user {ENTRY} {url} "
            f"--header \"Authorization: Bearer {token}\"")


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


def token_in(path: Path, client: str) -> str | None:
    """The token our entry in a client's config file carries, if the file has one (None otherwise)."""
    try:
        data = _parse(Path(path).read_text(encoding="utf-8"), client, Path(path))
    except (OSError, InputError):
        return None
    key = "servers" if client == "vscode" else "mcpServers"
    entry = (data.get(key) or {}).get(ENTRY) if isinstance(data.get(key), dict) else None
    if not isinstance(entry, dict):
        return None
    if client == "claude-desktop":
        tok = (entry.get("env") or {}).get(TOKEN_ENV)
    else:
        auth = str((entry.get("headers") or {}).get("Authorization") or "")
        tok = auth[len("Bearer "):] if auth.startswith("Bearer ") else None
    return tok if isinstance(tok, str) and tok else None


def merge_into(path: Path, client: str, url: str, token: str, home: Path | None = None) -> dict[str, Any]:
    """Add or replace our entry in the client's file, keeping everything else; backs up the original.

    A symlinked file is written at its target (the link stays). VS Code's file may be JSONC: the
    entry is spliced into the text so its comments stay; if that cannot be done the file is
    rewritten as plain JSON and `comments_dropped` says so (the backup keeps them)."""
    key, entry = server_entry(client, url, token, home)
    path = Path(path)
    target = Path(os.path.realpath(path))  # a dotfiles link is followed, never replaced by a plain file
    data: dict[str, Any] = {}
    raw = ""
    backup = None
    if target.exists():
        raw = target.read_text(encoding="utf-8")
        if raw.strip():
            data = _parse(raw, client, path)
        if not isinstance(data, dict):
            raise InputError(f"{path} does not hold a JSON object; the file was not changed")
        backup = path.with_name(path.name + ".bak-" + utcnow().strftime("%Y%m%d%H%M%S"))
        shutil.copy2(target, backup)
    servers = data.setdefault(key, {})
    if not isinstance(servers, dict):
        raise InputError(f"{path}: '{key}' is not an object; the file was not changed")
    replaced = ENTRY in servers
    servers[ENTRY] = entry
    text, comments_dropped = json.dumps(data, indent=2) + "\n", False
    if client == "vscode" and raw.strip() and _has_comments(raw):
        spliced = _splice(raw, key, entry)
        if spliced is not None and _parse(spliced, client, path) == data:
            text = spliced
        else:
            comments_dropped = True
    target.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(target, text, mode=0o600)  # it holds a token
    return {"path": str(path), "target": str(target) if target != path.absolute() else None,
            "backup": str(backup) if backup else None, "replaced": replaced, "servers": sorted(servers),
            "comments_dropped": comments_dropped}


# ---- JSONC (VS Code's mcp.json): // and /* */ comments, trailing commas ----------------------

_TOKEN_RE = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/|[^"/]+|/', re.S)


def _parse(raw: str, client: str, path: Path) -> Any:
    """The file's JSON; for VS Code, JSONC (comments and trailing commas) as VS Code itself accepts."""
    try:
        return json.loads(_strip_jsonc(raw) if client == "vscode" else raw)
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}); fix it or paste the "
                         "snippet by hand — the file was not changed") from None


def _strip_jsonc(raw: str) -> str:
    """JSONC to JSON of the same length: comments and trailing commas become spaces, so positions (and
    the line numbers of errors) match the original text."""
    # A comma followed only by whitespace and a closing bracket; strings are matched whole, so kept.
    return re.sub(r'"(?:[^"\\]|\\.)*"|,(?=\s*[}\]])', lambda m: m.group(0) if m.group(0) != "," else " ",
                  _blank_comments(raw))


def _has_comments(raw: str) -> bool:
    return any(t.startswith(("//", "/*")) for t in _TOKEN_RE.findall(raw))


def _match(pattern: re.Pattern[str], text: str, pos: int) -> re.Match[str]:
    """pattern matched at text[pos]; ValueError where it does not (the callers treat the text as unreadable)."""
    m = pattern.match(text, pos)
    if m is None:
        raise ValueError(f"expected {pattern.pattern!r} at {pos}")
    return m


def _members(text: str, start: int) -> tuple[list[tuple[str, int, int, int]], int]:
    """The members of the object whose '{' is at text[start] (comments already blanked):
    [(key, key_start, value_start, value_end)], and the position of its closing '}'."""
    dec = json.JSONDecoder()
    ws = re.compile(r"[\s,]*")
    members: list[tuple[str, int, int, int]] = []
    i = start + 1
    while True:
        i = _match(ws, text, i).end()
        if text[i] == "}":
            return members, i
        key, j = dec.raw_decode(text, i)
        j = _match(re.compile(r"\s*:\s*"), text, j).end()
        _, end = dec.raw_decode(text, j)
        members.append((key, i, j, end))
        i = end


def _splice(raw: str, key: str, entry: dict[str, Any]) -> str | None:
    """raw with servers.mirador set to entry by editing the text only where it goes, or None."""
    try:
        blank = _strip_jsonc(raw)
        top = _match(re.compile(r"\s*"), blank, 0).end()
        if blank[top] != "{":
            return None
        members, _ = _members(blank, top)
        found = next((m for m in members if m[0] == key), None)
        if found is None:
            sep = "," if members else ""
            body = _indent(json.dumps({ENTRY: entry}, indent=2), "  ")
            return raw[:top + 1] + f'\n  "{key}": {body}{sep}' + raw[top + 1:]
        _, kstart, vstart, _ = found
        if blank[vstart] != "{":
            return None
        inner, _ = _members(blank, vstart)
        pad = _line_indent(raw, kstart)
        mine = next((m for m in inner if m[0] == ENTRY), None)
        if mine is not None:
            _, _, s0, s1 = mine
            return raw[:s0] + _indent(json.dumps(entry, indent=2), pad + "  ") + raw[s1:]
        sep = "," if inner else ""
        body = _indent(json.dumps(entry, indent=2), pad + "  ")
        return raw[:vstart + 1] + f'\n{pad}  "{ENTRY}": {body}{sep}' + raw[vstart + 1:]
    except (ValueError, IndexError, AttributeError):
        return None


def _blank_comments(raw: str) -> str:
    """raw with every comment replaced by spaces (same length, so positions match raw)."""
    return "".join(re.sub(r"[^\n]", " ", t) if t.startswith(("//", "/*")) else t for t in _TOKEN_RE.findall(raw))


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    return _match(re.compile(r"[ \t]*"), text, line_start).group(0)


def _indent(block: str, pad: str) -> str:
    """A multi-line JSON value placed after a key: lines after the first are indented by pad."""
    return block.replace("\n", "\n" + pad)
