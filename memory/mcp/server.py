"""Mirador's MCP server (official `mcp` SDK, FastMCP): tools, the core-profile resource, stdio and HTTP.

One Store per process, opened by the lifespan on first use and shared by every session. Tool
bodies run in a few worker threads (LanceDB and the embedder block), so the event loop keeps
answering while they work; over HTTP each call is answered as one JSON response (no event stream).
Over HTTP the caller is whoever the bearer token says; over stdio it is the principal chosen on the
command line. Nothing here prints: logs go to stderr through `logging`.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.fastmcp.utilities.func_metadata import FuncMetadata
from mcp.types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, ValidationError

from memory.errors import MiradorError, StorageError
from memory.mcp import tools as T
from memory.mcp.auth import Principal
from memory.mcp.limits import Refusal, screen
from memory.store.io_faults import storage_error

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

MemType = Literal["episodic", "semantic", "procedural", "resource", "core", "vault"]
AddType = Literal["episodic", "semantic", "procedural", "resource", "core"]
Source = Literal["screen", "audio", "manual", "import", "mcp"]
SearchTypes = Annotated[list[MemType] | None, Field(max_length=6, description="only these memory types (vault: "
                                                    "secret labels); omit for all")]
# recall never hands out vault entries, so its schema does not offer them (memory_search finds them)
RecallTypes = Annotated[list[AddType] | None, Field(max_length=5, description="only these memory types; omit for all "
                                                    "but vault")]
Query = Annotated[str, Field(min_length=1, max_length=2000, description="words or a question to search for")]

def _id(description: str) -> Any:
    return Annotated[str, Field(min_length=4, max_length=64, description=description)]


MemId = _id("a memory id (mem_…) from memory_search or memory_recall")
GetId = _id("a memory id (mem_…) or vault entry id (vlt_…) from memory_search")
EvdId = _id("an evidence id (evd_…) from evidence_search or timeline")
SrcId = _id("the memory id (mem_…) the edge starts at; it must be in your write scope")
DstId = _id("the memory id (mem_…) the edge points to")
AnyId = _id("a memory (mem_…), evidence (evd_…) or vault entry (vlt_…) id")
RelId = _id("a relation id (rel_…) from memory_related or memory_chain")
ScopeArg = Annotated[str | None, Field(min_length=1, max_length=200, description="narrow to one scope you may read, "
                                       "e.g. work/acme; omit for all your scopes (an empty string is refused)")]
WriteScopeArg = Annotated[str | None, Field(min_length=1, max_length=200, description="the scope to store it in: your "
                                            "write scope (status shows it) or one below it, e.g. work/acme; omit for "
                                            "your write scope (an empty string is refused)")]
Since = Annotated[str | None, Field(max_length=40, description="only items at or after this ISO 8601 time, e.g. "
                                    "2024-05-08T13:56 (local if no zone); omit for no lower bound")]
Until = Annotated[str | None, Field(max_length=40, description="only items before this ISO 8601 time, e.g. "
                                    "2024-05-08T18:00 (local if no zone); omit for no upper bound")]
Names = Annotated[list[Annotated[str, Field(max_length=200)]] | None,
                  Field(max_length=20, description="only these app names, e.g. [\"kitty\", \"firefox\"]; omit for all")]
Details = Annotated[dict[str, Any] | None, Field(max_length=50, description="type-specific fields, e.g. "
                                                 "{\"steps\": [...]} for procedural")]
# Booleans and numbers are pydantic's strict types (StrictBool, StrictInt, StrictFloat): JSON true/false only,
# never "yes", "true" or 1; integers only as JSON integers (not "5" or 5.0); numbers not as strings. In lax
# mode "yes" was true, and evidence_forget {"confirm": "yes"} erased for real.
# tests/memory/test_mcp_strict_input.py walks every tool's arguments.
Limit = Annotated[StrictInt, Field(ge=1, le=50, description="at most this many results")]
Inactive = Annotated[StrictBool, Field(description="also return superseded and rejected memories")]
Confidence = Annotated[StrictFloat, Field(ge=0, le=1, description="how sure you are, 0 to 1")]
Title = Annotated[str | None, Field(max_length=200, description="a short title; optional")]
IdempotencyKey = Annotated[str | None, Field(min_length=1, max_length=200, description="a key you make once for "
                                             "this write (e.g. a UUID) and send again with every retry of it: a "
                                             "retry returns the first call's result and stores nothing twice; "
                                             "optional")]

# Tool bodies run in this many worker threads at once; more calls wait their turn. Python runs one
# thread at a time (the GIL), so on a small machine many runnable threads mostly take turns, every
# call then finishes late, and switching between them costs CPU; a few threads keep the cores busy
# (the store and the embedder release the GIL) and serve calls in arrival order.
TOOL_THREADS = 4
# Not queued (anyio's own pool): tools that answer from kept counts or one row by id, so a queue of
# searches does not hold them up, and consolidate, which may run a local LLM for minutes.
UNQUEUED_TOOLS = (T.status, T.memory_get, T.evidence_get, T.consolidate)

READ = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
ERASE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


@dataclass
class ServerState:
    """What every session shares: the store (opened once) and, outside HTTP, the fixed caller."""

    open_store: Callable[[], Any]
    principal: Principal | None = None
    http: bool = False
    _store: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _limiter: Any = None
    schemas: dict[str, dict] = field(default_factory=dict)  # each tool's input schema, as clients see it

    def limiter(self, fn: Callable) -> Any:
        """The worker threads a tool body waits for (None: anyio's default pool)."""
        if fn in UNQUEUED_TOOLS:
            return None
        if self._limiter is None:  # created on the event loop's thread, where anyio needs it
            self._limiter = anyio.CapacityLimiter(TOOL_THREADS)
        return self._limiter

    @property
    def store(self):
        """The process's Store, opened on first use."""
        with self._lock:
            if self._store is None:
                self._store = self.open_store()
            return self._store

    def expect(self, tool: str, argument: str) -> str | None:
        """What a tool's argument takes, in words (None: no such tool or argument)."""
        prop = self.schemas.get(tool, {}).get("properties", {}).get(argument)
        return None if prop is None else _expected(prop)

    def screen(self, raw: bytes | str) -> Refusal | None:
        """memory/mcp/limits.py's check of one raw message, its refusals worded with these tools' arguments."""
        return screen(raw, self.expect)


def principal_of(ctx: Context, state: ServerState) -> Principal:
    """The caller of this request: the verified token over HTTP, else the server's fixed principal."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    request = ctx.request_context.request
    user = request.scope.get("user") if request is not None and hasattr(request, "scope") else None
    if isinstance(user, AuthenticatedUser):
        return Principal.from_claims(user.access_token.client_id, user.access_token.claims or {})
    if state.http or state.principal is None:
        raise ToolError("not authenticated: send the header 'Authorization: Bearer <token>' "
                        "(the person creates one with `mirador mcp token add`)")
    return state.principal


async def _call(ctx: Context, fn: Callable, **kw) -> Any:
    state: ServerState = ctx.request_context.lifespan_context
    p = principal_of(ctx, state)
    if state.store.keys.locked:  # `mirador lock` or the tray's Lock: no tool reads or writes until unlocked
        raise ToolError("Mirador is locked: the person unlocks it with `mirador unlock` or Unlock Mirador… in "
                        "the tray; until then no memory can be read or written — tell the person")
    try:
        return await anyio.to_thread.run_sync(lambda: fn(state.store, p, **kw), limiter=state.limiter(fn))
    except StorageError as e:
        raise ToolError(_disk_fault(e)) from None
    except MiradorError as e:
        raise ToolError(T.for_model(str(e))) from None
    except Exception as e:  # nothing a client sends may take the server down; say what to do instead
        fault = storage_error(e, state.store.home)  # a disk fault outside a store write (a read, a lock file)
        if fault is not None:
            log.warning("tool %s: %s", fn.__name__, fault)
            raise ToolError(_disk_fault(fault)) from None
        log.exception("tool %s failed", fn.__name__)
        raise ToolError(f"internal error in {fn.__name__} ({type(e).__name__}); it is logged on the server — "
                        "retry once, then call status and tell the person") from None


def _disk_fault(e: StorageError) -> str:
    # The store raises it for a write that did not commit; one that went through is kept and reported as made.
    return (f"{e} — tell the person; retry once it is fixed (with the same idempotency_key, if you sent one, so "
            "nothing is stored twice)")


def build_server(open_store: Callable[[], Any], principal: Principal | None = None, *, http: bool = False,
                 token_verifier=None, port: int = 8765) -> FastMCP:
    """A FastMCP server over one store; `principal` fixes the caller for stdio/in-process use."""
    state = ServerState(open_store, principal, http)

    @asynccontextmanager
    async def lifespan(_app: FastMCP) -> AsyncIterator[ServerState]:
        # Runs once per session; the state (and so the store) is shared by all of them.
        await anyio.to_thread.run_sync(lambda: state.store)
        yield state

    kw: dict[str, Any] = {}
    if token_verifier is not None:
        from mcp.server.auth.settings import AuthSettings

        kw = dict(token_verifier=token_verifier,
                  auth=AuthSettings(issuer_url=f"http://127.0.0.1:{port}", resource_server_url=None))
    # json_response: a call's one JSON-RPC response as plain JSON, not an SSE stream (no tool streams
    # progress), which spares both ends the event-stream machinery on every call.
    mcp = FastMCP(SERVER_NAME, instructions=INSTRUCTIONS, lifespan=lifespan, host="127.0.0.1", port=port,
                  json_response=True, log_level="WARNING", **kw)
    mcp._mcp_server.version = mirador_version()  # else serverInfo.version is the SDK's own version
    _check_output_schemas_once()
    _register_tools(mcp)
    _register_resources(mcp)
    for tool in mcp._tool_manager.list_tools():  # docstrings carry code indentation; models get clean text
        tool.description = inspect.cleandoc(tool.description or "")
        _strict_arguments(tool)
        state.schemas[tool.name] = tool.parameters
    mcp.state = state  # type: ignore[attr-defined]  # the app reaches the shared store through it
    return mcp


def mirador_version() -> str:
    """Mirador's installed version (what serverInfo.version reports)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mirador")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


class _StrictMetadata(FuncMetadata):
    """Validates a call's arguments itself, so a wrong one gets one line naming it and what to send
    (pydantic's own text is several lines with links to its docs). The arguments are validated once
    and the validated values passed on (the SDK's method would validate them a second time)."""

    async def call_fn_with_arg_validation(self, fn, fn_is_async, arguments_to_validate, arguments_to_pass_directly):
        try:
            arguments = self.pre_parse_json(arguments_to_validate)
        except (RecursionError, ValueError):
            # A string argument holding JSON too deep or a number too long to read (the SDK's pre-parse, for
            # clients that send a list as a JSON string, catches only syntax errors): validate it as sent,
            # and the strict types refuse the string with the usual one line.
            arguments = arguments_to_validate
        try:
            parsed = self.arg_model.model_validate(arguments)
        except ValidationError as e:
            raise ToolError(argument_error(e, self.arg_model.model_json_schema())) from None
        kwargs = parsed.model_dump_one_level() | (arguments_to_pass_directly or {})
        return await fn(**kwargs) if fn_is_async else fn(**kwargs)


class _SchemaCheckedOnce:
    """Stands in for the `jsonschema` module in the SDK's low-level server, which validates every tool
    result with `jsonschema.validate`: that checks the schema itself against the JSON Schema
    metaschema on every call, the costliest step of a small call. Here each schema is checked once and
    its validator kept; every result is still validated against it, with the same error raised."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self._validator = functools.lru_cache(maxsize=256)(self._make)

    def _make(self, key: str) -> Any:
        schema = json.loads(key)
        cls = self._module.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)

    def validate(self, instance: Any, schema: Any, *args: Any, **kw: Any) -> None:
        """jsonschema.validate(instance, schema), its schema check and validator built once per schema."""
        if args or kw:  # a call this stand-in does not know: the real thing
            return self._module.validate(instance, schema, *args, **kw)
        validator = self._validator(json.dumps(schema, sort_keys=True))
        error = self._module.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error
        return None

    def __getattr__(self, name: str) -> Any:  # ValidationError, SchemaError, ...: the module's own
        return getattr(self._module, name)


def _check_output_schemas_once() -> None:
    import jsonschema  # type: ignore[import-untyped]
    from mcp.server.lowlevel import server as lowlevel

    if getattr(lowlevel, "jsonschema", None) is jsonschema:
        lowlevel.jsonschema = _SchemaCheckedOnce(jsonschema)


def _strict_arguments(tool) -> None:
    """Refuse unknown arguments (a misspelt one would otherwise be dropped silently) and word errors for a model."""
    base = tool.fn_metadata.arg_model
    strict = type(base.__name__, (base,), {"model_config": ConfigDict(**base.model_config, extra="forbid"),
                                           "__module__": base.__module__})
    meta = tool.fn_metadata
    tool.fn_metadata = _StrictMetadata(arg_model=strict, output_schema=meta.output_schema,
                                       output_model=meta.output_model, wrap_output=meta.wrap_output)
    tool.parameters = strict.model_json_schema(by_alias=True)


def argument_error(e: ValidationError, schema: dict) -> str:
    """One line: which argument was wrong, why, and what to send instead."""
    props = schema.get("properties", {})
    err = e.errors(include_url=False)[0]
    name = ".".join(str(x) for x in err.get("loc", ())) or "arguments"
    top = str(err["loc"][0]) if err.get("loc") else ""
    if err["type"] == "extra_forbidden":
        return f"unknown argument {top!r}: this tool takes only {', '.join(props) or 'no arguments'}"
    if err["type"] == "missing":
        return f"missing argument {top!r}: send {_expected(props.get(top, {}))}"
    got = json.dumps(err.get("input"), default=str)
    got = got if len(got) <= 60 else got[:57] + "..."
    msg = err.get("msg", "invalid value").rstrip(".")
    return f"argument {name!r} is wrong ({msg}; got {got}): send {_expected(props.get(top, {}))}"


def _expected(prop: dict) -> str:
    desc = prop.get("description")
    kinds = [prop, *prop.get("anyOf", [])]
    parts = []
    for k in kinds:
        if "enum" in k:
            parts.append("one of " + ", ".join(json.dumps(v) for v in k["enum"]))
        elif k.get("type") == "array" and "enum" in k.get("items", {}):
            parts.append("a list of " + ", ".join(json.dumps(v) for v in k["items"]["enum"]))
        elif k.get("type") in ("integer", "number"):
            lo, hi = k.get("minimum"), k.get("maximum")
            parts.append(f"a{'n integer' if k['type'] == 'integer' else ' number'}"
                         + (f" from {lo} to {hi}" if lo is not None and hi is not None else ""))
        elif k.get("type") == "string":
            n = k.get("maxLength")
            parts.append("a string" + (f" of {k.get('minLength', 0)}-{n} characters" if n else ""))
        elif k.get("type") == "array":
            n = k.get("maxItems")
            parts.append("a list" + (f" of at most {n} items" if n else ""))
        elif k.get("type") == "boolean":
            parts.append("true or false")
        elif k.get("type") == "object":
            n = k.get("maxProperties")
            parts.append("an object" + (f" of at most {n} fields" if n else ""))
    what = " or ".join(dict.fromkeys(parts)) or "a valid value"
    return f"{what} ({desc})" if desc else what


def _register_tools(mcp: FastMCP) -> None:
    _register_memory_reads(mcp)
    _register_memory_writes(mcp)
    _register_evidence_tools(mcp)
    _register_relation_tools(mcp)
    _register_peer_tools(mcp)


def _register_memory_reads(mcp: FastMCP) -> None:
    @mcp.tool(annotations=READ)
    async def memory_search(ctx: Context, query: Query, types: SearchTypes = None, scope: ScopeArg = None,
                            since: Since = None, until: Until = None, include_inactive: Inactive = False,
                            limit: Limit = 10) -> dict[str, Any]:
        """Search the person's memories (facts, preferences, procedures, events, resources) by meaning and words.

        Use it to answer "what do I know about X" or to find an id before memory_get, memory_update or
        memory_forget. Filter by types, a scope, or a time range (since/until, ISO) on last change.
        include_inactive also returns superseded and rejected memories.
        """
        return await _call(ctx, T.memory_search, query=query, types=types, scope=scope, since=since, until=until,
                           include_inactive=include_inactive, limit=limit)

    @mcp.tool(annotations=READ)
    async def memory_recall(ctx: Context, query: Query,
                            budget_tokens: Annotated[StrictInt, Field(ge=50, le=8000, description="the most tokens the "
                                                                "returned text may use")] = 1000,
                            types: RecallTypes = None, scope: ScopeArg = None,
                            include_evidence: Annotated[StrictBool, Field(description="also include captured evidence, "
                                                                    "not only memories")] = True) -> dict[str, Any]:
        """Get ready-to-use context for a task: the most relevant memories (and evidence) within a token budget.

        Call this first when starting a task or answering a question about the person, their projects or
        preferences. Returns one text block to read plus the items (with ids) it was built from.
        """
        return await _call(ctx, T.memory_recall, query=query, budget_tokens=budget_tokens, types=types, scope=scope,
                           include_evidence=include_evidence)

    @mcp.tool(annotations=READ)
    async def memory_get(ctx: Context, id: GetId) -> dict[str, Any]:
        """Read every field of one memory (mem_…) or vault entry (vlt_…): details, status, provenance evidence ids.

        Use after memory_search/memory_recall when you need the full record or its evidence ids.
        """
        return await _call(ctx, T.memory_get, id=id)


def _register_memory_writes(mcp: FastMCP) -> None:
    @mcp.tool(annotations=WRITE)
    async def memory_add(ctx: Context, text: Annotated[str, Field(min_length=1, max_length=10_000, description="the "
                                                                  "fact, preference or procedure, short and "
                                                                  "self-contained")],
                         type: Annotated[AddType, Field(description="semantic (fact), procedural, episodic, resource "
                                                        "or core")] = "semantic",
                         title: Title = None, details: Details = None, scope: WriteScopeArg = None,
                         status: Annotated[Literal["active", "candidate"], Field(description="candidate if the person "
                                                                                 "has not confirmed it")] = "active",
                         confidence: Confidence = 0.8, idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
        """Remember something durable the person told you or that you learned: one fact, preference or procedure.

        Use when the person says "remember…", states a preference, or you learn a stable fact about their
        work. Keep text short and self-contained. Types: semantic (fact), procedural (how to do something;
        details.steps), episodic (an event), resource (a document/link; details.uri), core (profile).
        Search first to avoid duplicates; to change an existing memory use memory_update. If a call fails or
        times out, retry it with the same idempotency_key: it is then stored once.
        """
        return await _call(ctx, T.memory_add, text=text, type=type, title=title, details=details, scope=scope,
                           status=status, confidence=confidence, idempotency_key=idempotency_key)

    @mcp.tool(annotations=WRITE)
    async def memory_update(ctx: Context, id: MemId,
                            text: Annotated[str | None, Field(max_length=10_000, description="the corrected text; "
                                                              "omit to keep it")] = None,
                            title: Annotated[str | None, Field(max_length=200, description="a new title; omit to "
                                                               "keep it")] = None,
                            details: Details = None,
                            confidence: Annotated[StrictFloat | None, Field(ge=0, le=1, description="a new "
                                                                            "confidence, 0 to 1; omit to keep it")
                                                  ] = None,
                            status: Annotated[Literal["active", "candidate", "rejected", "superseded"] | None,
                                              Field(description="a new status; omit to keep it")] = None
                            ) -> dict[str, Any]:
        """Correct or confirm an existing memory: new text/title/details/confidence, or a status change.

        Use when a memory is outdated or wrong (status=rejected or superseded), or to confirm a candidate
        (status=active). Memories pinned by the person cannot be changed.
        """
        return await _call(ctx, T.memory_update, id=id, text=text, title=title, details=details,
                           confidence=confidence, status=status)

    @mcp.tool(annotations=ERASE)
    async def memory_forget(ctx: Context, ids: Annotated[list[AnyId], Field(min_length=1, max_length=50,
                                                                        description="the ids to erase")]
                            ) -> dict[str, Any]:
        """Erase memories or evidence for good (no undo). Only when the person explicitly asks to forget them.

        Every id is checked first; if one is unknown or outside your write scope nothing is deleted.
        """
        return await _call(ctx, T.memory_forget, ids=ids)

    @mcp.tool(annotations=ERASE)
    async def evidence_forget(ctx: Context,
                              app: Annotated[str | None, Field(min_length=1, max_length=200, description="erase "
                                                               "evidence captured from this app (as timeline "
                                                               "names it); omit for every app")] = None,
                              since: Since = None, until: Until = None, scope: WriteScopeArg = None,
                              confirm: Annotated[StrictBool, Field(description="false (default): only return what "
                                                                   "would be erased, with counts; true: erase it")
                                                 ] = False
                              ) -> dict[str, Any]:
        """Erase captured evidence by app and/or time range, for good (no undo), with the memories derived only
        from it. Only when the person explicitly asks, e.g. "delete everything from Slack" or "the last hour".

        Give app, since or until (or several). First call without confirm: it returns what would be erased,
        with counts, and changes nothing; tell the person, then call again with confirm=true. Memories that
        also rest on other evidence, or that the person edited, lose these sources and go to review; memories
        the person wrote and vault entries are never touched. Works in your write scope (or one below it);
        if the delete would change a memory outside it, nothing is erased.
        """
        return await _call(ctx, T.evidence_forget, app=app, since=since, until=until, scope=scope, confirm=confirm)

    @mcp.tool(annotations=WRITE)
    async def memory_reinforce(ctx: Context, ids: Annotated[list[MemId], Field(min_length=1, max_length=50,
                                                                           description="the mem_ ids your answer "
                                                                           "used")]
                               ) -> dict[str, Any]:
        """Tell Mirador which memories your answer actually used (mem_ ids from memory_recall/memory_search).

        Call it once after answering, with only the memories you relied on — not everything you were shown.
        Used memories rank higher later; unused ones slowly fade back. It needs a token with a write scope;
        ids outside that scope, unknown or forgotten ones are listed under not_found and nothing is recorded.
        """
        return await _call(ctx, T.memory_reinforce, ids=ids)


def _register_evidence_tools(mcp: FastMCP) -> None:
    @mcp.tool(annotations=READ)
    async def evidence_search(ctx: Context, query: Query, apps: Names = None,
                              sources: Annotated[list[Source] | None, Field(max_length=5, description="only these "
                                                                            "capture sources; omit for all")] = None,
                              scope: ScopeArg = None, since: Since = None, until: Until = None,
                              limit: Limit = 10) -> dict[str, Any]:
        """Search raw captured evidence: screen text (OCR), meeting transcripts, notes — exact words and meaning.

        Use when memories do not have the answer, to find where something was seen ("the error I saw in the
        terminal"), or to check a memory's source. Filter by app name, source, scope or time range.
        """
        return await _call(ctx, T.evidence_search, query=query, apps=apps, sources=sources, scope=scope,
                           since=since, until=until, limit=limit)

    @mcp.tool(annotations=READ)
    async def evidence_get(ctx: Context, id: EvdId,
                           max_chars: Annotated[StrictInt, Field(ge=100, le=100_000, description="cut the text to this "
                                                           "many characters")] = 20_000
                           ) -> dict[str, Any]:
        """Read one captured evidence row (evd_…) in full: text, app, window, time, source."""
        return await _call(ctx, T.evidence_get, id=id, max_chars=max_chars)

    @mcp.tool(annotations=READ)
    async def timeline(ctx: Context,
                       since: Annotated[str | None, Field(min_length=4, max_length=40, description="start, ISO 8601 "
                                                          "(local if no zone), e.g. 2024-05-08T09:00; omit for 24 "
                                                          "hours before until")] = None,
                       until: Annotated[str | None, Field(max_length=40, description="end, ISO 8601; omit for "
                                                          "now")] = None,
                       scope: ScopeArg = None, apps: Names = None,
                       samples_per_app: Annotated[StrictInt, Field(ge=0, le=20, description="sample evidence ids per "
                                                             "app")] = 5) -> dict[str, Any]:
        """What happened between two times (ISO; since defaults to 24 hours before until, until to now).

        Captured activity grouped by app.

        Use for "what was I doing this morning", "summarise yesterday afternoon". Returns per app the count,
        first/last time, main windows and sample evidence ids, plus episodic memories from that span.
        """
        return await _call(ctx, T.timeline, since=since, until=until, scope=scope, apps=apps,
                           samples_per_app=samples_per_app)

    @mcp.tool(annotations=READ)
    async def status(ctx: Context) -> dict[str, Any]:
        """Who you are to Mirador (client name, readable scopes, write scope) and how much memory you can see.

        Call it when a tool says you lack access, or to check that capture is running (last_evidence_at).
        """
        return await _call(ctx, T.status)


RelationName = Literal["BECAUSE", "TRIGGERED", "CONTRADICTS", "UPDATES", "RESOLVES", "MENTIONS"]
Relation = Annotated[RelationName, Field(description="how src relates to dst: src RELATION dst")]
Relations = Annotated[list[RelationName] | None, Field(max_length=6, description="only these relation types; omit for all")]


def _register_relation_tools(mcp: FastMCP) -> None:
    @mcp.tool(annotations=READ)
    async def memory_related(ctx: Context, id: MemId, relations: Relations = None,
                             direction: Annotated[Literal["out", "in", "both"], Field(description="out: edges from "
                                                  "this memory; in: edges to it")] = "both",
                             scope: ScopeArg = None, include_inactive: Inactive = False,
                             limit: Annotated[StrictInt, Field(ge=1, le=100, description="at most this many "
                                                         "edges")] = 20
                             ) -> dict[str, Any]:
        """List a memory's neighbours by relation: why it holds (BECAUSE), what it triggered, fixed or replaced.

        Edges read "src RELATION dst" (a decision BECAUSE its reason; an alert TRIGGERED a rollback; a fix
        RESOLVES a problem; a new value UPDATES an old one; CONTRADICTS; MENTIONS). direction out: this memory
        is src; in: it is dst. include_inactive also returns superseded and rejected neighbours.
        """
        return await _call(ctx, T.memory_related, id=id, relations=relations, direction=direction, scope=scope,
                           include_inactive=include_inactive, limit=limit)

    @mcp.tool(annotations=READ)
    async def memory_chain(ctx: Context, id: MemId,
                           direction: Annotated[Literal["causes", "consequences"], Field(description="causes: why; "
                                                "consequences: what followed")] = "causes",
                           depth: Annotated[StrictInt, Field(ge=1, le=6, description="how many hops to follow")] = 3,
                           relations: Relations = None, scope: ScopeArg = None,
                           include_inactive: Inactive = False) -> dict[str, Any]:
        """Follow a memory's causes ("why was this decided?") or consequences ("what followed?") up to depth hops.

        Follows BECAUSE, TRIGGERED and RESOLVES unless relations says otherwise; each memory appears once,
        so cycles end. Every hop carries its edge and the evidence rows it rests on.
        """
        return await _call(ctx, T.memory_chain, id=id, direction=direction, depth=depth, relations=relations,
                           scope=scope, include_inactive=include_inactive)

    @mcp.tool(annotations=WRITE)
    async def memory_relate(ctx: Context, src: SrcId,
                            relation: Relation, dst: DstId,
                            evidence: Annotated[list[EvdId] | None, Field(max_length=20, description="evd_ ids the "
                                                                          "edge rests on")] = None,
                            confidence: Confidence = 0.8, idempotency_key: IdempotencyKey = None) -> dict[str, Any]:
        """Record how two memories relate, as "src RELATION dst" (e.g. a decision BECAUSE its reason).

        src must be in your write scope and dst readable by you. Adding the same edge again only merges its
        evidence. Use it when the person explains why something was decided or what fixed what.
        """
        return await _call(ctx, T.memory_relate, src=src, relation=relation, dst=dst, evidence=evidence,
                           confidence=confidence)


# ---- evidence_add, memory_list, relation_remove, consolidate: their results have declared schemas --------


class _Out(BaseModel):
    model_config = ConfigDict(extra="allow")  # a field added later still reaches the client


class EvidenceBrief(_Out):
    id: str = Field(description="the new evidence id (evd_…)")
    captured_at: str | None = Field(description="when it was seen or said, ISO 8601 UTC")
    source: str = Field(description="always mcp for evidence added over MCP")
    app: str | None = Field(description="the app it came from")
    window: str | None = Field(description="the window or page title")
    scope: str = Field(description="the scope it is stored in")
    text: str = Field(description="the stored text, secrets replaced by [REDACTED:kind], cut to 400 characters")


class EvidenceAdded(_Out):
    created: EvidenceBrief
    redactions: dict[str, int] = Field(description="secrets replaced before storing, per kind (e.g. aws_key)")
    actor: str = Field(description="who the audit trail records as the writer")
    hint: str
    replayed: bool = Field(False, description="true when an earlier call with this idempotency_key stored it: "
                                              "created is that row, and nothing was stored again")


class MemoryBrief(_Out):
    id: str = Field(description="the memory id (mem_…)")
    type: str
    scope: str
    title: str | None = None
    text: str = Field(description="the memory's text, cut to 400 characters")
    status: str | None = None
    confidence: float | None = None
    updated_at: str | None = Field(None, description="last change, ISO 8601 UTC")
    evidence: int = Field(0, description="how many evidence rows it rests on")


class MemoryPage(_Out):
    scopes: list[str] = Field(description="the scopes listed")
    types: list[str] | None = Field(description="the types listed; null: all but vault")
    status: list[str] = Field(description="the statuses listed")
    results: list[MemoryBrief] = Field(description="most recently changed first, then by id")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null when this is the last")
    hint: str


class RelationRemoved(_Out):
    removed: dict[str, Any] = Field(description="the removed edge: id, src, relation, dst, provenance, confidence")
    actor: str = Field(description="who the audit trail records as the remover")


class PlanStep(_Out):
    kind: str = Field(description="merge, provenance, supersede, decay, crystallise or archive")
    action: str = Field(description="apply (done without asking) or 'propose to the person' (waits for review)")
    scope: str
    reason: str
    target_id: str | None = None
    other_id: str | None = None
    text: str | None = Field(None, description="the text of a memory crystallise would create")


class Consolidation(_Out):
    dry_run: bool = Field(description="true: nothing was written, this is the plan")
    pending_evidence: int = Field(description="evidence rows not yet extracted (in your scopes; after this call "
                                  "when it ran)")
    scopes: list[str] | None = Field(None, description="dry run: the scopes the plan covers")
    would_extract: int | None = Field(None, description="dry run: evidence rows a run would extract now")
    since: str | None = Field(None, description="dry run: changes after this time are consolidated")
    until: str | None = Field(None, description="dry run: up to this time")
    counts: dict[str, int] | None = Field(None, description="dry run: planned steps per kind:action")
    steps: list[PlanStep] | None = Field(None, description="dry run: the planned steps (at most 100)")
    steps_total: int | None = None
    scope: str | None = Field(None, description="run: the write scope it ran in")
    extraction: dict[str, Any] | None = Field(None, description="run: evidence read, memories created, "
                                              "candidates, corroborated, skipped, engines used, memory_ids")
    dream: dict[str, Any] | None = Field(None, description="run: dream steps applied and proposed, with the steps")
    actor: str | None = None
    hint: str


def _register_peer_tools(mcp: FastMCP) -> None:
    @mcp.tool(annotations=WRITE)
    async def evidence_add(ctx: Context,
                           text: Annotated[str, Field(min_length=1, max_length=T.EVIDENCE_MAX_CHARS,
                                                      description="the raw text to keep as evidence: a note, a "
                                                      "transcript, a page's text; secrets in it are redacted")],
                           scope: WriteScopeArg = None,
                           app: Annotated[str | None, Field(max_length=200, description="the app or source it came "
                                                            "from, e.g. slack; omit for this client's name")] = None,
                           window: Annotated[str | None, Field(max_length=500, description="a window, page or "
                                                               "channel title; optional")] = None,
                           captured_at: Annotated[str | None, Field(max_length=40, description="when it was seen or "
                                                                    "said, ISO 8601 (local if no zone); omit for "
                                                                    "now")] = None,
                           idempotency_key: IdempotencyKey = None) -> EvidenceAdded:
        """Keep raw text as evidence (source "mcp"), like captured screen text: searchable at once, and turned
        into memories by extraction later.

        Use for material the person shares that is not one distilled fact (a meeting's notes, a pasted thread);
        for a single durable fact use memory_add. Secrets (keys, tokens, passwords, card numbers) are replaced
        by [REDACTED:kind] before anything is stored. Needs a token with a write scope; stored in that scope
        or the one you name below it. If a call fails or times out, retry it with the same idempotency_key: it
        is then stored once.
        """
        return await _call(ctx, T.evidence_add, text=text, scope=scope, app=app, window=window,
                           captured_at=captured_at, idempotency_key=idempotency_key)

    @mcp.tool(annotations=READ)
    async def memory_list(ctx: Context, scope: ScopeArg = None, types: RecallTypes = None,
                          status: Annotated[list[Literal["active", "candidate", "superseded", "rejected"]] | None,
                                            Field(max_length=4, description="only memories with these statuses; "
                                                  "omit for active and candidate")] = None,
                          limit: Annotated[StrictInt, Field(ge=1, le=100, description="at most this many memories per "
                                                      "page")] = 20,
                          cursor: Annotated[str | None, Field(min_length=1, max_length=500, description="next_cursor "
                                                              "from the previous page (same filters); omit for the "
                                                              "first page")] = None) -> MemoryPage:
        """List the person's memories page by page, most recently changed first: browse without a query.

        Filter by scope, types and status; pass next_cursor back as cursor for the next page (null: no more).
        Use memory_search to find memories about something; this tool is for going through all of them.
        """
        return await _call(ctx, T.memory_list, scope=scope, types=types, status=status, limit=limit, cursor=cursor)

    @mcp.tool(annotations=ERASE)
    async def relation_remove(ctx: Context,
                              id: RelId) -> RelationRemoved:
        """Remove one relation between two memories (rel_… id), e.g. a BECAUSE that turned out wrong.

        The memories stay. Needs a token whose write scope holds the relation's src memory. To record a
        corrected link afterwards call memory_relate.
        """
        return await _call(ctx, T.relation_remove, id=id)

    @mcp.tool(annotations=WRITE)
    async def consolidate(ctx: Context,
                          dry_run: Annotated[StrictBool, Field(description="true: only return the plan (any token); "
                                                         "false: run it (needs a write scope)")] = True,
                          limit: Annotated[StrictInt, Field(ge=1, le=T.CONSOLIDATE_MAX_EVIDENCE, description="at most "
                                                      "this many pending evidence rows to extract in this call")] = 20,
                          scope: Annotated[str | None, Field(min_length=1, max_length=200, description="dry run: "
                                                             "narrow the plan to one scope you may read; run: your "
                                                             "write scope or one below it; omit for all your scopes "
                                                             "(dry run) or your write scope (run)")] = None
                          ) -> Consolidation:
        """Consolidate memory now: extract memories from pending evidence, then a dream pass (merge duplicates,
        supersede stale facts, crystallise repeated patterns).

        dry_run=true (the default) changes nothing and shows the plan for your scopes: pending evidence and
        the dream steps; any token may ask. dry_run=false needs a token with a write scope and works inside
        it only: it extracts up to limit pending evidence rows (call again while pending_evidence > 0) and
        applies the dream steps there. Merges and superseded facts become proposals the person reviews;
        salience decay stays with Mirador's scheduled pass.
        """
        return await _call(ctx, T.consolidate, dry_run=dry_run, limit=limit, scope=scope)


def _register_resources(mcp: FastMCP) -> None:
    @mcp.resource(PROFILE_URI, name="core_profile", title="Core profile", mime_type="text/markdown")
    async def core_profile() -> str:
        """The person's core profile: who they are and how they like to work (core memories in your scopes)."""
        ctx = mcp.get_context()
        state: ServerState = ctx.request_context.lifespan_context
        p = principal_of(ctx, state)
        return await anyio.to_thread.run_sync(lambda: T.core_profile(state.store, p))


# ---- transports -------------------------------------------------------------------------------


def open_store_at(home: Path | None) -> Callable[[], Any]:
    """A store opener for a data dir (None = $MIRADOR_HOME / the default)."""
    def _open():
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
    mcp = build_server(open_store_at(home), principal)

    async def main() -> None:
        async with stdio_streams(proto_in, proto_out, mcp.state.screen) as (read, write):
            server = mcp._mcp_server
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


def http_app(home: Path | None = None, port: int = 8765, open_store: Callable[[], Any] | None = None,
             extra_origins: list[str] | tuple = ()):
    """The ASGI app for http://127.0.0.1:PORT/mcp: Host/Origin guard → message limits → bearer auth → MCP
    endpoint."""
    from mcp.server.transport_security import TransportSecuritySettings

    from memory.config import data_dir
    from memory.mcp.auth import HostOriginGuard, MiradorTokenVerifier, TokenStore
    from memory.mcp.transport import MessageLimits

    quiet_disconnects()
    home = Path(home) if home else data_dir()
    verifier = MiradorTokenVerifier(TokenStore(home))
    mcp = build_server(open_store or open_store_at(home), http=True, token_verifier=verifier, port=port)
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    mcp.settings.transport_security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + list(extra_origins))
    # Host/Origin first, then the message limits (before the SDK's json.loads), then the SDK: auth, the endpoint.
    app = MessageLimits(mcp.streamable_http_app(), mcp.state.screen, verifier)
    return HostOriginGuard(app, port, extra_origins), mcp


class HttpServer:
    """uvicorn serving the MCP app on 127.0.0.1 in a background thread (the app's and `serve`'s server)."""

    def __init__(self, home: Path | None = None, port: int = 8765, open_store: Callable[[], Any] | None = None,
                 extra_origins: list[str] | tuple = ()) -> None:
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

