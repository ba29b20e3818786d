"""Text and vectors sealed at rest: every column that holds what a person saw, said or wrote is stored
sealed with the data key (memory/store/keys.py), and opened as it is read.

The seal sits at the boundary between Python and LanceDB, so the rest of Mirador sees plain rows:
- writes: Store.append / Store.upsert_rows / Store.update_rows hand their Arrow data to `seal_arrow`;
- reads: Store.scan (so Store.rows and get_many) and the search reader (memory/store/reads.py) hand what
  LanceDB returned to `open_arrow` / `open_rows`.
Shared scopes' buckets are not sealed here (every device of a team reads them: docs/sharing.md).

What each column becomes (docs/capture-and-privacy.md, "At rest", says what someone with the files learns):
- SEALED columns: AES-256-GCM with a random nonce, the column's name bound in as associated data:
  `\\x1es1:` + base64(nonce ‖ ciphertext ‖ tag). Two equal texts look unrelated.
- EQUAL columns (an evidence row's app, window title and speaker): the same AEAD with a nonce derived from
  the value (a synthetic IV: HMAC of the column and value), so equal values seal equally. Why: a capture
  stream is a (scope, source, app, window) group found by equality (memory/store/context.py), rows are
  filtered by app (filters.where's `apps`, given Store.equal_forms), and the speakers of a store are read as
  its distinct values. It shows which rows share an app, window or speaker, never what it is.
- the full-text index column `fts_terms`: keyed hashes of each word's stem (memory/store/terms.py).
- `vector`: turned by a secret orthogonal matrix drawn from the data key. Cosine scores between turned
  vectors equal those of the originals, so the vector index and every search rank exactly as before; a
  query vector is turned the same way (query_vector).

Values already sealed are not sealed again, and opening a value that is not sealed returns it as it is (a
store made by an older version, until its migration has run: memory/store/seal_migration.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from memory.store import tables as T
from memory.store.keys import DataKeys, KeyUnavailableError
from memory.store.terms import TermHasher

if TYPE_CHECKING:  # imported when the first key is opened, not with the store
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

SEAL = "\x1es1:"  # a value sealed with a random nonce
EQUAL = "\x1ee1:"  # a value sealed with a nonce derived from it
TERMS_COLUMN = "fts_terms"

_MEMORY_TEXT = ("title", "text", "details", "search_text")
_EVIDENCE_TEXT = ("text", "meta", "search_text")
SEALED: dict[str, tuple[str, ...]] = {
    T.MEMORIES: _MEMORY_TEXT,
    T.EVIDENCE: _EVIDENCE_TEXT,
    T.VAULT: ("label",),
    T.AUDIT: ("before", "after"),
    T.OUTBOX: _MEMORY_TEXT,  # a memory of a shared scope waiting to be sent: the whole row
    T.EV_OUTBOX: _EVIDENCE_TEXT,
}
_EVIDENCE_EQUAL = ("app", "window", "speaker")
EQUAL_COLUMNS: dict[str, tuple[str, ...]] = {T.EVIDENCE: _EVIDENCE_EQUAL, T.EV_OUTBOX: _EVIDENCE_EQUAL}
# The tables searched by words, and the column whose text their terms are made from.
TERMS_FROM: dict[str, str] = {T.MEMORIES: "search_text", T.EVIDENCE: "search_text", T.VAULT: "label"}
ROTATED: frozenset[str] = frozenset({T.MEMORIES, T.EVIDENCE, T.OUTBOX, T.EV_OUTBOX, T.REEMBED_STAGING})
VECTOR = "vector"


def is_sealed(value: Any) -> bool:
    return isinstance(value, str) and (value.startswith(SEAL) or value.startswith(EQUAL))


def sealed_tables() -> set[str]:
    """Every table that holds sealed columns or turned vectors."""
    return set(SEALED) | set(EQUAL_COLUMNS) | set(ROTATED)


def _hkdf(key: bytes, label: str, n: int = 32) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=n, salt=None, info=label.encode()).derive(key)


def rotation(seed: bytes, dim: int) -> np.ndarray:
    """A secret orthogonal dim × dim matrix from seed: the Q of a QR decomposition of a matrix whose
    entries come from SHAKE-256(seed), signs fixed so that the result does not depend on LAPACK's choices."""
    raw = hashlib.shake_256(seed + dim.to_bytes(4, "big")).digest(dim * dim * 4)
    a = np.frombuffer(raw, dtype="<u4").astype(np.float64).reshape(dim, dim) / 2.0 ** 32 - 0.5
    q, r = np.linalg.qr(a)
    return q * np.where(np.diag(r) < 0, -1.0, 1.0)


@dataclass
class _Material:
    """What one data key gives: the column cipher, the equal-value nonce key, the term hasher, the rotation."""

    key: bytes
    aead: AESGCM
    nonce_key: bytes
    terms: TermHasher
    rotation_seed: bytes
    key_id: str

    def __post_init__(self) -> None:
        self._rot: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.equal = lru_cache(maxsize=16_384)(self._equal)
        self.open_equal = lru_cache(maxsize=16_384)(self._open_equal)

    def rot(self, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """(Q, Qᵀ) as float32: a vector v is stored as Q v, and read back as Qᵀ (Q v)."""
        got = self._rot.get(dim)
        if got is None:
            q = rotation(self.rotation_seed, dim).astype(np.float32)
            got = self._rot[dim] = (q, np.ascontiguousarray(q.T))
        return got

    def seal(self, column: str, value: str) -> str:
        nonce = os.urandom(12)
        return SEAL + base64.b64encode(nonce + self.aead.encrypt(nonce, value.encode("utf-8"), column.encode())
                                       ).decode("ascii")

    def _equal(self, column: str, value: str) -> str:
        nonce = hmac.new(self.nonce_key, column.encode() + b"\0" + value.encode("utf-8"), hashlib.sha256).digest()[:12]
        return EQUAL + base64.b64encode(nonce + self.aead.encrypt(nonce, value.encode("utf-8"), column.encode())
                                        ).decode("ascii")

    def open(self, column: str, token: str) -> str:
        from cryptography.exceptions import InvalidTag

        if token.startswith(EQUAL):
            return self.open_equal(column, token)
        blob = base64.b64decode(token[len(SEAL):])
        try:
            return self.aead.decrypt(blob[:12], blob[12:], column.encode()).decode("utf-8")
        except InvalidTag:
            raise _wrong_key(column) from None

    def _open_equal(self, column: str, token: str) -> str:
        from cryptography.exceptions import InvalidTag

        blob = base64.b64decode(token[len(EQUAL):])
        try:
            return self.aead.decrypt(blob[:12], blob[12:], column.encode()).decode("utf-8")
        except InvalidTag:
            raise _wrong_key(column) from None


def _wrong_key(column: str) -> KeyUnavailableError:
    return KeyUnavailableError(
        f"a sealed value ({column}) does not open with this data folder's key: it was sealed under another key — "
        "data-key.json (or the keyring entry that wraps it) was replaced since; restore the one it was written with")


class Sealer:
    """Seals and opens the columns of one data folder's tables with its data key."""

    def __init__(self, keys: DataKeys) -> None:
        self.keys = keys
        # Whether the store's rows are sealed (memory/store/seal_migration.py): until then its searches run on
        # the words and vectors as an older version stored them.
        self.active = False
        self._material: _Material | None = None
        self._lock = threading.Lock()

    # ---- keys ------------------------------------------------------------------------------

    def material(self) -> _Material:
        """The data key's derived keys; asks DataKeys each time, so a lock (or a locked marker written by
        another process) is honoured at the next read or write."""
        key = self.keys.key()
        m = self._material
        if m is None or m.key != key:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            with self._lock:
                m = self._material = _Material(
                    key=key, aead=AESGCM(_hkdf(key, "mirador column seal v1")),
                    nonce_key=_hkdf(key, "mirador equal-value nonce v1"),
                    terms=TermHasher(_hkdf(key, "mirador search terms v1")),
                    rotation_seed=_hkdf(key, "mirador vector rotation v1"),
                    key_id=_hkdf(key, "mirador key id v1", 8).hex())
        return m

    def drop(self) -> None:
        """Forget the derived keys (after a lock)."""
        self._material = None

    # ---- writes ----------------------------------------------------------------------------

    def seal_arrow(self, table: str, data: pa.Table, schema: pa.Schema | None = None) -> pa.Table:
        """data as it is to be stored in `table`: sealed columns sealed, terms made, vectors turned.
        schema: the table's schema, when the data must match it column for column (an append)."""
        names = set(data.column_names)
        sealed = [c for c in SEALED.get(table, ()) if c in names]
        equal = [c for c in EQUAL_COLUMNS.get(table, ()) if c in names]
        src = TERMS_FROM.get(table)
        rotate = table in ROTATED and VECTOR in names
        with_terms = src in names and (schema is None or TERMS_COLUMN in schema.names)
        # The key only when something is to be sealed: an audit row of a reveal or a delete holds no content.
        needed = data.num_rows > 0 and (
            any(data[c].null_count < data.num_rows for c in (*sealed, *equal))
            or (rotate and data[VECTOR].null_count < data.num_rows)
            or (with_terms and data[src].null_count < data.num_rows))
        if not needed:
            return _conform(data, schema) if schema is not None else data
        m = self.material()
        if with_terms:
            assert src is not None
            terms = pa.array([m.terms.terms(_plain(m, src, v)) for v in data[src].to_pylist()], pa.string())
            data = _put(data, TERMS_COLUMN, terms)
        for col in sealed:
            values = data[col].to_pylist()
            data = _put(data, col, pa.array([v if v is None or is_sealed(v) else m.seal(col, v) for v in values],
                                            pa.string()))
        for col in equal:
            values = data[col].to_pylist()
            data = _put(data, col, pa.array([v if v is None or is_sealed(v) else m.equal(col, v) for v in values],
                                            pa.string()))
        if rotate:
            q, _ = m.rot(data.schema.field(VECTOR).type.list_size)
            data = _put(data, VECTOR, _turn(data[VECTOR], q.T))
        return _conform(data, schema) if schema is not None else data

    def equal_value(self, table: str, column: str, value: str) -> str:
        """What an EQUAL column holds for value: for an equality filter on it."""
        if column not in EQUAL_COLUMNS.get(table, ()):
            return value
        return self.material().equal(column, value)

    def equal_forms(self, table: str, column: str, values: Iterable[str]) -> tuple[str, ...]:
        """Every form a value of column may take in a filter: sealed as this store holds it, and as it is —
        a shared scope's bucket holds it in the clear (docs/sharing.md), and so does a row an older version
        wrote until the store's migration has sealed it (memory/store/seal_migration.py). The clear form
        never matches a sealed value, so a filter on both finds each row once."""
        listed = list(dict.fromkeys(values))
        if column not in EQUAL_COLUMNS.get(table, ()) or not listed:
            return tuple(listed)
        m = self.material()
        return tuple(dict.fromkeys([*(m.equal(column, v) for v in listed), *listed]))

    # ---- reads -----------------------------------------------------------------------------

    def open_arrow(self, table: str, data: pa.Table) -> pa.Table:
        """data as LanceDB returned it from `table`, opened: plain text, vectors turned back."""
        names = set(data.column_names)
        cols = [c for c in (*SEALED.get(table, ()), *EQUAL_COLUMNS.get(table, ())) if c in names]
        rotate = table in ROTATED and VECTOR in names
        if data.num_rows == 0 or not (cols or rotate):
            return data
        # Which vectors are turned is read off the sealed columns as stored: before they are opened.
        mask = self._turned(table, data, names, self.active) if rotate else None
        opened: dict[str, list[Any]] = {}
        m: _Material | None = None
        for col in cols:
            values = data[col].to_pylist()
            if any(is_sealed(v) for v in values):
                m = m or self.material()
                opened[col] = [m.open(col, v) if is_sealed(v) else v for v in values]
        for col, values in opened.items():
            data = _put(data, col, pa.array(values, pa.string()))
        if rotate:
            if mask is not None and mask.any():
                m = m or self.material()
                _, qt = m.rot(data.schema.field(VECTOR).type.list_size)
                data = _put(data, VECTOR, _turn(data[VECTOR], qt.T, mask))
        return data

    def open_rows(self, table: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The same for rows as dicts (what the search reader returns), opened in place."""
        cols = [*SEALED.get(table, ()), *EQUAL_COLUMNS.get(table, ())]
        rotate = table in ROTATED
        m: _Material | None = None
        for r in rows:
            # A row written sealed has its vector turned; one of an older store (not migrated yet) has neither.
            marker = next((c for c in SEALED.get(table, ()) if c in r), None) if rotate else None
            turned = rotate and r.get(VECTOR) is not None and (
                self.active if marker is None else r[marker] is None or is_sealed(r[marker]))
            for c in cols:
                v = r.get(c)
                if isinstance(v, str) and is_sealed(v):
                    m = m or self.material()
                    r[c] = m.open(c, v)
            if turned:
                m = m or self.material()
                _, qt = m.rot(len(r[VECTOR]))
                r[VECTOR] = np.asarray(r[VECTOR], dtype=np.float32) @ qt.T
        return rows

    def open_values(self, table: str, column: str, values: list[Any]) -> list[Any]:
        """Values of one column of table, opened."""
        if not any(is_sealed(v) for v in values):
            return values
        m = self.material()
        return [m.open(column, v) if is_sealed(v) else v for v in values]

    @staticmethod
    def _turned(table: str, data: pa.Table, names: set[str], active: bool) -> np.ndarray | None:
        """Which rows' vectors are turned. A row written sealed has its vector turned in the same write; a
        row of an older version's store (before its migration finished) has neither. A read that has none of
        the sealed columns goes by the store: every vector is turned once it is sealed, none before."""
        marker = next((c for c in SEALED.get(table, ()) if c in names), None)
        if marker is None:
            return np.full(data.num_rows, active, dtype=bool)
        return np.array([v is None or is_sealed(v) for v in data[marker].to_pylist()], dtype=bool)

    # ---- queries ---------------------------------------------------------------------------

    def query_vector(self, vector: Any) -> np.ndarray:
        """A query vector turned like the stored ones (several: one per row); as it is while the store's rows
        are not sealed yet."""
        v = np.asarray(vector, dtype=np.float32)
        if not self.active:
            return v
        q, _ = self.material().rot(v.shape[-1])
        turned: np.ndarray = v @ q.T
        return turned

    def query_terms(self, text: str) -> str:
        """The terms a full-text query on a sealed table looks for ("" when none)."""
        return self.material().terms.terms(text)

    def key_id(self) -> str:
        """A short id of the data key (no secret): recorded when a store is sealed, so a replaced key is told."""
        return self.material().key_id


def _plain(m: _Material, column: str, value: Any) -> str | None:
    return m.open(column, value) if is_sealed(value) else value


def _put(data: pa.Table, name: str, arr: pa.Array) -> pa.Table:
    i = data.schema.get_field_index(name)
    field = pa.field(name, arr.type) if i < 0 else data.schema.field(i).with_type(arr.type)
    return data.append_column(field, arr) if i < 0 else data.set_column(i, field, arr)


def _conform(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """data with the schema's columns in its order (absent nullable ones as nulls)."""
    cols = []
    for f in schema:
        i = data.schema.get_field_index(f.name)
        cols.append(data.column(i).cast(f.type) if i >= 0 else pa.nulls(data.num_rows, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


def _turn(col: pa.ChunkedArray | pa.Array, m: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """Each vector v of a fixed-size-list column as v @ m (rows where mask is False, and nulls, as they are)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    dim = arr.type.list_size
    flat = arr.values.to_numpy(zero_copy_only=False)[arr.offset * dim:(arr.offset + len(arr)) * dim]
    vecs = np.asarray(flat, dtype=np.float32).reshape(len(arr), dim)
    valid = ~np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    which = valid if mask is None else valid & mask
    out = vecs.copy()
    if which.any():
        out[which] = vecs[which] @ m
    values = pa.array(out.reshape(-1), pa.float32())
    return pa.FixedSizeListArray.from_arrays(values, dim, mask=pa.array(~valid) if not valid.all() else None)
