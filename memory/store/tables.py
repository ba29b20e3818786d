"""Arrow schemas of the LanceDB tables (docs/architecture.md, "Data model")."""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us")  # naive UTC; LanceDB filters compare it with `timestamp '...'` literals

EVIDENCE = "evidence"
MEMORIES = "memories"
VAULT = "vault"
TOMBSTONES = "tombstones"
AUDIT = "audit"
MIGRATIONS = "_migrations"
DERIVATIONS = "derivations"
PROPOSALS = "proposals"
RELATIONS = "relations"
USAGE = "memory_usage"
REEMBED_STAGING = "reembed_staging"  # new vectors while `mirador reembed` runs (memory/store/reembed.py)
OUTBOX = "remote_outbox"  # writes of shared scopes waiting to be sent (memory/store/remote.py)
EV_OUTBOX = "remote_evidence_outbox"  # evidence copies of shared scopes waiting to be sent (remote_evidence.py)


def evidence_schema(dim: int) -> pa.Schema:
    """One row per captured unit: screen text, an utterance, a note, an imported message."""
    return pa.schema([
        ("id", pa.string()),
        ("captured_at", TS),
        ("source", pa.string()),
        ("app", pa.string()),
        ("window", pa.string()),
        ("speaker", pa.string()),
        ("scope", pa.string()),
        ("text", pa.string()),
        ("redactions", pa.int32()),
        ("content_hash", pa.string()),
        ("frame_path", pa.string()),
        ("meta", pa.string()),
        ("vector", pa.list_(pa.float32(), dim)),
        ("extracted_at", TS),
    ])


def memories_schema(dim: int) -> pa.Schema:
    """Typed memories; `details` is the type's JSON fields, `search_text` what FTS indexes."""
    return pa.schema([
        ("id", pa.string()),
        ("type", pa.string()),
        ("scope", pa.string()),
        ("title", pa.string()),
        ("text", pa.string()),
        ("details", pa.string()),
        ("search_text", pa.string()),
        ("vector", pa.list_(pa.float32(), dim)),
        ("status", pa.string()),
        ("confidence", pa.float32()),
        ("salience", pa.float32()),
        ("provenance", pa.list_(pa.string())),
        ("supersedes", pa.string()),
        ("superseded_by", pa.string()),
        ("valid_from", TS),
        ("valid_to", TS),
        ("created_at", TS),
        ("updated_at", TS),
        ("origin", pa.string()),
        ("user_edited", pa.bool_()),
        ("pinned", pa.bool_()),
        ("fingerprint", pa.string()),
    ])


def vault_schema() -> pa.Schema:
    """Knowledge-vault entries. No vector and no text column for the value: only the label is searchable."""
    return pa.schema([
        ("id", pa.string()),
        ("label", pa.string()),
        ("value_enc", pa.string()),
        ("scope", pa.string()),
        ("provenance", pa.list_(pa.string())),
        ("created_at", TS),
        ("updated_at", TS),
        ("origin", pa.string()),
        ("fingerprint", pa.string()),
    ])


def tombstones_schema() -> pa.Schema:
    """What survives a delete: enough to stop re-extraction, nothing to read."""
    return pa.schema([
        ("id", pa.string()),
        ("kind", pa.string()),
        ("fingerprint", pa.string()),
        ("deleted_at", TS),
        ("scope", pa.string()),
    ])


def audit_schema() -> pa.Schema:
    """Append-only change log. before/after are JSON; they are scrubbed when the entity is forgotten."""
    return pa.schema([
        ("id", pa.string()),
        ("at", TS),
        ("actor", pa.string()),
        ("action", pa.string()),
        ("entity_kind", pa.string()),
        ("entity_id", pa.string()),
        ("scope", pa.string()),
        ("before", pa.string()),
        ("after", pa.string()),
    ])


def migrations_schema() -> pa.Schema:
    return pa.schema([("name", pa.string()), ("applied_at", TS), ("note", pa.string())])


def derivations_schema() -> pa.Schema:
    """Which evidence an automated pass derived which memory from: ids only, so a delete can block re-extraction."""
    return pa.schema([
        ("memory_id", pa.string()),
        ("evidence_id", pa.string()),
        ("type", pa.string()),
        ("actor", pa.string()),
        ("created_at", TS),
    ])


def proposals_schema() -> pa.Schema:
    """Changes a dream pass may not apply itself (they would hide a memory): ids and a reason, no content."""
    return pa.schema([
        ("id", pa.string()),
        ("kind", pa.string()),
        ("target_id", pa.string()),
        ("other_id", pa.string()),
        ("scope", pa.string()),
        ("reason", pa.string()),
        ("status", pa.string()),
        ("created_at", TS),
        ("decided_at", TS),
    ])


def relations_schema() -> pa.Schema:
    """Typed edges between memories (memory/graph/relations.py): ids, a type and evidence ids, no content.

    `scope` is the source memory's scope and `dst_scope` the target's, so a read filters both ends
    inside the query (principle 5).
    """
    return pa.schema([
        ("id", pa.string()),
        ("src", pa.string()),
        ("dst", pa.string()),
        ("relation", pa.string()),
        ("provenance", pa.list_(pa.string())),
        ("confidence", pa.float32()),
        ("origin", pa.string()),
        ("scope", pa.string()),
        ("dst_scope", pa.string()),
        ("created_at", TS),
    ])


def usage_schema() -> pa.Schema:
    """How often and how recently answers used a memory (memory/graph/reinforcement.py): ids and numbers, no content."""
    return pa.schema([
        ("memory_id", pa.string()),
        ("type", pa.string()),  # a memory's type never changes; its half-life applies to the decay
        ("scope", pa.string()),
        ("uses", pa.int64()),
        ("strength", pa.float64()),  # at last_used_at; it decays from there (half-life per type)
        ("first_used_at", TS),
        ("last_used_at", TS),
    ])


# The columns a read selects for a whole row of each kind (every column but the vector); the public
# column lists of the store's data-access API (Store.rows / Store.get_many).
MEMORY_COLS = [f.name for f in memories_schema(1) if f.name != "vector"]
EVIDENCE_COLS = [f.name for f in evidence_schema(1) if f.name != "vector"]
VAULT_COLS = [f.name for f in vault_schema()]
RELATION_COLS = [f.name for f in relations_schema()]
