"""What each MCP tool returns, as pydantic models: clients get each tool's output schema (tools/list), and each
tool body in memory/mcp/tools.py returns its model (its return annotation; memory/mcp/catalog.py names the
same model), which memory/mcp/server.py sends as it is.

Schemas are exact: every model forbids fields it does not declare (additionalProperties false), so every field
a tool can return is declared here, those it adds only now and then (a replayed add's `replayed`, a hit's
`score`) included. A result carries the fields its tool set, no more: the server dumps with exclude_unset, so a
field the tool left out is absent, not sent as null.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# Times are ISO 8601 strings in UTC; a few come straight from a row as datetimes and are sent the same way.
Time = datetime | str


class _Out(BaseModel):
    # Exact: a field a tool sets without declaring it here is an error (in the tests), not a surprise to a client.
    model_config = ConfigDict(extra="forbid")


# ---- memories -------------------------------------------------------------------------------------------


class MemoryBrief(_Out):
    id: str = Field(description="the memory id (mem_…)")
    type: str
    scope: str
    title: str | None = None
    text: str = Field(description="the memory's text, cut to 400 characters")
    status: str | None = None
    confidence: float | None = None
    updated_at: Time | None = Field(None, description="last change, ISO 8601 UTC")
    evidence: int = Field(0, description="how many evidence rows it rests on")


class MemoryHit(_Out):
    """A memory, or a vault entry's label (never its value), as a search lists it."""

    id: str = Field(description="a memory id (mem_…) or vault entry id (vlt_…)")
    type: str = Field(description="the memory type, or vault")
    scope: str
    title: str | None = None
    text: str | None = Field(None, description="the memory's text, cut to 400 characters (not for vault entries)")
    label: str | None = Field(None, description="a vault entry's label")
    note: str | None = None
    status: str | None = None
    confidence: float | None = None
    updated_at: Time | None = None
    evidence: int | None = Field(None, description="how many evidence rows it rests on")
    score: float | None = Field(None, description="relevance, higher is better")


class MemorySearch(_Out):
    query: str
    scopes: list[str] = Field(description="the scopes searched")
    results: list[MemoryHit] = Field(description="best first")
    hint: str


class RecallItem(_Out):
    id: str
    kind: str = Field(description="memory or evidence")
    type: str = Field(description="the memory type, or the evidence's source")
    time: str | None = Field(None, description="ISO 8601 UTC")
    provenance: str
    level: str = Field(description="full, summary or header: how much of it the text holds")
    text: str = Field(description="exactly what this item adds to the text block")
    tokens: int
    score: float
    scope: str = ""


class Recall(_Out):
    query: str
    budget_tokens: int
    used_tokens: int
    scopes: list[str]
    text: str = Field(description="the context block to read")
    items: list[RecallItem] = Field(description="what the text was built from, with ids")


class MemoryRecord(_Out):
    """Every field of one memory, or of one vault entry (its value only for tokens allowed the vault)."""

    id: str
    type: str
    scope: str
    title: str | None = None
    text: str | None = None
    label: str | None = Field(None, description="vault entries: the label")
    value: str | None = Field(None, description="vault entries: the secret, or null when this token may not read it")
    details: dict[str, Any] | None = None
    status: str | None = None
    confidence: float | None = None
    salience: float | None = None
    provenance: list[str] | None = Field(None, description="the evidence ids it rests on (evidence_get reads them)")
    supersedes: str | None = None
    superseded_by: str | None = None
    valid_from: Time | None = None
    valid_to: Time | None = None
    created_at: Time | None = None
    updated_at: Time | None = None
    origin: str | None = None
    user_edited: bool | None = None
    pinned: bool | None = None
    note: str | None = Field(None, description="vault entries: why value is null")
    hint: str | None = None


class MemoryAdded(_Out):
    created: MemoryBrief | None = Field(description="the new memory; null when the same text was already kept")
    existing: MemoryBrief | None = Field(None, description="the memory that already holds this text")
    actor: str = Field(description="who the audit trail records as the writer")
    hint: str | None = None
    replayed: bool | None = Field(None, description="true: an earlier call with this idempotency_key stored it (this "
                                  "is that memory, as it is now); nothing was stored again")


class MemoryUpdated(_Out):
    updated: MemoryBrief
    actor: str


class Forgotten(_Out):
    deleted: int = Field(description="rows erased")
    by_kind: dict[str, int] = Field(description="rows erased per kind: memory, evidence, vault")
    actor: str


class Usage(_Out):
    id: str
    uses: int | None = None
    strength: float | None = None
    salience: float | None = None
    effective_salience: float | None = None
    last_used_at: Time | None = None
    scope: str | None = None
    type: str | None = None


class NotFound(_Out):
    id: str
    reason: str


class Reinforced(_Out):
    reinforced: list[Usage] = Field(description="each memory's use count and strength after this call")
    not_found: list[NotFound] = Field(description="ids not recorded, with why")
    actor: str
    hint: str | None = None


class MemoryPage(_Out):
    scopes: list[str] = Field(description="the scopes listed")
    types: list[str] | None = Field(description="the types listed; null: all but vault")
    status: list[str] = Field(description="the statuses listed")
    results: list[MemoryBrief] = Field(description="most recently changed first, then by id")
    next_cursor: str | None = Field(description="pass as cursor for the next page; null when this is the last")
    hint: str


# ---- evidence ---------------------------------------------------------------------------------------------


class EvidenceBrief(_Out):
    id: str = Field(description="the evidence id (evd_…)")
    captured_at: Time | None = Field(description="when it was seen or said, ISO 8601 UTC")
    source: str | None = Field(description="screen, audio, manual, import or mcp")
    app: str | None = Field(description="the app it came from")
    window: str | None = Field(description="the window or page title")
    scope: str = Field(description="the scope it is stored in")
    text: str = Field(description="the text, cut to 400 characters (the lines that match the query, when it is longer)")
    score: float | None = Field(None, description="relevance, higher is better")


class EvidenceSearch(_Out):
    query: str
    scopes: list[str]
    results: list[EvidenceBrief] = Field(description="best first")
    hint: str


class EvidenceRow(_Out):
    id: str
    captured_at: Time | None = None
    source: str | None = None
    app: str | None = None
    window: str | None = None
    speaker: str | None = None
    scope: str
    text: str = Field(description="the text, cut to max_chars")
    truncated: bool = Field(description="true when the text was cut")
    redactions: int | None = Field(None, description="secrets replaced by [REDACTED:kind] before it was stored")
    frame_path: str | None = None
    extracted_at: Time | None = None
    meta: dict[str, Any] | None = Field(None, description="what capture recorded besides the text")


class EvidenceAdded(_Out):
    created: EvidenceBrief
    redactions: dict[str, int] = Field(description="secrets replaced before storing, per kind (e.g. aws_key)")
    actor: str = Field(description="who the audit trail records as the writer")
    hint: str
    replayed: bool | None = Field(None, description="true: an earlier call with this idempotency_key stored it (this "
                                  "is its row); nothing was stored again")


class EvidenceForget(_Out):
    dry_run: bool = Field(description="true: nothing was erased, this is what would go")
    scope: str
    app: str | None
    since: str | None
    until: str | None
    counts: dict[str, int] = Field(description="what the filters match: evidence, frames, memories, review")
    description: str = Field(description="the same in words, for the person")
    deleted: int = Field(0, description="rows erased (0 in a dry run)")
    by_kind: dict[str, int] | None = None
    reviewed: int | None = Field(None, description="memories that lost these sources and went to review")
    frames_removed: int | None = None
    actor: str | None = None
    hint: str | None = None


class Sample(_Out):
    id: str
    text: str


class AppActivity(_Out):
    app: str
    count: int = Field(description="evidence rows from this app in the span")
    first: str | None
    last: str | None
    windows: list[str] = Field(description="its most frequent windows")
    sources: list[str]
    samples: list[Sample]


class Episode(_Out):
    id: str
    title: str | None = None
    at: str | None = None


class Timeline(_Out):
    since: str
    until: str
    scopes: list[str]
    evidence_rows: int
    capped: bool = Field(description="true when the span held more rows than one call reads")
    apps: list[AppActivity] = Field(description="most active app first")
    episodes: list[Episode] = Field(description="episodic memories changed in the span")


class Visible(_Out):
    memories: int
    evidence: int
    vault_entries: int


class Status(_Out):
    server: str
    client: str
    actor: str
    read_scopes: list[str]
    write_scope: str | None = Field(description="null: this token is read-only")
    can_write: bool
    vault_values: bool = Field(description="whether this token may read vault values")
    visible: Visible = Field(description="how much this token can see")
    last_evidence_at: str | None = Field(description="the newest evidence it can see: is capture running?")
    tools: str


# ---- relations --------------------------------------------------------------------------------------------


class MemoryEnd(_Out):
    id: str
    type: str | None = None
    scope: str | None = None
    title: str | None = None
    status: str | None = None
    text: str | None = None


class Edge(_Out):
    id: str = Field(description="the relation id (rel_…)")
    src: str
    relation: str
    dst: str
    provenance: list[str] = Field(description="evidence ids the edge rests on")
    confidence: float
    origin: str | None = None
    scope: str | None = None
    dst_scope: str | None = None
    created_at: str | None = None


class Neighbour(Edge):
    direction: str = Field(description="out: this memory is src; in: it is dst")
    other: MemoryEnd


class Related(_Out):
    id: str
    scopes: list[str]
    relations: list[Neighbour]
    hint: str


class HopEvidence(_Out):
    id: str
    source: str | None = None
    app: str | None = None
    window: str | None = None
    scope: str | None = None
    captured_at: str | None = None
    text: str | None = None


class Hop(Edge):
    depth: int
    from_: str = Field(alias="from")
    to: str
    memory: MemoryEnd
    evidence: list[HopEvidence]

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Chain(_Out):
    start: MemoryEnd
    direction: str
    relations: list[str]
    depth: int
    hops: list[Hop]
    truncated: bool = Field(description="true when more hops were found than one call lists")
    scopes: list[str]
    hint: str


class NewEdge(Edge):
    created: bool | None = Field(None, description="false when the edge existed: its evidence was merged in")


class EdgeAdded(_Out):
    relation: NewEdge = Field(description="the edge as stored")
    actor: str


class RelationRemoved(_Out):
    removed: Edge = Field(description="the removed edge")
    actor: str = Field(description="who the audit trail records as the remover")


# ---- consolidate --------------------------------------------------------------------------------------------


class PlanStep(_Out):
    kind: str = Field(description="merge, provenance, supersede, decay, crystallise or archive")
    action: str = Field(description="apply (done without asking) or 'propose to the person' (waits for review)")
    scope: str
    reason: str
    target_id: str | None = None
    other_id: str | None = None
    text: str | None = Field(None, description="the text of a memory crystallise would create")
    ids: list[str] | None = Field(None, description="the memories a step covers (decay: the first 20)")
    count: int | None = Field(None, description="how many memories the step covers in all")


class Extraction(_Out):
    """What one extraction run did (memory/consolidation/extraction.py ExtractionReport)."""

    evidence: int = Field(description="evidence rows read")
    created: int = Field(description="memories created active")
    candidates: int = Field(description="memories created as candidates for review")
    corroborated: int = Field(description="existing memories the evidence confirmed")
    superseded: int
    relations: int = Field(description="relations written between memories")
    skipped: int
    engines: dict[str, int] = Field(description="batches per engine (llm, rules)")
    memory_ids: list[str] = Field(description="the memories made or touched (the first 50)")


class Dream(_Out):
    """The dream steps a run applied in the write scope."""

    applied: int = Field(description="steps done")
    proposed: int = Field(description="steps waiting for the person's review")
    counts: dict[str, int] = Field(description="steps per kind:action")
    steps: list[PlanStep] = Field(description="the steps (at most 100)")


class Consolidation(_Out):
    dry_run: bool = Field(description="true: nothing was written, this is the plan")
    pending_evidence: int = Field(description="evidence rows not yet extracted (in your scopes; after this call "
                                  "when it ran)")
    scopes: list[str] | None = Field(None, description="dry run: the scopes the plan covers")
    would_extract: int | None = Field(None, description="dry run: evidence rows a run would extract now")
    since: str | None = Field(None, description="dry run: changes after this time are consolidated")
    until: str | None = Field(None, description="dry run: up to this time")
    counts: dict[str, int] | None = Field(None, description="dry run: planned steps per kind:action")
    steps: list[PlanStep] | None = Field(None, description="dry run: the planned steps (at most 100)")
    steps_total: int | None = None
    scope: str | None = Field(None, description="run: the write scope it ran in")
    extraction: Extraction | None = Field(None, description="run: what extraction did")
    dream: Dream | None = Field(None, description="run: dream steps applied and proposed, with the steps")
    actor: str | None = None
    hint: str
