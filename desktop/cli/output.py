"""How the CLI prints: one JSON document with --json, short aligned lines otherwise."""

from __future__ import annotations

import json
import sys
from typing import Any

from desktop.runtime.console import print_record as print_record  # re-exported: the CLI prints one row with it


def emit_json(doc: Any) -> None:
    """Print one JSON document to stdout."""
    from memory.store.rows import jsonable  # here, not at import: it loads numpy and pyarrow

    sys.stdout.write(json.dumps(jsonable(doc), ensure_ascii=False, indent=2) + "\n")


def short(text: str, width: int = 90) -> str:
    """One line, cut to width."""
    line = " ".join((text or "").split())
    return line if len(line) <= width else line[: width - 1] + "…"


def print_hits(hits: list[dict]) -> None:
    """Search results, best first."""
    if not hits:
        print("no matches")
        return
    for h in hits:
        label = h.get("type") or h.get("source") or h.get("kind")
        print(f"{h['score']:.4f}  {h['id']}  [{label} · {h['scope']}]  {short(h['text'])}")


def print_rows(rows: list[dict]) -> None:
    """A listing of memories, vault labels or evidence."""
    if not rows:
        print("nothing here")
        return
    for r in rows:
        when = r.get("captured_at") or r.get("updated_at") or ""
        label = r.get("type") or r.get("source")
        status = f" {r['status']}" if r.get("status") else ""
        print(f"{r['id']}  {when}  [{label}{status} · {r['scope']}]  {short(r.get('text', ''), 70)}")
