"""memory/store/filters.py: its list of sealed columns matches the sealer's, and its helpers refuse them."""

from __future__ import annotations

import pytest

from memory.store import filters as F
from memory.store.sealer import EQUAL_COLUMNS, SEALED, TERMS_COLUMN


def test_the_filters_module_knows_every_sealed_column():
    # A column the sealer seals that filters.py does not know could be compared by value and match nothing.
    sealed = {c for cols in SEALED.values() for c in cols} | {c for cols in EQUAL_COLUMNS.values() for c in cols}
    assert sealed | {TERMS_COLUMN} <= F.SEALED_COLUMNS


@pytest.mark.parametrize("column", sorted(F.SEALED_COLUMNS))
def test_a_helper_refuses_a_sealed_column(column):
    with pytest.raises(ValueError, match="sealed at rest"):
        F.equals(column, "x")
    with pytest.raises(ValueError, match="sealed at rest"):
        F.id_in(["x"], column)


def test_helpers_join_and_quote():
    assert F.and_(None, F.equals("status", "active"), None) == "status = 'active'"
    assert F.and_(F.equals("status", "active"), F.id_in(["a'b"])) == "(status = 'active') AND (id IN ('a''b'))"
    assert F.id_in([]) == F.NOTHING and F.derived_from([]) == F.NOTHING and F.and_() is None
    assert F.or_(F.id_is("a"), None) == "id = 'a'"


def test_an_app_filter_takes_the_forms_the_store_made_never_plain_names():
    # The evidence app is sealed (an EQUAL column): `app IN ('slack')` would match no sealed row.
    with pytest.raises(ValueError, match="sealed at rest"):
        F.one_of("app", ["slack"])
    with pytest.raises(TypeError, match="equal_forms"):
        F.where("evidence", apps=["slack"])  # type: ignore[arg-type]
    forms = F.EqualForms(("\x1ee1:c2VhbGVk", "slack"))
    assert F.where("evidence", apps=forms) == "app IN ('\x1ee1:c2VhbGVk', 'slack')"
    assert F.where("evidence", apps=F.EqualForms(())) is None
    assert F.sealed_one_of("app", F.EqualForms(())) == F.NOTHING


def test_the_store_seals_app_names_for_a_filter_and_keeps_them_for_a_shared_bucket(store):
    from memory.store import tables as T

    forms = store.equal_forms(T.EVIDENCE, "app", ["slack", "slack", "firefox"])
    assert forms[2:] == ("slack", "firefox") and all(f.startswith("\x1ee1:") for f in forms[:2])
    assert store.equal_forms(T.EVIDENCE, "source", ["screen"]) == ("screen",)
    assert store.where("evidence", apps=["slack"]) == f"app IN ('{forms[0]}', 'slack')"


def test_a_prefix_match_refuses_like_wildcards_and_sealed_columns():
    assert F.starts_with("actor", "mcp:") == "actor LIKE 'mcp:%'"
    for bad in ("mcp_", "50%"):
        with pytest.raises(ValueError, match="would match more"):
            F.starts_with("actor", bad)
    with pytest.raises(ValueError, match="sealed at rest"):
        F.starts_with("app", "sl")
