"""`mirador evidence add`: put an evidence row in by hand, as capture would."""

from __future__ import annotations

from desktop.cli.common import open_store, read_text
from desktop.cli.output import emit_json
from memory.errors import InputError


def register(cmd, as_json, scope) -> None:
    """Add `evidence` and its actions to the `mirador` parser."""
    sp = cmd("evidence", None, "work with evidence rows")
    esub = sp.add_subparsers(metavar="ACTION")
    ep = esub.add_parser("add", help="add an evidence row by hand")
    ep.set_defaults(func=cmd_evidence_add)
    ep.add_argument("text")
    ep.add_argument("--source", default="manual")
    ep.add_argument("--app")
    ep.add_argument("--window")
    ep.add_argument("--speaker")
    ep.add_argument("--at", help="capture time, ISO (local if no zone); default now")
    ep.add_argument("--scope")
    as_json(ep)
    sp.set_defaults(func=cmd_evidence)


def cmd_evidence(a) -> int:
    """`mirador evidence` alone: say which actions there are."""
    raise InputError("`mirador evidence` needs an action: add")


def cmd_evidence_add(a) -> int:
    """Add one evidence row; print its id, or the row with --json."""
    from memory.store.rows import parse_time

    row = open_store().add_evidence(read_text(a.text), actor="person", source=a.source, app=a.app or "",
                                    window=a.window or "", speaker=a.speaker or "", scope=a.scope,
                                    captured_at=parse_time(a.at, "--at"))
    emit_json(row) if a.json else print(row["id"])
    return 0
