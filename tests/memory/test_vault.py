"""Vault values are encrypted at rest, never embedded or indexed; only the label is searchable."""

from __future__ import annotations

import os
import stat

import pytest

from memory.errors import InputError
from memory.retrieval.search import search_memories
from tests.conftest import files_containing

SECRET = "hunter2-PLAINTEXT-d41d8cd98f"


def test_value_never_in_plaintext_on_disk(store, mirador_home):
    row = store.add_memory("Staging database password", type="vault", value=SECRET, scope="work")
    store.optimize()
    assert files_containing(mirador_home, SECRET) == []
    assert files_containing(mirador_home, "d41d8cd98f") == []
    assert store.reveal(row["id"]) == SECRET
    assert files_containing(mirador_home, SECRET) == []


def test_label_is_searchable_value_is_not(store):
    row = store.add_memory("Staging database password", type="vault", value=SECRET, scope="work")
    assert [h.id for h in search_memories(store, "staging database password")] == [row["id"]]
    assert search_memories(store, "hunter2 PLAINTEXT") == []
    shown = store.get(row["id"])
    assert "value" not in shown and "value_enc" not in shown and SECRET not in str(shown)


def test_vault_has_no_vector_and_label_only_index(store):
    names = store.columns("vault")
    assert "vector" not in names
    indexed = {c for ix in store.vault.list_indices() for c in ix.columns}
    assert indexed == {"fts_terms"}  # the label's keyed terms (memory/store/sealer.py); never the value


def test_no_key_file_lies_beside_the_vault(store, mirador_home):
    store.add_memory("k", type="vault", value="v")
    assert not (mirador_home / "vault.key").exists()  # the data key is wrapped (tests/memory/test_data_key.py)
    assert stat.S_IMODE(os.stat(mirador_home / "data-key.json").st_mode) == 0o600


def test_vault_needs_a_value_and_automated_actors_cannot_write(store):
    with pytest.raises(InputError, match="secret value"):
        store.add_memory("label only", type="vault")
    row = store.add_memory("API token", type="vault", value="abc")
    with pytest.raises(InputError, match="may not write the vault"):
        store.update_vault(row["id"], actor="extractor", value="evil")


def test_label_search_runs_only_where_the_vault_has_entries(store, monkeypatch):
    from memory.retrieval.search import search_vault
    from memory.store.erasure import forget

    asked = []
    run = store.reader.run
    monkeypatch.setattr(store.reader, "run", lambda *legs: asked.extend(legs) or run(*legs))
    vault_legs = lambda: [leg for leg in asked if leg.table == "vault"]  # noqa: E731
    assert search_memories(store, "staging database password", scopes=["work"]) == []
    assert vault_legs() == []  # an empty vault is not searched
    row = store.add_memory("Staging database password", type="vault", value=SECRET, scope="work/acme")
    assert [h.id for h in search_memories(store, "staging database password", scopes=["work"])] == [row["id"]]
    assert len(vault_legs()) == 1  # seen at once: the scopes in use follow the table's version
    assert search_vault(store, "staging database password", scopes=["personal"]) == []
    assert len(vault_legs()) == 1  # no entry in that scope: not searched
    forget(store, [row["id"]])
    assert search_memories(store, "staging database password", scopes=["work"]) == []
