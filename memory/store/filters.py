"""The SQL filters every read path hands to LanceDB: scopes, types, statuses, sources, apps, time."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from memory.scopes import scope_filter, sql_list
from memory.store.rows import ts_literal
from memory.types import Status, parse_status, parse_type

# The column a kind's rows are ordered and time-filtered by.
TIME_COLUMN = {"memory": "updated_at", "evidence": "captured_at", "vault": "updated_at"}


def where(kind: str, *, scopes: Iterable[str] | None = None, types: Iterable[str] | None = None,
          statuses: Iterable[str] | None = None, sources: Iterable[str] | None = None,
          apps: Iterable[str] | None = None, since: datetime | None = None,
          until: datetime | None = None) -> str | None:
    """A predicate over one kind's table (None: every row). Memories default to candidate + active;
    `statuses=[]` means every status."""
    parts = []
    sf = scope_filter(scopes)
    if sf:
        parts.append(sf)
    if kind == "memory":
        if types:
            parts.append("type IN " + sql_list(parse_type(t).value for t in types))
        sts = [Status.CANDIDATE, Status.ACTIVE] if statuses is None else [parse_status(s) for s in statuses]
        if sts:
            parts.append("status IN " + sql_list(s.value for s in sts))
    time_col = TIME_COLUMN[kind]
    if kind == "evidence":
        if sources:
            parts.append("source IN " + sql_list(sources))
        if apps:
            parts.append("app IN " + sql_list(apps))
    if since:
        parts.append(f"{time_col} >= {ts_literal(since)}")
    if until:
        parts.append(f"{time_col} < {ts_literal(until)}")
    return " AND ".join(parts) if parts else None


def and_(*parts: str | None) -> str | None:
    """Join the predicates that are not None with AND (None if none is left)."""
    kept = [p for p in parts if p]
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else " AND ".join(f"({p})" for p in kept)
