"""`mirador` command line. Scripts depend on this contract: keep commands and --json shapes stable.

The entry point only: it builds the parser from the command modules (each adds its commands and their
options with `register(cmd, as_json, scope)`, next to the handlers), dispatches, and turns errors into
one line and an exit code. tests/desktop/test_cli_contract.py walks the contract.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from importlib.metadata import PackageNotFoundError, version

from memory.errors import MiradorError

log = logging.getLogger("mirador")

# Imported by name, in this order, when the parser is built; each module imports what its handlers need
# only when they run, so `mirador --version` and the assistant hooks start fast.
COMMAND_MODULES: list[str] = [
    "desktop.cli.memories", "desktop.cli.store_admin", "desktop.cli.export", "desktop.cli.doctor",
    "desktop.cli.evidence", "desktop.cli.mcp", "desktop.cli.capture", "desktop.cli.recall", "desktop.cli.app",
    "desktop.cli.extract", "desktop.cli.selftest", "desktop.cli.imports", "desktop.cli.relations",
    "desktop.cli.reinforce", "desktop.cli.hooks",
]

# The order `mirador --help` lists commands in (people read it; modules group them differently).
# A command missing here is listed after these.
HELP_ORDER: list[str] = [
    "add", "search", "show", "edit", "delete", "purge", "optimize", "reembed", "list", "export", "stats", "doctor",
    "evidence", "serve", "mcp", "capture", "status", "pause", "resume", "recall", "app", "extract", "dream",
    "selftest", "import", "relate", "related", "chain", "unrelate", "reinforce", "hooks", "hook", "service",
]


def _version() -> str:
    try:
        return version("mirador")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    """The whole `mirador` parser: global options, then every command module's commands."""
    p = argparse.ArgumentParser(prog="mirador", description="Local memory for you and your AI assistants.")
    p.add_argument("--version", action="version", version=f"mirador {_version()}")
    p.add_argument("-v", "--verbose", action="store_true", help="log progress and show tracebacks")
    sub = p.add_subparsers(metavar="COMMAND")

    def cmd(name, fn, help_):
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(func=fn)
        sp.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS)
        return sp

    def scope(sp, many=True):
        if many:
            sp.add_argument("--scope", action="append", help="scope key, e.g. work or work/acme (repeatable)")
        else:
            sp.add_argument("--scope", help="scope key, e.g. work or work/acme")

    def as_json(sp):
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
    """Entry point of the `mirador` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if not getattr(args, "func", None):
        # No command: the tray app where there is a display, the headless service otherwise.
        args = parser.parse_args(["app"] + (argv or []))
    try:
        return args.func(args)
    except MiradorError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # last line of defence: one line, not a traceback, for the person
        from models.locate import ModelNotFound

        if isinstance(e, ModelNotFound):
            print(f"error: {e}", file=sys.stderr)
            return 3
        log.debug("unexpected error", exc_info=True)
        print(f"error: {type(e).__name__}: {e} (run with -v for details and report it)", file=sys.stderr)
        if getattr(args, "verbose", False):
            raise
        return 1


if __name__ == "__main__":
    sys.exit(main())
