"""The hook's fast path: ask the running Mirador (app or `mirador serve`) for the recall over MCP HTTP.

A hook is a fresh process per prompt; loading the embedder there costs seconds, while the app
already has it warm. `mirador hooks install` creates a read-only MCP token named `claude-code-hooks`
whose read scopes are `[hooks] allowed_scopes` and keeps it in `hooks/token` (0600) in the data dir.
The hook uses it only while the token's scopes still equal the configured ones and the server
answers on 127.0.0.1 within a fraction of a second; otherwise it recalls in-process (slower, same
result). Plain JSON-RPC over httpx: three small requests, no MCP client import on the hot path.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from memory.config import Config

from memory.errors import InputError

log = logging.getLogger(__name__)

TOKEN_NAME = "claude-code-hooks"
TOKEN_FILE = "token"
CONNECT_SECONDS = 0.3
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def token_path(home: Path) -> Path:
    """Where the hooks' MCP token is kept."""
    return Path(home) / "hooks" / TOKEN_FILE


def issue_token(home: Path, scopes: list[str]) -> str | None:
    """(Re)create the read-only token the hook uses against the running server; None without scopes."""
    from memory.mcp.auth import TokenStore

    tokens = TokenStore(home)
    if any(r.name == TOKEN_NAME for r in tokens.list()):
        tokens.revoke(TOKEN_NAME)
    p = token_path(home)
    if not scopes:
        p.unlink(missing_ok=True)
        return None
    token, _ = tokens.add(TOKEN_NAME, scopes, None)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(token)
    return token


def revoke_token(home: Path) -> None:
    """Remove the hooks' token (on uninstall)."""
    from memory.mcp.auth import TokenStore

    try:
        TokenStore(home).revoke(TOKEN_NAME)
    except InputError:
        pass
    token_path(home).unlink(missing_ok=True)


def _usable_token(home: Path, scopes: list[str]) -> str | None:
    from memory.mcp.auth import TokenStore

    p = token_path(home)
    if not p.exists():
        return None
    rec = next((r for r in TokenStore(home).list() if r.name == TOKEN_NAME), None)
    if rec is None or sorted(rec.read) != sorted(scopes):
        return None  # scopes changed since install: only the in-process path knows the new ones
    return p.read_text(encoding="utf-8").strip() or None


def _rpc(client: httpx.Client, url: str, headers: dict, msg: dict) -> dict | None:
    r = client.post(url, json=msg, headers=headers)
    r.raise_for_status()
    if "id" not in msg:
        return None
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                if data.get("id") == msg["id"]:
                    return data
        return None
    return r.json()


def remote_recall(home: Path, cfg: Config, query: str, timeout: float) -> dict | None:
    """memory_recall's result from the running server, or None when there is no usable server."""
    import httpx

    token = _usable_token(home, list(cfg.hooks.allowed_scopes))
    if not token or not cfg.mcp.enabled:
        return None
    url = f"http://127.0.0.1:{cfg.mcp.port}/mcp"
    headers = {**HEADERS, "Authorization": f"Bearer {token}"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "mirador-hook", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "memory_recall", "arguments": {
                "query": query, "budget_tokens": max(cfg.hooks.budget_tokens, 50),
                "include_evidence": cfg.hooks.include_evidence}}}
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, connect=CONNECT_SECONDS)) as client:
            first = client.post(url, json=init, headers=headers)
            first.raise_for_status()
            session = first.headers.get("mcp-session-id")
            if session:
                headers["mcp-session-id"] = session
            _rpc(client, url, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            reply = _rpc(client, url, headers, call)
            if session:
                client.delete(url, headers=headers)
    except (httpx.HTTPError, ValueError) as e:
        log.info("no running Mirador server to ask (%s); recalling in-process", type(e).__name__)
        return None
    result = (reply or {}).get("result") or {}
    if result.get("isError") or not result.get("content"):
        log.warning("server recall failed: %s", (reply or {}).get("error") or result.get("content"))
        return None
    return json.loads(result["content"][0]["text"])
