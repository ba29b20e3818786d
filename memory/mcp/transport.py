"""The two ways a message reaches the server, each passing it through memory/mcp/limits.py first.

HTTP: `MessageLimits` wraps the SDK's streamable HTTP app and reads a POST's body (at most the limit)
before the SDK's json.loads does. stdio: `stdio_streams` is the SDK's stdio loop (mcp.server.stdio)
with the same check per line, and an unreadable line answered with a JSON-RPC error instead of
nothing. A message that passes goes on exactly as the client sent it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

from memory.mcp.limits import MAX_MESSAGE_BYTES, PARSE_ERROR, Refusal, message_id, plain

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

Screen = Callable[[bytes | str], Refusal | None]


class MessageLimits:
    """ASGI wrapper: a POST whose body `screen` refuses gets its JSON-RPC refusal; any other request, and
    every request without a valid token, goes to the app with its body as sent (strangers get the SDK's
    401, which parses no body)."""

    def __init__(self, app: ASGIApp, screen: Screen, verifier: TokenVerifier) -> None:
        self.app, self.screen, self.verifier = app, screen, verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        messages, body = await _read_body(receive, MAX_MESSAGE_BYTES)
        # A plain body (nearly all) goes straight on. Any other is looked at closely only for a caller with a
        # valid token: a stranger's goes on too, to the SDK's 401. A body cut short is past the limit: too large.
        refusal = None if plain(body) or not await self._authenticated(scope) else self.screen(body)
        if refusal is not None:
            log.info("refused an MCP message (HTTP %s): %s", refusal.status, refusal.reply.get("error")
                     or refusal.reply["result"]["content"][0]["text"])
            data = refusal.body()
            await send({"type": "http.response.start", "status": refusal.status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})
            return None

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    async def _authenticated(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        return scheme.lower() == "bearer" and await self.verifier.verify_token(token.strip()) is not None


async def _read_body(receive: Receive, limit: int) -> tuple[list[Message], bytes]:
    """The ASGI messages read (to hand on unchanged) and the body; stops once the body passes `limit`,
    so a huge body is never held whole."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages, b"".join(chunks)
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit or not message.get("more_body", False):
            return messages, b"".join(chunks)


@asynccontextmanager
async def stdio_streams(stdin: Any, stdout: Any, screen: Screen) -> AsyncIterator[tuple[Any, Any]]:
    """(read, write) streams for `Server.run` over line-delimited JSON-RPC on stdin/stdout (async files)."""
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage | str](0)
    replies = write_stream.clone()  # refusals go out through the one writer, so lines never interleave

    async def reader() -> None:
        async with read_writer, replies:
            async for line in stdin:
                if not line.strip():  # a blank line carries no message to answer
                    continue
                refusal = screen(line)
                if refusal is None:
                    try:
                        message = jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValidationError as e:
                        refusal = _unreadable(line, e)
                    else:
                        await read_writer.send(SessionMessage(message))
                        continue
                log.info("refused an MCP message: %s", refusal.reply.get("error") or refusal.reply.get("result"))
                await replies.send(refusal.body().decode("utf-8"))

    async def writer() -> None:
        async with write_reader:
            async for item in write_reader:
                line = item if isinstance(item, str) else item.message.model_dump_json(by_alias=True,
                                                                                       exclude_unset=True)
                await stdout.write(line + "\n")
                await stdout.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        yield read_stream, write_stream


def _unreadable(line: str, e: ValidationError) -> Refusal:
    """A line that is not a JSON-RPC message: say so (the SDK's loop answered nothing, the client waited)."""
    err = e.errors(include_url=False)[0]
    what = "not JSON" if err["type"] == "json_invalid" else "not a JSON-RPC message"
    reason = str(err.get("msg", "")).removeprefix("Invalid JSON: ")
    if err["type"] != "json_invalid" and err.get("loc"):
        reason = ".".join(str(x) for x in err["loc"]) + ": " + reason
    return Refusal(400, {"jsonrpc": "2.0", "id": message_id(line), "error": {
        "code": PARSE_ERROR, "message": f"the line is {what} ({reason}): send one JSON-RPC message per line"}})
