"""The running service's local door for the `mirador` CLI on the same machine, and the CLI's side of it.

A CLI call is a fresh process: `mirador search` would open the store and load the embedder, while a running
service (`mirador serve`, `mirador service`, the tray app) already has both warm. So the service listens on
127.0.0.1 (a port the system picks) and writes an endpoint file in the data dir: its URL, its pid and a
random secret made anew at each start. The file is the data dir owner's alone (mode 0600, written
atomically), and is removed when the service stops. A CLI call that finds a live one sends its parsed
command there and prints the answer; anything else (no file, a dead pid, a refused connection, a refusal,
an error) and the call runs in-process as before, with the same answer.

The local user is the owner and keeps full access, as in-process: the secret is what proves it, so it is
never logged and never leaves this file and the loopback request. Requests are checked for the Host and
Origin a local client sends (like the MCP routes: a web page cannot reach this by DNS rebinding) and for the
secret (401 otherwise). What a request runs is decided above this package (desktop/cli/via_service.py
registers it with `set_handler`); this module only carries it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from http.server import BaseHTTPRequestHandler

    from memory.store.core import Store

log = logging.getLogger(__name__)

ENDPOINT_FILE = "service-endpoint.json"
ROUTE = "/local/cli"
MAX_BODY = 8 * 1024 * 1024  # a request carries one command line (evidence text included)

# (store, request) -> (HTTP status, answer). Set by desktop.cli.via_service before a service starts.
Handler = Callable[[Any, dict], tuple[int, dict]]
_handler: Handler | None = None


def set_handler(fn: Handler | None) -> None:
    """What the endpoint runs for a request; without one, services start no endpoint."""
    global _handler
    _handler = fn


@dataclass(frozen=True)
class Endpoint:
    """Where a running service listens for this data dir's CLI."""

    url: str
    secret: str
    pid: int

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/", 1)[0])


def endpoint_path(home: Path) -> Path:
    """The endpoint file of a data dir."""
    return Path(home) / ENDPOINT_FILE


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process reuses the pid: not our service
        return False
    except OSError:
        return False
    return True


def read_endpoint(home: Path) -> Endpoint | None:
    """The endpoint of a live service for this data dir, or None (none, stale, or not safely ours)."""
    p = endpoint_path(home)
    try:
        st = os.lstat(p)
    except OSError:
        return None
    # Only a plain file of ours that nobody else can read or change: anything else is ignored.
    if not os.path.isfile(p) or os.path.islink(p) or st.st_mode & 0o077 or (
            hasattr(os, "getuid") and st.st_uid != os.getuid()):
        log.info("ignoring %s: not a private file of this user", p)
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        ep = Endpoint(str(data["url"]), str(data["secret"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        log.info("ignoring %s: unreadable", p)
        return None
    if not ep.url.startswith("http://127.0.0.1:") or not _alive(ep.pid):
        log.info("ignoring %s: its service (pid %s) is gone", p, ep.pid)
        return None
    return ep


def write_endpoint(home: Path, ep: Endpoint) -> None:
    """Write the endpoint file (0600 from creation, replaced atomically)."""
    from memory.store.atomic import write_atomic

    Path(home).mkdir(parents=True, exist_ok=True)
    write_atomic(endpoint_path(home), json.dumps({"url": ep.url, "secret": ep.secret, "pid": ep.pid}), mode=0o600)


def remove_endpoint(home: Path, secret: str) -> None:
    """Remove the endpoint file if it is still this service's (another service may have replaced it)."""
    p = endpoint_path(home)
    try:
        if json.loads(p.read_text(encoding="utf-8")).get("secret") == secret:
            p.unlink()
    except (OSError, ValueError, AttributeError):
        pass


class LocalEndpoint:
    """An HTTP listener on 127.0.0.1 (port chosen by the system) answering ROUTE for one store."""

    def __init__(self, store: Store, handler: Handler, home: Path | None = None) -> None:
        self.store = store
        self.handler = handler
        import secrets

        self.home = Path(home) if home is not None else Path(store.home)
        self.secret = secrets.token_urlsafe(32)
        self._server: Any = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{ROUTE}"

    def start(self) -> LocalEndpoint:
        """Listen, then publish the endpoint file."""
        from http.server import ThreadingHTTPServer

        server = ThreadingHTTPServer(("127.0.0.1", 0), _request_handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="mirador-cli-endpoint", daemon=True)
        self._thread.start()
        write_endpoint(self.home, Endpoint(self.url, self.secret, os.getpid()))
        log.info("CLI endpoint for %s at %s", self.home, self.url)
        return self

    def stop(self) -> None:
        """Withdraw the endpoint file first (new CLI calls go in-process), then stop listening."""
        remove_endpoint(self.home, self.secret)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def start_endpoint(store: Store, home: Path | None = None) -> LocalEndpoint | None:
    """Start the CLI endpoint for a service's store; None (the CLI then works in-process) if it cannot."""
    if _handler is None:
        return None
    try:
        return LocalEndpoint(store, _handler, home).start()
    except Exception:  # the service runs without it: every CLI call simply works in-process
        log.warning("the CLI endpoint did not start; `mirador` commands will work in-process", exc_info=True)
        return None


def _request_handler(ep: LocalEndpoint) -> type[BaseHTTPRequestHandler]:
    import hmac
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class RequestHandler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # request lines only (never headers), and only at debug
            log.debug("cli endpoint: " + format, *args)

        def _answer(self, status: int, doc: dict) -> None:
            body = json.dumps(doc, ensure_ascii=False).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(405, {"error": f"POST to {ROUTE}"})

        def do_POST(self) -> None:
            server = self.server
            assert isinstance(server, HTTPServer)  # LocalEndpoint.start serves it on a ThreadingHTTPServer
            port = server.server_port
            hosts = {f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"}
            origin = self.headers.get("Origin")
            if self.headers.get("Host") not in hosts or (origin and origin not in {f"http://{h}" for h in hosts}):
                log.warning("CLI endpoint refused a request with Host %r Origin %r", self.headers.get("Host"), origin)
            if self.headers.get("Host") not in hosts:
                return self._answer(421, {"error": "Host not allowed: this endpoint answers only 127.0.0.1"})
            if origin and origin not in {f"http://{h}" for h in hosts}:
                return self._answer(403, {"error": "Origin not allowed"})
            auth = self.headers.get("Authorization") or ""
            given = auth[7:] if auth.startswith("Bearer ") else ""
            if not hmac.compare_digest(given.encode("utf-8"), ep.secret.encode("utf-8")):
                log.warning("CLI endpoint refused a request without the right secret")
                return self._answer(401, {"error": "unauthorized: send the secret from the data dir's "
                                                   f"{ENDPOINT_FILE}"})
            if self.path != ROUTE:
                return self._answer(404, {"error": f"no route {self.path}"})
            try:
                size = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                size = -1
            if not 0 < size <= MAX_BODY:
                return self._answer(413 if size > MAX_BODY else 400, {"error": "send one JSON request body"})
            try:
                req = json.loads(self.rfile.read(size))
                if not isinstance(req, dict):
                    raise ValueError("not an object")
            except ValueError as e:
                return self._answer(400, {"error": f"the body is not a JSON object ({e})"})
            try:
                status, doc = ep.handler(ep.store, req)
            except Exception as e:  # the CLI falls back to in-process; the service keeps running
                log.exception("CLI endpoint request failed")
                status, doc = 500, {"error": f"{type(e).__name__}"}
            self._answer(status, doc)

    return RequestHandler


class Unanswered(Exception):
    """The request reached the service but no answer came back: whether it ran is unknown."""


def call(home: Path, request: dict, timeout: float) -> dict | None:
    """POST a request to the live service of `home` and return its answer (status 200).

    None when the service did not run it (no live service, connection refused, a refusal); raises
    Unanswered when the request was sent but no answer came (a write may then have happened).
    """
    ep = read_endpoint(home)
    if ep is None:
        return None
    import socket

    # One request on a plain socket: http.client (with the email and ssl modules it loads) would cost the
    # CLI more start-up time than the answer takes. The service speaks HTTP/1.1 with a Content-Length.
    body = json.dumps(request, ensure_ascii=False).encode("utf-8")
    head = (f"POST {ROUTE} HTTP/1.1\r\nHost: 127.0.0.1:{ep.port}\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {ep.secret}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n")
    try:
        sock = socket.create_connection(("127.0.0.1", ep.port), timeout=timeout)
    except OSError as e:
        log.info("the service did not take the request (%s); working in-process", type(e).__name__)
        return None
    with sock:
        try:
            sock.sendall(head.encode("latin-1") + body)
        except OSError as e:  # nothing arrived whole: the service cannot have run it
            log.info("the service did not take the request (%s); working in-process", type(e).__name__)
            return None
        try:
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except OSError as e:
            raise Unanswered(f"{type(e).__name__}: {e}") from None
    status, doc = _parse_response(b"".join(chunks))
    if status is None:
        raise Unanswered("no complete answer")
    if status != 200:  # refused (401, 409 ...) or failed before running the command
        log.info("the service answered %s; working in-process", status)
        return None
    if not isinstance(doc, dict):
        raise Unanswered("unreadable answer")
    return doc


def _parse_response(raw: bytes) -> tuple[int | None, Any]:
    """(status, JSON body) of a whole HTTP/1.1 response; (None, None) if it is cut short or malformed."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        return None, None
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = headers.get("content-length")
    if length is None or not length.isdigit() or len(body) != int(length):
        return None, None
    try:
        return int(parts[1]), json.loads(body)
    except ValueError:
        return int(parts[1]), None
