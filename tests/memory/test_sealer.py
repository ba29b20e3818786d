"""The seal at the store's boundary (memory/store/sealer.py): what goes to LanceDB is sealed, what comes back is
what was written; equal values seal equally only where equality is needed; turned vectors keep every cosine."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from memory.store import tables as T
from memory.store.keys import DataKeys, KeyUnavailableError, LockedError
from memory.store.rows import to_arrow
from memory.store.sealer import EQUAL, SEAL, TERMS_COLUMN, Sealer, is_sealed, rotation
from memory.store.terms import words


@pytest.fixture
def sealer(mirador_home):
    s = Sealer(DataKeys(mirador_home))
    s.active = True
    return s


def _memories(n: int, dim: int = 384) -> list[dict]:
    rng = np.random.default_rng(3)
    return [{"id": f"mem_{i:024d}", "type": "semantic", "scope": "work", "title": f"Budget meeting {i}",
             "text": f"The budget meeting {i} moved to Thursday", "details": '{"fact": "moved"}',
             "search_text": f"Budget meeting {i} The budget meeting {i} moved to Thursday",
             "vector": rng.standard_normal(dim).astype(np.float32)} for i in range(n)]


def test_sealed_rows_come_back_as_written_and_hold_no_plain_text(sealer):
    rows = _memories(5)
    data = to_arrow(rows, T.memories_schema(384))
    sealed = sealer.seal_arrow(T.MEMORIES, data)
    for col in ("title", "text", "details", "search_text"):
        assert all(v.startswith(SEAL) for v in sealed[col].to_pylist()), col
        assert not any("budget" in v.lower() or "Thursday" in v for v in sealed[col].to_pylist())
    assert sealed[TERMS_COLUMN].to_pylist()[0] == sealer.query_terms(rows[0]["search_text"])
    assert sealed["scope"].to_pylist() == ["work"] * 5  # filters run on these: left as they are
    # Equal texts look unrelated once sealed (a random nonce each).
    twice = sealer.seal_arrow(T.MEMORIES, data)
    assert twice["text"].to_pylist()[0] != sealed["text"].to_pylist()[0]
    opened = sealer.open_arrow(T.MEMORIES, sealed)
    for col in ("title", "text", "details", "search_text"):
        assert opened[col].to_pylist() == [r[col] for r in rows]
    back = np.asarray(opened["vector"].to_pylist(), dtype=np.float32)
    assert np.allclose(back, np.stack([r["vector"] for r in rows]), atol=1e-5)
    # The same through the rows path the search reader uses, and a value already sealed is not sealed twice.
    as_rows = sealer.open_rows(T.MEMORIES, sealed.to_pylist())
    assert [r["text"] for r in as_rows] == [r["text"] for r in rows]
    assert np.allclose(np.stack([r["vector"] for r in as_rows]), back, atol=1e-6)
    again = sealer.seal_arrow(T.MEMORIES, sealed.drop_columns(["vector"]))
    assert again["text"].to_pylist() == sealed["text"].to_pylist()


def test_turned_vectors_keep_every_cosine_and_the_query_is_turned_alike(sealer):
    rows = _memories(50)
    sealed = sealer.seal_arrow(T.MEMORIES, to_arrow(rows, T.memories_schema(384)))
    stored = np.asarray(sealed["vector"].to_pylist(), dtype=np.float32)
    plain = np.stack([r["vector"] for r in rows])
    q = np.random.default_rng(9).standard_normal(384).astype(np.float32)

    def cos(a, b):
        return (a @ b) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b))

    assert np.allclose(cos(stored, sealer.query_vector(q)), cos(plain, q), atol=1e-5)
    assert not np.allclose(stored, plain, atol=0.1)  # ...and the stored vectors are not the embedder's
    assert np.array_equal(np.argsort(-cos(stored, sealer.query_vector(q))), np.argsort(-cos(plain, q)))
    r = rotation(b"seed" * 8, 16)
    assert np.allclose(r @ r.T, np.eye(16), atol=1e-12) and np.allclose(rotation(b"seed" * 8, 16), r)


def test_rows_of_an_older_store_are_read_as_they_are_beside_sealed_ones(sealer):
    rows = _memories(4)
    plain = to_arrow(rows[:2], T.memories_schema(384))
    sealed = sealer.seal_arrow(T.MEMORIES, to_arrow(rows[2:], T.memories_schema(384))).drop_columns([TERMS_COLUMN])
    mixed = pa.concat_tables([plain, sealed])
    opened = sealer.open_arrow(T.MEMORIES, mixed)
    assert opened["text"].to_pylist() == [r["text"] for r in rows]
    assert np.allclose(np.asarray(opened["vector"].to_pylist()), np.stack([r["vector"] for r in rows]), atol=1e-5)
    assert [r["text"] for r in sealer.open_rows(T.MEMORIES, mixed.to_pylist())] == [r["text"] for r in rows]


def test_window_and_speaker_seal_equally_so_a_stream_is_found_by_equality(sealer):
    ev = [{"id": f"evd_{i}", "text": f"line {i}", "window": "Quarterly plan.xlsx", "speaker": "Mara",
           "search_text": f"line {i}", "meta": None} for i in range(3)]
    schema = pa.schema([(k, pa.string()) for k in ev[0]])
    sealed = sealer.seal_arrow(T.EVIDENCE, pa.Table.from_pylist(ev, schema=schema))
    windows = sealed["window"].to_pylist()
    assert len(set(windows)) == 1 and windows[0].startswith(EQUAL) and "Quarterly" not in windows[0]
    assert windows[0] == sealer.equal_value(T.EVIDENCE, "window", "Quarterly plan.xlsx")
    assert sealed["meta"].to_pylist() == [None] * 3  # nothing to seal
    assert len(set(sealed["text"].to_pylist())) == 3
    assert sealer.open_values(T.EVIDENCE, "speaker", list(set(sealed["speaker"].to_pylist()))) == ["Mara"]


def test_terms_are_keyed_hashes_of_stems_that_match_across_word_forms(sealer, mirador_home):
    assert words("The meetings were MOVED to Zürich") == ["meet", "move", "zurich"]
    assert sealer.query_terms("meeting moved") == sealer.query_terms("the meetings were moving")
    other = Sealer(DataKeys(mirador_home / "other"))
    other.active = True
    assert other.query_terms("meeting") != sealer.query_terms("meeting")  # another folder, another key
    assert sealer.query_terms("the of and") == ""  # stop words only: nothing to look for


def test_no_key_no_seal(mirador_home, monkeypatch):
    s = Sealer(DataKeys(mirador_home))
    data = to_arrow(_memories(1), T.memories_schema(384))
    sealed = s.seal_arrow(T.MEMORIES, data)
    s.keys.lock()
    with pytest.raises(LockedError):
        s.seal_arrow(T.MEMORIES, data)
    with pytest.raises(LockedError):
        s.open_arrow(T.MEMORIES, sealed)
    s.keys.unlock()
    assert s.open_arrow(T.MEMORIES, sealed)["text"].to_pylist() == data["text"].to_pylist()
    # Another folder's key does not open it, and says so.
    foreign = Sealer(DataKeys(mirador_home / "elsewhere"))
    with pytest.raises(KeyUnavailableError, match="sealed under another key"):
        foreign.open_arrow(T.MEMORIES, sealed)
    assert is_sealed(sealed["text"].to_pylist()[0]) and not is_sealed("plain")
