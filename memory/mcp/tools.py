"""What each MCP tool does, as plain functions of (store, principal, arguments) — no protocol here.

Every read passes the client's scopes into the store/search call so the filter runs inside the
LanceDB query (principle 5); every write goes to the client's write scope and is audited with the
client's name as actor and origin (principle 6). Errors are InputErrors whose text tells a model
what to call next; memory/mcp/server.py turns them into tool errors.

Each argument is declared once, by the type its parameter names (memory/mcp/args.py); the server reads the
signatures for the tools' input schemas and validators (memory/mcp/arguments.py). Each tool returns its result
model (memory/mcp/results.py), named by its return annotation; the server sends it as it is.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory.errors import Hint, InputError, NotFoundError
from memory.mcp.args import (
    CONSOLIDATE_MAX_EVIDENCE,
    AddStatus,
    AddTypeArg,
    Budget,
    CapturedAt,
    ChainDirection,
    Confidence,
    Confirm,
    ConsolidateLimit,
    ConsolidateScope,
    Cursor,
    Depth,
    Details,
    Direction,
    DryRun,
    DstId,
    EdgeEvidence,
    EdgeLimit,
    EvdId,
    EvidenceApp,
    EvidenceText,
    ForgetApp,
    ForgetIds,
    GetId,
    IdempotencyKey,
    Inactive,
    Limit,
    ListStatuses,
    MaxChars,
    MemId,
    MemoryText,
    Names,
    NewConfidence,
    NewStatus,
    NewText,
    NewTitle,
    PageSize,
    Query,
    RecallTypes,
    Relation,
    Relations,
    RelId,
    Samples,
    ScopeArg,
    SearchTypes,
    Since,
    Sources,
    SrcId,
    TimelineSince,
    TimelineUntil,
    Title,
    Until,
    UsedIds,
    Window,
    WithEvidence,
    WriteScopeArg,
)
from memory.mcp.auth import Principal
from memory.mcp.results import (
    AppActivity,
    Chain,
    Consolidation,
    Dream,
    Edge,
    EdgeAdded,
    Episode,
    EvidenceAdded,
    EvidenceBrief,
    EvidenceForget,
    EvidenceRow,
    EvidenceSearch,
    Extraction,
    Forgotten,
    Hop,
    MemoryAdded,
    MemoryBrief,
    MemoryEnd,
    MemoryHit,
    MemoryPage,
    MemoryRecord,
    MemorySearch,
    MemoryUpdated,
    Neighbour,
    NewEdge,
    NotFound,
    PlanStep,
    Recall,
    RecallItem,
    Reinforced,
    Related,
    RelationRemoved,
    Sample,
    Status,
    Timeline,
    Usage,
    Visible,
)
from memory.retrieval.relevance import RELEVANCE_FLOOR  # noqa: F401 - re-exported; the browser uses the same floor
from memory.retrieval.relevance import relevant as _relevant
from memory.scopes import in_scopes, validate_scope
from memory.store import filters as F
from memory.store.audit import utcnow
from memory.store.fingerprint import fingerprint
from memory.store.rows import iso, jsonable, kind_of, parse_time

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

    from memory.consolidation.dream import Step
    from memory.store.core import Store

log = logging.getLogger(__name__)

SNIPPET_CHARS = 400
MAX_DETAILS_CHARS = 10_000
MAX_DETAILS_DEPTH = 8  # type-specific fields are a level or two (steps: [...]); more is a mistake or an attack
TIMELINE_MAX_ROWS = 20_000
SEARCH_HINT = "call memory_search to find a valid id"
EVIDENCE_HINT = "call evidence_search or timeline to find a valid evidence id"


# ---- scopes -----------------------------------------------------------------------------------


def read_scopes(p: Principal, scope: str | None) -> list[str]:
    """The scopes a read runs in: the client's, or the narrower one it asked for."""
    if scope is None:
        return list(p.read)
    _not_blank(scope)
    s = validate_scope(scope)
    if p.can_read(s):
        return [s]
    narrower = [r for r in p.read if r.startswith(s + "/")]
    if narrower:
        return narrower
    raise InputError(f"scope {s!r} is outside what this client may read ({', '.join(p.read)}); "
                     "omit scope to use all of them")


def write_scope(p: Principal, scope: str | None) -> str:
    """The scope a write goes to: the client's write scope or one below it."""
    if p.write is None:
        raise InputError("this client's token is read-only: it may search and read but not add, change or forget. "
                         "Ask the person to issue a token with --write SCOPE (`mirador mcp token add`)")
    if scope is None:
        return p.write
    _not_blank(scope)
    s = validate_scope(scope)
    if not in_scopes(s, [p.write]):
        raise InputError(f"this client may write only to scope {p.write!r} and below, not {s!r}; omit scope")
    return s


def _not_blank(scope: str) -> None:
    # An empty scope is not "all scopes": a client that meant one and sent "" must hear about it.
    if not scope.strip():
        raise InputError("scope is empty: name one scope, e.g. work or work/acme, or leave scope out to use "
                         "all of this client's scopes")


# ---- shaping results --------------------------------------------------------------------------


def _snip(text: str, n: int = SNIPPET_CHARS, query_stems: frozenset[str] = frozenset(), screen: bool = False) -> str:
    """text, or when longer than n: the lines that share most words with the query (its
    memory.retrieval.snippets.stems) or, without such lines, its start (a screen's past its menu bars and tabs);
    "…" marks what was left out."""
    from memory.retrieval.snippets import focused, past_chrome

    text = text or ""
    if len(text) <= n:
        return text
    if query_stems:
        lines = focused(text, query_stems, n)
        if lines is not None:
            return lines if len(lines) <= n else lines[: n - 1].rstrip() + "…"
    if screen:
        text = past_chrome(text)
    return text[: n - 1].rstrip() + "…"


# What a search result shows (the briefs below): a search reads only these columns of its winners,
# each column read costs time per winner (bench/scale.py). memory_get / evidence_get return whole rows.
MEMORY_BRIEF_COLS = ["id", "type", "scope", "title", "text", "status", "confidence", "updated_at", "provenance"]
EVIDENCE_BRIEF_COLS = ["id", "captured_at", "source", "app", "window", "scope", "text"]


def _brief_fields(m: dict[str, Any]) -> dict[str, Any]:
    """What a listing shows of a (non-vault) memory row."""
    return {"id": m["id"], "type": m["type"], "scope": m["scope"], "title": m.get("title"),
            "text": _snip(m.get("text", "")), "status": m.get("status"), "confidence": m.get("confidence"),
            "updated_at": m.get("updated_at"), "evidence": len(m.get("provenance") or [])}


def _memory_brief(m: dict[str, Any]) -> MemoryBrief:
    return MemoryBrief(**_brief_fields(m))


def _memory_hit(m: dict[str, Any], score: float | None = None) -> MemoryHit:
    """A search result: a memory's brief, or a vault entry's label (never its value)."""
    if m.get("type") == "vault":
        fields: dict[str, Any] = {
            "id": m["id"], "type": "vault", "scope": m["scope"], "label": m.get("label") or m.get("text"),
            "note": "a secret; its value is returned only to tokens allowed to read the vault (memory_get)"}
    else:
        fields = _brief_fields(m)
    if score is not None:
        fields["score"] = round(score, 5)
    return MemoryHit(**fields)


def _evidence_brief(e: dict[str, Any], score: float | None = None,
                    query_stems: frozenset[str] = frozenset()) -> EvidenceBrief:
    fields: dict[str, Any] = {
        "id": e["id"], "captured_at": e.get("captured_at"), "source": e.get("source"), "app": e.get("app"),
        "window": e.get("window"), "scope": e["scope"],
        "text": _snip(e.get("text", ""), query_stems=query_stems, screen=e.get("source") == "screen")}
    if score is not None:
        fields["score"] = round(score, 5)
    return EvidenceBrief(**fields)


def _statuses(include_inactive: bool) -> list[str] | None:
    return [] if include_inactive else None


# ---- memory tools -----------------------------------------------------------------------------


def memory_search(store: Store, p: Principal, query: Query, types: SearchTypes = None, scope: ScopeArg = None,
                  since: Since = None, until: Until = None, include_inactive: Inactive = False,
                  limit: Limit = 10) -> MemorySearch:
    """Hybrid search over the client's memories."""
    from memory.retrieval.search import search_memories

    scopes = read_scopes(p, scope)
    hits = search_memories(store, query, scopes=scopes, types=types or None, statuses=_statuses(include_inactive),
                           since=parse_time(since, "since"), until=parse_time(until, "until"), limit=limit,
                           cols=MEMORY_BRIEF_COLS)
    hits = _relevant(store, query, hits)
    _appeared(store, p, [h.id for h in hits], scopes)
    return MemorySearch(
        query=query, scopes=scopes, results=[_memory_hit(h.row, h.score) for h in hits],
        hint="call memory_get with an id for every field and its evidence ids" if hits
        else "no match: try other words, evidence_search for raw captured text, or timeline for a time range")


def memory_recall(store: Store, p: Principal, query: Query, budget_tokens: Budget = 1000, types: RecallTypes = None,
                  scope: ScopeArg = None, include_evidence: WithEvidence = True) -> Recall:
    """Budgeted context for a task, built by memory/retrieval/recall.py."""
    try:
        from memory.retrieval.recall import recall
    except ImportError:
        raise InputError("recall is not available in this build; use memory_search instead") from None
    scopes = read_scopes(p, scope)
    res = recall(store, query, budget_tokens=budget_tokens, scopes=scopes, types=types or None,
                 include_evidence=include_evidence)
    _appeared(store, p, [i.id for i in (res.items or [])], scopes)
    # RecallItem declares no value field: a vault value in an item would be refused, never sent.
    items = [RecallItem.model_validate(_item(i)) for i in (res.items or [])]
    return Recall(query=res.query, budget_tokens=res.budget_tokens, used_tokens=res.used_tokens, scopes=scopes,
                  text=res.text, items=items)


def _appeared(store: Store, p: Principal, ids: list[str], scopes: list[str]) -> None:
    # Showing a memory is not using it; only when the person configured it does it count (weaker).
    from memory.graph.reinforcement import note_appearances

    note_appearances(store, ids, actor=p.actor, scopes=scopes)


def memory_reinforce(store: Store, p: Principal, ids: UsedIds) -> Reinforced:
    """Record that an answer used these memories: their salience rises (and decays again without use)."""
    from memory.graph.reinforcement import reinforce

    if not ids:
        raise InputError(f"no ids given — pass the mem_ ids your answer used; {SEARCH_HINT}")
    # Reinforcing changes ranking, so it is a write: only in the client's write scope (reading changes nothing).
    ws = write_scope(p, None)
    res = reinforce(store, ids, actor=p.actor, scopes=[ws])
    if not res["reinforced"]:
        bad = ", ".join(n["id"] for n in res["not_found"])
        raise NotFoundError(f"nothing was reinforced: {bad} — each must be a mem_ id in this client's write scope "
                            f"{ws!r} (it never existed, is outside that scope, or was forgotten); {SEARCH_HINT}")
    out = Reinforced(reinforced=[Usage.model_validate(u) for u in res["reinforced"]],
                     not_found=[NotFound.model_validate(n) for n in res["not_found"]], actor=p.actor)
    if res["not_found"]:
        out.hint = "ids under not_found were not recorded; check them with memory_get"
    return out


def _item(item: Any) -> Any:
    if is_dataclass(item) and not isinstance(item, type):
        return jsonable(asdict(item))
    if hasattr(item, "model_dump"):
        return jsonable(item.model_dump())
    return jsonable(item)


def memory_get(store: Store, p: Principal, id: GetId) -> MemoryRecord:
    """Every field of one memory (or vault entry) the client may see."""
    kind = _kind(id, SEARCH_HINT)
    if kind == "evidence":
        raise InputError(f"{id} is an evidence id; call evidence_get for it")
    try:
        row = store.get(id, scopes=list(p.read))
    except NotFoundError:
        raise NotFoundError(f"no memory with id {id} is visible to this client (it never existed, is outside "
                            f"its scopes, or was forgotten) — {SEARCH_HINT}") from None
    if kind == "vault":
        entry = MemoryRecord(**{k: row[k] for k in ("id", "type", "label", "scope", "created_at", "updated_at",
                                                     "origin")})
        if p.allow_vault:
            entry.value = store.reveal(id, actor=p.actor, scopes=list(p.read))
        else:
            entry.value = None
            entry.note = "this client's token may not read vault values; ask the person"
        return entry
    row.pop("fingerprint", None)
    return MemoryRecord(**row, hint="provenance lists evidence ids; call evidence_get to read what was captured")


def memory_add(store: Store, p: Principal, text: MemoryText, type: AddTypeArg = "semantic", title: Title = None,
               details: Details = None, scope: WriteScopeArg = None, status: AddStatus = "active",
               confidence: Confidence = 0.8, idempotency_key: IdempotencyKey = None) -> MemoryAdded:
    """Create a memory in the client's write scope, recorded with the client's name.

    idempotency_key: a retry with the same key returns the first call's memory and stores nothing
    (memory/store/idempotency.py)."""
    from memory.store.idempotency import add_once, keyed_id
    from memory.store.specs import MemorySpec

    ws = write_scope(p, scope)
    asked: str = type  # the schema leaves vault out; a direct caller could still pass it
    if asked == "vault":
        raise InputError("secrets are added by the person only, never over MCP",
                         hint=Hint(mcp="ask the person to add it to the vault themselves"))
    _check_details(details)
    if idempotency_key is not None:
        keyed_id("memory", p.actor, idempotency_key)  # a bad key is refused before anything is looked at
    # Redacted first, as the store will write it: the tombstone and same-text checks compare what is stored.
    scrubbed, secrets = store.scrubber.text(text)
    text = scrubbed or ""  # a str stays a str
    fields: dict[str, Any] = dict(type=type, scope=ws, title=title, details=details, status=status,
                                  confidence=confidence, origin=p.actor)
    done: list[MemoryAdded] = []  # what this call's write answered (none: a keyed retry found the first)

    def write(id_: str | None = None) -> dict[str, Any]:
        added = _add_checked(store, p, text, fields, secrets, id_)
        done.append(added)
        brief = added.created or added.existing
        return brief.model_dump() if brief is not None else {}

    if idempotency_key is None:
        write()
        return done[0]
    first, replayed = add_once(store, "memory", p.actor, idempotency_key,
                               dict(store.memory_row(MemorySpec(text=text, **fields))), write, scopes=list(p.read))
    return _memory_added(p, first, secrets, replayed=True) if replayed else done[0]


def _add_checked(store: Store, p: Principal, text: str, fields: dict[str, Any], secrets: Any,
                 id_: str | None) -> MemoryAdded:
    """Store the memory unless the person erased this text, or the scope holds it already (then say which)."""
    # Only tombstones the client could have seen: a scope-blind check would tell a work client
    # whether this exact text was once deleted from 'personal'.
    fp = fingerprint(text)
    if store.is_tombstoned(fp, scopes=list(p.read)):
        raise InputError("the person deleted a memory with this content earlier; do not store it again "
                         "unless the person asks you to in this conversation and adds it themselves")
    # The same text in the same scope is one memory: a retried or repeated add returns the first — the scope's
    # shared copy too (the text a teammate stored there is already remembered).
    same = store.rows("memory", F.and_(F.equals("fingerprint", fp), F.equals("type", fields["type"]),
                                       F.where("memory", statuses=["active", "candidate"])),
                      MEMORY_BRIEF_COLS, scopes=[fields["scope"]], limit=1)
    if same:
        return MemoryAdded(created=None, existing=_memory_brief(same[0]), actor=p.actor,
                           hint=f"this text is already remembered as {same[0]['id']}; nothing was added — "
                                "call memory_update with that id to change it")
    row = store.add_memory(text, actor=p.actor, id=id_, **fields)
    return _memory_added(p, row, secrets)


def _memory_added(p: Principal, row: dict[str, Any], secrets: Any, replayed: bool = False) -> MemoryAdded:
    out = MemoryAdded(created=_memory_brief(row), actor=p.actor)
    if secrets or "[REDACTED:" in row["text"] + row["title"]:
        out.hint = ("secrets in the text were replaced by [REDACTED:kind] before anything was stored; a secret "
                       "the person wants kept belongs in the vault, which only they add to (`mirador add --type vault`)")
    if replayed:
        out.replayed = True
        out.hint = ("an earlier call with this idempotency_key stored it (this is that memory, as it is now); "
                    "nothing was stored again")
    return out


def memory_update(store: Store, p: Principal, id: MemId, text: NewText = None, title: NewTitle = None,
                  details: Details = None, confidence: NewConfidence = None,
                  status: NewStatus = None) -> MemoryUpdated:
    """Edit a memory in the client's write scope (text, title, details, confidence and/or status)."""
    ws = write_scope(p, None)
    if _kind(id, SEARCH_HINT) != "memory":
        raise InputError(f"{id} is not a memory id (mem_…); evidence is never edited and vault entries are "
                         "edited by the person only")
    _check_details(details)
    try:
        old = store.get(id, scopes=list(p.read))
    except NotFoundError:
        raise NotFoundError(f"no memory with id {id} is visible to this client — {SEARCH_HINT}") from None
    if not in_scopes(old["scope"], [ws]):
        raise InputError(f"{id} is in scope {old['scope']!r}; this client may change only scope {ws!r} and below")
    if old.get("pinned"):
        raise InputError(f"{id} is pinned by the person; it cannot be changed over MCP — tell the person instead")
    if text is None and title is None and details is None and confidence is None and status is None:
        raise InputError("nothing to change: give text, title, details, confidence or status")
    row = old
    if text is not None or title is not None or details is not None or confidence is not None:
        row = store.update_memory(id, actor=p.actor, text=text, title=title, details=details, confidence=confidence,
                                  scopes=[ws])
    if status is not None:
        row = store.set_status(id, status, actor=p.actor, scopes=[ws])
    return MemoryUpdated(updated=_memory_brief(row), actor=p.actor)


def memory_forget(store: Store, p: Principal, ids: ForgetIds) -> Forgotten:
    """Erase memories or evidence in the client's write scope, for good (tombstone + purge)."""
    from memory.store.erasure import forget

    ws = write_scope(p, None)
    if not ids:
        raise InputError(f"no ids given — {SEARCH_HINT}")
    for i in ids:
        if _kind(i, SEARCH_HINT) == "vault" and not p.allow_vault:
            raise InputError(f"{i} is a vault entry; this client's token may not touch the vault — nothing was deleted")
    try:
        res = forget(store, ids, actor=p.actor, scopes=[ws])
    except NotFoundError as e:
        raise NotFoundError(f"{e.message} (this client may forget only rows in scope {ws!r} and below)",
                            hint=e.hint) from None
    return Forgotten(deleted=res["deleted"], by_kind=res["by_kind"], actor=p.actor)


def evidence_forget(store: Store, p: Principal, app: ForgetApp = None, since: Since = None, until: Until = None,
                    scope: WriteScopeArg = None, confirm: Confirm = False) -> EvidenceForget:
    """Erase captured evidence by app and/or time range in the client's write scope (or `scope` below it),
    with the memories derived only from it (memory/store/erasure.py forget_where). Without confirm: the
    plan with counts, nothing changed. Every memory the delete erases or sends to review must lie in the
    write scope, else nothing is erased. Hand-written memories and vault entries are never touched."""
    from memory.store.erasure import forget_where, plan_forget_where

    ws = write_scope(p, scope)
    if app is not None and not app.strip():
        raise InputError("app is empty: name an app (e.g. slack, as timeline lists it) or leave app out")
    start, end = parse_time(since, "since"), parse_time(until, "until")
    if not (app or start or end):
        raise InputError("give app, since or until: evidence_forget erases captured evidence by app and/or time "
                         "range; to erase single rows call memory_forget with their ids")
    if start and end and start >= end:
        raise InputError(f"since ({since}) is not before until ({until}): nothing matches")
    plan = plan_forget_where(store, scope=ws, app=app, since=start, until=end)
    outside = sorted({r["scope"] for r in plan.memories + plan.review if not in_scopes(r["scope"], [ws])})
    if outside:
        raise InputError(f"this delete would change memories in scope {outside[0]!r}, outside this client's write "
                         f"scope {ws!r} — nothing was deleted; ask the person to delete it in Mirador")
    counts = plan.counts()
    del counts["vault"]  # an evidence delete never touches the vault
    what: dict[str, Any] = {"scope": ws, "app": app, "since": iso(start), "until": iso(end), "counts": counts,
                            "description": plan.describe()}
    if plan.empty():
        return EvidenceForget(dry_run=not confirm, **what, deleted=0, hint="nothing matches these filters: nothing "
                              "to erase (timeline lists the apps and times captured)")
    if not confirm:
        return EvidenceForget(dry_run=True, **what, hint="nothing was erased; this is what would go. Only when the "
                              "person confirms, call evidence_forget again with the same arguments and confirm=true")
    res = forget_where(store, scope=ws, app=app, since=start, until=end, actor=p.actor, plan=plan)
    return EvidenceForget(dry_run=False, **what, deleted=res["deleted"], by_kind=res["by_kind"],
                          reviewed=res["reviewed"], frames_removed=res["frames_removed"], actor=p.actor)


# ---- relation tools ---------------------------------------------------------------------------


def _visible_memory(store: Store, p: Principal, id: str, scopes: list[str]) -> None:
    if _kind(id, SEARCH_HINT) != "memory":
        raise InputError(f"{id} is not a memory id (mem_…); relations link memories only")
    if not store.get_many("memory", [id], ["id"], scopes=scopes):  # a shared scope's memory too
        raise NotFoundError(f"no memory with id {id} is visible to this client — {SEARCH_HINT}")


def memory_related(store: Store, p: Principal, id: MemId, relations: Relations = None, direction: Direction = "both",
                   scope: ScopeArg = None, include_inactive: Inactive = False, limit: EdgeLimit = 20) -> Related:
    """A memory's neighbours by relation, both ends inside the client's scopes."""
    from memory.graph.relations import related

    scopes = read_scopes(p, scope)
    _visible_memory(store, p, id, scopes)
    edges = related(store, id, relations or None, direction, scopes, _statuses(include_inactive), limit)
    return Related(id=id, scopes=scopes, relations=[Neighbour.model_validate(e) for e in edges],
                   hint="an edge reads 'src RELATION dst'; call memory_chain to follow causes or consequences further"
                   if edges else "no relations visible; memory_relate adds one")


def memory_chain(store: Store, p: Principal, id: MemId, direction: ChainDirection = "causes", depth: Depth = 3,
                 relations: Relations = None, scope: ScopeArg = None, include_inactive: Inactive = False) -> Chain:
    """Causes (why) or consequences (what followed) of a memory, hop by hop, with each hop's evidence."""
    from memory.graph.relations import chain

    scopes = read_scopes(p, scope)
    _visible_memory(store, p, id, scopes)
    out = chain(store, id, direction, relations or None, depth, scopes, _statuses(include_inactive))
    return Chain(start=MemoryEnd.model_validate(out["start"]), direction=out["direction"],
                 relations=out["relations"], depth=out["depth"], hops=[Hop.model_validate(h) for h in out["hops"]],
                 truncated=out["truncated"], scopes=scopes,
                 hint="each hop lists the evidence its edge rests on; call evidence_get for the full text"
                 if out["hops"] else f"no {direction} recorded within depth {depth}")


def memory_relate(store: Store, p: Principal, src: SrcId, relation: Relation, dst: DstId, evidence: EdgeEvidence = None,
                  confidence: Confidence = 0.8) -> EdgeAdded:
    """Add the edge `src RELATION dst`: src in the client's write scope, dst readable; audited as the client."""
    from memory.graph.relations import add_relation

    ws = write_scope(p, None)
    _visible_memory(store, p, src, [ws])
    edge = add_relation(store, src, relation, dst, actor=p.actor, provenance=evidence or [], confidence=confidence,
                        origin=p.actor, scopes=list(p.read))
    return EdgeAdded(relation=NewEdge.model_validate(edge), actor=p.actor)


# ---- evidence tools ---------------------------------------------------------------------------


def evidence_search(store: Store, p: Principal, query: Query, apps: Names = None, sources: Sources = None,
                    scope: ScopeArg = None, since: Since = None, until: Until = None,
                    limit: Limit = 10) -> EvidenceSearch:
    """Hybrid search over captured evidence (screen text, transcripts, notes)."""
    from memory.retrieval.search import search_evidence

    scopes = read_scopes(p, scope)
    hits = search_evidence(store, query, scopes=scopes, sources=sources or None, apps=apps or None,
                           since=parse_time(since, "since"), until=parse_time(until, "until"), limit=limit,
                           cols=EVIDENCE_BRIEF_COLS)
    from memory.retrieval.snippets import stems

    query_stems = stems(query)  # once, not per result
    return EvidenceSearch(
        query=query, scopes=scopes, results=[_evidence_brief(h.row, h.score, query_stems) for h in hits],
        hint="a text over 400 characters shows the lines that match the query (… marks what is left out); "
             "call evidence_get for the whole row" if hits
        else "no match: try other words, fewer filters, or timeline for a time range")


def evidence_get(store: Store, p: Principal, id: EvdId, max_chars: MaxChars = 20_000) -> EvidenceRow:
    """One evidence row, its text cut to max_chars."""
    if _kind(id, EVIDENCE_HINT) != "evidence":
        raise InputError(f"{id} is not an evidence id (evd_…); call memory_get for mem_/vlt_ ids")
    try:
        row = store.get(id, scopes=list(p.read))
    except NotFoundError:
        raise NotFoundError(f"no evidence with id {id} is visible to this client — {EVIDENCE_HINT}") from None
    text = row.get("text") or ""
    row["truncated"] = len(text) > max_chars
    row["text"] = text[:max_chars]
    row.pop("content_hash", None)
    return EvidenceRow.model_validate(row)


def timeline(store: Store, p: Principal, since: TimelineSince = None, until: TimelineUntil = None, scope: ScopeArg = None,
             apps: Names = None, samples_per_app: Samples = 5) -> Timeline:
    """What happened between two times: evidence grouped by app, plus episodic memories of that span."""
    end = parse_time(until, "until") or utcnow() + timedelta(seconds=1)
    start = parse_time(since, "since") if since is not None else end - timedelta(hours=24)
    if start is None or start >= end:
        raise InputError("since must be an ISO time before until, e.g. since=2024-05-08T09:00 until=2024-05-08T12:00")
    scopes = read_scopes(p, scope)
    where = store.where("evidence", apps=apps or None, since=start, until=end)
    # Column by column, in time order: a day of capture is many thousands of rows, and a dict per row
    # cost more than the read itself (the result is the same as grouping the rows one by one).
    import numpy as np
    import pyarrow.compute as pc

    table = store.scan("evidence", where, ["id", "captured_at", "app", "window", "source"], scopes=scopes,
                       limit=TIMELINE_MAX_ROWS)
    table = table.take(pc.sort_indices(table, [("captured_at", "ascending")]))  # a stable sort
    ids, times, n_rows = table["id"], table["captured_at"], table.num_rows
    groups_of = _by_app(table)
    sample_rows = {g: _spread(rows.tolist(), samples_per_app) for g, rows in groups_of.items()}
    texts = _texts(store, [ids[i].as_py() for rows in sample_rows.values() for i in rows])
    window_codes, window_names = _codes(table["window"])
    source_codes, source_names = _codes(table["source"])
    groups = []
    for app, rows in sorted(groups_of.items(), key=lambda kv: -len(kv[1])):  # stable: first seen first on ties
        groups.append(AppActivity(
            app=app, count=len(rows), first=iso(times[int(rows[0])].as_py()), last=iso(times[int(rows[-1])].as_py()),
            windows=_most_common(window_codes[rows], window_names, 5),
            sources=sorted(source_names[c] for c in np.unique(source_codes[rows]) if c >= 0),
            samples=[Sample(id=ids[i].as_py(), text=_snip(texts.get(ids[i].as_py(), ""), 200))
                     for i in sample_rows[app]],
        ))
    mwhere = F.where("memory", types=["episodic"], since=start, until=end)
    episodes = store.rows("memory", mwhere, ["id", "title", "scope", "updated_at"], scopes=scopes, limit=50)
    return Timeline(since=iso(start), until=iso(end), scopes=scopes, evidence_rows=n_rows,
                    capped=n_rows >= TIMELINE_MAX_ROWS, apps=groups,
                    episodes=[Episode(id=e["id"], title=e["title"], at=iso(e["updated_at"])) for e in episodes])


# Timeline works column by column (numpy over dictionary codes): a day of capture is many thousands
# of rows, and a Python object per row cost more than reading them.


def _codes(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    """A string column as (int codes, names): codes number the distinct non-empty values in order of
    first appearance; null and "" are -1."""
    import numpy as np

    enc = col.combine_chunks().dictionary_encode() if hasattr(col, "combine_chunks") else col.dictionary_encode()
    names = enc.dictionary.to_pylist()
    codes = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    if "" in names:
        codes[codes == names.index("")] = -1
    return codes, names


def _by_app(table: pa.Table) -> dict[str, np.ndarray]:
    """Row numbers per app (in table order), apps in order of first appearance; no app is "(unknown app)"."""
    import numpy as np

    codes, names = _codes(table["app"])
    keys = names + ["(unknown app)"]
    codes[codes < 0] = len(names)
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=len(keys)))
    parts = np.split(order, bounds[:-1])
    present, first = np.unique(codes, return_index=True)
    return {keys[c]: parts[c] for c in present[np.argsort(first, kind="stable")].tolist()}


def _most_common(codes: np.ndarray, names: list[str], n: int) -> list[str]:
    """The n most frequent values among codes (-1 ignored); ties: the one seen first."""
    import numpy as np

    codes = codes[codes >= 0]
    if not len(codes):
        return []
    values, first, counts = np.unique(codes, return_index=True, return_counts=True)
    top = sorted(range(len(values)), key=lambda k: (-counts[k], first[k]))[:n]
    return [names[values[k]] for k in top]


def _spread(ids: list[str], n: int) -> list[str]:
    if len(ids) <= n:
        return ids
    step = (len(ids) - 1) / max(n - 1, 1)
    return list(dict.fromkeys(ids[round(i * step)] for i in range(n)))


def _texts(store: Store, ids: list[str]) -> dict[str, str]:
    return {i: r["text"] for i, r in store.get_many("evidence", ids, ["id", "text"]).items()}


# ---- status and profile -----------------------------------------------------------------------


def status(store: Store, p: Principal) -> Status:
    """Who the client is, what it may do, and how much it can see."""
    # Kept counts (memory/store/tallies.py), summed over the client's scopes only: no table scan, and
    # rows in scopes it may not read are neither counted nor dated.
    read = list(p.read)
    evidence = store.tallies.visible("evidence", read)
    memories = store.tallies.visible("memory", read).count
    if store.remotes.reading(read):  # a shared scope's memories live in its bucket, not in the kept counts
        visible = F.where("memory")
        memories += store.count("memory", visible, scopes=read) - store.count("memory", visible, scopes=read, local=True)
    return Status(
        server="mirador", client=p.name, actor=p.actor, read_scopes=read, write_scope=p.write,
        can_write=p.write is not None, vault_values=p.allow_vault,
        visible=Visible(memories=memories, evidence=evidence.count,
                        vault_entries=store.tallies.visible("vault", read).count),
        last_evidence_at=iso(evidence.newest),
        tools="memory_recall for task context; memory_search/evidence_search to look things up; "
              "timeline for a time range; memory_add to remember a durable fact",
    )


def core_profile(store: Store, p: Principal) -> str:
    """The person's core profile (core memories in the client's scopes) as Markdown."""
    rows = store.list("memory", scopes=list(p.read), types=["core"], statuses=["active"], limit=200)
    if not rows:
        return "# Core profile\n\n(no core memories in the scopes this client may read)\n"
    blocks: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        blocks.setdefault((r.get("details") or {}).get("block", "user"), []).append(r)
    lines = ["# Core profile", ""]
    for block, items in sorted(blocks.items()):
        lines.append(f"## {block}")
        lines.extend(f"- {r['text']} ({r['id']}, {r['scope']})" for r in items)
        lines.append("")
    return "\n".join(lines)


# ---- helpers ----------------------------------------------------------------------------------


def _kind(id_: str, hint: str) -> str:
    if id_.startswith("rel_"):
        raise InputError(f"{id_} is a relation id; call relation_remove to remove a relation")
    try:
        return kind_of(id_)
    except InputError:
        raise InputError(f"{id_!r} is not an id: ids start with mem_, evd_ or vlt_ — {hint}") from None


def _check_details(details: dict[str, Any] | None) -> None:
    if details is not None and _nesting(details, MAX_DETAILS_DEPTH) > MAX_DETAILS_DEPTH:  # before json.dumps recurses
        raise InputError(f"details is nested deeper than {MAX_DETAILS_DEPTH} levels; flatten it: a few fields whose "
                         "values are text, numbers or lists of text, e.g. {\"steps\": [\"build\", \"deploy\"]}")
    if details is not None and len(json.dumps(details, default=str)) > MAX_DETAILS_CHARS:
        raise InputError(f"details is larger than {MAX_DETAILS_CHARS:,} characters as JSON; keep it to a few fields")


def _nesting(value: Any, limit: int) -> int:
    """How many levels of objects and lists `value` nests, counted without recursion; stops past `limit`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, depth = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            break
        stack.extend((c, depth + 1) for c in children)
    return deepest


# ---- what peers' servers offer too: adding evidence, paging memories, removing an edge, consolidating ----------

LIST_STATUSES = ["active", "candidate"]
PLAN_MAX_STEPS = 100  # steps a consolidate result lists (counts cover them all)


def evidence_add(store: Store, p: Principal, text: EvidenceText, scope: WriteScopeArg = None, app: EvidenceApp = None,
                 window: Window = None, captured_at: CapturedAt = None,
                 idempotency_key: IdempotencyKey = None) -> EvidenceAdded:
    """Store text as evidence (source "mcp") in the client's write scope, secrets redacted as capture does.

    idempotency_key: a retry with the same key returns the first call's row and stores nothing
    (memory/store/idempotency.py)."""
    from memory.redaction import Redactor
    from memory.store.idempotency import add_once
    from memory.store.specs import EvidenceSpec

    ws = write_scope(p, scope)
    if not text.strip():
        raise InputError("text is empty: send the text to keep as evidence (a note, a transcript, a page's text)")
    at = parse_time(captured_at, "captured_at") if captured_at is not None else None
    if at is not None and at > utcnow() + timedelta(minutes=5):
        raise InputError(f"captured_at {captured_at!r} is in the future: send when the text was seen or said "
                         "(ISO 8601), or omit it for now")
    priv = store.config.privacy
    redactor = Redactor(priv.redact_kinds, priv.redact)  # the person's redaction settings, as capture uses them
    red = redactor.redact(text)
    # A title or app name can quote a secret too (a window titled with a token); capture redacts both.
    app_text = redactor.redact(app).text if app else p.name
    window_text = redactor.redact(window).text if window else ""
    fields: dict[str, Any] = dict(source="mcp", app=app_text, window=window_text, scope=ws, captured_at=at, redactions=red.total)

    def write(id_: str | None = None) -> dict[str, Any]:
        return store.add_evidence(red.text, actor=p.actor, id=id_, **fields)

    replayed = False
    if idempotency_key is None:
        row = write()
    else:
        row, replayed = add_once(store, "evidence", p.actor, idempotency_key,
                                 dict(store.evidence_row(EvidenceSpec(text=red.text, **fields))), write,
                                 scopes=list(p.read))
    out = EvidenceAdded(created=_evidence_brief(row), redactions=dict(red.counts), actor=p.actor,
                        hint="extraction turns it into memories later (consolidate runs it now); evidence_get reads "
                             "it back")
    if red.total:
        out.hint = (f"{red.total} secret(s) were replaced by [REDACTED:kind] markers before storing; "
                    "secrets belong in the vault, which the person fills (`mirador add --type vault`)")
    if replayed:
        out.replayed = True
        out.hint = "an earlier call with this idempotency_key stored it (this is its row); nothing was stored again"
    return out


def _list_key(scopes: Sequence[str], types: Sequence[str] | None, statuses: Sequence[str]) -> str:
    import hashlib

    basis = json.dumps([sorted(scopes), sorted(types or []), sorted(statuses)])
    return hashlib.sha256(basis.encode()).hexdigest()[:12]


_CURSOR_HELP = ("send next_cursor exactly as the previous memory_list call returned it, with the same scope, "
                "types and status, or omit cursor to start from the most recently changed memory")


def _encode_cursor(key: str, updated_at: datetime, id_: str) -> str:
    import base64

    raw = json.dumps({"k": key, "u": updated_at.isoformat(timespec="microseconds"), "i": id_})
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, key: str) -> tuple[datetime, str]:
    import base64
    import binascii

    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        at, id_ = datetime.fromisoformat(raw["u"]), str(raw["i"])
        if raw["k"] != key:
            raise InputError(f"cursor belongs to a listing with other filters: {_CURSOR_HELP}")
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise InputError(f"cursor is not one memory_list returned: {_CURSOR_HELP}") from None
    return at, id_


def memory_list(store: Store, p: Principal, scope: ScopeArg = None, types: RecallTypes = None,
                status: ListStatuses = None, limit: PageSize = 20, cursor: Cursor = None) -> MemoryPage:
    """A page of the client's memories, most recently changed first (then by id), filtered; cursor pages on."""
    scopes = read_scopes(p, scope)
    statuses = list(status) if status else list(LIST_STATUSES)
    key = _list_key(scopes, types or None, statuses)
    where = F.where("memory", types=types or None, statuses=statuses)
    if cursor is not None:
        at, last = _decode_cursor(cursor, key)
        # Keyset paging: rows changed meanwhile move to the front and are not repeated on later pages.
        where = F.and_(where, F.keyset_before(at, last))
    import pyarrow.compute as pc

    # This device's memories and the shared scopes' (Store.scan), the scope filter inside every query.
    keys = store.scan("memory", where, ["id", "updated_at"], scopes=scopes)
    # Only the page (and one more, to know there is a next) becomes Python rows, not every key.
    order = pc.sort_indices(keys, [("updated_at", "descending"), ("id", "descending")])
    top = keys.take(order[: limit + 1]).to_pylist()
    page = top[:limit]
    rows = store.get_many("memory", [r["id"] for r in page], MEMORY_BRIEF_COLS)
    results = []
    for r in page:
        if r["id"] in rows:
            brief = _memory_brief(rows[r["id"]])
            brief.updated_at = iso(r["updated_at"])
            results.append(brief)
    more = len(top) > limit
    return MemoryPage(scopes=scopes, types=types or None, status=statuses, results=results,
                      next_cursor=_encode_cursor(key, page[-1]["updated_at"], page[-1]["id"]) if more else None,
                      hint="more memories: call memory_list again with cursor=next_cursor" if more
                      else ("that is all of them" if results else "no memories match these filters"))


def relation_remove(store: Store, p: Principal, id: RelId) -> RelationRemoved:
    """Remove the edge `id` (rel_…) whose src is in the client's write scope; audited as the client."""
    from memory.graph.relations import edge_rows, remove_relation

    ws = write_scope(p, None)
    if not id.startswith("rel_") or len(id) <= 4:
        raise InputError(f"{id!r} is not a relation id (rel_…): memory_related lists a memory's relations with "
                         "their ids; memory_forget erases memories and evidence")
    read = list(p.read)
    rows = edge_rows(store, F.id_is(id), ["id", "scope"], 1, read)  # both ends in read; a shared scope's edges too
    if not rows:
        raise NotFoundError(f"no relation {id} is visible to this client (it never existed, was removed, or an end "
                            "is outside its scopes) — call memory_related on a memory to list its relations")
    if not in_scopes(rows[0]["scope"], [ws]):
        raise InputError(f"relation {id} starts at a memory in scope {rows[0]['scope']!r}; this client may remove "
                         f"only relations whose src is in scope {ws!r} and below")
    edge = remove_relation(store, id, actor=p.actor, scopes=read)
    return RelationRemoved(removed=Edge.model_validate(edge), actor=p.actor)


def _step(s: Step) -> PlanStep:
    out: dict[str, Any] = {"kind": s.kind, "action": "apply" if s.action == "apply" else "propose to the person",
                           "scope": s.scope, "reason": s.reason}
    if s.target_id:
        out["target_id"] = s.target_id
    if s.other_id:
        out["other_id"] = s.other_id
    if s.ids:
        out["ids"] = s.ids[:20]
        out["count"] = len(s.ids)
    if s.spec:
        out["text"] = _snip(s.spec.get("text") or "", 200)
    return PlanStep(**out)


def _counts(steps: list[Step]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for s in steps:
        out[f"{s.kind}:{s.action}"] += len(s.ids) if s.kind == "decay" else 1
    return dict(out)


def consolidate(store: Store, p: Principal, dry_run: DryRun = True, limit: ConsolidateLimit = 20,
                scope: ConsolidateScope = None) -> Consolidation:
    """Dry run: what extraction and a dream pass would do in the client's read scopes (or `scope`). Otherwise
    extract up to `limit` pending evidence rows of the client's write scope (or `scope` below it) and apply
    the dream steps inside it."""
    from memory.consolidation.dream import apply_steps, plan_dream

    limit = max(1, min(limit, CONSOLIDATE_MAX_EVIDENCE))
    if dry_run:
        scopes = read_scopes(p, scope)
        pending = store.count("evidence", F.is_null("extracted_at"), scopes=scopes, local=True)
        plan = plan_dream(store)
        steps = [s for s in plan.steps if in_scopes(s.scope, scopes)]
        return Consolidation(
            dry_run=True, scopes=scopes, pending_evidence=pending, would_extract=min(pending, limit),
            since=plan.since, until=plan.until, counts=_counts(steps),
            steps=[_step(s) for s in steps[:PLAN_MAX_STEPS]], steps_total=len(steps),
            hint="nothing was written; consolidate with dry_run=false (a token with a write scope) runs "
                 "extraction and the steps in that scope (decay stays with the scheduled pass)")
    ws = write_scope(p, scope)
    from memory.consolidation.extraction import make_extractor, run_extraction
    from memory.store.audit import audit_row

    report = run_extraction(store, extractor=make_extractor(store), limit=limit, scopes=[ws])
    plan = plan_dream(store)
    # Decay is time-based housekeeping of every scope; the scheduled pass does it once per interval.
    steps = [s for s in plan.steps if s.kind != "decay" and in_scopes(s.scope, [ws])]
    applied, proposed = apply_steps(store, steps)
    left = store.count("evidence", F.is_null("extracted_at"), scopes=[ws], local=True)
    extraction = Extraction(evidence=report.evidence, created=report.created, candidates=report.candidates,
                            corroborated=report.corroborated, superseded=report.superseded,
                            relations=report.relations, skipped=report.skipped, engines=report.engines,
                            memory_ids=report.memory_ids[:50])
    store.write_audit([audit_row(p.actor, "consolidate", "memory", f"scope:{ws}", ws,
                                 after={"extracted": report.evidence, "memory_ids": report.memory_ids[:50],
                                        "applied": applied, "proposed": proposed})])
    return Consolidation(
        dry_run=False, scope=ws, extraction=extraction, pending_evidence=left,
        dream=Dream(applied=applied, proposed=proposed, counts=_counts(steps),
                    steps=[_step(s) for s in steps[:PLAN_MAX_STEPS]]),
        actor=p.actor,
        hint=(f"{left} evidence rows still wait; call consolidate again" if left else
              "done; proposals (merges, superseded facts) wait for the person to accept or dismiss "
              "in Mirador's review"))
