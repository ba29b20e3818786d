"""MCP client tokens and what each may see: stored hashed, checked per HTTP request, never logged.

A token is 32 random bytes, so a plain SHA-256 is enough to store it (no password stretching
needed: it cannot be guessed from a word list). The file is JSON, mode 0600, in the data dir,
rewritten atomically; the server re-reads it when it changes, so `revoke` takes effect at once.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.errors import Hint, InputError
from memory.scopes import in_scopes, validate_scope
from memory.store.atomic import write_atomic
from memory.store.audit import utcnow
from memory.store.rows import iso

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger(__name__)

TOKENS_FILE = "mcp_tokens.json"
TOKEN_PREFIX = "mir_"
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,39}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling and what they may touch: read scopes (with their sub-scopes), one write scope."""

    name: str
    read: tuple[str, ...]
    write: str | None = None  # None = read-only
    allow_vault: bool = False

    @property
    def actor(self) -> str:
        """The audit actor and memory origin of this client's writes."""
        return f"mcp:{self.name}"

    def can_read(self, scope: str) -> bool:
        """True if a row in this scope is visible to the client."""
        return in_scopes(scope, self.read)

    def claims(self) -> dict[str, Any]:
        """What travels with a verified HTTP request (AccessToken.claims)."""
        return {"read": list(self.read), "write": self.write, "allow_vault": self.allow_vault}

    @classmethod
    def from_claims(cls, name: str, claims: dict[str, Any]) -> Principal:
        """Rebuild a principal from a verified token's claims."""
        return cls(name, tuple(claims.get("read") or ()), claims.get("write"), bool(claims.get("allow_vault")))


def validate_name(name: str) -> str:
    """A client name: short, lowercase, safe to show in the audit log."""
    n = (name or "").strip()
    if not _NAME_RE.match(n):
        raise InputError(f"invalid client name {name!r}: use 1-40 lowercase letters, digits, '.', '_' or '-', "
                         "e.g. claude-code")
    return n


def make_principal(name: str, read: Iterable[str], write: str | None, allow_vault: bool = False) -> Principal:
    """Validate names and scopes; the write scope must be readable too (a client sees what it writes)."""
    read_t = tuple(dict.fromkeys(validate_scope(s) for s in _split(read)))
    if not read_t and write:
        read_t = (validate_scope(write),)
    if not read_t:
        raise InputError("give at least one read scope, e.g. --read work (comma-separated for several)")
    w = validate_scope(write) if write else None
    if w and not in_scopes(w, read_t):
        read_t = read_t + (w,)
    return Principal(validate_name(name), read_t, w, bool(allow_vault))


def _split(scopes: Iterable[str]) -> list[str]:
    out: list[str] = []
    for s in scopes or ():
        out.extend(p.strip() for p in str(s).split(",") if p.strip())
    return out


def hash_token(token: str) -> str:
    """SHA-256 hex of a token: what the file stores."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _now() -> str:
    stamp = iso(utcnow())
    assert stamp is not None  # iso() is None only for None
    return stamp


@dataclass
class TokenRecord:
    """One stored token: its hash and grants, never the token itself."""

    name: str
    sha256: str
    read: list[str]
    write: str | None
    allow_vault: bool = False
    created_at: str = field(default_factory=lambda: _now())

    def principal(self) -> Principal:
        """The grants of this token."""
        return Principal(self.name, tuple(self.read), self.write, self.allow_vault)

    def public(self) -> dict[str, Any]:
        """What `token list` shows (no hash)."""
        d = asdict(self)
        d.pop("sha256")
        return d


class TokenStore:
    """The per-client tokens of one data directory."""

    def __init__(self, home: Path) -> None:
        self.path = Path(home) / TOKENS_FILE
        self._lock = threading.Lock()
        self._cache: tuple[float, int, list[TokenRecord]] | None = None

    def _load(self) -> list[TokenRecord]:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return []
        with self._lock:
            if self._cache and self._cache[:2] == (st.st_mtime, st.st_size):
                return self._cache[2]
            try:
                raw = json.loads(self.path.read_text(encoding="utf-8"))
                records = [TokenRecord(**r) for r in raw.get("tokens", [])]
            except (json.JSONDecodeError, TypeError, AttributeError) as e:
                raise InputError(f"{self.path} is damaged ({e}) — delete it and add the tokens again") from None
            self._cache = (st.st_mtime, st.st_size, records)
            return records

    def _save(self, records: list[TokenRecord]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps({"version": 1, "tokens": [asdict(r) for r in records]}, indent=2).encode("utf-8")
        write_atomic(self.path, data, mode=0o600, fsync=True)
        with self._lock:
            self._cache = None

    def add(self, name: str, read: Iterable[str], write: str | None, allow_vault: bool = False) -> tuple[str, TokenRecord]:
        """Create a token; returns (token, record). The token is shown once and never stored."""
        p = make_principal(name, read, write, allow_vault)
        records = self._load()
        if any(r.name == p.name for r in records):
            raise InputError(f"a token named {p.name!r} exists", hint=Hint(
                cli=f"revoke it first (`mirador mcp token revoke {p.name}`) or pick another name"))
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        rec = TokenRecord(p.name, hash_token(token), list(p.read), p.write, p.allow_vault)
        self._save(records + [rec])
        return token, rec

    def list(self) -> list[TokenRecord]:
        """Every stored token record."""
        return list(self._load())

    def revoke(self, name: str) -> TokenRecord:
        """Delete a token by client name; its next request gets 401."""
        records = self._load()
        keep = [r for r in records if r.name != name]
        if len(keep) == len(records):
            known = ", ".join(r.name for r in records) or "none"
            raise InputError(f"no token named {name!r} (known: {known})", hint=Hint(cli="see `mirador mcp token list`"))
        self._save(keep)
        return next(r for r in records if r.name == name)

    def verify(self, token: str | None) -> TokenRecord | None:
        """The record a presented token belongs to, or None (compared in constant time)."""
        if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        digest = hash_token(token)
        found = None
        for r in self._load():
            if hmac.compare_digest(r.sha256, digest):
                found = r
        return found


class MiradorTokenVerifier:
    """mcp TokenVerifier over the TokenStore: a valid token becomes an AccessToken carrying its grants."""

    def __init__(self, tokens: TokenStore) -> None:
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        """Return an AccessToken for a known token, None otherwise (the SDK answers 401)."""
        from mcp.server.auth.provider import AccessToken

        try:
            rec = self.tokens.verify(token)
        except InputError:
            log.exception("token file unreadable; refusing every token until it is fixed")
            return None
        if rec is None:
            return None
        p = rec.principal()
        scopes = [f"read:{s}" for s in p.read] + ([f"write:{p.write}"] if p.write else [])
        return AccessToken(token=token, client_id=p.name, scopes=scopes, claims=p.claims())


class HostOriginGuard:
    """ASGI wrapper that refuses foreign Host/Origin headers before anything else runs (DNS rebinding).

    The SDK's transport security checks the same inside the MCP endpoint, but only after auth; this
    answers a rebinding page with 421/403 without touching the token verifier at all.
    """

    def __init__(self, app: ASGIApp, port: int, extra_origins: Iterable[str] = ()) -> None:
        self.app = app
        self.hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
        self.origins = {f"http://{h}" for h in self.hosts} | set(extra_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            host, origin = headers.get("host"), headers.get("origin")
            status = 421 if host not in self.hosts else 403 if origin and origin not in self.origins else 0
            if status:
                log.warning("refused request with Host %r Origin %r", host, origin)
                body = b"Host or Origin not allowed: Mirador's MCP endpoint answers only 127.0.0.1/localhost"
                await send({"type": "http.response.start", "status": status,
                            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
