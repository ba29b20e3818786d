"""Index management. Builds run at open, after batches and on a schedule — never on the query path."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def _fts_config():
    from lancedb.index import FTS

    # Stemming and stop words help natural-language questions; positions are not needed (no phrases).
    return FTS(with_position=False, stem=True, remove_stop_words=True, lower_case=True, ascii_folding=True)


def has_index(table, column: str) -> bool:
    """True if an index covers the column."""
    return any(column in ix.columns for ix in table.list_indices())


def ensure_fts(table, column: str, replace: bool = False) -> None:
    """Create the full-text index on a column if missing (or rebuild it when replace=True)."""
    if replace or not has_index(table, column):
        table.create_index(column, config=_fts_config(), replace=True)
        log.debug("fts index built on %s.%s", table.name, column)
