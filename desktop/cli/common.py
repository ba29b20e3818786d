"""What several command modules share: opening the store (or the running service's), reading `-` as stdin,
and running a parsed command with its errors turned into one line and an exit code."""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from memory.errors import MiradorError, with_hint

if TYPE_CHECKING:
    import argparse

    from memory.errors import StorageError
    from memory.store.core import Store

log = logging.getLogger("mirador")
_bound = threading.local()

# What main.py hands each command module's register(cmd, as_json, scope).
Handler = Callable[["argparse.Namespace"], int]


class AddCommand(Protocol):
    """cmd(name, handler, help): a new subcommand's parser (handler None: a command that only has actions)."""

    def __call__(self, name: str, fn: Handler | None, help_: str) -> argparse.ArgumentParser: ...


class AddJson(Protocol):
    """as_json(sp): the --json flag."""

    def __call__(self, sp: argparse.ArgumentParser) -> None: ...


class AddScope(Protocol):
    """scope(sp, many=True): --scope, repeatable unless many is False."""

    def __call__(self, sp: argparse.ArgumentParser, many: bool = True) -> None: ...


def open_store() -> Store:
    """The store in the data dir (MIRADOR_HOME or the platform's); imported late, it loads LanceDB.

    In a service answering a CLI request (desktop/cli/via_service.py), the service's own open store."""
    bound: Store | None = getattr(_bound, "store", None)
    if bound is not None:
        return bound
    from memory.store.core import Store

    return Store()


@contextmanager
def bound_store(store: Store) -> Iterator[Store]:
    """Make open_store() return `store` in this thread for the duration of the block."""
    _bound.store = store
    try:
        yield store
    finally:
        _bound.store = None


def read_text(text: str) -> str:
    """The argument itself, or stdin (without its final newline) when the argument is `-`."""
    return sys.stdin.read().rstrip("\n") if text == "-" else text


def run_command(args: argparse.Namespace, first: Callable[[argparse.Namespace], int | None] | None = None) -> int:
    """Run a parsed command (args.func) and turn its errors into one line on stderr and an exit code.

    first: tried before args.func; its exit code, or None to run args.func (the CLI passes the running
    service's answer, desktop/cli/via_service.py; the service itself runs the handler directly).
    """
    try:
        if first is not None:
            code = first(args)
            if code is not None:
                return code
        return args.func(args)
    except MiradorError as e:
        print(render_error(e), file=sys.stderr)
        if getattr(args, "json", False) is True:  # a program reading --json branches on the code, not on words
            from desktop.cli.output import emit_json

            emit_json({"error": {"code": e.code, "message": e.message, "hint": e.hint.cli, "exit_code": e.exit_code}})
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError as e:
        if _stdout_gone():
            return _stdout_closed()
        print(f"error: {type(e).__name__}: {e} (run with -v for details and report it)", file=sys.stderr)
        return 1
    except Exception as e:  # last line of defence: one line, not a traceback, for the person
        from models.locate import ModelNotFound

        if isinstance(e, ModelNotFound):
            print(f"error: {e}", file=sys.stderr)
            return 3
        fault = _disk_fault(e)
        if fault is not None:  # a full or failing disk outside a store write (opening it, a read): say so plainly
            log.debug("disk fault", exc_info=True)
            print(render_error(fault), file=sys.stderr)
            return fault.exit_code
        log.debug("unexpected error", exc_info=True)
        print(f"error: {type(e).__name__}: {e} (run with -v for details and report it)", file=sys.stderr)
        if getattr(args, "verbose", False):
            raise
        return 1


def _disk_fault(e: BaseException) -> StorageError | None:
    """The StorageError that words e, when e is a full, read-only or failing disk (memory/store/io_faults.py)."""
    from memory.config import data_dir
    from memory.store.io_faults import storage_error

    store = getattr(_bound, "store", None)
    return storage_error(e, store.home if store is not None else data_dir())


def render_error(e: MiradorError) -> str:
    """The error as the terminal shows it: one line, what went wrong and then the command that helps (its CLI
    hint; an MCP client gets the same error with the tool that helps instead: memory/mcp/replies.py)."""
    return "error: " + with_hint(e.message, e.hint.cli)


def _stdout_gone() -> bool:
    """Whether stdout's reader went away (a broken pipe elsewhere, e.g. to a child process, is a real error)."""
    try:
        import select

        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll() (Windows) or no real stdout: trust the error
        return True


def _stdout_closed() -> int:
    """The reader of stdout went away (`mirador status | head -1`): stop quietly, exit 1.

    Python docs, "Note on SIGPIPE": point stdout at devnull so that no later flush (at exit) raises again.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout is not a real file (a test's capture): nothing to redirect
        pass
    return 1
