"""Argument definitions for `mirador`, kept apart from what the commands do."""

from __future__ import annotations

import argparse
import importlib

# Modules with `register(cmd, as_json, scope)` adding their subcommands.
COMMAND_MODULES: list[str] = ["desktop.cli.mcp", "desktop.cli.capture", "desktop.cli.recall", "desktop.cli.app", "desktop.cli.extract", "desktop.cli.selftest", "desktop.cli.imports", "desktop.cli.relations", "desktop.cli.reinforce", "desktop.cli.hooks"]

TYPES = "episodic, semantic, procedural, resource, core, vault"


def build(cmds, version: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mirador", description="Local memory for you and your AI assistants.")
    p.add_argument("--version", action="version", version=f"mirador {version}")
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

    sp = cmd("add", cmds.cmd_add, "add a memory ('-' reads the text from stdin)")
    sp.add_argument("text")
    sp.add_argument("--type", default="semantic", help=f"one of: {TYPES} (default semantic)")
    scope(sp, many=False)
    sp.add_argument("--title")
    sp.add_argument("--details", help="type-specific fields as JSON, e.g. '{\"steps\": [\"a\", \"b\"]}'")
    sp.add_argument("--status", default="active", help="candidate or active (default active)")
    sp.add_argument("--confidence", type=float, default=1.0)
    sp.add_argument("--pin", action="store_true", help="pinned memories are never changed by automated passes")
    sp.add_argument("--value-stdin", action="store_true", help="vault: read the secret value from stdin")
    as_json(sp)

    sp = cmd("search", cmds.cmd_search, "hybrid search over memories (or --evidence)")
    sp.add_argument("query")
    scope(sp)
    sp.add_argument("--type", action="append", help=f"memory type filter (repeatable): {TYPES}")
    sp.add_argument("--status", action="append", help="status filter (repeatable); 'all' for every status")
    sp.add_argument("--evidence", action="store_true", help="search captured evidence instead of memories")
    sp.add_argument("--source", action="append", help="evidence source: screen, audio, manual, import, mcp")
    sp.add_argument("--app", action="append", help="evidence app name (repeatable)")
    sp.add_argument("--since", help="ISO time (local if no zone)")
    sp.add_argument("--until", help="ISO time (local if no zone)")
    sp.add_argument("--limit", type=int, default=10)
    as_json(sp)

    sp = cmd("show", cmds.cmd_show, "show every field of a memory, evidence row or vault entry")
    sp.add_argument("id")
    sp.add_argument("--reveal", action="store_true", help="vault: decrypt and print the secret value")
    as_json(sp)

    sp = cmd("edit", cmds.cmd_edit, "edit a memory (marks it user-edited)")
    sp.add_argument("id")
    sp.add_argument("--text")
    sp.add_argument("--title")
    sp.add_argument("--details", help="type-specific fields as JSON (merged)")
    sp.add_argument("--scope")
    sp.add_argument("--status", help="candidate, active, superseded or rejected")
    sp.add_argument("--confidence", type=float)
    sp.add_argument("--pin", dest="pin", action="store_true", default=None)
    sp.add_argument("--unpin", dest="pin", action="store_false")
    sp.add_argument("--value-stdin", action="store_true", help="vault: read a new secret value from stdin")
    as_json(sp)

    sp = cmd("delete", cmds.cmd_delete, "erase rows for good (tombstone + purge of old versions)")
    sp.add_argument("ids", nargs="*")
    sp.add_argument("--scope", help="bulk: everything in this scope and below")
    sp.add_argument("--app", help="bulk: all evidence captured from this app")
    sp.add_argument("--since", help="bulk: from this ISO time")
    sp.add_argument("--until", help="bulk: before this ISO time")
    sp.add_argument("--yes", action="store_true", help="confirm a bulk delete")
    as_json(sp)

    cmd("purge", cmds.cmd_purge, "remove deleted data from old versions and indexes now")
    cmd("optimize", cmds.cmd_optimize, "compact tables and update indexes now (also runs after write batches)")

    sp = cmd("reembed", cmds.cmd_reembed, "embed every row again with the embedder a new store would get "
             "(after an upgrade that retuned it, or for a store made before the tuning)")
    sp.add_argument("--force", action="store_true", help="re-embed even when the store's embedder is current")
    sp.add_argument("--progress", action="store_true", help="show progress even when stderr is not a terminal")
    as_json(sp)

    sp = cmd("list", cmds.cmd_list, "list memories (newest first), or --evidence / --vault")
    scope(sp)
    sp.add_argument("--type", action="append")
    sp.add_argument("--status", action="append", help="'all' for every status")
    sp.add_argument("--evidence", action="store_true")
    sp.add_argument("--vault", action="store_true")
    sp.add_argument("--limit", type=int, default=50)
    sp.add_argument("--offset", type=int, default=0)
    as_json(sp)

    sp = cmd("export", cmds.cmd_export, "export memories as JSONL")
    sp.add_argument("--out", help="file to write (default stdout)")
    scope(sp)
    sp.add_argument("--evidence", action="store_true", help="include evidence rows")
    sp.add_argument("--include-secrets", action="store_true", help="include decrypted vault values")

    # `import` is registered by desktop.cli.imports (Mirador export + history importers).

    sp = cmd("stats", cmds.cmd_stats, "counts and size of the store")
    as_json(sp)

    sp = cmd("doctor", cmds.cmd_doctor, "check data dir, models, tesseract and audio, and say how to fix each")
    as_json(sp)

    sp = cmd("evidence", None, "work with evidence rows")
    esub = sp.add_subparsers(metavar="ACTION")
    ep = esub.add_parser("add", help="add an evidence row by hand")
    ep.set_defaults(func=cmds.cmd_evidence_add)
    ep.add_argument("text")
    ep.add_argument("--source", default="manual")
    ep.add_argument("--app")
    ep.add_argument("--window")
    ep.add_argument("--speaker")
    ep.add_argument("--at", help="capture time, ISO (local if no zone); default now")
    ep.add_argument("--scope")
    as_json(ep)
    sp.set_defaults(func=lambda a: (_ for _ in ()).throw(_usage("evidence", "add")))

    for name in COMMAND_MODULES:
        # Each feature registers its own commands, so features do not edit one shared parser.
        importlib.import_module(name).register(cmd, as_json, scope)

    sp = cmd("service", cmds.cmd_service, "run the headless service (maintenance on a schedule) until stopped")
    sp.add_argument("--once", action="store_true", help="print the status screen, run maintenance once, exit")
    sp.add_argument("--interval", type=float, default=600.0, help="seconds between maintenance passes")
    return p


def _usage(group: str, actions: str):
    from memory.errors import InputError

    return InputError(f"`mirador {group}` needs an action: {actions}")
