"""`mirador` command line. Scripts depend on this contract: keep commands and --json shapes stable.

The entry point only: it builds the parser from the command modules (each adds its commands and their
options with `register(cmd, as_json, scope)`, next to the handlers), dispatches, and turns errors into
one line and an exit code. tests/desktop/test_cli_contract.py walks the contract.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import logging
import os
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desktop.cli.common import Handler

log = logging.getLogger("mirador")

# Imported by name, in this order, when the parser is built; each module imports what its handlers need
# only when they run, so `mirador --version` and the assistant hooks start fast.
COMMAND_MODULES: list[str] = [
    "desktop.cli.memories", "desktop.cli.store_admin", "desktop.cli.export", "desktop.cli.doctor",
    "desktop.cli.evidence", "desktop.cli.mcp", "desktop.cli.capture", "desktop.cli.recall", "desktop.cli.app",
    "desktop.cli.extract", "desktop.cli.selftest", "desktop.cli.imports", "desktop.cli.relations",
    "desktop.cli.reinforce", "desktop.cli.hooks", "desktop.cli.remote", "desktop.cli.keys",
]

# The order `mirador --help` lists commands in (people read it; modules group them differently).
# A command missing here is listed after these.
HELP_ORDER: list[str] = [
    "add", "search", "show", "edit", "delete", "purge", "optimize", "reembed", "list", "export", "stats", "doctor",
    "evidence", "serve", "mcp", "capture", "status", "pause", "resume", "recall", "app", "extract", "dream",
    "selftest", "import", "relate", "related", "chain", "unrelate", "reinforce", "hooks", "hook", "remote", "service",
    "lock", "unlock",
]


# Commands that answer and end: a Claude Code hook, a script's search or note. Run as the process's entry
# point, they skip the cyclic garbage collector and onnxruntime's weight pre-packing (see _one_shot).
# Long-running commands (app, serve, mcp, capture) and bulk ones (import, reembed, extract) keep both.
ONE_SHOT: frozenset[str] = frozenset({
    "add", "search", "show", "list", "evidence", "recall", "hook", "reinforce", "related", "stats", "status",
})


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mirador")
    except PackageNotFoundError:
        return "0+unknown"


class _VersionAction(argparse.Action):
    """argparse's "version" action, reading the version only when asked (importlib.metadata is slow to load)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, default: Any = argparse.SUPPRESS,
                 help: str = "show program's version number and exit") -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        parser._print_message(f"mirador {_version()}\n", sys.stdout)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The whole `mirador` parser: global options, then every command module's commands."""
    p = argparse.ArgumentParser(prog="mirador", description="Local memory for you and your AI assistants.")
    p.add_argument("--version", action=_VersionAction)
    p.add_argument("-v", "--verbose", action="store_true", help="log progress and show tracebacks")
    sub = p.add_subparsers(metavar="COMMAND")

    def cmd(name: str, fn: Handler | None, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(func=fn, _command=name)
        sp.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
        return sp

    def scope(sp: argparse.ArgumentParser, many: bool = True) -> None:
        if many:
            sp.add_argument("--scope", action="append", help="scope key, e.g. work or work/acme (repeatable)")
        else:
            sp.add_argument("--scope", help="scope key, e.g. work or work/acme")

    def as_json(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--json", action="store_true", help="print one JSON document")

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(cmd, as_json, scope)
    _list_in_help_order(sub)
    return p


def _list_in_help_order(sub: argparse._SubParsersAction) -> None:
    # argparse lists subcommands (in --help and in "invalid choice" errors) in the order they were added.
    rank = {name: i for i, name in enumerate(HELP_ORDER)}
    order = sorted(sub.choices, key=lambda n: rank.get(n, len(rank)))
    parsers = dict(sub.choices)
    sub.choices.clear()
    sub.choices.update((n, parsers[n]) for n in order)
    sub._choices_actions.sort(key=lambda a: rank.get(a.dest, len(rank)))


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `mirador` console script.

    With `argv` (tests, in-process callers) it returns the exit code. Without it, it is the process's entry
    point (console script, `python -m desktop.cli.main`, the installer's executable) and ends the process
    with that code itself: see `_leave`.
    """
    if argv is not None:
        return _dispatch(argv)
    # Off until the command is known (_dispatch), which turns it back on unless the command is one-shot.
    gc.disable()
    try:
        code = _exit_status(SystemExit(_dispatch(None)))  # as sys.exit would read a handler's return value
    except SystemExit as e:  # argparse (--help, --version, usage errors) and any handler that exits
        code = _exit_status(e)
    except KeyboardInterrupt:
        code = 130
    except BaseException:  # -v re-raises the unexpected error: show its traceback as the interpreter would
        import traceback

        traceback.print_exc()
        code = 1
    _leave(code)
    return code  # not reached


def _exit_status(e: SystemExit) -> int:
    # What the interpreter makes of `sys.exit(x)`: None is 0, an int is itself, anything else is printed.
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _leave(code: int) -> None:
    """End the process with `code` after what a normal exit runs, but without interpreter finalization.

    LanceDB's native threads (a scanner's, its async runtime's) can still be releasing the GIL while the
    interpreter finalizes, and CPython then aborts the process (SIGABRT, "PyGILState_Release: thread
    state ... must be current when releasing"; lance-format/lance#4152) after the command has printed its
    answer. So everything an ordinary exit does before finalizing is done here, in the same order: join
    non-daemon threads (and run threading's exit hooks, which stop executors), run atexit handlers (log
    handlers flush and close, multiprocessing stops its daemon children such as the LLM worker,
    weakref.finalize callbacks stop the tesseract worker, temporary directories go), flush stdio; then
    os._exit. Only the process entry point may do this, never library code.
    """
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # what Py_Finalize calls first; private (not in typeshed), hence the fallback below
    except Exception:
        for t in threading.enumerate():
            if t is not threading.main_thread() and not t.daemon:
                t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can reach it
            if code == 0 and stream is sys.stdout:
                code = 1
    os._exit(code)


def _one_shot() -> None:
    """Set this process up to answer one command and exit (a hook, a script's call).

    The cyclic garbage collector stays off: the passes that the imports set off (LanceDB's, pyarrow's,
    pydantic's classes, all kept for the life of the process) walk every object and free next to
    nothing, and the little cyclic garbage one command leaves goes when the process ends. The
    embedder's onnxruntime session skips pre-packing its weights: a copy made for many runs, and such
    a process embeds one or two texts (models/onnx_encoder.py, set_short_lived).
    """
    from memory.store import lifetime
    from models import onnx_encoder

    onnx_encoder.set_short_lived(True)
    lifetime.set_short_lived(True)  # no search row cache built in the background: the process is about to go


# Commands that run until stopped: they take the passphrase from MIRADOR_PASSPHRASE or the tray, never a prompt.
LONG_RUNNING = {"app", "serve", "service", "mcp", "capture"}
# Commands whose process lends its data key to the others (and so never borrows one).
LENDERS = {"app", "serve", "service", "capture"}


def _dispatch(argv: list[str] | None) -> int:
    """Parse, run the command, and turn its errors into one line and an exit code."""
    # Before anything writes: every file and folder this process creates (logs, exports, the service's
    # endpoint file, LanceDB's tables) is owner-only (memory/store/permissions.py).
    from memory.store.permissions import restrict_umask

    restrict_umask()
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not getattr(args, "func", None):
        # No command: the tray app where there is a display, the headless service otherwise.
        args = parser.parse_args(["app"] + (argv or []))
    if argv is None and getattr(args, "_command", None) in ONE_SHOT:
        _one_shot()
    else:
        gc.enable()
    from memory.store.keys import DataKeys

    if getattr(args, "_command", None) not in LONG_RUNNING:
        # A command a person typed may ask for the passphrase in the terminal; the tray, the service and the
        # MCP server never read a terminal from a background thread (memory/store/keys.py).
        DataKeys.terminal_prompt = True
    if getattr(args, "_command", None) not in LENDERS:
        # Without a keyring or a passphrase of its own, a process borrows the key of the running, unlocked
        # Mirador of its data dir (an assistant's stdio MCP server, a hook): desktop/cli/via_service.py.
        from desktop.cli.via_service import borrow_key

        if borrow_key not in DataKeys.lenders:
            DataKeys.lenders.append(borrow_key)
    from desktop.cli.common import run_command

    def first(a: argparse.Namespace) -> int | None:  # commands a running service can answer go there first (desktop/cli/via_service.py)
        from desktop.cli.via_service import try_service

        return try_service(a)

    return run_command(args, first)


if __name__ == "__main__":
    sys.exit(main())
