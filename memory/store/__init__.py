"""The store: LanceDB tables and their schemas, migrations, rows, scoped filters, audit, erasure,
vault encryption, indexes and re-embedding. It imports no other memory subpackage.

`Store` (core.py) is the data-access API every other package uses: rows / scan / get_many to read,
commit / append / write_audit to write, table() for the tables beyond the three kinds, and the column
lists in tables.py. The rest: specs.py (what a caller hands in), builders.py (spec -> row), filters.py
(the SQL filters), embedder_record.py (which model made the vectors), lifecycle.py (listeners that
packages above register for forget and rescope), atomic.py (file writes a reader never sees half of).

See docs/architecture.md for the package map.
"""

from __future__ import annotations

import importlib
from typing import Any

from memory.store import lazy_deps

lazy_deps.install()  # before any module of this package imports lancedb (lazy_deps.py says why)

_EXPORTS = {"Store": "memory.store.core", "MemorySpec": "memory.store.core", "EvidenceSpec": "memory.store.core"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    # Lazy, so that importing a light module of this package (scopes, rows, tables) does not load LanceDB.
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory.store' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
