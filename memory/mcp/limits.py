"""What one MCP message may be, checked on its raw text before a JSON parser reads it.

The SDK's transports parse a message first and ask questions later. Python's json module (streamable
HTTP) recurses once per nesting level and cannot read an integer of more than 4,300 digits; pydantic's
parser (stdio) gives up at about 200 levels and at the same digit count. None of these failures is a
JSON syntax error, so the SDK answered them with HTTP 500, or over stdio with nothing at all (the
client waited for ever). `screen` finds them first, without recursing, and words a reply that says
what to send instead. Types and ranges of tool arguments stay with the tools' signatures
(memory/mcp/args.py, memory/mcp/arguments.py); these limits only keep every message readable by the parsers
behind them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.types import PROTOCOL_VERSION_META_KEY

from memory.mcp.replies import refusal

# The SDK's own HTTP body limit (mcp.server.transport_security), kept so that over HTTP this check answers
# first, in JSON; evidence_add's 100,000 characters need well under 1 MiB even with every character escaped.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# Levels of nesting in one message. A tool's arguments sit 3 levels down ({params: {arguments: {...}}}), and no
# argument needs more than a few; 64 stays well below where pydantic's parser (about 200) or the SDK's
# serialisation of a request gives up.
MAX_DEPTH = 64
ARGUMENT_DEPTH = MAX_DEPTH - 3  # what is left to one argument's value
# Python's int() and pydantic's parser refuse integers longer than this (sys.int_info.default_max_str_digits).
MAX_DIGITS = 4300

INVALID_REQUEST = -32600
PARSE_ERROR = -32700

# Strings (escapes included), structural characters and numbers; true/false/null need no token.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\],:]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?')
# Only at the start of a run of digits, so the search stays linear however many long runs a text holds.
_LONG_NUMBER = re.compile(r"(?<!\d)\d{%d}" % (MAX_DIGITS + 1))
_PATH_SHOWN = 6  # path components a message names before "…"


@dataclass(frozen=True)
class Refusal:
    """The answer to a message that is not handed on: an HTTP status and the JSON-RPC reply."""

    status: int
    reply: dict[str, Any]

    def body(self) -> bytes:
        """The reply as the bytes of an HTTP body or a stdio line."""
        return json.dumps(self.reply).encode("utf-8")


@dataclass
class _Found:
    """What the scan learnt of a message before it stopped: its id, method, tool and the first problem."""

    id: str | int | None = None
    method: str | None = None
    tool: str | None = None
    problem: str | None = None  # "deep" or "digits"
    path: list[str] = field(default_factory=list)
    digits: int = 0
    # The request carries the per-request envelope of protocol 2026-07-28 (params._meta names the protocol
    # version; the SDK tells the eras apart the same way), whose results must say their resultType.
    envelope: bool = False


def plain(raw: bytes | str) -> bool:
    """True when the message cannot hit a limit: small enough, UTF-8, a few brackets, no long number. Nearly
    every message is plain, and this costs a few passes in C; `screen` looks closer only at the others."""
    if len(raw) > MAX_MESSAGE_BYTES:
        return False
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return raw.count("{") + raw.count("[") <= MAX_DEPTH and not _LONG_NUMBER.search(raw)


def screen(raw: bytes | str, expect: Callable[[str, str], str | None]) -> Refusal | None:
    """None when the message can be handed to the SDK; else the reply that refuses it.

    `expect(tool, argument)` words what that argument takes (None: no such argument), so a problem inside
    a tool call's arguments is answered as that tool's error, naming the argument and what to send.
    """
    if plain(raw):
        return None
    size = len(raw)
    if size > MAX_MESSAGE_BYTES:
        return _error(413, _oversized_id(raw), INVALID_REQUEST, f"the message is {size:,} bytes; at most {MAX_MESSAGE_BYTES:,} "
                      "are read: send less per call (split a long text over several evidence_add calls)")
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return _error(400, None, PARSE_ERROR, f"the message is not UTF-8 (byte {e.start} cannot be read): "
                          "send the JSON-RPC message encoded as UTF-8")
    found = _scan(raw)
    return None if found.problem is None else _refuse(found, expect)


# A top-level "id" as the last member of a message: where the Python SDK's client puts it.
_ID_LAST = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")\s*}\s*$')
ID_SCAN_BYTES = 64 * 1024


def _oversized_id(raw: bytes | str) -> str | int | None:
    """The id of a message too large to read whole, from its first 64 KiB or its last member: over stdio a reply
    without it matches no request, and the client would wait for its timeout."""
    text = raw if isinstance(raw, str) else raw[:ID_SCAN_BYTES].decode("utf-8", "ignore") + "\n" + \
        raw[-256:].decode("utf-8", "ignore")
    head = _scan(text[:ID_SCAN_BYTES]).id
    if head is not None:
        return head
    last = _ID_LAST.search(text[-256:])
    if last is None:
        return None
    value: str | int = json.loads(last.group(1))
    return value


def message_id(text: str) -> str | int | None:
    """The id of a message that could not be parsed, if its text shows one (for the error reply)."""
    return _scan(text).id


def _scan(text: str) -> _Found:
    """Walk the message's tokens with an explicit stack (no recursion): the first problem, and the id,
    method and tool name wherever they are (a client may put "id" last, after the arguments)."""
    found = _Found()
    objects: list[bool] = []  # for each open container: is it an object (else an array)
    labels: list[str] = []  # for each open container: its key in the parent ("[]" in an array, "" at the top)
    key: str | None = None  # the last key read in the innermost object
    expect_key = False
    over = 0  # levels open beyond MAX_DEPTH: only counted, until the scan is back within the limit
    for m in _TOKEN.finditer(text):
        tok = m.group()
        c = tok[0]
        if over:
            over += 1 if c in "{[" else -1 if c in "}]" else 0
            continue
        if c in "{[":
            label = "" if not objects else (key or "?") if objects[-1] else "[]"
            if len(objects) == MAX_DEPTH:
                if found.problem is None:
                    found.problem, found.path = "deep", labels[1:] + [label]
                over = 1
                continue
            labels.append(label)
            objects.append(c == "{")
            expect_key, key = c == "{", None
        elif c in "}]":
            if objects:
                objects.pop()
                labels.pop()
            expect_key = False
        elif c == ",":
            expect_key = bool(objects) and objects[-1]
        elif c == ":":
            continue
        elif c == '"':
            if expect_key:
                key, expect_key = _string(tok), False
                if key == PROTOCOL_VERSION_META_KEY and len(objects) == 3 and labels[1:] == ["params", "_meta"]:
                    found.envelope = True
            elif len(objects) <= 2 and key in ("id", "method", "name"):
                _note(found, objects, labels, key, tok)
        else:  # a number
            whole = len(tok.lstrip("-").split(".")[0].split("e")[0].split("E")[0])
            if whole > MAX_DIGITS:
                if found.problem is None:
                    found.problem, found.digits = "digits", whole
                    found.path = labels[1:] + ([(key or "?") if objects[-1] else "[]"] if objects else [])
            elif len(objects) == 1 and key == "id" and tok.lstrip("-").isdigit():
                found.id = int(tok)
    return found


def _note(found: _Found, objects: list[bool], labels: list[str], key: str | None, tok: str) -> None:
    """Keep the id, the method and a tool call's tool name when the scan passes them."""
    try:
        value = json.loads(tok)
    except ValueError:  # a broken escape: the parser behind will say so
        return
    if len(objects) == 1 and key == "id":
        found.id = value
    elif len(objects) == 1 and key == "method":
        found.method = value
    elif len(objects) == 2 and labels[1] == "params" and key == "name":
        found.tool = value


def _string(tok: str) -> str:
    if len(tok) > 202:  # a key or name that long is not one we look for; show its start only
        return tok[1:60] + "…"
    try:
        value = json.loads(tok)
    except ValueError:
        return tok[1:-1]
    return value if isinstance(value, str) else tok[1:-1]


def _refuse(found: _Found, expect: Callable[[str, str], str | None]) -> Refusal:
    path = found.path
    where = ".".join(path[:_PATH_SHOWN]) + ("…" if len(path) > _PATH_SHOWN else "") or "the top level"
    argument = path[2] if len(path) > 2 and path[:2] == ["params", "arguments"] else None
    tool = found.tool
    wanted = expect(tool, argument) if tool and argument and found.method == "tools/call" else None
    if tool and wanted is not None and found.id is not None:
        # A tool's error like any other wrong argument (memory/mcp/replies.py): clients show it to the model,
        # and the session goes on.
        if found.problem == "deep":
            text = f"argument {argument!r} is nested deeper than {ARGUMENT_DEPTH} levels; flatten it: send {wanted}"
        else:
            text = (f"argument {argument!r} is wrong (a number of {found.digits:,} digits; at most "
                    f"{MAX_DIGITS:,} are read): send {wanted}")
        result = refusal(tool, text, "invalid_arguments")
        if found.envelope:  # what the SDK adds to a 2026-07-28 result; 2.x clients refuse one without it
            result["resultType"] = "complete"
        return Refusal(200, {"jsonrpc": "2.0", "id": found.id, "result": result})
    if found.problem == "deep":
        return _error(400, found.id, INVALID_REQUEST, f"the message is nested deeper than {MAX_DEPTH} levels (at "
                      f"{where}); flatten it: no MCP request needs more than a few levels")
    return _error(400, found.id, INVALID_REQUEST, f"{where} is a number of {found.digits:,} digits; at most "
                  f"{MAX_DIGITS:,} are read: send a shorter number")


def _error(status: int, id_: str | int | None, code: int, message: str) -> Refusal:
    return Refusal(status, {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}})
