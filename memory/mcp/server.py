"""Mirador's MCP server on the official SDK's public low-level `Server` (mcp 2.x, mcp.server.lowlevel): the
tools of memory/mcp/catalog.py, the core-profile resource, stdio and HTTP. Its handlers are registered as the
constructor's `on_*` callables, each taking the request context and the request's typed params.

Mirador reads each call itself: the arguments are validated by the tool's strict model
(memory/mcp/arguments.py), the body runs, and its result is checked against the tool's result model
(memory/mcp/results.py) and sent as structured content with the same JSON as text. So nothing of the SDK is
patched or reached into: the SDK carries messages, sessions, the HTTP transport and bearer auth.

One Store per process, opened by the lifespan on first use and shared by every session. Tool bodies run in a
few worker threads (LanceDB and the embedder block), so the event loop keeps answering while they work; over
HTTP each call is answered as one JSON response (no event stream). Over HTTP the caller is whoever the bearer
token says; over stdio it is the principal chosen on the command line. Nothing here prints: logs go to stderr
through `logging`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pydantic_core
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from memory.errors import Hint, MiradorError, StorageError
from memory.mcp import tools as T
from memory.mcp.arguments import ArgumentError
from memory.mcp.auth import Principal
from memory.mcp.catalog import TOOLS, ToolSpec
from memory.mcp.limits import Refusal, screen
from memory.mcp.replies import for_model, refusal
from memory.store.io_faults import storage_error
from memory.store.keys import LockedError

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

    from memory.mcp.auth import HostOriginGuard
    from memory.store.core import Store

log = logging.getLogger(__name__)

SERVER_NAME = "mirador"
PROFILE_URI = "mirador://profile/core"
INSTRUCTIONS = (
    "Mirador is the person's local memory: typed memories distilled from what they saw, heard and told you, "
    "plus the raw captured evidence (screen text, transcripts). Start a task with memory_recall; look things "
    "up with memory_search or evidence_search; use timeline for 'what was I doing between X and Y'. Store "
    "durable facts, preferences and procedures with memory_add (short, one fact each). After answering, "
    "call memory_reinforce with the ids of the memories your answer used (tokens with a write scope). Ids start with mem_, "
    "evd_, vlt_ or rel_ (relations); get them from search results. memory_list pages through memories without a "
    "query; evidence_add keeps raw text the person shares (secrets redacted). The core profile is the resource "
    + PROFILE_URI + "."
)
PROFILE = types.Resource(uri=PROFILE_URI, name="core_profile", title="Core profile", mime_type="text/markdown",
                         description="The person's core profile: who they are and how they like to work (core "
                                     "memories in your scopes).")

# Tool bodies run in this many worker threads at once; more calls wait their turn. Python runs one
# thread at a time (the GIL), so on a small machine many runnable threads mostly take turns, every
# call then finishes late, and switching between them costs CPU; a few threads keep the cores busy
# (the store and the embedder release the GIL) and serve calls in arrival order. Tools marked
# queued=False in memory/mcp/catalog.py use anyio's own pool instead.
TOOL_THREADS = 4

NOT_AUTHENTICATED = MiradorError(
    "not authenticated: send the header 'Authorization: Bearer <token>'",
    hint=Hint(mcp="the person creates a token with `mirador mcp token add`"), code="not_authenticated")


# `mirador lock` or the tray's Lock: no tool reads or writes until the person unlocks.
LOCKED = LockedError("Mirador is locked: no memory can be read or written until the person unlocks it",
                hint=Hint(mcp="the person unlocks it with `mirador unlock` or Unlock Mirador… in the tray — tell "
                          "the person"))


@dataclass
class ServerState:
    """What every session shares: the store (opened once) and, outside HTTP, the fixed caller."""

    open_store: Callable[[], Store]
    principal: Principal | None = None
    http: bool = False
    _store: Store | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _limiter: anyio.CapacityLimiter | None = None

    def limiter(self, spec: ToolSpec) -> anyio.CapacityLimiter | None:
        """The worker threads a tool body waits for (None: anyio's default pool)."""
        if not spec.queued:
            return None
        if self._limiter is None:  # created on the event loop's thread, where anyio needs it
            self._limiter = anyio.CapacityLimiter(TOOL_THREADS)
        return self._limiter

    @property
    def store(self) -> Store:
        """The process's Store, opened on first use."""
        with self._lock:
            if self._store is None:
                self._store = self.open_store()
            return self._store

    def expect(self, tool: str, argument: str) -> str | None:
        """What a tool's argument takes, in words (None: no such tool or argument)."""
        spec = TOOLS.get(tool)
        return None if spec is None else spec.arguments.expect(argument)

    def screen(self, raw: bytes | str) -> Refusal | None:
        """memory/mcp/limits.py's check of one raw message, its refusals worded with these tools' arguments."""
        return screen(raw, self.expect)

    def principal_of(self, request: Any) -> Principal:
        """The caller: the verified token of an HTTP request, else the server's fixed principal."""
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

        user = request.scope.get("user") if request is not None and hasattr(request, "scope") else None
        if isinstance(user, AuthenticatedUser):
            return Principal.from_claims(user.access_token.client_id, user.access_token.claims or {})
        if self.http or self.principal is None:
            raise NOT_AUTHENTICATED
        return self.principal


Context = ServerRequestContext[ServerState]


class MiradorServer(Server[ServerState]):
    """The SDK's low-level server with Mirador's tools and resource registered; `state` is what its sessions
    share (HttpServer and `mirador serve` reach the store through it)."""

    def __init__(self, state: ServerState) -> None:
        @asynccontextmanager
        async def lifespan(_server: Server[ServerState]) -> AsyncIterator[ServerState]:
            # Entered once per stdio connection and once for the HTTP app's lifetime; the state (and so the
            # store) is shared by everything it serves.
            await anyio.to_thread.run_sync(lambda: state.store)
            yield state

        # No SDK check of tool arguments runs on this path (the low-level server validates only the request's
        # shape): each tool's strict model checks them, in run_tool.
        super().__init__(SERVER_NAME, version=mirador_version(), instructions=INSTRUCTIONS, lifespan=lifespan,
                         get_tool_input_schema=tool_input_schema,
                         on_list_tools=list_tools, on_call_tool=self.run_tool,
                         on_list_resources=list_resources, on_read_resource=self.read_profile,
                         on_list_resource_templates=no_templates, on_list_prompts=no_prompts)
        self.state = state

    async def run_tool(self, ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        """One tools/call: arguments checked, the body run in a worker thread, the result checked."""
        name = params.name
        spec = TOOLS.get(name)
        if spec is None:
            return types.CallToolResult(content=[types.TextContent(type="text", text=f"Unknown tool: {name}")],
                                        is_error=True)
        state = self.state
        try:
            kwargs = spec.arguments.parse(params.arguments or {})
            p = state.principal_of(ctx.request)
            if state.store.keys.locked:
                raise LOCKED
            body = getattr(T, name)  # looked up per call: a test may stand in a body
            out = await anyio.to_thread.run_sync(lambda: body(state.store, p, **kwargs),
                                                 limiter=state.limiter(spec))
            # A body returns its result model, sent as it was built; anything else (a stand-in's dict) is checked
            # against that model first. exclude_unset: a field the tool did not set is left out, not sent as null.
            result = out if isinstance(out, spec.result) else spec.result.model_validate(out)
            data = result.model_dump(mode="json", by_alias=True, exclude_unset=True)
        except ArgumentError as e:
            return _refused(name, str(e), "invalid_arguments")
        except StorageError as e:
            return _refused(name, _disk_fault(e), e.code)
        except MiradorError as e:
            return _refused(name, for_model(e), e.code)
        except Exception as e:  # nothing a client sends may take the server down; say what to do instead
            fault = storage_error(e, state.store.home)  # a disk fault outside a store write (a read, a lock file)
            if fault is not None:
                log.warning("tool %s: %s", name, fault)
                return _refused(name, _disk_fault(fault), fault.code)
            log.exception("tool %s failed", name)
            return _refused(name, f"internal error in {name} ({type(e).__name__}); it is logged on the server — "
                            "retry once, then call status and tell the person", "internal")
        text = pydantic_core.to_json(data, indent=2).decode()
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=data)

    async def read_profile(self, ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        """The core profile resource (the only one)."""
        uri = params.uri
        try:
            if uri != PROFILE_URI:
                raise MiradorError(f"Unknown resource: {uri}", code="not_found")
            p = self.state.principal_of(ctx.request)
        except MiradorError as e:
            # The JSON-RPC error the SDK sends for a handshake-era handler's exception (code 0, the error's
            # text), on the 2026-07-28 era too (which would say only "Internal server error").
            raise MCPError(code=0, message=str(e)) from None
        text = await anyio.to_thread.run_sync(lambda: T.core_profile(self.state.store, p))
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, text=text,
                                                                             mime_type="text/markdown")])


def _disk_fault(e: StorageError) -> str:
    # The store raises it for a write that did not commit; one that went through is kept and reported as made.
    return (f"{e.message} — tell the person; retry once it is fixed (with the same idempotency_key, if you sent "
            "one, so nothing is stored twice)")


def tool_input_schema(name: str) -> dict[str, Any] | None:
    """A tool's input schema by name (what tools/list shows; None: no such tool). The SDK checks a 2026-07-28
    HTTP call's Mcp-Param-* headers against it; without it, it would run tools/list before every call."""
    spec = TOOLS.get(name)
    return None if spec is None else spec.arguments.schema


async def list_tools(_ctx: Context, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[spec.info for spec in TOOLS.values()])


async def list_resources(_ctx: Context, _params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[PROFILE])


async def no_templates(_ctx: Context, _params: types.PaginatedRequestParams | None) \
        -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(resource_templates=[])


async def no_prompts(_ctx: Context, _params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[])


def _refused(tool: str, text: str, code: str) -> types.CallToolResult:
    return types.CallToolResult.model_validate(refusal(tool, text, code))


def build_server(open_store: Callable[[], Store], principal: Principal | None = None, *,
                 http: bool = False) -> MiradorServer:
    """A server over one store; `principal` fixes the caller for stdio/in-process use."""
    return MiradorServer(ServerState(open_store, principal, http))


def mirador_version() -> str:
    """Mirador's installed version (what serverInfo.version reports)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mirador")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


# ---- transports -------------------------------------------------------------------------------


def open_store_at(home: Path | None) -> Callable[[], Store]:
    """A store opener for a data dir (None = $MIRADOR_HOME / the default)."""
    def _open() -> Store:
        from memory.store.core import Store

        return Store(home)

    return _open


def run_stdio(principal: Principal, home: Path | None = None) -> None:
    """Serve one client over stdin/stdout. Stray output (ours or a C library's) is sent to stderr."""
    import os
    import sys
    from io import TextIOWrapper

    from memory.mcp.transport import stdio_streams

    # The protocol owns a private copy of fd 1; fd 1 itself now points at stderr, so a print or a
    # native library writing to stdout cannot corrupt the JSON-RPC stream.
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    proto_out = anyio.wrap_file(TextIOWrapper(os.fdopen(proto_fd, "wb"), encoding="utf-8"))
    # stdin as the SDK's stdio transport reads it: UTF-8, undecodable bytes replaced
    proto_in = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    server = build_server(open_store_at(home), principal)

    async def main() -> None:
        async with stdio_streams(proto_in, proto_out, server.state.screen) as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


def _is_disconnect(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_disconnect(e) for e in exc.exceptions)
    return isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream))


class ClientGoneFilter(logging.Filter):
    """Drops the SDK's ERROR tracebacks for a client that simply went away (its streams closed under a
    writer, e.g. "Error in standalone SSE writer" / ClosedResourceError): ordinary disconnects, not faults."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and _is_disconnect(exc):
            log.debug("client disconnected: %s (%s)", record.getMessage(), type(exc).__name__)
            return False
        return True


_CLIENT_GONE = ClientGoneFilter()


def quiet_disconnects() -> None:
    """Install ClientGoneFilter on the SDK's streamable HTTP logger (once)."""
    sdk_log = logging.getLogger("mcp.server.streamable_http")
    if _CLIENT_GONE not in sdk_log.filters:
        sdk_log.addFilter(_CLIENT_GONE)


def http_app(home: Path | None = None, port: int = 8765, open_store: Callable[[], Store] | None = None,
             extra_origins: list[str] | tuple[str, ...] = ()) -> tuple[HostOriginGuard, MiradorServer]:
    """The ASGI app for http://127.0.0.1:PORT/mcp: Host/Origin guard → message limits → bearer auth → MCP
    endpoint (the SDK's streamable HTTP session manager, one JSON response per call), and its server."""
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.routing import Route

    from memory.config import data_dir
    from memory.mcp.auth import HostOriginGuard, MiradorTokenVerifier, TokenStore
    from memory.mcp.transport import MessageLimits

    quiet_disconnects()
    home = Path(home) if home else data_dir()
    verifier = MiradorTokenVerifier(TokenStore(home))
    server = build_server(open_store or open_store_at(home), http=True)
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=[f"http://{h}" for h in hosts] + list(extra_origins))
    # json_response: a call's one JSON-RPC response as plain JSON, not an SSE stream (no tool streams
    # progress), which spares both ends the event-stream machinery on every call.
    sessions = StreamableHTTPSessionManager(app=server, json_response=True, security_settings=security)

    async def endpoint(scope: Scope, receive: Receive, send: Send) -> None:
        await sessions.handle_request(scope, receive, send)

    # Every request needs a valid bearer token (401 otherwise); the verified token is the caller (principal_of).
    sdk_app = Starlette(routes=[Route("/mcp", endpoint=RequireAuthMiddleware(endpoint, required_scopes=[]))],
                        middleware=[Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(verifier)),
                                    Middleware(AuthContextMiddleware)],
                        lifespan=lambda _app: sessions.run())
    # Host/Origin first, then the message limits (before the SDK's json.loads), then the SDK: auth, the endpoint.
    app = MessageLimits(sdk_app, server.state.screen, verifier)
    return HostOriginGuard(app, port, extra_origins), server


class HttpServer:
    """uvicorn serving the MCP app on 127.0.0.1 in a background thread (the app's and `serve`'s server)."""

    def __init__(self, home: Path | None = None, port: int = 8765, open_store: Callable[[], Store] | None = None,
                 extra_origins: list[str] | tuple[str, ...] = ()) -> None:
        import uvicorn

        self.port = port
        self.app, self.mcp = http_app(home, port, open_store, extra_origins)
        config = uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning", lifespan="on",
                                access_log=False)
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Where clients connect."""
        return f"http://127.0.0.1:{self.port}/mcp"

    def warm(self) -> None:
        """Open the store and load the embedder now, so the first request is not the slow one."""
        store = self.mcp.state.store
        store.embedder.embed_query("warm up")
        store.tallies.warm()

    def serve_forever(self) -> None:
        """Block serving until stop() or SIGINT/SIGTERM."""
        self.server.run()

    def start(self, timeout: float = 30.0) -> HttpServer:
        """Serve in a daemon thread; returns once the port accepts connections."""
        import time

        self._thread = threading.Thread(target=self.server.run, name="mirador-mcp-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise MiradorError(f"the MCP server did not start on 127.0.0.1:{self.port} — is the port in use? "
                                   "set [mcp] port in config.toml or pass --port")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Ask uvicorn to finish and wait for the thread."""
        self.server.should_exit = True
        if self._thread:
            self._thread.join(timeout=10)

