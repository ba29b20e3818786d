"""`mirador serve`, `mirador mcp` (stdio), `mirador mcp token …` and `mirador mcp config …`."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from desktop.cli.output import emit_json
from memory.errors import InputError

log = logging.getLogger(__name__)

TOKEN_ENV = "MIRADOR_MCP_TOKEN"


def register(cmd, as_json, scope) -> None:
    """Add the MCP commands to the `mirador` parser."""
    sp = cmd("serve", cmd_serve, "serve MCP over HTTP at http://127.0.0.1:PORT/mcp until stopped (needs a token)")
    sp.add_argument("--port", type=int, help="port on 127.0.0.1 (default: [mcp] port in config.toml, 8765)")

    sp = cmd("mcp", cmd_mcp_stdio, "run the MCP server over stdio for a client that starts it (see `token`, `config`)")
    sp.add_argument("--token", help=f"act as this token's client (or set ${TOKEN_ENV}); its scopes apply")
    scope(sp)
    sp.add_argument("--write", dest="write_scope", metavar="SCOPE",
                    help="with --scope: the scope writes go to (default: the first --scope)")
    sp.add_argument("--read-only", action="store_true", help="with --scope: refuse every write")
    sp.add_argument("--name", default="stdio", help="with --scope: client name recorded on writes (default stdio)")
    sp.add_argument("--allow-vault", action="store_true", help="with --scope: let the client read vault values")
    msub = sp.add_subparsers(metavar="ACTION")

    tp = msub.add_parser("token", help="per-client tokens: add, list, revoke")
    tp.set_defaults(func=lambda a: (_ for _ in ()).throw(InputError("`mirador mcp token` needs: add, list or revoke")))
    tsub = tp.add_subparsers(metavar="ACTION")
    ap = tsub.add_parser("add", help="create a token (printed once) for a client")
    ap.set_defaults(func=cmd_token_add)
    ap.add_argument("name", help="client name, e.g. claude-code (recorded as mcp:NAME on its writes)")
    ap.add_argument("--read", action="append", default=[], metavar="SCOPES",
                    help="scopes it may read, comma-separated or repeated (sub-scopes included)")
    ap.add_argument("--write", metavar="SCOPE", help="the one scope it may write to; omit for read-only")
    ap.add_argument("--allow-vault", action="store_true", help="let it read knowledge-vault values")
    as_json(ap)
    lp = tsub.add_parser("list", help="list tokens (names and scopes; tokens themselves are never stored)")
    lp.set_defaults(func=cmd_token_list)
    as_json(lp)
    rp = tsub.add_parser("revoke", help="revoke a client's token (its next request gets 401)")
    rp.set_defaults(func=cmd_token_revoke)
    rp.add_argument("name")
    as_json(rp)

    cp = msub.add_parser("config", help="print (or --write) the config snippet for an MCP client")
    cp.set_defaults(func=cmd_config)
    cp.add_argument("client", choices=["claude-code", "claude-desktop", "cursor", "vscode"])
    cp.add_argument("--token", default=os.environ.get(TOKEN_ENV),
                    help="token to put in the snippet; default: create one named after the client")
    cp.add_argument("--read", action="append", default=[], metavar="SCOPES",
                    help="scopes of a newly created token (default: store.default_scope)")
    cp.add_argument("--write-scope", metavar="SCOPE", help="write scope of a newly created token (default: "
                    "store.default_scope; 'none' for read-only)")
    cp.add_argument("--port", type=int, help="server port (default: [mcp] port in config.toml)")
    cp.add_argument("--write", action="store_true", help="merge into the client's config file (backs it up first)")
    cp.add_argument("--path", help="config file to merge into instead of the client's default")
    as_json(cp)


def _home() -> Path:
    from memory.config import data_dir

    return data_dir()


def _port(a) -> int:
    from memory.config import load_config

    port = a.port or load_config(_home()).mcp.port
    if not 1024 <= port <= 65535:
        raise InputError(f"--port must be between 1024 and 65535, got {port}")
    return port


def cmd_serve(a) -> int:
    from memory.config import load_config
    from memory.mcp.auth import TokenStore
    from memory.mcp.server import HttpServer

    home = _home()
    srv = HttpServer(home, _port(a), extra_origins=load_config(home).mcp.allowed_origins)
    srv.warm()
    if not TokenStore(home).list():
        print("no MCP tokens yet — create one: mirador mcp token add NAME --read SCOPES --write SCOPE",
              file=sys.stderr)
    print(f"Mirador MCP server at {srv.url} — Ctrl+C to stop", flush=True)
    srv.serve_forever()
    return 0


def cmd_mcp_stdio(a) -> int:
    from memory.mcp.auth import TokenStore, make_principal
    from memory.mcp.server import run_stdio

    home = _home()
    if a.token and a.scope:
        raise InputError("give either --token or --scope, not both")
    token = a.token or (None if a.scope else os.environ.get(TOKEN_ENV))
    if token:
        rec = TokenStore(home).verify(token)
        if rec is None:
            raise InputError(f"unknown or revoked token (from --token or ${TOKEN_ENV}); see `mirador mcp token list`")
        principal = rec.principal()
    elif a.scope:
        write = None if a.read_only else (a.write_scope or a.scope[0].split(",")[0])
        principal = make_principal(a.name, a.scope, write, a.allow_vault)
    else:
        raise InputError(f"choose what this client may see: --token TOKEN (or ${TOKEN_ENV}), or --scope SCOPE "
                         "[--write SCOPE | --read-only]")
    log.info("MCP stdio server for %s (read %s, write %s)", principal.name, ",".join(principal.read), principal.write)
    run_stdio(principal, home)
    return 0


def cmd_token_add(a) -> int:
    from memory.mcp.auth import TokenStore

    token, rec = TokenStore(_home()).add(a.name, a.read, a.write, a.allow_vault)
    if a.json:
        emit_json({"token": token, **rec.public()})
    else:
        print(token)
        print(f"token for {rec.name}: reads {', '.join(rec.read)}; writes {rec.write or 'nothing (read-only)'}"
              f"{'; may read vault values' if rec.allow_vault else ''}. It is shown only now — copy it.",
              file=sys.stderr)
    return 0


def cmd_token_list(a) -> int:
    from memory.mcp.auth import TokenStore

    rows = [r.public() for r in TokenStore(_home()).list()]
    if a.json:
        emit_json(rows)
    elif not rows:
        print("no tokens — create one with: mirador mcp token add NAME --read SCOPES --write SCOPE")
    else:
        for r in rows:
            print(f"{r['name']:<20} read {','.join(r['read']):<24} write {r['write'] or '-':<12} "
                  f"{'vault ' if r['allow_vault'] else ''}created {r['created_at']}")
    return 0


def cmd_token_revoke(a) -> int:
    from memory.mcp.auth import TokenStore

    rec = TokenStore(_home()).revoke(a.name)
    emit_json({"revoked": rec.name}) if a.json else print(f"revoked {rec.name}")
    return 0


def cmd_config(a) -> int:
    from memory.mcp.clients import config_file, merge_into, snippet

    port = _port(a)
    url = f"http://127.0.0.1:{port}/mcp"
    token = a.token or _new_token(a)
    out = {"client": a.client, "url": url, "snippet": snippet(a.client, url, token)}
    if a.write:
        path = Path(a.path).expanduser() if a.path else config_file(a.client)
        out["written"] = merge_into(path, a.client, url, token)
    if a.json:
        emit_json(out)
        return 0
    print(out["snippet"])
    if a.write:
        w = out["written"]
        print(f"\nmerged into {w['path']}" + (f" (backup: {w['backup']})" if w["backup"] else ""), file=sys.stderr)
    if a.client != "claude-desktop":
        print(f"\nthe client connects to {url}: keep `mirador serve` (or the app) running", file=sys.stderr)
    return 0


def _new_token(a) -> str:
    from memory.config import load_config
    from memory.mcp.auth import TokenStore

    default = load_config(_home()).store.default_scope
    write = None if (a.write_scope or "").lower() == "none" else (a.write_scope or default)
    token, rec = TokenStore(_home()).add(a.client, a.read or [write or default], write)
    print(f"created token {rec.name!r} (reads {', '.join(rec.read)}; writes {rec.write or 'nothing'}); "
          "revoke with `mirador mcp token revoke " + rec.name + "`", file=sys.stderr)
    return token
