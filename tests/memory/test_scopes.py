"""Scope in every query: a `work` search never sees `personal`, on every read path."""

from __future__ import annotations

import pytest

from memory.errors import InputError, NotFoundError
from memory.retrieval.search import search_evidence, search_memories, search_vault
from memory.scopes import in_scopes, validate_scope
from memory.store.filters import scope_filter


@pytest.fixture
def scoped(store):
    ids = {}
    for scope in ("work", "work/acme", "personal", "workshop", "work_x"):
        ids[("mem", scope)] = store.add_memory(f"Quarterly budget planning notes ({scope})", scope=scope)["id"]
        ids[("ev", scope)] = store.add_evidence(f"Quarterly budget spreadsheet open ({scope})", scope=scope,
                                                source="screen", app="calc")["id"]
        ids[("vault", scope)] = store.add_memory(f"Quarterly budget portal password {scope}", type="vault",
                                                 value=f"s3cret-{scope}", scope=scope)["id"]
    return ids


def test_scope_keys_are_validated():
    assert validate_scope("work/acme") == "work/acme"
    for bad in ("", "Work", "work//x", "/work", "work/", "a b", "x'; drop"):
        with pytest.raises(InputError, match="invalid scope"):
            validate_scope(bad)


def test_filter_is_a_query_predicate_not_python():
    f = scope_filter(["work"])
    assert "scope >= 'work/' AND scope < 'work0'" in f and "scope = 'work'" in f


_KEYS = ["work", "work/acme", "work/acme/x", "workshop", "work-x", "work.x", "work_x", "work0", "wor", "work/",
         "personal", "a", "a/b", "a-b", "a.b", "a0", "a/b/c", "ab", "a_", "z"]


@pytest.mark.parametrize("indexed", [False, True])
def test_range_filter_matches_exactly_the_scope_and_its_descendants(tmp_path, indexed):
    """The SQL range must agree with the Python prefix rule on neighbours like 'workshop' and 'work0'."""
    import lancedb

    table = lancedb.connect(tmp_path).create_table("t", data=[{"scope": k} for k in _KEYS])
    if indexed:
        table.create_scalar_index("scope", index_type="BITMAP")
    for s in ["work", "work/acme", "a", "a/b", "personal", "ab", "z"]:
        got = sorted(r["scope"] for r in table.search().where(scope_filter([s])).limit(100).to_list())
        assert got == sorted(k for k in _KEYS if in_scopes(k, [s])), s


@pytest.mark.parametrize("search", [search_memories, search_evidence])
def test_work_sees_work_and_children_only(store, scoped, search):
    hits = search(store, "quarterly budget", scopes=["work"], limit=50)
    scopes = {h.scope for h in hits}
    assert scopes == {"work", "work/acme"}
    assert not scopes & {"personal", "workshop", "work_x"}


def test_vault_labels_are_scoped(store, scoped):
    hits = search_vault(store, "budget portal password", scopes=["personal"])
    assert {h.scope for h in hits} == {"personal"}
    assert all("s3cret" not in str(h.to_dict()) for h in hits)


def test_child_scope_does_not_see_parent(store, scoped):
    hits = search_memories(store, "quarterly budget", scopes=["work/acme"], limit=50)
    assert {h.scope for h in hits} == {"work/acme"}


def test_get_list_and_reveal_respect_scope(store, scoped):
    with pytest.raises(NotFoundError):
        store.get(scoped[("mem", "personal")], scopes=["work"])
    with pytest.raises(NotFoundError):
        store.get(scoped[("ev", "personal")], scopes=["work"])
    with pytest.raises(NotFoundError):
        store.reveal(scoped[("vault", "personal")], scopes=["work"])
    for kind in ("memory", "evidence", "vault"):
        rows = store.list(kind, scopes=["work"])
        assert rows and {r["scope"] for r in rows} <= {"work", "work/acme"}


def test_no_scope_means_every_scope_for_the_owner(store, scoped):
    hits = search_memories(store, "quarterly budget", limit=50, types=["semantic"])
    assert {h.scope for h in hits} == {"work", "work/acme", "personal", "workshop", "work_x"}
