"""The memory graph: typed relations between memories, and reinforcement by use.

Importing this package registers its erasure cascades with the store (memory/store/lifecycle.py):
forgetting a memory drops its edges and use counts, moving it to another scope moves its edges'
end scopes. `memory/__init__.py` imports it, so the cascades are in place in every process. The
modules load only when a cascade runs: importing the package stays cheap.

See docs/architecture.md for the package map.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory.store import lifecycle

if TYPE_CHECKING:
    from memory.store.core import Store


def _drop_edges_and_usage(store: Store, memory_ids: list[str], actor: str) -> None:
    from memory.graph.reinforcement import forget_usage
    from memory.graph.relations import drop_for_memories

    drop_for_memories(store, memory_ids, actor)  # an edge is a fact about both ends: it goes with either
    forget_usage(store, memory_ids)  # use counts of a memory that is gone


def _move_edges(store: Store, memory_id: str, scope: str) -> None:
    from memory.graph.relations import rescope

    rescope(store, memory_id, scope)


lifecycle.on_forget(_drop_edges_and_usage)
lifecycle.on_rescope(_move_edges)
