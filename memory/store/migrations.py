"""Named, append-only schema migrations, applied in order when the store opens.

Never edit or reorder a released migration: add a new one. Each is recorded in `_migrations`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from memory.store import tables as T
from memory.types import utcnow

if TYPE_CHECKING:
    from lancedb import DBConnection

log = logging.getLogger(__name__)


def m001_initial(db: DBConnection, dim: int) -> str:
    """Create the five tables of the data model."""
    existing = set(db.table_names())
    for name, schema in (
        (T.EVIDENCE, T.evidence_schema(dim)),
        (T.MEMORIES, T.memories_schema(dim)),
        (T.VAULT, T.vault_schema()),
        (T.TOMBSTONES, T.tombstones_schema()),
        (T.AUDIT, T.audit_schema()),
    ):
        if name not in existing:
            db.create_table(name, schema=schema)
    return f"tables created, vector dim {dim}"


def m002_fts_indexes(db: DBConnection, dim: int) -> str:
    """Full-text indexes: memory search text, evidence text, vault labels (never vault values)."""
    from memory.store.indexes import ensure_fts

    ensure_fts(db.open_table(T.MEMORIES), "search_text")
    ensure_fts(db.open_table(T.EVIDENCE), "text")
    ensure_fts(db.open_table(T.VAULT), "label")
    return "fts on memories.search_text, evidence.text, vault.label"


def m003_evidence_search_text(db: DBConnection, dim: int) -> str:
    """Evidence gains `search_text` (text + speaker + resolved dates, see memory/store/context.py) with its own FTS index."""
    from memory.store.indexes import ensure_fts

    table = db.open_table(T.EVIDENCE)
    if "search_text" not in table.schema.names:
        # Existing rows start from their plain text; new rows get the full context at ingest.
        table.add_columns({"search_text": "text"})
    ensure_fts(table, "search_text")
    return "evidence.search_text added (from text) with fts"


def m004_derivations_and_proposals(db: DBConnection, dim: int) -> str:
    """Extraction ledger (evidence → memory ids) and the dream pass's proposals for review."""
    existing = set(db.table_names())
    for name, schema in ((T.DERIVATIONS, T.derivations_schema()), (T.PROPOSALS, T.proposals_schema())):
        if name not in existing:
            db.create_table(name, schema=schema)
    return "derivations and proposals tables"


def m005_relations(db: DBConnection, dim: int) -> str:
    """Typed edges between memories (BECAUSE, TRIGGERED, CONTRADICTS, UPDATES, RESOLVES, MENTIONS)."""
    if T.RELATIONS not in set(db.table_names()):
        db.create_table(T.RELATIONS, schema=T.relations_schema())
    return "relations table"


def m006_reinforcement(db: DBConnection, dim: int) -> str:
    """Use counts and strengths per memory, kept apart from the memories table (see memory/graph/reinforcement.py)."""
    if T.USAGE not in set(db.table_names()):
        db.create_table(T.USAGE, schema=T.usage_schema())
    return "memory_usage table"


def m007_evidence_runs(db: DBConnection, dim: int) -> str:
    """Evidence gains `run_id` and `run_pos`: where a row sits in its stream, so search can credit it
    with the scores of the turns around it (memory/context.place_in_runs). Existing rows are placed here."""
    from memory.store.context import place_in_runs

    table = db.open_table(T.EVIDENCE)
    if "run_id" in table.schema.names:
        return "evidence runs already present"
    table.add_columns({"run_id": "CAST(NULL AS STRING)", "run_pos": "CAST(NULL AS INT)"})
    keys = table.search().select(["id", "captured_at", "scope", "source", "app", "window"]).limit(None).to_list()
    placed = [{"id": r["id"], "run_id": run, "run_pos": pos}
              for r, (run, pos) in zip(keys, place_in_runs(keys, {}), strict=True)]
    schema = pa.schema([("id", pa.string()), ("run_id", pa.string()), ("run_pos", pa.int32())])
    for start in range(0, len(placed), 50_000):
        # Only these columns travel: the rest of each row (its vector) is left as it is.
        table.merge_insert("id").when_matched_update_all().execute(
            pa.Table.from_pylist(placed[start:start + 50_000], schema=schema))
    return f"evidence run_id/run_pos added, {len(placed)} rows placed"


def m008_sealed_terms(db: DBConnection, dim: int) -> str:
    """Memories, evidence and vault gain `fts_terms`, the keyed hashes of their words' stems that the sealed
    full-text index holds (memory/store/sealer.py, terms.py). The rows are sealed and their terms made by
    memory/store/seal_migration.py, which needs the data key; this only adds the column and its index."""
    from memory.store.indexes import TERMS_COLUMN, ensure_fts

    for name in (T.MEMORIES, T.EVIDENCE, T.VAULT):
        table = db.open_table(name)
        if TERMS_COLUMN not in table.schema.names:
            table.add_columns({TERMS_COLUMN: "CAST(NULL AS STRING)"})
        ensure_fts(table, TERMS_COLUMN)
    return "fts_terms on memories, evidence, vault"


MIGRATIONS: list[tuple[str, Callable[[DBConnection, int], str]]] = [
    ("m001_initial", m001_initial),
    ("m002_fts_indexes", m002_fts_indexes),
    ("m003_evidence_search_text", m003_evidence_search_text),
    ("m004_derivations_and_proposals", m004_derivations_and_proposals),
    ("m005_relations", m005_relations),
    ("m006_reinforcement", m006_reinforcement),
    ("m007_evidence_runs", m007_evidence_runs),
    ("m008_sealed_terms", m008_sealed_terms),
]


def apply_migrations(db: DBConnection, dim: int) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied now."""
    if T.MIGRATIONS not in db.table_names():
        db.create_table(T.MIGRATIONS, schema=T.migrations_schema())
    log_table = db.open_table(T.MIGRATIONS)
    done = {r["name"] for r in log_table.to_arrow().to_pylist()}
    applied: list[str] = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        note = fn(db, dim)
        log_table.add([{"name": name, "applied_at": utcnow(), "note": note}])
        log.info("migration %s applied: %s", name, note)
        applied.append(name)
    return applied
