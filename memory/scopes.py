"""Hierarchical scope keys (`work`, `work/acme`, `personal`): what a valid key is, and which keys a scope covers.

A search in `work` sees `work` and everything under `work/`, never `personal` or `workshop`. The SQL predicate
that enforces it inside the LanceDB query (principle 5) is memory/store/filters.py's scope_filter, with every
other filter; in_scopes here is its Python twin for a single known row.
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


def in_scopes(scope: str, scopes: Iterable[str] | None) -> bool:
    """Python twin of memory/store/filters.py scope_filter, for checking a single known row (e.g. before a write)."""
    if scopes is None:
        return True
    return any(scope == s or scope.startswith(s + "/") for s in scopes)


def scope_field(value: str) -> str:
    """validate_scope for pydantic validators, which must raise ValueError to name the field."""
    try:
        return validate_scope(value)
    except InputError as e:
        raise ValueError(str(e)) from None
