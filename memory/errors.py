"""Errors a person or a calling tool can act on: each says what went wrong and what to do.

An error carries its message (what went wrong, in words any surface can show), a stable `code` a caller
can branch on, and a `hint`: what helps, in each surface's own words — the `mirador` command a person
runs, the MCP tool an assistant calls. Each surface renders the error itself: the CLI as one line with
its hint (desktop/cli/common.py), the MCP server as a tool error naming the tool, with the MCP hint
(memory/mcp/replies.py). A message never names a command of one surface for another to rewrite.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Hint:
    """What helps after an error, per surface; None where that surface has nothing to offer."""

    cli: str | None = None  # e.g. "find ids with `mirador search` or `mirador list`"
    mcp: str | None = None  # e.g. "call memory_search to find a valid id"


def with_hint(message: str, hint: str | None) -> str:
    """One line: the message, then the hint."""
    return f"{message} — {hint}" if hint else message


class MiradorError(Exception):
    """Base class; the message is shown to the person as one line.

    code: stable, snake_case, for callers that branch on the kind of error (a class's default, or a more
    specific one given where it is raised). str(e) is what a person reads: the message and the CLI hint.
    """

    code = "error"
    exit_code = 1

    def __init__(self, message: str = "", *, hint: Hint | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or Hint()
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return with_hint(self.message, self.hint.cli)


class InputError(MiradorError):
    """Bad input from the caller: an unknown id, an empty text, an invalid value."""

    code = "invalid_input"
    exit_code = 2


class NotFoundError(InputError):
    """An id that is not in the store (or was forgotten)."""

    code = "not_found"


class ConfigError(MiradorError):
    """The config file is unreadable or holds an unknown key or a bad value."""

    code = "config"
    exit_code = 3


class SharedOfflineError(MiradorError):
    """A row that may live in a shared scope could not be read because that scope's store does not answer."""

    code = "shared_offline"
    exit_code = 4


class StorageError(MiradorError):
    """The data folder's disk refused a read or write: full, over quota, read-only or failing (EIO).

    memory/store/io_faults.py words it (which folder, how much is free, what to do); `errno` says which fault."""

    code = "storage"
    exit_code = 5

    def __init__(self, message: str, errno: int | None = None, *, hint: Hint | None = None) -> None:
        super().__init__(message, hint=hint)
        self.errno = errno


class DiskFullError(StorageError):
    """No space left (ENOSPC) or the disk quota is used up (EDQUOT): it passes once space is freed."""

    code = "disk_full"


# Hints several raise sites share.
FIND_IDS = Hint(cli="find ids with `mirador search` or `mirador list`",
                mcp="call memory_search (or memory_list) to find a valid id")
