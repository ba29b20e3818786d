"""How a refused tool call reads on the wire, whoever refuses it (the message limits of memory/mcp/limits.py,
the argument check, the tool itself): a result with isError, one line that names the tool, and the error's
code under _meta for a client that branches on it. A MiradorError is worded for a model here: its message
and its MCP hint (memory/errors.py), never the CLI's.
"""

from __future__ import annotations

from typing import Any

from memory.errors import MiradorError, with_hint

ERROR_CODE = "mirador/error_code"  # the _meta key of a refusal's code


def for_model(e: MiradorError) -> str:
    """The error as a model reads it: what went wrong, then which tool helps."""
    return with_hint(e.message, e.hint.mcp)


def refusal(tool: str, text: str, code: str) -> dict[str, Any]:
    """A tools/call result, as JSON, that refuses the call to `tool` with `text`."""
    return {"content": [{"type": "text", "text": f"Error executing tool {tool}: {text}"}], "isError": True,
            "_meta": {ERROR_CODE: code}}
