"""Typed edges between memories: why a decision was made, what triggered, fixed or replaced what.

An edge reads as a sentence, `SRC RELATION DST`:

    decision BECAUSE reason        the reason (dst) is the cause of the decision (src)
    alert    TRIGGERED rollback    the trigger (src) caused the effect (dst)
    fix      RESOLVES problem      the problem (dst) led to the fix (src)
    new      UPDATES old           the old value (dst) came first; the new one replaces it
    a        CONTRADICTS b         no direction of cause
    a        MENTIONS b            no direction of cause

Edges hold ids, a type, evidence ids (provenance), a confidence and an origin — no content — in
the `relations` table. Both ends' scopes are columns, so every read filters both inside the query
(principle 5); the other end is then read through the memories table with the same filter. One
edge per (src, relation, dst): its id is a hash of the three, so adding it twice changes nothing
but provenance and confidence. Every change is audited (principle 6). Forgetting a memory removes
its edges (memory/store/erasure.py calls `drop_for_memories`). Superseding a memory leaves its edges on
the old id (they were true of that version) and links the new one to it with UPDATES.

Shared scopes (memory/store/remote.py, docs/sharing.md): an edge whose two ends are memories of one bound
scope lives in that binding's bucket, written through the outbox (`Remotes.divert_edges`); an edge with
an end in a local scope stays here, so no personal memory's id reaches a bucket. Every read below asks
both (`edge_rows`) under the same filter; forgetting a memory removes its shared edges too (the store's
remote forget, ahead of this module's local drop).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory.errors import Hint, InputError, NotFoundError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import audit_row, utcnow
from memory.store.rows import iso, kind_of

if TYPE_CHECKING:
    from datetime import datetime

    from memory.store.core import Store

log = logging.getLogger(__name__)

BECAUSE, TRIGGERED, CONTRADICTS, UPDATES, RESOLVES, MENTIONS = (
    "BECAUSE", "TRIGGERED", "CONTRADICTS", "UPDATES", "RESOLVES", "MENTIONS")
RELATIONS = (BECAUSE, TRIGGERED, CONTRADICTS, UPDATES, RESOLVES, MENTIONS)
CAUSAL = (BECAUSE, TRIGGERED, RESOLVES)  # what `chain` follows by default
# Which end of an edge is the cause (see the module docstring); None: followed both ways.
CAUSE_AT = {BECAUSE: "dst", TRIGGERED: "src", RESOLVES: "dst", UPDATES: "dst"}
MAX_DEPTH = 6
MAX_HOPS = 200
EDGE_LIMIT = 5000  # rows one read asks for; a fixed limit spares the count query `limit=None` costs
_EDGE_COLS = T.RELATION_COLS
_END_COLS = ["id", "type", "scope", "title", "text", "status", "confidence"]


@dataclass
class EdgeSpec:
    """One edge to add: src RELATION dst, with the evidence it rests on."""

    src: str
    relation: str
    dst: str
    provenance: list[str] = field(default_factory=list)
    confidence: float = 1.0
    origin: str | None = None


def parse_relation(name: str) -> str:
    """The canonical relation name, or an InputError listing the allowed ones."""
    rel = str(name or "").strip().upper()
    if rel not in RELATIONS:
        raise InputError(f"unknown relation {name!r}: use one of {', '.join(RELATIONS)}")
    return rel


def edge_id(src: str, relation: str, dst: str) -> str:
    """The id of the one edge src RELATION dst (stable, so adding it again is idempotent)."""
    return "rel_" + hashlib.sha256(f"{src}|{relation}|{dst}".encode()).hexdigest()[:24]


def public_edge(row: dict) -> dict:
    """An edge row as callers see it."""
    out = {k: row.get(k) for k in _EDGE_COLS}
    out["provenance"] = list(row.get("provenance") or [])
    out["confidence"] = round(float(row.get("confidence") or 0.0), 4)
    out["created_at"] = iso(row.get("created_at"))
    return out


def memory_rows(store: Store, ids: Iterable[str], scopes: Iterable[str] | None = None, statuses: Iterable[str] | None = None, cols: list[str] | None = None) -> dict[str, dict]:
    """Memories by id that are visible in scopes with these statuses (None = candidate+active, [] = all)."""
    ids = sorted(set(ids))
    if not ids:
        return {}
    return store.get_many("memory", ids, cols or _END_COLS, scopes=scopes, where=F.where("memory", statuses=statuses))


def brief(row: dict) -> dict:
    """What a listing shows of a memory at the other end of an edge."""
    text = row.get("text") or ""
    return {"id": row["id"], "type": row.get("type"), "scope": row.get("scope"), "title": row.get("title"),
            "status": row.get("status"), "text": text if len(text) <= 300 else text[:299].rstrip() + "…"}


def edge_rows(store: Store, where: F.Where | None, cols: list[str], limit: int | None, scopes: Iterable[str] | None = None,
              shared_too: bool = True) -> list[dict]:
    """Edges under the filter whose two ends are both in scopes (None: all): the local table's and those of
    every shared store the scopes reach, the same filter inside each query (Store.rows). An edge in both (one
    made before its scope was shared) once. shared_too=False: the caller knows no shared edge can match (an
    end in a local scope)."""
    return store.rows(T.RELATIONS, where, cols, scopes=scopes, limit=limit, local=not shared_too)


def export_edges(store: Store, scopes: Iterable[str] | None = None) -> list[dict]:
    """Every edge with both ends in scopes, oldest first (for `mirador export`)."""
    rows = edge_rows(store, None, _EDGE_COLS, None, scopes)
    return [public_edge(r) for r in sorted(rows, key=lambda r: (r["created_at"] is None, r["created_at"], r["id"]))]


# ---- writes ---------------------------------------------------------------------------------------


def add_relation(store: Store, src: str, relation: str, dst: str, *, actor: str = "person", provenance: Iterable[str] = (),
                 confidence: float = 1.0, origin: str | None = None, scopes: Iterable[str] | None = None) -> dict:
    """Add src RELATION dst (both ends must be memories visible in scopes); idempotent per (src, relation, dst)."""
    spec = EdgeSpec(src, relation, dst, list(provenance), confidence, origin)
    return add_relations(store, [spec], actor=actor, scopes=scopes, check_evidence=True)[0]


def check_edge(s: EdgeSpec) -> None:
    """The edge's own shape, before any store is read: a known relation (normalised in place), two
    different memory ids, a confidence in [0, 1]."""
    s.relation = parse_relation(s.relation)
    for end in (s.src, s.dst):
        if kind_of(end) != "memory":
            raise InputError(f"{end} is not a memory id (mem_…); relations link memories only")
    if s.src == s.dst:
        raise InputError(f"a memory cannot be related to itself ({s.src})")
    if not 0.0 <= float(s.confidence) <= 1.0:
        raise InputError(f"confidence must be between 0 and 1, got {s.confidence}")


def add_relations(store: Store, specs: list[EdgeSpec], *, actor: str, scopes: Iterable[str] | None = None, check_evidence: bool = False) -> list[dict]:
    """Validate every edge first, then write them in one commit with one audit row each.

    Each result is the edge's public row plus `created` (False when it existed: its provenance and
    confidence were merged in instead).
    """
    rows: dict[str, dict]  # id -> the edge row to write
    if not specs:
        return []
    for s in specs:
        check_edge(s)
    ends = memory_rows(store, [e for s in specs for e in (s.src, s.dst)], scopes, statuses=[])
    missing = sorted({e for s in specs for e in (s.src, s.dst)} - set(ends))
    if missing:
        raise store.missing(missing[0], scopes, f"no memory with id {missing[0]} (never existed, outside your scopes, or "
                            "forgotten) — nothing was related")
    if check_evidence:
        _check_evidence(store, [e for s in specs for e in s.provenance], scopes)
    ids = [edge_id(s.src, s.relation, s.dst) for s in specs]
    here = store.get_many(T.RELATIONS, ids, _EDGE_COLS, local=True)
    old = store.get_many(T.RELATIONS, ids, _EDGE_COLS)  # this device's first, then a shared store's
    now, rows, audits, out = utcnow(), {}, [], []
    for s, eid in zip(specs, ids, strict=True):
        prev = rows.get(eid) or old.get(eid)
        row = _merge(prev, s, eid, ends, actor, now)
        if prev is None or row != prev:
            rows[eid] = row
            before = None if prev is None else {k: public_edge(prev)[k] for k in ("provenance", "confidence")}
            audits.append(audit_row(actor, "update" if prev else "create", "relation", eid, row["scope"],
                                    before, public_edge(row)))
        out.append({**public_edge(row), "created": eid not in old})
    if rows:
        # Edges between two memories of one shared scope go to its store; the rest are written here.
        local = store.remotes.divert_edges(list(rows.values()))
        store.upsert_rows(T.RELATIONS, local)
        moved = [r["id"] for r in rows.values() if r["id"] in here and r not in local]
        if moved:  # made here before its scope was shared: now kept in the shared store only
            store.delete_rows(T.RELATIONS, F.id_in(moved))
        store.write_audit(audits)
    return out


def _merge(prev: dict | None, s: EdgeSpec, eid: str, ends: dict, actor: str, now: datetime) -> dict:
    if prev is not None:
        prov = list(dict.fromkeys(list(prev["provenance"] or []) + list(s.provenance)))
        conf = max(float(prev["confidence"]), float(s.confidence))
        if prov == list(prev["provenance"] or []) and abs(conf - float(prev["confidence"])) < 1e-6:
            return prev
        return {**prev, "provenance": prov, "confidence": conf}
    return {"id": eid, "src": s.src, "dst": s.dst, "relation": s.relation,
            "provenance": list(dict.fromkeys(s.provenance)), "confidence": float(s.confidence),
            "origin": s.origin or actor, "scope": ends[s.src]["scope"], "dst_scope": ends[s.dst]["scope"],
            "created_at": now}


def _check_evidence(store: Store, ids: list[str], scopes: Iterable[str] | None) -> None:
    ids = sorted(set(ids))
    for i in ids:
        if kind_of(i) != "evidence":
            raise InputError(f"{i} is not an evidence id (evd_…); an edge's provenance lists evidence")
    if not ids:
        return
    found = set(store.get_many("evidence", ids, ["id"], scopes=scopes))
    if set(ids) - found:
        raise NotFoundError(f"no evidence with id {sorted(set(ids) - found)[0]} in your scopes — nothing was related")


def rescope(store: Store, memory_id: str, scope: str) -> None:
    """Keep the end-scope columns of a memory's edges current when the memory moves to another scope.

    Reads filter edges by those columns inside the query: left stale, an edge into a scope the
    reader can see would stay hidden (never shown where it should not be: the other end is read
    through the memories table under the same filter)."""
    store.update_rows(T.RELATIONS, F.id_is(memory_id, "src"), {"scope": scope})
    store.update_rows(T.RELATIONS, F.id_is(memory_id, "dst"), {"dst_scope": scope})
    remotes = store.remotes
    if not remotes.shared:
        return
    # With shared scopes the move may also move edges between here and a bucket (both ends in one binding
    # or not): each edge goes where its ends now say, and leaves where it was.
    touch = F.touching([memory_id])
    here = store.rows(T.RELATIONS, touch, _EDGE_COLS, limit=EDGE_LIMIT, local=True)
    away = remotes.edges(None, touch, _EDGE_COLS, EDGE_LIMIT)
    moved = [{**r, **({"scope": scope} if r["src"] == memory_id else {}),
              **({"dst_scope": scope} if r["dst"] == memory_id else {})} for r in away]
    keep_here = remotes.divert_edges(here + moved)
    kept = {r["id"] for r in keep_here}
    gone_here = [r["id"] for r in here if r["id"] not in kept]
    if gone_here:
        store.delete_rows(T.RELATIONS, F.id_in(gone_here))
    if keep_here:
        store.upsert_rows(T.RELATIONS, [r for r in keep_here if r["id"] not in {h["id"] for h in here}])
    # Out of the store it was in (not when it stays in the same one: the put above updated it there).
    left = [old for old, new in zip(away, moved, strict=True)
            if remotes.edge_binding(old["scope"], old["dst_scope"])
            is not remotes.edge_binding(new["scope"], new["dst_scope"])]
    remotes.remove_edges(left)


def remove_relation(store: Store, edge: str | None = None, *, src: str | None = None, relation: str | None = None,
                    dst: str | None = None, actor: str = "person", scopes: Iterable[str] | None = None) -> dict:
    """Remove one edge, by its id or by (src, relation, dst); audited. NotFoundError if not visible."""
    if edge is None:
        if not (src and relation and dst):
            raise InputError("name the edge: its id (rel_…) or SRC RELATION DST")
        edge = edge_id(src, parse_relation(relation), dst)
    if not str(edge).startswith("rel_"):
        raise InputError(f"{edge!r} is not a relation id (rel_…)",
                         hint=Hint(cli="list them with `mirador related ID`", mcp="call memory_related to list them"))
    rows = edge_rows(store, F.id_is(edge), _EDGE_COLS, 1, scopes)
    if not rows:
        raise NotFoundError(f"no relation {edge} in your scopes (never existed or already removed) — "
                            "list a memory's relations with `mirador related ID`")
    # A shared edge is removed from its store (and purged there); any copy here goes too.
    if not store.remotes.remove_edges(rows) or store.count(T.RELATIONS, F.id_is(edge), local=True):
        store.delete_rows(T.RELATIONS, F.id_is(edge))
    store.write_audit([audit_row(actor, "delete", "relation", edge, rows[0]["scope"], public_edge(rows[0]))])
    return public_edge(rows[0])


def drop_for_memories(store: Store, memory_ids: list[str], actor: str) -> int:
    """Erasure: delete every edge touching these memories and scrub the edge ids from the audit trail.

    The local table's edges; a shared scope's edges go with the memory's remote delete
    (memory/store/remote.py: Remotes.forget)."""
    if not memory_ids:
        return 0
    dropped = 0
    for start in range(0, len(memory_ids), 200):
        rows = store.rows(T.RELATIONS, F.touching(memory_ids[start:start + 200]), ["id", "scope"], local=True)
        if rows:
            # Delete by edge id: LanceDB keeps a delete's predicate in its transaction files, and the
            # memory id must not outlive the memory there.
            store.delete_rows(T.RELATIONS, F.id_in(r["id"] for r in rows))
            store.write_audit([audit_row(actor, "delete", "relation", r["id"], r["scope"]) for r in rows])
            dropped += len(rows)
    _scrub_audit(store, memory_ids)
    return dropped


def _scrub_audit(store: Store, memory_ids: list[str]) -> None:
    # Relation audit rows (including those of edges removed earlier) name both ends: keep who/when, drop what.
    # before/after are sealed at rest (memory/store/sealer.py), so they are read and matched here, not in SQL.
    ids = {i for i in memory_ids if kind_of(i) == "memory"}
    if not ids:
        return
    rows = store.rows(T.AUDIT, F.and_(F.equals("entity_kind", "relation"),
                                      F.or_(F.not_null("before"), F.not_null("after"))), ["id", "before", "after"])
    named = [r["id"] for r in rows if any(i in (r["before"] or "") or i in (r["after"] or "") for i in ids)]
    for start in range(0, len(named), 500):
        store.update_rows(T.AUDIT, F.id_in(named[start:start + 500]), {"before": None, "after": None})


# ---- reads ----------------------------------------------------------------------------------------


def _anchor(store: Store, id_: str, scopes: Iterable[str] | None) -> dict:
    if kind_of(id_) != "memory":
        raise InputError(f"{id_} is not a memory id (mem_…); relations link memories only")
    rows = memory_rows(store, [id_], scopes, statuses=[])
    if not rows:
        raise store.missing(id_, scopes, f"no memory with id {id_} (never existed, outside your scopes, or forgotten)")
    return rows[id_]


def _rel_filter(relations: Iterable[str] | None) -> F.Where | None:
    if not relations:
        return None
    return F.one_of("relation", (parse_relation(r) for r in relations))


def related(store: Store, id_: str, relations: Iterable[str] | None = None, direction: str = "both", scopes: Iterable[str] | None = None,
            statuses: Iterable[str] | None = None, limit: int = 100) -> list[dict]:
    """The edges of one memory whose other end is visible (scopes and statuses), newest first.

    direction: out (id is the src), in (id is the dst) or both. statuses None = candidate+active,
    [] = every status.
    """
    if direction not in ("out", "in", "both"):
        raise InputError(f"direction must be out, in or both, not {direction!r}")
    anchor = _anchor(store, id_, scopes)
    where = F.and_(F.touching([id_], direction), _rel_filter(relations))
    # A memory of a local scope has no shared edge (both ends of one are shared): no round trip to a bucket.
    shared_too = store.remotes.binding_for(anchor["scope"]) is not None if store.remotes.shared else False
    edges = edge_rows(store, where, _EDGE_COLS, EDGE_LIMIT, scopes, shared_too)
    others = memory_rows(store, [e["dst"] if e["src"] == id_ else e["src"] for e in edges], scopes, statuses)
    out = []
    for e in sorted(edges, key=lambda e: e["created_at"], reverse=True):
        way, other = ("out", e["dst"]) if e["src"] == id_ else ("in", e["src"])
        if other in others:
            out.append({**public_edge(e), "direction": way, "other": brief(others[other])})
    return out[:limit]


def _follow(relations: tuple[str, ...], direction: str) -> tuple[list[str], list[str]]:
    """(relations followed src→dst, relations followed dst→src) for causes or consequences."""
    fwd, back = [], []
    for r in relations:
        at = CAUSE_AT.get(r)
        if at is None:
            fwd.append(r)
            back.append(r)
        elif (at == "dst") == (direction == "causes"):
            fwd.append(r)
        else:
            back.append(r)
    return fwd, back


def chain(store: Store, id_: str, direction: str = "causes", relations: Iterable[str] | None = None, depth: int = 3,
          scopes: Iterable[str] | None = None, statuses: Iterable[str] | None = None) -> dict:
    """Follow causes (why) or consequences (what followed) breadth-first to `depth`, each memory once.

    Every hop carries its edge and the evidence rows (visible in scopes) the edge rests on.
    """
    if direction not in ("causes", "consequences"):
        raise InputError(f"direction must be causes or consequences, not {direction!r}")
    if not 1 <= int(depth) <= MAX_DEPTH:
        raise InputError(f"depth must be between 1 and {MAX_DEPTH}, got {depth}")
    rels = tuple(parse_relation(r) for r in relations) if relations else CAUSAL
    start = _anchor(store, id_, scopes)
    fwd, back = _follow(rels, direction)
    hops: list[dict]
    seen, frontier, hops, cut = {id_}, [id_], [], False
    for level in range(1, int(depth) + 1):
        if not frontier:
            break
        found = _step(store, frontier, fwd, back, scopes)
        nxt = memory_rows(store, [n for _, n, _ in found], scopes, statuses)
        frontier = []
        for frm, to, e in found:
            if to in seen or to not in nxt:
                continue  # already on the chain (a cycle, or reached another way) or not visible
            if len(hops) >= MAX_HOPS:
                cut = True
                break
            seen.add(to)
            frontier.append(to)
            hops.append({"depth": level, "from": frm, "to": to, **public_edge(e), "memory": brief(nxt[to])})
    evidence = _evidence(store, [p for h in hops for p in h["provenance"]], scopes)
    for h in hops:
        h["evidence"] = [evidence[p] for p in h["provenance"] if p in evidence]
    return {"start": brief(start), "direction": direction, "relations": list(rels), "depth": int(depth),
            "hops": hops, "truncated": cut}


def _step(store: Store, frontier: list[str], fwd: list[str], back: list[str], scopes: Iterable[str] | None) -> list[tuple[str, str, dict]]:
    """(from, to, edge) for every edge leaving the frontier in the followed direction."""
    where = F.or_(F.and_(F.touching(frontier, "out"), _rel_filter(fwd)) if fwd else None,
                  F.and_(F.touching(frontier, "in"), _rel_filter(back)) if back else None)
    rows = sorted(edge_rows(store, where, _EDGE_COLS, EDGE_LIMIT, scopes), key=lambda e: (-e["confidence"], e["id"]))
    inside = set(frontier)
    out = []
    for e in rows:
        if e["relation"] in fwd and e["src"] in inside:
            out.append((e["src"], e["dst"], e))
        if e["relation"] in back and e["dst"] in inside:
            out.append((e["dst"], e["src"], e))
    return out


def _evidence(store: Store, ids: list[str], scopes: Iterable[str] | None) -> dict[str, dict]:
    ids = sorted(set(ids))
    if not ids:
        return {}
    cols = ["id", "source", "app", "window", "scope", "captured_at", "text"]
    rows = store.get_many("evidence", ids, cols, scopes=scopes).values()
    return {r["id"]: {**r, "captured_at": iso(r["captured_at"]),
                      "text": r["text"] if len(r["text"]) <= 400 else r["text"][:399] + "…"} for r in rows}


def _because_sources(store: Store) -> frozenset[str]:
    """Ids with a BECAUSE edge in any scope, re-read only when the relations table's version moves.

    Why: recall asks for the reasons of every memory candidate; the query is a LanceDB round trip in
    every recall and nearly always finds none (bench/scale.py times recall). Scopes are still applied by the edge query that follows, so this set
    never decides what a caller may see.
    """
    where = F.equals("relation", BECAUSE)
    return store.versioned("_because_sources", T.RELATIONS,
                           lambda: frozenset(r["src"] for r in store.rows(T.RELATIONS, where, ["src"], local=True)))


def reasons_for(store: Store, ids: list[str], scopes: Iterable[str] | None = None, types: Iterable[str] | None = None) -> dict[str, list[dict]]:
    """Recall: for each memory id, the visible (candidate/active) memories it is BECAUSE of, best edge first."""
    # Most memories explain nothing: ask only about the ids that have a BECAUSE edge at all.
    explained = _because_sources(store) if ids else frozenset()
    here = [i for i in ids if i in explained]
    cols = ["id", "src", "dst", "confidence"]
    because = F.equals("relation", BECAUSE)
    found = store.rows(T.RELATIONS, F.and_(F.touching(here, "out"), because), cols, scopes=scopes, limit=EDGE_LIMIT,
                       local=True) if here else []
    if ids and store.remotes.reading(scopes):
        # A shared store's edges are not in the set above: asked for every candidate, one query per store.
        have = {e["id"] for e in found}
        found += [e for e in store.remotes.edges(scopes, F.and_(F.touching(ids, "out"), because, F.both_ends(scopes)),
                                                 cols, EDGE_LIMIT) if e["id"] not in have]
    if not found:
        return {}
    edges = sorted(found, key=lambda e: -e["confidence"])
    cols = ["id", "type", "scope", "title", "text", "status", "provenance", "origin", "valid_from", "created_at",
            "updated_at", "confidence"]
    rows = memory_rows(store, [e["dst"] for e in edges], scopes, None, cols)
    out: dict[str, list[dict]] = {}
    for e in edges:
        r = rows.get(e["dst"])
        if r is not None and (not types or r["type"] in types):
            out.setdefault(e["src"], []).append(r)
    return out
