"""`mirador recall`: the context block an assistant would get for a question, within a token budget."""

from __future__ import annotations

from typing import TYPE_CHECKING

from desktop.cli.common import open_store
from desktop.cli.output import emit_json

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope


def cmd_recall(a: argparse.Namespace) -> int:
    """Print the recall block (or the whole result as JSON with --json)."""
    from memory.retrieval.recall import recall

    store = open_store()
    res = recall(store, a.query, a.budget, scopes=a.scope, types=a.type, include_evidence=not a.no_evidence)
    if a.json:
        emit_json(res.to_dict())
    elif res.items:
        print(res.text)
    else:
        print("no matches")
    return 0


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the `recall` subcommand."""
    sp = cmd("recall", cmd_recall, "memories and evidence for a question, packed into a token budget")
    sp.add_argument("query")
    sp.add_argument("--budget", type=int, default=1000, help="tokens the block may use, 20..32000 (default 1000)")
    scope(sp)
    sp.add_argument("--type", action="append", help="memory type filter (repeatable); evidence is unaffected")
    sp.add_argument("--no-evidence", action="store_true", help="memories only")
    as_json(sp)
