"""Idempotency keys: a retried add returns what the first call stored instead of storing it twice.

A caller that did not hear back (a timeout, a dropped connection, an error it cannot read) cannot tell whether
its add was stored, and `evidence_add` stores the same text twice if asked twice. With a key (the MCP tools'
`idempotency_key`, the CLI's `--idempotency-key`), the new row's id is derived from (kind, actor, key). So the
key is stored in the same commit as the row — no second table, no second commit that a full disk could refuse
in between — and a retry with the key finds that id: it gets the first call's row back and nothing is written.

Rules a caller can rely on:
- keys are per actor (the person at the CLI, each MCP client by its name): two clients never collide;
- a key names one write: the same key with another text is refused (InputError), unless the memory it made was
  edited since (its text then differs for that reason, and the row is still the one the key made);
- a key whose row was erased since is refused too: the person erased it, a retry must not bring it back;
- a retry racing the first call in the same process waits for it (the store's write lock), then finds its row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from memory.errors import InputError
from memory.scopes import in_scopes
from memory.store.rows import PREFIX

if TYPE_CHECKING:
    from memory.store.core import Store

KEY_MAX_CHARS = 200
_SAME = {"evidence": ("content_hash",), "memory": ("fingerprint", "type")}  # what makes two adds the same write


def check_key(key: str) -> str:
    """The key, stripped; InputError when it is empty, too long or not printable."""
    k = (key or "").strip()
    if not k or len(k) > KEY_MAX_CHARS or not k.isprintable():
        raise InputError(f"an idempotency key is 1 to {KEY_MAX_CHARS} printable characters, e.g. a UUID the caller "
                         "makes once per write and sends again with each retry of it")
    return k


def keyed_id(kind: str, actor: str, key: str) -> str:
    """The id an add of `kind` by `actor` with `key` gets: the same for every retry."""
    if kind not in _SAME:
        raise InputError(f"idempotency keys are for memories and evidence, not {kind} entries")
    digest = hashlib.sha256(f"{kind}\0{actor}\0{check_key(key)}".encode()).hexdigest()
    return PREFIX[kind] + digest[:24]


def add_once(store: Store, kind: str, actor: str, key: str, row: dict[str, Any],
             write: Callable[[str], dict[str, Any]], scopes: Iterable[str] | None = None) -> tuple[dict[str, Any], bool]:
    """(the row, replayed): the row an earlier add with this key stored, or write(id) now.

    row: what this call would store (the store's row builders make it, text redacted), compared with the earlier
    row; write(id): stores it under that id and returns its public row. scopes: what the caller may read (an MCP
    client's); an earlier row moved out of them since is not handed back (principle 5)."""
    id_ = keyed_id(kind, actor, key)
    with store.write_lock:  # a retry arriving while its first call commits waits here, then finds the row
        first = earlier(store, kind, id_, key, row, scopes)
        if first is not None:
            return first, True
        return write(id_), False


def earlier(store: Store, kind: str, id_: str, key: str, row: dict[str, Any],
            scopes: Iterable[str] | None = None) -> dict[str, Any] | None:
    """The public row stored under id_ by an earlier call with key; None when there is none."""
    cols = ["id", "scope", *_SAME[kind]] + (["created_at", "updated_at"] if kind == "memory" else [])
    got = store.get_many(kind, [id_], cols).get(id_)
    if got is not None and scopes is not None and not in_scopes(got["scope"], list(scopes)):
        # Its own earlier write, moved to a scope this caller may not read: say only that it exists.
        raise InputError(f"what an earlier call with idempotency key {key!r} stored ({id_}) was moved out of your "
                         "scopes since; nothing was stored")
    if got is None:
        if store.tombstoned(ids=[id_]):
            raise InputError(f"what an earlier call with idempotency key {key!r} stored ({id_}) was erased since; "
                             "nothing was stored — to store it again, use a new key")
        return None
    same = all(got.get(c) == row.get(c) for c in _SAME[kind])
    edited = kind == "memory" and got.get("updated_at") != got.get("created_at")
    if not same and not edited:
        raise InputError(f"idempotency key {key!r} was used for a different {kind} ({id_}); nothing was stored — "
                         "a key names one write: send a new key with new content")
    return dict(store.get(id_, scopes=scopes))
