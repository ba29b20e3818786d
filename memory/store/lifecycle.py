"""What happens elsewhere when the store forgets or moves a memory: a registry of listeners.

The store owns erasure (memory/store/erasure.py) and edits (Store.update_memory), but the data that
hangs off a memory lives in packages above it (memory/graph: its edges and use counts), which the
store may not import. Those packages register here instead, and the store calls whatever is
registered. memory/graph registers itself when imported; `memory/__init__.py` imports it, so every
process that can open a store has the cascades installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.store.core import Store

# (store, memory ids, actor) -> None: the memories are gone; drop what refers to them.
ForgetListener = Callable[["Store", list[str], str], None]
# (store, memory id, new scope) -> None: the memory now lives in another scope.
RescopeListener = Callable[["Store", str, str], None]

_forget: list[ForgetListener] = []
_rescope: list[RescopeListener] = []


def on_forget(listener: ForgetListener) -> ForgetListener:
    """Call listener(store, memory_ids, actor) after memories are erased; registering twice is a no-op."""
    if listener not in _forget:
        _forget.append(listener)
    return listener


def on_rescope(listener: RescopeListener) -> RescopeListener:
    """Call listener(store, memory_id, scope) after a memory moves to another scope."""
    if listener not in _rescope:
        _rescope.append(listener)
    return listener


def memories_forgotten(store: Store, memory_ids: list[str], actor: str) -> None:
    """Tell every forget listener (memory/store/erasure.py calls this)."""
    for listener in list(_forget):
        listener(store, memory_ids, actor)


def memory_rescoped(store: Store, memory_id: str, scope: str) -> None:
    """Tell every rescope listener (Store.update_memory calls this)."""
    for listener in list(_rescope):
        listener(store, memory_id, scope)
