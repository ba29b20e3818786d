"""`mirador export`: memories (and optionally evidence and vault values) as JSONL, which `mirador import` reads back."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from desktop.cli.common import open_store

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `export` to the `mirador` parser."""
    sp = cmd("export", cmd_export, "export memories as JSONL")
    sp.add_argument("--out", help="file to write (default stdout)")
    scope(sp)
    sp.add_argument("--evidence", action="store_true", help="include evidence rows")
    sp.add_argument("--include-secrets", action="store_true", help="include decrypted vault values")


def cmd_export(a: argparse.Namespace) -> int:
    """Write the export to --out (a count on stderr) or to stdout."""
    from memory.integrations.transfer import write_export

    store = open_store()
    kw = dict(scopes=a.scope, include_evidence=a.evidence, include_secrets=a.include_secrets)
    if a.out and a.out != "-":
        with open(a.out, "w", encoding="utf-8") as fh:
            n = write_export(store, fh, **kw)
        print(f"exported {n} line(s) to {a.out}", file=sys.stderr)
    else:
        write_export(store, sys.stdout, **kw)
    return 0
