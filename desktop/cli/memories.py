"""`mirador add`, `search`, `show`, `edit`, `delete`, `list`: memories, evidence and vault rows one by one."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from desktop.cli.common import open_store, read_text
from desktop.cli.output import emit_json, print_hits, print_record, print_rows
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.store.core import Store

TYPES = "episodic, semantic, procedural, resource, core, vault"


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the row commands to the `mirador` parser."""
    sp = cmd("add", cmd_add, "add a memory ('-' reads the text from stdin)")
    sp.add_argument("text")
    sp.add_argument("--type", default="semantic", help=f"one of: {TYPES} (default semantic)")
    scope(sp, many=False)
    sp.add_argument("--title")
    sp.add_argument("--details", help="type-specific fields as JSON, e.g. '{\"steps\": [\"a\", \"b\"]}'")
    sp.add_argument("--status", default="active", help="candidate or active (default active)")
    sp.add_argument("--confidence", type=float, default=1.0)
    sp.add_argument("--pin", action="store_true", help="pinned memories are never changed by automated passes")
    sp.add_argument("--value-stdin", action="store_true", help="vault: read the secret value from stdin")
    sp.add_argument("--idempotency-key", metavar="KEY",
                    help="a key made once for this memory (e.g. a UUID) and given again on every retry: a retry "
                         "prints the first memory's id and stores nothing twice (not for vault entries)")
    as_json(sp)

    sp = cmd("search", cmd_search, "hybrid search over memories (or --evidence)")
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

    sp = cmd("show", cmd_show, "show every field of a memory, evidence row or vault entry")
    sp.add_argument("id")
    sp.add_argument("--reveal", action="store_true", help="vault: decrypt and print the secret value")
    as_json(sp)

    sp = cmd("edit", cmd_edit, "edit a memory (marks it user-edited)")
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

    sp = cmd("delete", cmd_delete, "erase rows for good (tombstone + purge of old versions)")
    sp.add_argument("ids", nargs="*")
    sp.add_argument("--scope", help="bulk: everything in this scope and below (memories, vault, evidence); with "
                                    "--app/--since/--until, only the evidence in it")
    sp.add_argument("--app", help="bulk: all evidence captured from this app, with the memories derived only from it")
    sp.add_argument("--since", help="bulk: evidence captured from this ISO time (memories you wrote and the vault "
                                    "are kept)")
    sp.add_argument("--until", help="bulk: evidence captured before this ISO time")
    sp.add_argument("--yes", action="store_true",
                    help="confirm a bulk delete (without it, say what would be erased and erase nothing)")
    as_json(sp)

    sp = cmd("list", cmd_list, "list memories (newest first), or --evidence / --vault")
    scope(sp)
    sp.add_argument("--type", action="append")
    sp.add_argument("--status", action="append", help="'all' for every status")
    sp.add_argument("--evidence", action="store_true")
    sp.add_argument("--vault", action="store_true")
    sp.add_argument("--limit", type=int, default=50)
    sp.add_argument("--offset", type=int, default=0)
    as_json(sp)


def _details(raw: str | None) -> dict | None:
    from memory.types import parse_details

    if raw is None:
        return None
    try:
        return parse_details(raw)
    except InputError as e:
        raise InputError(f"--details is {e}") from None


def cmd_add(a: argparse.Namespace) -> int:
    """Add one memory (or vault entry); print its id, or the row with --json."""
    from memory.types import MemoryType, parse_type

    store = open_store()
    mtype = parse_type(a.type)
    kw = dict(scope=a.scope, title=a.title, details=_details(a.details), status=a.status,
              confidence=a.confidence, pinned=a.pin)
    if mtype == MemoryType.VAULT:
        if a.idempotency_key is not None:
            raise InputError("--idempotency-key is for memories and evidence; a vault entry is added once, by hand")
        value = sys.stdin.read().rstrip("\n") if a.value_stdin else None
        kw["details"] = {"label": read_text(a.text)}
        row = store.add_memory(read_text(a.text), type="vault", value=value, **kw)
    elif a.idempotency_key is not None:
        if a.value_stdin:
            raise InputError("--value-stdin is only for --type vault")
        row = _add_once(store, read_text(a.text), a.idempotency_key, type=mtype.value, **kw)
    else:
        if a.value_stdin:
            raise InputError("--value-stdin is only for --type vault")
        row = store.add_memory(read_text(a.text), type=mtype.value, **kw)
    emit_json(row) if a.json else print(row["id"])
    return 0


def _add_once(store: Store, text: str, key: str, **kw: Any) -> dict:
    """add with --idempotency-key: the memory an earlier call with the key stored, else a new one under the key."""
    from memory.store.idempotency import add_once
    from memory.store.specs import MemorySpec

    row, replayed = add_once(store, "memory", "person", key, dict(store.memory_row(MemorySpec(text=text, **kw))),
                             lambda id_: store.add_memory(text, id=id_, **kw))
    if replayed:
        print(f"{row['id']} was stored by an earlier call with this key; nothing was stored again", file=sys.stderr)
    return row


def cmd_search(a: argparse.Namespace) -> int:
    """Hybrid search over memories, or over evidence with --evidence; best first."""
    from memory.retrieval.search import search_evidence, search_memories
    from memory.store.rows import parse_time

    store = open_store()
    since, until = parse_time(a.since, "--since"), parse_time(a.until, "--until")
    if a.evidence:
        if a.type or a.status:
            raise InputError("--type and --status apply to memories; drop them with --evidence")
        hits = search_evidence(store, a.query, scopes=a.scope, sources=a.source, apps=a.app, since=since,
                               until=until, limit=a.limit)
    else:
        if a.source or a.app:
            raise InputError("--source and --app filter evidence; add --evidence")
        statuses = None if not a.status else ([] if a.status == ["all"] else a.status)
        hits = search_memories(store, a.query, scopes=a.scope, types=a.type, statuses=statuses, since=since,
                               until=until, limit=a.limit)
    out = [h.to_dict() for h in hits]
    emit_json(out) if a.json else print_hits(out)
    return 0


def cmd_show(a: argparse.Namespace) -> int:
    """Every field of one row; --reveal decrypts a vault value."""
    store = open_store()
    row = store.get(a.id)
    if a.reveal:
        row["value"] = store.reveal(a.id)
    emit_json(row) if a.json else print_record(row)
    return 0


def cmd_edit(a: argparse.Namespace) -> int:
    """Change a memory's fields or status, or a vault entry's label and value; evidence is never edited."""
    from memory.store.rows import kind_of

    store = open_store()
    changes = dict(text=a.text, title=a.title, details=_details(a.details), scope=a.scope,
                   confidence=a.confidence, pinned=a.pin)
    if not any(v is not None for v in changes.values()) and not a.status and not a.value_stdin:
        raise InputError("nothing to change: give --text, --title, --details, --scope, --status, --pin/--unpin, "
                         "--confidence or --value-stdin")
    if kind_of(a.id) == "vault":
        value = sys.stdin.read().rstrip("\n") if a.value_stdin else None
        row = store.update_vault(a.id, label=a.text, value=value, scope=a.scope)
    elif kind_of(a.id) == "evidence":
        raise InputError("evidence is what was captured and is not edited; delete it with `mirador delete ID`")
    else:
        row = store.get(a.id)
        if any(v is not None for v in changes.values()):
            row = store.update_memory(a.id, **changes)
        if a.status:
            row = store.set_status(a.id, a.status)
    emit_json(row) if a.json else print(row["id"])
    return 0


def cmd_delete(a: argparse.Namespace) -> int:
    """Erase rows by id, or in bulk by scope/app/time (with --yes)."""
    from memory.store.erasure import forget, forget_where, plan_forget_where
    from memory.store.rows import parse_time

    store = open_store()
    bulk = a.scope or a.app or a.since or a.until
    if a.ids and bulk:
        raise InputError("give either ids or a bulk filter (--scope/--app/--since/--until), not both")
    if a.ids:
        result = forget(store, a.ids)
    elif bulk:
        where = dict(scope=a.scope, app=a.app, since=parse_time(a.since, "--since"),
                     until=parse_time(a.until, "--until"))
        if not a.yes:
            plan = plan_forget_where(store, **where)
            raise InputError(f"bulk delete erases for good. {plan.describe()} Nothing was erased yet: "
                             "repeat with --yes to confirm")
        result = forget_where(store, **where)
    else:
        raise InputError("nothing to delete: give an id, or --scope/--app/--since/--until with --yes")
    if a.json:
        emit_json(result)
    else:
        reviewed = result.get("reviewed", 0)
        line = f"erased {result['deleted']} row(s); {result['frames_removed']} frame file(s) removed"
        if reviewed:
            line += f"; {reviewed} memory(ies) that also rest on other evidence sent to review"
        print(line)
    if result.get("unchecked_shared_scopes"):
        print(f"note: the shared scope {', '.join(result['unchecked_shared_scopes'])} did not answer: "
              + ("its memories were not erased — repeat this delete when it is back (`mirador remote test`)"
                 if a.scope and not (a.app or a.since or a.until) else
                 "its memories derived from this evidence are dealt with when it is back"), file=sys.stderr)
    return 0


def cmd_list(a: argparse.Namespace) -> int:
    """Memories newest first (or evidence / vault labels), a page at a time."""
    kind = "evidence" if a.evidence else "vault" if a.vault else "memory"
    store = open_store()
    statuses = None if not a.status else ([] if a.status == ["all"] else a.status)
    rows = store.list(kind, scopes=a.scope, types=a.type if kind == "memory" else None,
                      statuses=statuses if kind == "memory" else None, limit=a.limit, offset=a.offset)
    emit_json(rows) if a.json else print_rows(rows)
    return 0
