"""`mirador relate / related / chain / unrelate`: typed edges between memories (memory/graph/relations.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.cli.common import open_store
from desktop.cli.output import emit_json, short

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope

REL_HELP = "BECAUSE, TRIGGERED, CONTRADICTS, UPDATES, RESOLVES or MENTIONS (read as 'SRC REL DST')"


def cmd_relate(a: argparse.Namespace) -> int:
    """Add the edge SRC REL DST (idempotent)."""
    from memory.graph.relations import add_relation

    edge = add_relation(open_store(), a.src, a.relation, a.dst, actor="person", provenance=a.evidence or [],
                        confidence=a.confidence, scopes=a.scope)
    if a.json:
        emit_json(edge)
    else:
        print(f"{'added' if edge['created'] else 'already there'}  {edge['id']}  "
              f"{edge['src']} {edge['relation']} {edge['dst']}")
    return 0


def cmd_related(a: argparse.Namespace) -> int:
    """List a memory's relations."""
    from memory.graph.relations import related

    edges = related(open_store(), a.id, a.relation, a.direction, scopes=a.scope, statuses=[] if a.all else None,
                    limit=a.limit)
    if a.json:
        emit_json({"id": a.id, "relations": edges})
    elif not edges:
        print("no relations")
    for e in [] if a.json else edges:
        arrow = f"{e['relation']} →" if e["direction"] == "out" else f"← {e['relation']}"
        o = e["other"]
        print(f"{e['id']}  {arrow:<14} {o['id']}  [{o['type']} · {o['status']}]  {short(o['title'] or o['text'], 70)}")
    return 0


def cmd_chain(a: argparse.Namespace) -> int:
    """Follow causes or consequences of a memory."""
    from memory.graph.relations import chain

    res = chain(open_store(), a.id, a.direction, a.relation, a.depth, scopes=a.scope, statuses=[] if a.all else None)
    if a.json:
        emit_json(res)
        return 0
    print(f"{res['start']['id']}  {short(res['start']['title'] or res['start']['text'], 80)}")
    if not res["hops"]:
        print(f"  no {a.direction} recorded within depth {a.depth}")
    for h in res["hops"]:
        pad = "  " * h["depth"]
        print(f"{pad}{h['relation']} {h['memory']['id']}  {short(h['memory']['title'] or h['memory']['text'], 70)}")
        for e in h["evidence"]:
            print(f"{pad}  evidence {e['id']} [{e['source']}] {short(e['text'], 60)}")
    return 0


def cmd_unrelate(a: argparse.Namespace) -> int:
    """Remove an edge by id, or by SRC REL DST."""
    from memory.errors import InputError
    from memory.graph.relations import remove_relation

    parts = a.edge
    if len(parts) == 1:
        edge = remove_relation(open_store(), parts[0], actor="person", scopes=a.scope)
    elif len(parts) == 3:
        edge = remove_relation(open_store(), src=parts[0], relation=parts[1], dst=parts[2], actor="person", scopes=a.scope)
    else:
        raise InputError("give an edge id (rel_…) or SRC REL DST — list them with `mirador related ID`")
    if a.json:
        emit_json({"removed": edge})
    else:
        print(f"removed  {edge['id']}  {edge['src']} {edge['relation']} {edge['dst']}")
    return 0


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the relation subcommands."""
    sp = cmd("relate", cmd_relate, "relate two memories: SRC REL DST, e.g. mem_a BECAUSE mem_b")
    sp.add_argument("src")
    sp.add_argument("relation", help=REL_HELP)
    sp.add_argument("dst")
    sp.add_argument("--evidence", action="append", help="evidence id the edge rests on (repeatable)")
    sp.add_argument("--confidence", type=float, default=1.0)
    scope(sp)
    as_json(sp)

    sp = cmd("related", cmd_related, "list a memory's relations (both directions)")
    sp.add_argument("id")
    sp.add_argument("--relation", action="append", help=f"only these (repeatable): {REL_HELP}")
    sp.add_argument("--direction", choices=["out", "in", "both"], default="both")
    sp.add_argument("--all", action="store_true", help="include superseded and rejected neighbours")
    sp.add_argument("--limit", type=int, default=100)
    scope(sp)
    as_json(sp)

    sp = cmd("chain", cmd_chain, "follow a memory's causes (why) or consequences, with the evidence of each hop")
    sp.add_argument("id")
    sp.add_argument("--depth", type=int, default=3, help="hops to follow, 1..6 (default 3)")
    sp.add_argument("--direction", choices=["causes", "consequences"], default="causes")
    sp.add_argument("--relation", action="append", help="follow these instead of BECAUSE, TRIGGERED, RESOLVES")
    sp.add_argument("--all", action="store_true", help="include superseded and rejected memories")
    scope(sp)
    as_json(sp)

    sp = cmd("unrelate", cmd_unrelate, "remove a relation: its id (rel_…) or SRC REL DST")
    sp.add_argument("edge", nargs="+")
    scope(sp)
    as_json(sp)
