"""Every SQL filter Mirador hands to LanceDB is built here, from typed helpers: ids, scopes, times, kinds, cursors.

Why one module: a filter written by hand elsewhere drifted (the "derived from this evidence" predicate existed
five times in two spellings), could quote a value wrongly, or could compare a sealed column — whose values are
ciphertext (memory/store/sealer.py), so `text = '…'` silently matches nothing. tests/test_architecture.py fails
on a filter string built in any other module. A helper refuses a sealed column outright.

Each helper returns a `Where` (a str, typed apart so a signature says "a filter from here"); `and_` / `or_`
join them, dropping the Nones a helper returns for "no condition". The quoting (sql_literal, sql_list) and the
scope predicate (scope_filter) are here too; memory/scopes.py says what a valid scope key is.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import NewType, overload

from memory.scopes import validate_scope
from memory.types import Status, parse_status, parse_type

Where = NewType("Where", str)

# The column a kind's rows are ordered and time-filtered by.
TIME_COLUMN = {"memory": "updated_at", "evidence": "captured_at", "vault": "updated_at"}
NOTHING = Where("false")  # matches no row (an empty id list, an empty scope list)

# Columns sealed at rest (memory/store/sealer.py SEALED) and the index text: equality or IN on them would
# compare ciphertext. Listed here rather than imported, so this module stays below the sealer; a test checks
# the two lists agree (tests/memory/test_filters.py).
SEALED_COLUMNS = frozenset({"title", "text", "details", "search_text", "meta", "label", "before", "after",
                            "fts_terms", "app", "window", "speaker"})

# The values an EQUAL-sealed column (an evidence row's app, window, speaker) is compared with: each value in
# every form the column may hold it — sealed, and in the clear for a shared bucket or an older version's row —
# from Store.equal_forms. Typed apart so that a list of plain names (which would match no sealed row) is not
# taken for it.
EqualForms = NewType("EqualForms", tuple[str, ...])


def _plain(column: str) -> str:
    if column in SEALED_COLUMNS:
        raise ValueError(f"{column} is sealed at rest: a filter on its value would match nothing — read the rows "
                         "and compare the opened values, or use Store.equal_forms for app/window/speaker")
    return column


def sql_literal(value: object) -> str:
    """Quote a string (an id, a scope, any plain value) for a LanceDB SQL predicate: the one quoting
    helper every filter uses."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_list(values: Iterable[object]) -> str:
    """A parenthesised, quoted list for `IN`: "('a', 'b')"."""
    return "(" + ", ".join(sql_literal(v) for v in values) + ")"


def scope_filter(scopes: Iterable[str] | None, column: str = "scope") -> str | None:
    """SQL predicate matching the given scopes and their descendants; None means every scope."""
    if scopes is None:
        return None
    scopes = [validate_scope(s) for s in scopes]
    if not scopes:
        return "false"
    parts = []
    for s in scopes:
        # Descendants of s are exactly the keys in the half-open range ['s/', 's0'): '0' is the byte
        # after '/', and comparison is bytewise. A range is served by the scope index, where
        # starts_with() forced a scan of every row and doubled search latency at 100k rows; LIKE
        # would also be wrong, since '_' is a LIKE wildcard.
        lo, hi = sql_literal(s + "/"), sql_literal(s + "0")
        parts.append(f"({column} = {sql_literal(s)} OR ({column} >= {lo} AND {column} < {hi}))")
    return "(" + " OR ".join(parts) + ")"


def ts_literal(dt: datetime) -> str:
    """A SQL timestamp literal (the store keeps naive UTC)."""
    return f"timestamp '{dt.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _ids(values: Iterable[object]) -> str:
    return sql_list(values)


# ---- joining ---------------------------------------------------------------------------------------


@overload
def and_(first: Where, /, *rest: str | None) -> Where: ...
@overload
def and_(*parts: str | None) -> Where | None: ...
def and_(*parts: str | None) -> Where | None:
    """Join the predicates that are not None with AND (None if none is left)."""
    kept = [p for p in parts if p]
    if not kept:
        return None
    return Where(kept[0] if len(kept) == 1 else " AND ".join(f"({p})" for p in kept))


def or_(*parts: str | None) -> Where | None:
    """Join the predicates that are not None with OR (None if none is left)."""
    kept = [p for p in parts if p]
    if not kept:
        return None
    return Where(kept[0] if len(kept) == 1 else "(" + " OR ".join(f"({p})" for p in kept) + ")")


# ---- values ----------------------------------------------------------------------------------------


def id_is(id_: str, column: str = "id") -> Where:
    """One row by id (or another id column: memory_id, entity_id, src, dst)."""
    return Where(f"{_plain(column)} = {sql_literal(id_)}")


def id_in(ids: Iterable[object], column: str = "id") -> Where:
    """Rows whose id column is one of these (none: no row). Callers send bounded chunks (a few hundred)."""
    listed = list(dict.fromkeys(ids))
    return Where(f"{_plain(column)} IN {_ids(listed)}") if listed else NOTHING


def rowid_in(rowids: Iterable[int]) -> Where:
    """Rows by Lance's own row id (`_rowid`): one copy of a duplicated id, where the id would name every copy."""
    listed = [int(i) for i in dict.fromkeys(rowids)]
    return Where(f"_rowid IN ({', '.join(str(i) for i in listed)})") if listed else NOTHING


def equals(column: str, value: str | bool | int) -> Where:
    """A plain (unsealed) column equal to a value: status, type, source, kind, an outbox op, a flag."""
    if isinstance(value, bool):
        return Where(f"{_plain(column)} = {'true' if value else 'false'}")
    if isinstance(value, int):
        return Where(f"{_plain(column)} = {int(value)}")
    return Where(f"{_plain(column)} = {sql_literal(value)}")


def not_equals(column: str, value: str) -> Where:
    """A plain column not equal to a value."""
    return Where(f"{_plain(column)} <> {sql_literal(value)}")


def one_of(column: str, values: Iterable[str]) -> Where:
    """A plain column holding one of these values (none: no row)."""
    listed = list(dict.fromkeys(values))
    return Where(f"{_plain(column)} IN {sql_list(listed)}") if listed else NOTHING


def numbers_in(column: str, values: Iterable[int]) -> Where:
    """An integer column (outbox_seq, a row address) holding one of these numbers."""
    listed = [str(int(v)) for v in values]
    return Where(f"{_plain(column)} IN ({', '.join(listed)})") if listed else NOTHING


def starts_with(column: str, prefix: str) -> Where:
    """A plain column whose value starts with this prefix (`actor LIKE 'mcp:%'`); a prefix holding LIKE's own
    wildcards (% or _) is refused rather than matched loosely."""
    if "%" in prefix or "_" in prefix:
        raise ValueError(f"a prefix with % or _ would match more than it says: {prefix!r}")
    return Where(f"{_plain(column)} LIKE {sql_literal(prefix + '%')}")


def is_null(column: str) -> Where:
    return Where(f"{column} IS NULL")


def not_null(column: str) -> Where:
    return Where(f"{column} IS NOT NULL")


def sealed_value_equals(column: str, sealed: str) -> Where:
    """An EQUAL-sealed column (an evidence row's window, speaker) equal to a value already sealed the way the
    column holds it (Store.equal_value): the one comparison on a sealed column that can match."""
    return Where(f"{column} = {sql_literal(sealed)}")


def sealed_one_of(column: str, forms: EqualForms) -> Where:
    """An EQUAL-sealed column holding one of these values, given in every form it may hold them
    (Store.equal_forms); none: no row."""
    if not isinstance(forms, tuple):  # plain names would match no sealed row: refuse them outright
        raise TypeError(f"{column} is sealed at rest: compare it with Store.equal_forms(...) of the values")
    listed = list(dict.fromkeys(forms))
    return Where(f"{column} IN {sql_list(listed)}") if listed else NOTHING


# ---- time ------------------------------------------------------------------------------------------


def at_or_after(column: str, when: datetime) -> Where:
    """column >= when."""
    return Where(f"{_plain(column)} >= {ts_literal(when)}")


def after(column: str, when: datetime) -> Where:
    """column > when."""
    return Where(f"{_plain(column)} > {ts_literal(when)}")


def before(column: str, when: datetime) -> Where:
    """column < when."""
    return Where(f"{_plain(column)} < {ts_literal(when)}")


def at_or_before(column: str, when: datetime) -> Where:
    """column <= when."""
    return Where(f"{_plain(column)} <= {ts_literal(when)}")


def keyset_before(at: datetime, last_id: str, column: str = "updated_at") -> Where:
    """Keyset paging, newest first then by id: the rows after (at, last_id) in that order, so rows changed
    meanwhile move to the front and are never repeated on a later page."""
    return Where(f"({column} < {ts_literal(at)} OR ({column} = {ts_literal(at)} AND id < {sql_literal(last_id)}))")


# ---- scopes ----------------------------------------------------------------------------------------


def scope_in(scopes: Iterable[str] | None, column: str = "scope") -> Where | None:
    """The scopes and every scope below them (scope_filter); None: every scope."""
    sf = scope_filter(scopes, column)
    return None if sf is None else Where(sf)


def both_ends(scopes: Iterable[str] | None) -> Where | None:
    """An edge (memory/graph/relations.py) whose two ends are both inside the scopes: principle 5 for relations."""
    listed = None if scopes is None else list(scopes)
    return and_(scope_in(listed, "scope"), scope_in(listed, "dst_scope"))


# ---- provenance and relations ----------------------------------------------------------------------


def derived_from(evidence_ids: Iterable[str]) -> Where:
    """Memories whose provenance names any of these evidence ids ("memories drawn from this evidence")."""
    listed = list(dict.fromkeys(evidence_ids))
    if not listed:
        return NOTHING
    return Where("array_has_any(provenance, make_array(" + ", ".join(sql_literal(i) for i in listed) + "))")


def touching(memory_ids: Iterable[str], direction: str = "both") -> Where:
    """Edges with an end among these memories: out (src), in (dst) or both."""
    listed = list(dict.fromkeys(memory_ids))
    if not listed:
        return NOTHING
    ids = _ids(listed)
    return Where({"out": f"src IN {ids}", "in": f"dst IN {ids}", "both": f"(src IN {ids} OR dst IN {ids})"}[direction])


# ---- a kind's listing filter -----------------------------------------------------------------------


def where(kind: str, *, scopes: Iterable[str] | None = None, types: Iterable[str] | None = None,
          statuses: Iterable[str] | None = None, sources: Iterable[str] | None = None,
          apps: EqualForms | None = None, since: datetime | None = None,
          until: datetime | None = None) -> Where | None:
    """A predicate over one kind's table (None: every row). Memories default to candidate + active;
    `statuses=[]` means every status. apps: Store.equal_forms of the app names (Store.where makes them)."""
    parts: list[str | None] = [scope_in(scopes)]
    if kind == "memory":
        if types:
            parts.append(one_of("type", (parse_type(t).value for t in types)))
        sts = [Status.CANDIDATE, Status.ACTIVE] if statuses is None else [parse_status(s) for s in statuses]
        if sts:
            parts.append(one_of("status", (s.value for s in sts)))
    time_col = TIME_COLUMN[kind]
    if kind == "evidence":
        if sources:
            parts.append(one_of("source", sources))
        if apps:
            parts.append(sealed_one_of("app", apps))
    if since:
        parts.append(at_or_after(time_col, since))
    if until:
        parts.append(before(time_col, until))
    kept = [p for p in parts if p]
    return Where(" AND ".join(kept)) if kept else None


# ---- shared scopes: the outbox and conditional commits (memory/store/remote*.py) ----------------------


def queued(ops: Iterable[str], bindings: Iterable[str] | None = None) -> Where:
    """Outbox rows of these ops (put, rput, eput, …), for these bindings (None: any)."""
    return Where(and_(one_of("outbox_op", ops), None if bindings is None else one_of("outbox_binding", bindings))
                 or NOTHING)


def versions_are(pairs: Iterable[tuple[str, datetime]], prefix: str = "target.") -> Where:
    """A merge's condition: the target row is at one of these (id, updated_at) versions."""
    parts = [f"({prefix}id = {sql_literal(i)} AND {prefix}updated_at = {ts_literal(at)})" for i, at in pairs]
    return Where(" OR ".join(parts)) if parts else NOTHING


def lease_free(now: datetime, device: str, prefix: str = "target.") -> Where:
    """A maintainer lease another device may take: expired, or held by this device already."""
    return Where(f"{prefix}until < {ts_literal(now)} OR {prefix}device = {sql_literal(device)}")

