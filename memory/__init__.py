"""The memory core, one subpackage per capability: `store` (tables, rows, audit, erasure, vault),
`retrieval` (search, rank, recall), `consolidation` (extraction, dream, scheduler), `graph` (relations,
reinforcement), `mcp` (the MCP server) and `integrations` (hooks, importers, export/import). The modules
at this level (config, errors, scopes, types) are the vocabulary every subpackage shares.
See docs/architecture.md.

Names are imported lazily: `mirador --version` and the assistant hooks import this package, and
pulling in LanceDB, pydantic models and numpy up front cost seconds of start-up on every call.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Config": "memory.config",
    "data_dir": "memory.config",
    "load_config": "memory.config",
    "save_config": "memory.config",
    "ConfigError": "memory.errors",
    "InputError": "memory.errors",
    "MiradorError": "memory.errors",
    "NotFoundError": "memory.errors",
    "EvidenceSpec": "memory.store.core",
    "MemorySpec": "memory.store.core",
    "Store": "memory.store.core",
}

__all__ = sorted(_EXPORTS)

# The graph's erasure cascades (edges and use counts go with a forgotten memory) hook into the store
# when memory.graph is imported; importing it here installs them in every process that has a store.
# It is cheap: the graph's modules load only when a cascade runs.
import memory.graph  # noqa: E402,F401  isort: skip


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
