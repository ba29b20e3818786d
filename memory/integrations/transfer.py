"""JSONL export and import. Import validates every line before writing any (no half-applied files).

An export carries memories, vault entries, the relations between memories (ids only, like the
relations table) and, if asked, evidence. Reinforcement use counts stay behind: they describe how
this store has been used, not what it knows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memory.errors import InputError
from memory.store import tables as T
from memory.store.core import EvidenceSpec, MemorySpec
from memory.store.rows import kind_of, parse_time
from memory.types import MemoryType, parse_type

if TYPE_CHECKING:
    from collections.abc import Iterable

    from memory.graph.relations import EdgeSpec
    from memory.store.core import Store


class MemoryLine(BaseModel):
    """One exported memory (or vault entry). Unknown fields are errors, so typos do not vanish."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["memory", "vault"] = "memory"
    id: str | None = None
    type: str = "semantic"
    scope: str | None = None
    title: str | None = None
    text: str | None = None
    label: str | None = None
    value: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    status: str = "active"
    confidence: float = 1.0
    salience: float = 0.5
    provenance: list[str] = Field(default_factory=list)
    supersedes: str | None = None
    superseded_by: str | None = None
    valid_from: str | None = None
    valid_to: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    origin: str = "import"
    user_edited: bool = False
    pinned: bool = False
    fingerprint: str | None = None


class EvidenceLine(BaseModel):
    """One exported evidence row."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["evidence"]
    id: str | None = None
    text: str
    source: str = "import"
    app: str = ""
    window: str = ""
    speaker: str = ""
    scope: str | None = None
    captured_at: str | None = None
    redactions: int = 0
    content_hash: str | None = None
    frame_path: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    extracted_at: str | None = None


class RelationLine(BaseModel):
    """One exported edge, `src RELATION dst` (memory/graph/relations.py)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["relation"]
    id: str | None = None  # derived from the three below; carried for reading, checked on import
    src: str
    relation: str
    dst: str
    provenance: list[str] = Field(default_factory=list)
    confidence: float = Field(1.0, ge=0.0, le=1.0)
    origin: str | None = None
    scope: str | None = None  # the ends' scopes when exported; the imported memories' own are used
    dst_scope: str | None = None
    created_at: str | None = None


def export_lines(store: Store, *, scopes: Iterable[str] | None = None, include_evidence: bool = False,
                 include_secrets: bool = False) -> Iterator[dict]:
    """Every memory and vault entry (and evidence if asked), as dicts ready for JSON."""
    for m in store.list("memory", scopes=scopes, statuses=[], limit=10**9):
        yield {"kind": "memory", **m}
    for v in store.list("vault", scopes=scopes, limit=10**9):
        line = {"kind": "vault", "id": v["id"], "type": "vault", "scope": v["scope"], "label": v["label"],
                "provenance": v["provenance"], "created_at": v["created_at"], "updated_at": v["updated_at"],
                "origin": v["origin"]}
        if include_secrets:
            line["value"] = store.reveal(v["id"], actor="export")
        yield line
    from memory.graph.relations import export_edges

    for edge in export_edges(store, scopes):
        yield {"kind": "relation", **edge}
    if include_evidence:
        for e in store.list("evidence", scopes=scopes, limit=10**9):
            yield {"kind": "evidence", **e}


def write_export(store: Store, out: IO[str], *, scopes: Iterable[str] | None = None, include_evidence: bool = False,
                 include_secrets: bool = False) -> int:
    """Write the export as JSONL; returns the number of lines."""
    n = 0
    for line in export_lines(store, scopes=scopes, include_evidence=include_evidence, include_secrets=include_secrets):
        out.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
        n += 1
    return n


def _parse(path: Path) -> list[MemoryLine | EvidenceLine | RelationLine]:
    items: list[MemoryLine | EvidenceLine | RelationLine] = []
    try:
        fh = path.open(encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror} — check the path") from None
    with fh:
        for no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                data = json.loads(raw)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{no}: not valid JSON ({e.msg}) — nothing was imported") from None
            if not isinstance(data, dict):
                raise InputError(f"{path}:{no}: expected a JSON object per line — nothing was imported")
            try:
                if data.get("kind") == "relation":
                    items.append(_relation_line(data))
                    continue
                if data.get("id") is not None:
                    expected = "evidence" if data.get("kind") == "evidence" else (
                        "vault" if data.get("kind") == "vault" or data.get("type") == "vault" else "memory")
                    if kind_of(str(data["id"])) != expected:
                        raise InputError(f"id {data['id']!r} is not a {expected} id — drop the id to get a new one")
                if data.get("kind") == "evidence":
                    items.append(EvidenceLine.model_validate(data))
                else:
                    line = MemoryLine.model_validate(data)
                    if line.kind == "vault" or line.type == "vault":
                        if not line.value:
                            raise InputError(f"{path}:{no}: vault entry without a value (export with "
                                             "--include-secrets to carry values) — nothing was imported")
                    parse_type(line.type)
                    items.append(line)
            except ValidationError as e:
                err = e.errors()[0]
                where = ".".join(str(p) for p in err["loc"])
                raise InputError(f"{path}:{no}: field '{where}': {err['msg']} — nothing was imported") from None
            except InputError as e:
                msg = str(e)
                raise InputError(msg if msg.startswith(str(path)) else f"{path}:{no}: {msg} — nothing was imported") from None
    return items


def _relation_line(data: dict) -> RelationLine:
    from memory.graph.relations import EdgeSpec, check_edge, edge_id

    line = RelationLine.model_validate(data)
    spec = EdgeSpec(line.src, line.relation, line.dst, confidence=line.confidence)
    check_edge(spec)
    line.relation = spec.relation
    if line.id is not None and line.id != edge_id(line.src, line.relation, line.dst):
        raise InputError(f"relation id {line.id!r} does not match {line.src} {line.relation} {line.dst} — "
                         "drop the id, it is derived from the three")
    return line


def _to_memory_spec(m: MemoryLine) -> MemorySpec:
    t = parse_type(m.type if m.kind != "vault" else "vault")
    return MemorySpec(
        id=m.id, text=m.label if t == MemoryType.VAULT else m.text, type=t.value, scope=m.scope, title=m.title,
        details=(m.details or None) if t != MemoryType.VAULT else {"label": m.label or m.text},
        status=m.status if t != MemoryType.VAULT else "active", confidence=m.confidence, salience=m.salience,
        provenance=m.provenance, origin=m.origin, pinned=m.pinned, user_edited=m.user_edited,
        valid_from=parse_time(m.valid_from), valid_to=parse_time(m.valid_to), supersedes=m.supersedes,
        superseded_by=m.superseded_by, created_at=parse_time(m.created_at), value=m.value,
    )


def import_jsonl(store: Store, path: Path, actor: str = "import") -> dict:
    """Import a JSONL file. Lines whose id already exists are skipped, so re-import adds nothing."""
    items = _parse(Path(path))
    mem_specs: list[MemorySpec] = []
    ev_specs: list[EvidenceSpec] = []
    edges = [it for it in items if isinstance(it, RelationLine)]
    for it in items:
        if isinstance(it, RelationLine):
            continue
        if isinstance(it, EvidenceLine):
            ev_specs.append(EvidenceSpec(
                id=it.id, text=it.text, source=it.source, app=it.app, window=it.window, speaker=it.speaker,
                scope=it.scope, captured_at=parse_time(it.captured_at), redactions=it.redactions,
                frame_path=it.frame_path, meta=it.meta or None))
        else:
            mem_specs.append(_to_memory_spec(it))
    # Validate all rows (types, sizes, scopes) before the first write.
    from memory.types import utcnow

    now = utcnow()
    for s in mem_specs:
        (store.vault_row if parse_type(s.type) == MemoryType.VAULT else store.memory_row)(s, now)
    for ev in ev_specs:
        store.evidence_row(ev, now)
    existing = _existing_ids(store, [s.id for s in mem_specs + ev_specs if s.id])
    forgotten = _forgotten_ids(store, [s.id for s in mem_specs + ev_specs if s.id])
    skip = existing | forgotten
    new_mem = [s for s in mem_specs if not s.id or s.id not in skip]
    new_ev = [s for s in ev_specs if not s.id or s.id not in skip]
    edge_specs, edges_forgotten = _edge_specs(store, path, edges, {s.id for s in mem_specs if s.id})
    from models.embedder import bulk_threads

    with bulk_threads(store.config.models.embedder_bulk_threads):
        for start in range(0, len(new_mem), 256):
            store.add_memories(new_mem[start:start + 256], actor=actor)
        for start in range(0, len(new_ev), 256):
            store.add_evidence_batch(new_ev[start:start + 256], actor=actor)
    from memory.graph.relations import add_relations

    added = [e for start in range(0, len(edge_specs), 256)
             for e in add_relations(store, edge_specs[start:start + 256], actor=actor) if e["created"]]
    return {"imported": len(new_mem) + len(new_ev), "memories": len(new_mem), "evidence": len(new_ev),
            "relations": len(added), "skipped_existing": len(existing), "skipped_forgotten": len(forgotten - existing),
            "relations_skipped_forgotten": edges_forgotten}


def _edge_specs(store: Store, path: Path, edges: list[RelationLine], in_file: set[str]) -> tuple[list[EdgeSpec], int]:
    """The edges to add, checked before anything is written: each end must be a memory of the file or
    of the store. An edge to a forgotten memory is skipped (and counted), never brought back."""
    from memory.graph.relations import EdgeSpec

    ends = sorted({e for line in edges for e in (line.src, line.dst)})
    gone = _forgotten_ids(store, ends)
    known = in_file | ids_present(store, "memory", [e for e in ends if e not in in_file])  # a shared scope's too
    specs, skipped = [], 0
    for line in edges:
        if line.src in gone or line.dst in gone:
            skipped += 1
            continue
        for end in (line.src, line.dst):
            if end not in known:
                raise InputError(f"{path}: relation {line.src} {line.relation} {line.dst}: no memory {end} in the "
                                 "file or the store — nothing was imported")
        specs.append(EdgeSpec(line.src, line.relation, line.dst, list(line.provenance), line.confidence,
                              line.origin))
    return specs, skipped


def ids_present(store: Store, source: str, ids: list[str], local: bool = False) -> set[str]:
    """Which of these ids a kind (this device's and the shared scopes') or side table holds: `id IN (...)`
    queries of 500, never a scan of the table. local: this device's rows only."""
    return set(store.get_many(source, ids, ["id"], local=local))


def _existing_ids(store: Store, ids: list[str]) -> set[str]:
    out: set[str] = set()
    for kind in ("memory", "evidence", "vault"):
        # This device's rows, as the import writes here (a shared scope's memory is read from its bucket too).
        out |= ids_present(store, kind, [i for i in ids if kind_of(i) == kind], local=kind == "evidence")
    return out


def _forgotten_ids(store: Store, ids: list[str]) -> set[str]:
    # An export made before a delete must not bring the deleted rows back (principle 3).
    return ids_present(store, T.TOMBSTONES, ids)
