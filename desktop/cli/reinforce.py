"""`mirador reinforce ID...`: record that memories were used (see memory/graph/reinforcement.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.cli.common import open_store
from desktop.cli.output import emit_json
from memory.errors import NotFoundError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope


def cmd_reinforce(a: argparse.Namespace) -> int:
    """Reinforce (or with --show, only report) the given memories; unknown ids fail the command."""
    from memory.graph.reinforcement import reinforce, usage_of

    store = open_store()
    if a.show:
        rows = usage_of(store, a.ids, scopes=a.scope)
        missing = [i for i in a.ids if i not in {r["id"] for r in rows}]
        res = {"usage": rows, "not_found": [{"id": i} for i in missing]}
    else:
        res = reinforce(store, a.ids, actor="person", scopes=a.scope)
        rows, missing = res["reinforced"], [n["id"] for n in res["not_found"]]
    if a.json:
        emit_json(res)
    else:
        for r in rows:
            when = f", last {r['last_used_at']}" if r.get("last_used_at") else ""
            print(f"{r['id']}  [{r['type']} · {r['scope']}]  uses {r['uses']}{when}  salience "
                  f"{r['salience']:.2f} → {r['effective_salience']:.2f}")
    if missing:
        err = NotFoundError(f"not found: {', '.join(missing)} (never existed, outside --scope, or forgotten; "
                            "evidence and vault ids are never reinforced) — find memory ids with `mirador search`")
        if a.json:
            return err.exit_code
        raise err
    return 0


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the `reinforce` subcommand."""
    sp = cmd("reinforce", cmd_reinforce, "record that memories were used: their salience rises, then decays "
             "without use")
    sp.add_argument("ids", nargs="+", metavar="ID", help="memory ids (mem_…)")
    scope(sp)
    sp.add_argument("--show", action="store_true", help="only print use counts and effective salience")
    as_json(sp)
