"""Move captured evidence to another scope, and the memories drawn from it with it (`mirador evidence rescope`).

Capture decides a row's scope from where it came from (capture/scope_rules.py); rows captured before
a rule existed, or under a wrong one, are moved here. Memories inherit their evidence's scope, so a
memory whose evidence all ends up in the new scope follows it; a memory that would rest on evidence
of two scopes stays where it is and goes to review (an active one becomes a candidate again): which
scope it belongs to is the person's call, and moving it could show it to a token that should not see
it. Memories without evidence provenance (written by hand, imported) and vault entries never move.
Every change is audited; a moved memory's listeners run (memory/store/lifecycle.py: its relations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory.errors import InputError, NotFoundError
from memory.scopes import validate_scope
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import ACTORS_AUTOMATED, audit_row, utcnow
from memory.store.lifecycle import memory_rescoped
from memory.store.rows import PREFIX
from memory.types import Status

if TYPE_CHECKING:
    from memory.store.core import Store

EVIDENCE_COLS = ["id", "scope", "app", "window", "text", "source", "captured_at"]
CHUNK = 500


@dataclass
class RescopePlan:
    """What a rescope will do, worked out before anything changes (the confirmation states it).

    evidence: the rows that move (their current scope differs from `to`); follow: memories whose
    evidence all lands in `to`, which move too; review: memories that would rest on evidence of two
    scopes, which stay and go to review."""

    to: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    follow: list[dict[str, Any]] = field(default_factory=list)
    review: list[dict[str, Any]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Counts by what happens, for the CLI's JSON and the dry run."""
        from_scopes: dict[str, int] = {}
        for r in self.evidence:
            from_scopes[r["scope"]] = from_scopes.get(r["scope"], 0) + 1
        return {"evidence": len(self.evidence), "memories": len(self.follow), "review": len(self.review),
                **{f"from {k}": v for k, v in sorted(from_scopes.items())}}

    def empty(self) -> bool:
        return not self.evidence

    def describe(self) -> str:
        """One plain sentence (or two) of what will move."""
        if self.empty():
            return f"Nothing to move: no matching row is outside {self.to}."
        src = ", ".join(f"{n:,} from {s}" for s, n in sorted(_by_scope(self.evidence).items()))
        text = (f"Moves {_n(len(self.evidence), 'captured row')} ({src}) to {self.to}, with "
                f"{_n(len(self.follow), 'memory', 'memories')} drawn only from them.")
        if self.review:
            text += (f" {_n(len(self.review), 'memory', 'memories')} that would rest on evidence of two scopes "
                     "stay where they are and go to review.")
        return text


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _by_scope(rows: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        out[r["scope"]] = out.get(r["scope"], 0) + 1
    return out


def select_evidence(store: Store, *, ids: Iterable[str] | None = None, app: str | None = None, scope: str | None = None,
                    since: datetime | None = None, until: datetime | None = None,
                    keep: Callable[[dict[str, Any]], bool] | None = None) -> list[dict[str, Any]]:
    """Evidence rows matching every filter given (app: case-insensitive name; scope: that scope and below;
    keep: a further test on each row, e.g. a window-title pattern). Unknown ids are an error."""
    ids = list(dict.fromkeys(ids or []))
    if not (ids or app or scope or since or until or keep):
        raise InputError("rescope needs ids, --app, --window, --scope, --since or --until; refusing to move "
                         "everything")
    scopes = [validate_scope(scope)] if scope else None
    where = F.where("evidence", scopes=scopes, since=since, until=until)
    if app:
        # The app column is sealed (memory/store/sealer.py): the names whatever their case are found among the
        # opened app names, then filtered on as the table holds them.
        name = app.strip().lower()
        where = F.and_(where, F.sealed_one_of("app", store.apps_matching(lambda a: a.lower() == name, where)))
    if ids:
        bad = [i for i in ids if not i.startswith(PREFIX["evidence"])]
        if bad:
            raise InputError(f"{bad[0]} is not an evidence id: rescope moves captured rows (their memories follow)")
        rows = list(store.get_many("evidence", ids, EVIDENCE_COLS, where=where).values())
        missing = set(ids) - {r["id"] for r in rows}
        if missing and not where:
            raise NotFoundError(f"no evidence row with id {sorted(missing)[0]} — nothing was moved; find ids with "
                                "`mirador timeline` or `mirador search --evidence`")
    else:
        rows = store.rows("evidence", where, EVIDENCE_COLS, local=True)  # this device's capture: moved here
    if keep is not None:
        rows = [r for r in rows if keep(r)]
    rows.sort(key=lambda r: (r["captured_at"], r["id"]))
    return rows


def plan_rescope(store: Store, to: str, rows: list[dict[str, Any]]) -> RescopePlan:
    """What moving these evidence rows to scope `to` does to them and their memories; changes nothing."""
    to = validate_scope(to)
    plan = RescopePlan(to=to, evidence=[r for r in rows if r["scope"] != to])
    moving = {r["id"] for r in plan.evidence}
    if not moving:
        return plan
    mems = _memories_citing(store, moving)
    cited = {e for m in mems for e in (m["provenance"] or []) if e.startswith(PREFIX["evidence"])}
    others = sorted(cited - moving)
    scope_of = {r["id"]: r["scope"] for r in store.get_many("evidence", others, ["id", "scope"]).values()}
    scope_of.update({e: to for e in moving})
    for m in mems:
        scopes = {scope_of[e] for e in (m["provenance"] or []) if e in scope_of}
        if scopes == {to}:
            if m["scope"] != to:
                plan.follow.append(m)
        else:
            plan.review.append(m)
    return plan


def _memories_citing(store: Store, evidence_ids: set[str]) -> list[dict[str, Any]]:
    """Memories whose provenance (or the derivations ledger) names any of these evidence rows, a shared scope's
    too. A memory the ledger names but whose provenance no longer cites the moved rows rests on other evidence
    now (an earlier erase sent it to review): its scope is decided by that evidence, not by this move."""
    hits = store.derived_from(evidence_ids, ["id", "scope", "status", "provenance"], ledger=True)
    return sorted((m for m in hits if set(m["provenance"] or []) & evidence_ids), key=lambda m: m["id"])


def rescope(store: Store, plan: RescopePlan, actor: str = "person") -> dict[str, Any]:
    """Carry out a plan: move the evidence, move the memories that follow, send the mixed ones to review."""
    if actor in ACTORS_AUTOMATED:
        raise InputError(f"{actor} may not move rows between scopes; a person decides (principle 2)")
    to = plan.to
    now = utcnow()
    ev_ids = [r["id"] for r in plan.evidence]
    for start in range(0, len(ev_ids), CHUNK):
        where = F.id_in(ev_ids[start:start + CHUNK])
        store.commit(lambda w=where: store.evidence.update(where=w, values={"scope": to}))
    store.write_audit([audit_row(actor, "update", "evidence", r["id"], to, {"scope": r["scope"]}, {"scope": to})
                       for r in plan.evidence])
    if getattr(store.remotes, "evidence", None) is not None:  # into or out of a scope whose binding shares evidence
        store.remotes.evidence.moved(ev_ids, {r["id"]: r["scope"] for r in plan.evidence}, to)
    moved = _rewrite_memories(store, plan.follow, actor, now, scope=to)
    for m in plan.follow:
        memory_rescoped(store, m["id"], to)  # e.g. the end scopes of its edges (memory/graph)
    reviewed = _rewrite_memories(store, plan.review, actor, now, review=True)
    store.reader.forget_cached()
    return {"scope": to, "evidence": len(ev_ids), "memories": moved, "review": reviewed,
            "memory_ids": [m["id"] for m in plan.follow], "review_ids": [m["id"] for m in plan.review]}


def _rewrite_memories(store: Store, rows: list[dict[str, Any]], actor: str, now: datetime, scope: str | None = None,
                      review: bool = False) -> int:
    """Set these memories' scope, or send them to review (active → candidate), in one commit, audited.

    Not Store.update_memory: a move that follows the evidence is not an edit of the memory, so it must
    not mark it user_edited (that would shield it from later consolidation as if the person rewrote it)."""
    if not rows:
        return 0
    # A shared scope's memories too: read from its bucket, written back through its outbox (memory/store/remote.py).
    full = list(store.get_many("memory", [r["id"] for r in rows], T.MEMORY_COLS + ["vector"]).values())
    originals = {r["id"]: dict(r) for r in full}
    audits = []
    for r in full:
        before = {"scope": r["scope"], "status": r["status"]}
        if scope is not None:
            r["scope"] = scope
        if review and r["status"] == Status.ACTIVE.value:
            r["status"] = Status.CANDIDATE.value
        after = {"scope": r["scope"], "status": r["status"]}
        if after == before:
            continue
        r["updated_at"] = now
        audits.append(audit_row(actor, "update", "memory", r["id"], r["scope"],
                                {k: v for k, v in before.items() if before[k] != after[k]},
                                {k: v for k, v in after.items() if before[k] != after[k]}))
    changed = [r for r in full if r["updated_at"] == now]
    if changed:
        local = [r for r in changed if not store.remotes.put(r, actor=actor, old=originals[r["id"]])]
        store.merge_rows(store.memories, local, insert=True)
        for r in changed:  # into or out of a shared scope: the copy left behind goes (as Store.update_memory)
            if r["scope"] != originals[r["id"]]["scope"]:
                store.remotes.moved(r["id"], originals[r["id"]]["scope"], r["scope"])
        store.write_audit(audits)
    return len(changed)

