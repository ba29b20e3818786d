"""`mirador serve`, `mirador mcp` (stdio), `mirador mcp token …` and `mirador mcp config …`."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from desktop.cli.output import emit_json
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope

log = logging.getLogger(__name__)

TOKEN_ENV = "MIRADOR_MCP_TOKEN"


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the MCP commands to the `mirador` parser."""
    sp = cmd("serve", cmd_serve, "serve MCP over HTTP at http://127.0.0.1:PORT/mcp until stopped (needs a token)")
    sp.add_argument("--port", type=int, help="port on 127.0.0.1 (default: [mcp] port in config.toml, 8765)")
    sp.add_argument("--create", action="store_true", help="start an empty store if the data dir has none")

    sp = cmd("mcp", cmd_mcp_stdio, "run the MCP server over stdio for a client that starts it (see `token`, `config`)")
    sp.add_argument("--token", help=f"act as this token's client (or set ${TOKEN_ENV}); its scopes apply")
    scope(sp)
    sp.add_argument("--write", dest="write_scope", metavar="SCOPE",
                    help="with --scope: the scope writes go to (default: the first --scope)")
    sp.add_argument("--read-only", action="store_true", help="with --scope: refuse every write")
    sp.add_argument("--name", default="stdio", help="with --scope: client name recorded on writes (default stdio)")
    sp.add_argument("--allow-vault", action="store_true", help="with --scope: let the client read vault values")
    sp.add_argument("--create", action="store_true", help="start an empty store if the data dir has none")
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
                    help="token to put in the snippet; default: the client's own token (named after it), "
                         "reused from its config file or made anew with --read/--write-scope")
    cp.add_argument("--read", action="append", default=[], metavar="SCOPES",
                    help="scopes the client's token may read, comma-separated or repeated")
    cp.add_argument("--write-scope", metavar="SCOPE", help="the one scope the client's token may write to "
                    "(omit, or 'none', for read-only)")
    cp.add_argument("--port", type=int, help="server port (default: [mcp] port in config.toml)")
    cp.add_argument("--write", action="store_true", help="merge into the client's config file (backs it up first)")
    cp.add_argument("--path", help="config file to merge into instead of the client's default")
    as_json(cp)


def _home() -> Path:
    from memory.config import data_dir

    return data_dir()


def _require_store(home: Path, create: bool) -> None:
    """Refuse to serve a data dir without a store (a client started with the wrong or no MIRADOR_HOME
    would otherwise get an empty store of its own), unless asked to create one."""
    if not create and not has_store(home):
        raise InputError(no_store_message(home))


def has_store(home: Path) -> bool:
    """True if the data dir holds a Mirador store (its memories table)."""
    return (Path(home) / "lancedb" / "memories.lance").is_dir()


def no_store_message(home: Path) -> str:
    return (f"no Mirador store at {Path(home).expanduser().absolute()} — set MIRADOR_HOME to your data dir, "
            "or pass --create to start an empty one")


def _port(a: argparse.Namespace) -> int:
    from memory.config import load_config

    port = a.port or load_config(_home()).mcp.port
    if not 1024 <= port <= 65535:
        raise InputError(f"--port must be between 1024 and 65535, got {port}")
    return port


def cmd_serve(a: argparse.Namespace) -> int:
    from memory.config import load_config
    from memory.mcp.auth import TokenStore
    from memory.mcp.server import HttpServer

    home = _home()
    port = _port(a)
    _require_store(home, a.create)
    srv = HttpServer(home, port, extra_origins=load_config(home).mcp.allowed_origins)
    srv.warm()
    if not TokenStore(home).list():
        print("no MCP tokens yet — create one: mirador mcp token add NAME --read SCOPES --write SCOPE",
              file=sys.stderr)
    from desktop.cli.via_service import install
    from desktop.runtime.local_endpoint import start_endpoint

    install()
    endpoint = start_endpoint(srv.mcp.state.store, home)  # `mirador search` & co. then use this warm store
    print(f"Mirador MCP server at {srv.url} — Ctrl+C to stop", flush=True)
    # uvicorn stops on SIGTERM, then raises it again with the handler it found: this one, so that the
    # process ends as a clean stop (exit 0, endpoint file removed) rather than killed by the signal.
    signal.signal(signal.SIGTERM, _stopped)
    try:
        srv.serve_forever()
    finally:
        if endpoint is not None:
            endpoint.stop()
    return 0


def _stopped(*_: object) -> None:
    raise SystemExit(0)


def cmd_mcp_stdio(a: argparse.Namespace) -> int:
    from memory.mcp.auth import TokenStore, make_principal
    from memory.mcp.server import run_stdio

    home = _home()
    if a.token and a.scope:
        raise InputError("give either --token or --scope, not both")
    token = a.token or (None if a.scope else os.environ.get(TOKEN_ENV))
    if token:
        rec = TokenStore(home).verify(token)
        if rec is None and not has_store(home):
            raise InputError(f"unknown or revoked token (from --token or ${TOKEN_ENV}), and "
                             + no_store_message(home))
        if rec is None:
            raise InputError(f"unknown or revoked token (from --token or ${TOKEN_ENV}); see `mirador mcp token list`")
        principal = rec.principal()
    elif a.scope:
        write = None if a.read_only else (a.write_scope or a.scope[0].split(",")[0])
        principal = make_principal(a.name, a.scope, write, a.allow_vault)
    else:
        raise InputError(f"choose what this client may see: --token TOKEN (or ${TOKEN_ENV}), or --scope SCOPE "
                         "[--write SCOPE | --read-only]")
    _require_store(home, a.create)
    log.info("MCP stdio server for %s (read %s, write %s)", principal.name, ",".join(principal.read), principal.write)
    run_stdio(principal, home)
    return 0


def cmd_token_add(a: argparse.Namespace) -> int:
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


def cmd_token_list(a: argparse.Namespace) -> int:
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


def cmd_token_revoke(a: argparse.Namespace) -> int:
    from memory.mcp.auth import TokenStore

    rec = TokenStore(_home()).revoke(a.name)
    emit_json({"revoked": rec.name}) if a.json else print(f"revoked {rec.name}")
    return 0


def cmd_config(a: argparse.Namespace) -> int:
    from memory.mcp.clients import cli_line, config_file, merge_into, snippet

    home = _home()
    port = _port(a)
    url = f"http://127.0.0.1:{port}/mcp"
    path = Path(a.path).expanduser() if a.path else config_file(a.client)
    token = a.token or _client_token(a, path)
    out = {"client": a.client, "url": url, "snippet": snippet(a.client, url, token, home)}
    line = cli_line(a.client, url, token)
    if line:
        out["cli"] = line
    if a.write:
        out["written"] = merge_into(path, a.client, url, token, home)
    if a.json:
        emit_json(out)
    else:
        print(out["snippet"])  # stdout is pure JSON: it can be piped or pasted as is; hints go to stderr
        if line:
            print(f"or, with the Claude Code CLI:\n  {line}", file=sys.stderr)
    if a.write:
        w = out["written"]
        print(f"merged into {w['path']}" + (f" (a link to {w['target']})" if w["target"] else "")
              + (f" (backup: {w['backup']})" if w["backup"] else ""), file=sys.stderr)
        if w["comments_dropped"]:
            print(f"the comments in {w['path']} could not be kept where the entry goes; they are in the backup "
                  f"{w['backup']}", file=sys.stderr)
    if a.client == "claude-desktop":
        if not has_store(home):
            print(no_store_message(home) + " (the client's `mirador mcp` will refuse to start until there is one)",
                  file=sys.stderr)
    else:
        print(f"the client connects to {url}: keep `mirador serve` (or the app) running", file=sys.stderr)
    return 0


def _client_token(a: argparse.Namespace, path: Path) -> str:
    """The client's own token (named after it): the one its config file already carries if still valid and
    the grants asked for (if any) are its grants; otherwise a new one, replacing an older one of that name."""
    from memory.mcp.auth import TokenStore, make_principal
    from memory.mcp.clients import token_in

    tokens = TokenStore(_home())
    write = None if (a.write_scope or "").lower() == "none" else a.write_scope
    want = make_principal(a.client, a.read, write) if (a.read or write) else None
    old = next((r for r in tokens.list() if r.name == a.client), None)
    held = token_in(path, a.client)
    rec = tokens.verify(held) if held else None
    if held and rec is not None and rec.name == a.client and (want is None or (tuple(rec.read), rec.write) ==
                                                      (want.read, want.write)):
        print(f"reusing token {rec.name!r} from {path} (reads {', '.join(rec.read)}; writes {rec.write or 'nothing'})",
              file=sys.stderr)
        return held
    if want is None:  # rotate with the grants it had: the old token is not stored, so cannot be shown again
        if old is None:
            raise InputError(f"say what {a.client} may see: pass --read SCOPES (comma-separated) and, to let it "
                             "write, --write-scope SCOPE; or pass --token TOKEN from `mirador mcp token add`")
        want = make_principal(a.client, old.read, old.write, old.allow_vault)
    if old is not None:
        tokens.revoke(old.name)
    token, rec = tokens.add(a.client, want.read, want.write, want.allow_vault)
    print(f"{'replaced' if old else 'created'} token {rec.name!r} (reads {', '.join(rec.read)}; writes "
          f"{rec.write or 'nothing'}){'; the old one no longer works' if old else ''}; revoke with "
          f"`mirador mcp token revoke {rec.name}`", file=sys.stderr)
    return token
