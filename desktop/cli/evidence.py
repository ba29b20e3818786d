"""`mirador evidence add`: put an evidence row in by hand, as capture would; `mirador evidence rescope`: move
captured rows (and the memories drawn from them) to another scope (memory/store/rescope.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from desktop.cli.common import open_store, read_text
from desktop.cli.output import emit_json
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
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
    ep.add_argument("--idempotency-key", metavar="KEY",
                    help="a key made once for this row (e.g. a UUID) and given again on every retry: a retry prints "
                         "the first row's id and stores nothing twice")
    as_json(ep)

    rp = esub.add_parser("rescope", help="move captured rows to another scope; the memories drawn only from them "
                                         "follow, those resting on evidence of two scopes go to review")
    rp.set_defaults(func=cmd_evidence_rescope)
    rp.add_argument("ids", nargs="*", help="evidence ids (or select rows with the options below)")
    rp.add_argument("--to", metavar="SCOPE", help="the scope to move them to (e.g. work/acme)")
    rp.add_argument("--by-rules", action="store_true",
                    help="instead of --to: move each selected row (every row if no filter is given) to the scope "
                         "the capture.scope_rules give it now; rows no rule matches stay")
    rp.add_argument("--app", help="rows captured from this app (name, case-insensitive)")
    rp.add_argument("--window", metavar="PATTERN",
                    help="rows whose window title contains this text; * stands for anything (e.g. '#acme-*')")
    rp.add_argument("--scope", help="rows now in this scope (and below)")
    rp.add_argument("--since", help="rows captured from this ISO time (local if no zone)")
    rp.add_argument("--until", help="rows captured before this ISO time")
    rp.add_argument("--yes", action="store_true", help="move (without it, say what would move and move nothing)")
    as_json(rp)
    sp.set_defaults(func=cmd_evidence)


def cmd_evidence(a: argparse.Namespace) -> int:
    """`mirador evidence` alone: say which actions there are."""
    raise InputError("`mirador evidence` needs an action: add or rescope")


def cmd_evidence_add(a: argparse.Namespace) -> int:
    """Add one evidence row; print its id, or the row with --json."""
    from memory.store.rows import parse_time

    store = open_store()
    fields = dict(source=a.source, app=a.app or "", window=a.window or "", speaker=a.speaker or "", scope=a.scope,
                  captured_at=parse_time(a.at, "--at"))
    text = read_text(a.text)
    if a.idempotency_key is None:
        row = store.add_evidence(text, actor="person", **fields)
    else:
        from memory.store.idempotency import add_once
        from memory.store.specs import EvidenceSpec

        row, replayed = add_once(store, "evidence", "person", a.idempotency_key,
                                 dict(store.evidence_row(EvidenceSpec(text=text, **fields))),
                                 lambda id_: store.add_evidence(text, actor="person", id=id_, **fields))
        if replayed:
            print(f"{row['id']} was stored by an earlier call with this key; nothing was stored again",
                  file=sys.stderr)
    emit_json(row) if a.json else print(row["id"])
    return 0


def cmd_evidence_rescope(a: argparse.Namespace) -> int:
    """Move the selected evidence rows to --to (or to what the scope rules say), after a dry run."""
    from capture.scope_rules import ScopeRules, matches, plan_by_rules
    from memory.scopes import validate_scope
    from memory.store.rescope import plan_rescope, rescope, select_evidence
    from memory.store.rows import parse_time

    if bool(a.to) == bool(a.by_rules):
        raise InputError("say where the rows go: --to SCOPE, or --by-rules to use the capture.scope_rules")
    store = open_store()
    filters = dict(app=a.app, scope=a.scope, since=parse_time(a.since, "--since"), until=parse_time(a.until, "--until"))
    keep = (lambda r: matches(a.window, r["window"] or "")) if a.window else None
    any_filter = bool(a.ids or keep or any(filters.values()))
    if not any_filter and not a.by_rules:
        raise InputError("rescope needs evidence ids or a filter (--app, --window, --scope, --since, --until); "
                         "refusing to move everything")
    if a.by_rules:
        rules = ScopeRules.from_config(store.config.capture)
        if not rules.rules:
            raise InputError("there are no scope rules: add some under Settings → Scopes (or capture.scope_rules in "
                             "config.toml), or move rows with --to SCOPE")
        plans = plan_by_rules(store, rules, select_evidence(store, ids=a.ids, keep=keep or (lambda r: True),
                                                            **filters))
    else:
        plan = plan_rescope(store, validate_scope(a.to.strip().lower()),
                            select_evidence(store, ids=a.ids, keep=keep, **filters))
        plans = [] if plan.empty() else [plan]
    if not plans:
        where = a.to or "the scope its rule names"
        msg = f"nothing to move: no matching row is outside {where}"
        emit_json({"moved": False, "plans": []}) if a.json else print(msg)
        return 0
    if not a.yes:
        said = " ".join(p.describe() for p in plans)
        raise InputError(f"{said} Nothing was moved yet: repeat with --yes to move")
    results = [rescope(store, p) for p in plans]
    if a.json:
        emit_json({"moved": True, "results": results})
    else:
        for r in results:
            line = f"moved {r['evidence']} row(s) and {r['memories']} memory(ies) to {r['scope']}"
            if r["review"]:
                line += f"; {r['review']} memory(ies) resting on evidence of two scopes sent to review"
            print(line)
    return 0
