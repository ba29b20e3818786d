"""Errors carry a code and a hint per surface (memory/errors.py), and each surface renders them itself: the
CLI as one line with the command that helps, the MCP server as a tool error naming the tool, with the tool
that helps. The same store error, raised once, through both: nothing rewrites one surface's text for the
other, and neither shows the other's commands."""

from __future__ import annotations

import pickle

import pytest

from desktop.cli.main import main
from memory.errors import FIND_IDS, Hint, InputError, MiradorError, NotFoundError
from memory.mcp.auth import make_principal
from memory.mcp.replies import ERROR_CODE
from tests.memory.mcp_support import call

MISSING = "mem_0123456789abcdef01234567"
WORK = make_principal("tester", ["work"], "work")


def test_an_error_carries_its_message_code_and_hints():
    e = NotFoundError("no row with id x", hint=FIND_IDS)
    assert (e.message, e.code, e.exit_code) == ("no row with id x", "not_found", 2)
    assert str(e) == "no row with id x — find ids with `mirador search` or `mirador list`"  # what a person reads
    assert InputError("bad").code == "invalid_input" and MiradorError("x").code == "error"
    assert InputError("bad", code="empty_text").code == "empty_text"
    assert str(MiradorError("no hint")) == "no hint" and MiradorError("no hint").hint == Hint()
    back = pickle.loads(pickle.dumps(e))  # crosses a process (the LLM worker, the service) intact
    assert (type(back), back.message, back.hint, back.code) == (NotFoundError, e.message, e.hint, "not_found")


def cli(capsys, *args) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.mark.parametrize(("args", "line"), [
    (["delete", MISSING], f"error: no row with id {MISSING} (never existed, outside your scopes, or already "
                          "forgotten) — nothing was deleted — find ids with `mirador search` or `mirador list`\n"),
    (["recall", "anything", "--type", "vault"],
     "error: recall never includes vault entries — drop --type vault (use `mirador search --type vault`)\n"),
    (["show", "nope_1"], "error: unknown id 'nope_1': ids start with mem_, evd_ or vlt_ — find ids with "
                        "`mirador search` or `mirador list`\n"),
])
def test_the_cli_renders_one_line_with_the_command_that_helps(capsys, mirador_home, args, line):
    code, err = cli(capsys, *args)
    assert code == 2 and err == line


def test_mcp_renders_the_same_errors_naming_the_tool_and_the_tool_that_helps(store):
    async def steps(c):
        return {"forget": await c.call_tool("memory_forget", {"ids": [MISSING]}),
                "recall": await c.call_tool("memory_recall", {"query": "anything", "types": ["vault"]}),
                "get": await c.call_tool("memory_get", {"id": "nope_1"}),
                "args": await c.call_tool("memory_search", {"query": "x", "limit": 0}),
                "unknown": await c.call_tool("memory_serach", {"query": "x"})}

    got = call(store, WORK, steps)
    text = {k: r.content[0].text for k, r in got.items()}
    assert all(r.is_error for r in got.values())
    assert text["forget"] == (f"Error executing tool memory_forget: no row with id {MISSING} (never existed, outside "
                              "your scopes, or already forgotten) — nothing was deleted (this client may forget only "
                              "rows in scope 'work' and below) — call memory_search (or memory_list) to find a "
                              "valid id")
    # recall's own refusal of vault (the CLI's above) is never reached here: its schema does not offer vault
    assert text["recall"].startswith("Error executing tool memory_recall: argument 'types.0' is wrong")
    assert text["get"].startswith("Error executing tool memory_get: 'nope_1' is not an id")
    assert text["unknown"] == "Unknown tool: memory_serach"
    for t in text.values():
        assert "mirador search" not in t and "--type" not in t and "\n" not in t  # never the CLI's words
    codes = {k: (r.meta or {}).get(ERROR_CODE) for k, r in got.items()}
    assert codes == {"forget": "not_found", "recall": "invalid_arguments", "get": "invalid_input",
                     "args": "invalid_arguments", "unknown": None}


def test_a_locked_store_is_refused_with_its_code_and_what_the_person_does(store):
    store.keys.lock()
    try:
        got = call(store, WORK, lambda c: c.call_tool("status", {}))
    finally:
        store.keys.unlock()
    assert got.is_error and got.meta[ERROR_CODE] == "locked"
    assert got.content[0].text.startswith("Error executing tool status: Mirador is locked")
    assert "`mirador unlock`" in got.content[0].text and "tell the person" in got.content[0].text
