"""Hierarchical scope keys (`work`, `work/acme`, `personal`) and the filters that enforce them.

A search in `work` sees `work` and everything under `work/`, never `personal` or `workshop`.
The filter is a SQL predicate that goes inside the LanceDB query (principle 5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memory.errors import InputError

_SEGMENT = r"[a-z0-9][a-z0-9_.-]{0,63}"
_SCOPE_RE = re.compile(rf"^{_SEGMENT}(/{_SEGMENT}){{0,7}}$")


def validate_scope(scope: str) -> str:
    """Return the scope key if valid, else raise an InputError that shows the expected form."""
    s = (scope or "").strip()
    if not _SCOPE_RE.match(s):
        raise InputError(
            f"invalid scope {scope!r}: use lowercase segments of letters, digits, '.', '_' or '-' "
            "joined by '/', e.g. 'work' or 'work/acme'"
        )
    return s


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


def in_scopes(scope: str, scopes: Iterable[str] | None) -> bool:
    """Python twin of scope_filter, for checking a single known row (e.g. before a write)."""
    if scopes is None:
        return True
    return any(scope == s or scope.startswith(s + "/") for s in scopes)


def scope_field(value: str) -> str:
    """validate_scope for pydantic validators, which must raise ValueError to name the field."""
    try:
        return validate_scope(value)
    except InputError as e:
        raise ValueError(str(e)) from None
