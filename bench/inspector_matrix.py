"""Least privilege as an independent client sees it: every MCP tool × {no scope, read-only, read+write, other scope}
through the MCP Inspector CLI, against a live `mirador serve` (streamable HTTP) and against `mirador mcp` over
stdio started from a minimal environment (`env -i HOME PATH` plus what the printed Claude Desktop config holds).

Prints one JSON object: per transport the tool count, the calls made, and every call whose outcome (allowed or
refused) differs from what least privilege says, or whose answer shows a row of a scope the token may not read,
or a refused write that changed a table. `mismatches` is 0 when all is as it should be. Needs node/npx (the
Inspector is fetched by npx on first use); not part of `make test`.

    .venv/bin/python bench/inspector_matrix.py [--transport http|stdio|both]

tests/memory/test_mcp_authz.py walks the same matrix in-process with the Python SDK client.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

ROOT = Path(__file__).resolve().parents[1]
# 0.17.2: the newest Inspector whose CLI runs on node 20 and has --header (tests/memory/test_mcp_http.py).
INSPECTOR = "@modelcontextprotocol/inspector@0.17.2"
MARK = "zanzibarquokka"  # only in personal rows
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
ROLES = {"none": ([], None), "read_only": (["work"], None), "read_write": (["work"], "work"),
         "other": (["personal"], "personal")}
# Reads a token outside `work` may still call (they answer with nothing of work); the rest name a work row.
OPEN_READS = {"memory_search", "memory_recall", "evidence_search", "timeline", "status", "memory_list"}


def inspector() -> list[str]:
    """How to run the Inspector: its cached copy straight with node when npx has fetched it (npx itself adds
    seconds to every call), else through npx."""
    for pkg in sorted(Path.home().glob(".npm/_npx/*/node_modules/@modelcontextprotocol/inspector/package.json")):
        try:
            meta = json.loads(pkg.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if meta.get("version") == INSPECTOR.rsplit("@", 1)[1] and shutil.which("node"):
            return ["node", str(pkg.parent / meta["bin"]["mcp-inspector"])]
    return ["npx", "-y", INSPECTOR]


def seed(home: Path) -> tuple[Any, dict]:
    sys.path.insert(0, str(ROOT))
    from memory.graph.relations import add_relation
    from memory.store.core import Store

    store = Store(home)
    ids = {
        "a": store.add_memory("The billing service retries webhooks three times", scope="work")["id"],
        "b": store.add_memory("Webhook retries were added because Stripe drops events", scope="work")["id"],
        "c": store.add_memory("Webhook retries used to be disabled on Fridays", scope="work")["id"],
        "evd": store.add_evidence("billing webhooks failing with 502", app="kitty", window="logs", scope="work")["id"],
        "vault": store.add_memory("billing api key", type="vault", scope="work", value="sk-very-secret")["id"],
        "personal": store.add_memory(f"My {MARK} passport is in the drawer", scope="personal")["id"],
        "pev": store.add_evidence(f"{MARK} chat about holidays", app="signal-desktop", scope="personal")["id"],
    }
    ids["rel"] = add_relation(store, ids["a"], "BECAUSE", ids["b"], actor="person")["id"]
    (home / "config.toml").write_text('[extraction]\nengine = "rules"\n', encoding="utf-8")  # no LLM here
    return store, ids


def tokens(home: Path) -> dict[str, str]:
    """One token per role. "none" reads no scope at all: the CLI refuses to make one, so it is written here."""
    from dataclasses import asdict

    from memory.mcp.auth import TOKEN_PREFIX, TokenRecord, TokenStore, hash_token

    store = TokenStore(home)
    out = {role: store.add(role.replace("_", "-"), read, write)[0]
           for role, (read, write) in ROLES.items() if read}
    out["none"] = TOKEN_PREFIX + os.urandom(24).hex()
    raw = json.loads(store.path.read_text(encoding="utf-8"))
    raw["tokens"].append(asdict(TokenRecord("nobody", hash_token(out["none"]), [], None)))
    store.path.write_text(json.dumps(raw), encoding="utf-8")
    return out


def read_calls(ids: dict) -> dict:
    return {
        "memory_search": {"query": "billing webhooks retries"},
        "memory_recall": {"query": "billing webhooks retries", "budget_tokens": 1000},
        "memory_get": {"id": ids["a"]},
        "evidence_search": {"query": "billing webhooks failing"},
        "evidence_get": {"id": ids["evd"]},
        "timeline": {"since": "2000-01-01T00:00:00Z"},
        "status": {},
        "memory_related": {"id": ids["a"]},
        "memory_chain": {"id": ids["a"]},
        "memory_list": {"types": ["semantic"]},
    }


def write_calls(ids: dict) -> dict:
    return {
        "memory_add": {"text": "Billing alerts go to #billing-oncall", "scope": "work"},
        "memory_update": {"id": ids["a"], "text": "The billing service retries webhooks five times"},
        "memory_forget": {"ids": [ids["c"]]},
        "memory_relate": {"src": ids["b"], "relation": "TRIGGERED", "dst": ids["a"]},
        "memory_reinforce": {"ids": [ids["a"]]},
        "evidence_forget": {"app": "kitty", "scope": "work", "confirm": True},
        "evidence_add": {"text": f"billing deploy key {AWS_KEY}", "app": "kitty", "scope": "work"},
        "relation_remove": {"id": ids["rel"]},
        "consolidate": {"dry_run": False, "scope": "work"},
    }


def snapshot(store: Any) -> dict:
    """Every table's row count and version (the store sees the server's writes): any write moves one of them."""
    return store.tables_state()


def tool_args(args: dict) -> list[str]:
    # The Inspector CLI parses each value as JSON when it can (lists, booleans, numbers), else keeps the string.
    return ["--tool-arg", *(f"{k}={json.dumps(v) if not isinstance(v, str) else v}" for k, v in args.items())] \
        if args else []


class Client:
    """Runs the Inspector CLI against one transport with one token."""

    def __init__(self, transport: str, home: Path, token: str | None, url: str | None, workdir: Path) -> None:
        self.transport, self.home, self.token, self.url = transport, home, token, url
        if transport == "stdio":
            cfg = subprocess.run([sys.executable, "-m", "desktop.cli.main", "mcp", "config", "claude-desktop",
                                  "--token", token], cwd=ROOT, env={**os.environ, "MIRADOR_HOME": str(home)},
                                 capture_output=True, text=True, check=True).stdout
            self.config = workdir / f"claude_desktop_{abs(hash(token))}.json"
            self.config.write_text(cfg, encoding="utf-8")  # exactly what the person pastes into Claude Desktop

    def base(self) -> list[str]:
        if self.transport == "http":
            head = ["--header", f"Authorization: Bearer {self.token}"] if self.token else []
            return [*inspector(), "--cli", self.url, "--transport", "http", *head]
        # Claude Desktop starts the server with an almost empty environment: only HOME and PATH here, plus the
        # config's own "env" (MIRADOR_HOME, MIRADOR_MCP_TOKEN), which the Inspector passes to the child.
        minimal = ["env", "-i", f"HOME={os.environ.get('HOME', '/root')}", "PATH=/usr/local/bin:/usr/bin:/bin"]
        return [*minimal, *inspector(), "--cli", "--config", str(self.config), "--server", "mirador"]

    def run(self, *args: str) -> tuple[int, str]:
        p = subprocess.run(self.base() + list(args), capture_output=True, text=True, timeout=600)
        return p.returncode, p.stdout + p.stderr

    def call(self, tool: str, args: dict) -> dict:
        code, out = self.run("--method", "tools/call", "--tool-name", tool, *tool_args(args))
        try:
            doc = json.loads(out[out.index("{"):]) if code == 0 else None
        except ValueError:
            doc = None
        allowed = code == 0 and doc is not None and not doc.get("isError")
        text = json.dumps(doc) if doc is not None else out
        return {"allowed": allowed, "text": text}


def leaks(role: str, tool: str, args: dict, text: str, ids: dict) -> list[str]:
    """Rows of scopes the role may not read that show in an answer (what the client sent is not a leak)."""
    sent_values = [v for v in args.values() if isinstance(v, str)]
    sent_values += [x for v in args.values() if isinstance(v, list) for x in v if isinstance(x, str)]
    for sent in sorted(sent_values, key=len, reverse=True):
        text = text.replace(sent, "")
    foreign = [MARK, ids["personal"], ids["pev"], "signal-desktop", "sk-very-secret"]
    if role in ("none", "other"):
        foreign = ([ids[k] for k in ("a", "b", "c", "evd", "vault")] + ["billing", "kitty"]) if role == "other" \
            else foreign + [ids[k] for k in ("a", "b", "c", "evd", "vault")] + ["billing", "kitty"]
    return [s for s in foreign if s in text]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def matrix(transport: str) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"mirador-inspector-{transport}-") as tmp:
        home = Path(tmp) / "home"
        store, ids = seed(home)
        toks = tokens(home)
        server = None
        url = None
        if transport == "http":
            port = free_port()
            url = f"http://127.0.0.1:{port}/mcp"
            log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115 (closed below)
            server = subprocess.Popen([sys.executable, "-m", "desktop.cli.main", "serve", "--port", str(port)],
                                      cwd=ROOT, env={**os.environ, "MIRADOR_HOME": str(home)}, stdout=log,
                                      stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 300
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if server.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"mirador serve did not start: {(Path(tmp) / 'serve.log').read_text()}") from None
                    time.sleep(0.2)
        try:
            clients = {role: Client(transport, home, toks[role], url, Path(tmp)) for role in ROLES}
            code, listed = clients["read_write"].run("--method", "tools/list")
            names = sorted(t["name"] for t in json.loads(listed[listed.index("{"):])["tools"]) if code == 0 else []
            reads, writes = read_calls(ids), write_calls(ids)
            missing = sorted(set(names) - set(reads) - set(writes))
            calls, mismatches = 0, []

            def check(role, tool, args, expect_allowed):
                nonlocal calls
                r = clients[role].call(tool, args)
                calls += 1
                print(f"{transport} {role} {tool}: {'allowed' if r['allowed'] else 'refused'}", file=sys.stderr,
                      flush=True)
                problems = []
                if r["allowed"] != expect_allowed:
                    problems.append(f"{'allowed' if r['allowed'] else 'refused'}, expected "
                                    f"{'allowed' if expect_allowed else 'refused'}")
                if leaked := leaks(role, tool, args, r["text"], ids):
                    problems.append(f"shows {leaked}")
                if problems:
                    mismatches.append({"role": role, "tool": tool, "problems": problems, "answer": r["text"][:300]})

            for role in ROLES:
                for tool, args in reads.items():
                    check(role, tool, args, role in ("read_only", "read_write") or tool in OPEN_READS)
            before = snapshot(store)
            for role in ("none", "read_only", "other"):
                for tool, args in writes.items():
                    check(role, tool, args, False)
            changed = snapshot(store) != before
            if changed:
                mismatches.append({"role": "refused writers", "tool": "*", "problems": ["a refused write changed "
                                                                                         "a table"]})
            for tool, args in writes.items():
                check("read_write", tool, args, True)
            if transport == "http":  # and no token at all: the transport refuses before any tool runs
                no_token = Client("http", home, None, url, Path(tmp))
                code, out = no_token.run("--method", "tools/list")
                calls += 1
                if code == 0 or "invalid_token" not in out:
                    mismatches.append({"role": "no token", "tool": "tools/list", "problems": ["not refused"],
                                       "answer": out[:300]})
        finally:
            if server is not None:
                server.send_signal(signal.SIGTERM)
                try:
                    server.wait(60)
                except subprocess.TimeoutExpired:
                    server.kill()
                log.close()
        return {"tools": len(names), "tools_not_in_matrix": missing, "calls": calls, "mismatches": len(mismatches),
                "details": mismatches, "refused_writes_changed_nothing": not changed}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transport", choices=["http", "stdio", "both"], default="both")
    a = ap.parse_args()
    if not shutil.which("npx"):
        print(json.dumps({"benchmark": "inspector_matrix", "skipped": "node/npx not installed"}))
        return 0
    out: dict = {"benchmark": "inspector_matrix", "inspector": INSPECTOR, "roles": list(ROLES),
                 "load_before": [round(x, 2) for x in os.getloadavg()]}
    t0 = time.monotonic()
    for transport in (["http", "stdio"] if a.transport == "both" else [a.transport]):
        out[transport] = matrix(transport)
    out["mismatches"] = sum(out[t]["mismatches"] for t in ("http", "stdio") if t in out)
    out["seconds"] = round(time.monotonic() - t0)
    print(json.dumps(out, indent=2))
    return 1 if out["mismatches"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
