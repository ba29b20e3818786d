"""Dream consolidation: merge near-duplicates, flag stale facts, decay salience, crystallise patterns.

A pass is incremental. It looks only at memories changed since the checkpoint kept in
`dream_state.json` in the data dir (plus the rows whose age crossed a half-life or the
retention limit in that interval), so its cost follows what changed, not the store's size.

It first writes a plan. Steps that hide nothing apply: adding a duplicate's provenance to the
memory it duplicates, halving salience, creating a *candidate* for a repeated pattern. Steps
that would hide a memory (merge away a duplicate, supersede a stale fact, archive an old
unreviewed candidate) become rows in the `proposals` table for the person to accept or
dismiss — a separate table rather than fake memories, so proposals never show up in search or
recall, and they hold ids and a reason only (no content to erase later). Every write is audited
with actor "dream". `dry_run=True` builds the same plan and writes nothing.

A pass can be stopped (at quit) between two steps. Only the checkpoint says a pass is done, so the
next pass plans the same interval again; every step but decay finds its work already done (provenance
already absorbed, proposal already filed, pattern already crystallised). Decay halves salience, so it
runs first, all at once, and `decayed_to` in the state file records that the interval's decay is done.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, overload

from memory.consolidation.rules import find_commands
from memory.consolidation.write_policy import (
    blocked_derivations,
    neighbours,
    neighbours_many,
    record_derivations,
    subject_key,
    tombstoned_fps,
)
from memory.errors import Hint, InputError, NotFoundError
from memory.store import filters as F
from memory.store import tables as T
from memory.store.atomic import write_atomic
from memory.store.audit import audit_row, utcnow
from memory.store.core import MemorySpec
from memory.store.fingerprint import fingerprint
from memory.store.rows import parse_time

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable

    from memory.config import DreamConfig, ExtractionConfig
    from memory.store.core import Store

log = logging.getLogger(__name__)

ACTOR = "dream"
STATE_FILE = "dream_state.json"
VISIBLE = ("candidate", "active")
_COLS = ["id", "type", "scope", "text", "details", "status", "provenance", "confidence", "user_edited", "pinned",
         "fingerprint", "created_at", "valid_from", "vector"]
_TYPES = ("episodic", "semantic", "procedural", "resource", "core")


@dataclass
class Step:
    """One planned change. action 'apply' runs now; 'propose' becomes a proposal row."""

    kind: str  # merge | provenance | supersede | decay | crystallise | archive
    action: str  # apply | propose
    scope: str
    reason: str
    target_id: str | None = None
    other_id: str | None = None
    ids: list[str] = field(default_factory=list)
    spec: dict | None = None


@dataclass
class DreamPlan:
    """What a pass found and (unless dry_run) did."""

    since: str | None
    until: str
    changed: int
    dry_run: bool
    steps: list[Step] = field(default_factory=list)
    applied: int = 0
    proposed: int = 0
    seconds: float = 0.0
    stopped: str | None = None  # where a stop ended the pass; None: it ran to the end

    def counts(self) -> dict:
        """Steps per kind/action."""
        out: dict[str, int] = {}
        for s in self.steps:
            key = f"{s.kind}:{s.action}"
            out[key] = out.get(key, 0) + (len(s.ids) if s.kind == "decay" else 1)
        return out

    def to_dict(self) -> dict:
        """JSON-ready."""
        d = asdict(self)
        d["counts"] = self.counts()
        return d


@overload
def _iso_us(dt: datetime) -> str: ...
@overload
def _iso_us(dt: datetime | None) -> str | None: ...
def _iso_us(dt: datetime | None) -> str | None:
    # Full precision: a checkpoint cut to the second would count rows from that second twice.
    return dt.isoformat(timespec="microseconds") + "Z" if dt else None


def _spec(step: Step) -> dict:
    """The memory a crystallise step adds: planned with it (the other kinds carry none)."""
    if step.spec is None:
        raise ValueError(f"a {step.kind} step carries no memory to add")
    return step.spec


def state_path(store: Store) -> Path:
    """Where the checkpoint lives."""
    return Path(store.home) / STATE_FILE


def load_checkpoint(store: Store, key: str = "checkpoint") -> datetime | None:
    """End of the last completed pass (naive UTC), None before the first. key="decayed_to": the end of
    the last interval whose decay was applied (a stopped pass gets that far)."""
    p = state_path(store)
    if not p.exists():
        return None
    try:
        return parse_time(json.loads(p.read_text(encoding="utf-8")).get(key))
    except (ValueError, json.JSONDecodeError, InputError):
        log.warning("%s is unreadable; the next pass starts from scratch", p)
        return None


def _save_checkpoint(store: Store, until: datetime | None, plan: DreamPlan, decayed_to: datetime | None = None) -> None:
    # Atomic: a crash never leaves half a checkpoint.
    write_atomic(state_path(store), json.dumps({"checkpoint": _iso_us(until), "decayed_to": _iso_us(decayed_to or until),
                                                "last_counts": plan.counts()}, indent=1))


class _Stopped(Exception):
    """A stop was asked for while planning (nothing written yet)."""


def _check(stop: threading.Event | None) -> None:
    if stop is not None and stop.is_set():
        raise _Stopped


def set_checkpoint(store: Store, when: datetime) -> None:
    """Declare everything changed up to `when` consolidated (e.g. after an import or a benchmark build)."""
    _save_checkpoint(store, when, DreamPlan(since=None, until=_iso_us(when), changed=0, dry_run=False))


def _changed(store: Store, since: datetime | None, until: datetime) -> list[dict]:
    # A shared scope's memories too: their duplicates and stale facts are proposed here as for local ones.
    where = F.and_(F.one_of("status", VISIBLE), F.at_or_before("updated_at", until),
                   F.after("updated_at", since) if since else None)
    return store.rows("memory", where, _COLS)


def _protected(row: dict) -> bool:
    return bool(row.get("user_edited") or row.get("pinned"))


def _survivor(a: dict, b: dict) -> tuple[dict, dict]:
    key = lambda r: (_protected(r), r["status"] == "active", float(r["confidence"]), -r["created_at"].timestamp())  # noqa: E731
    return (a, b) if key(a) >= key(b) else (b, a)


_BATCH = 256  # changed rows whose neighbours one LanceDB query looks up


def _near(store: Store, rows: list[dict], mtype: str | None, k: int, stop: threading.Event | None = None) -> dict[str, list[dict]]:
    """Each row's k nearest visible memories of its type (or of `mtype`) in its scope, by row id.

    Batched per type and scope: after an import thousands of rows have changed, and one LanceDB query
    per row would make the pass grow with them (bench/dream_stop.py). The stop is checked between batches.
    """
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((mtype or r["type"], r["scope"]), []).append(r)
    out: dict[str, list[dict]] = {}
    for (t, scope), members in groups.items():
        for i in range(0, len(members), _BATCH):
            _check(stop)
            part = members[i:i + _BATCH]
            found = neighbours_many(store, [r["vector"] for r in part], t, scope, k=k, statuses=VISIBLE)
            out.update(zip((r["id"] for r in part), found, strict=True))
    return out


def _plan_pairs(store: Store, changed: list[dict], cfg: DreamConfig, xcfg: ExtractionConfig,
                stop: threading.Event | None = None) -> list[Step]:
    """Merges (near-duplicates) and supersessions (same subject, different value) around changed rows."""
    steps, seen = [], set()
    near = _near(store, changed, None, cfg.neighbours, stop)
    for m in changed:
        for n in near[m["id"]]:
            pair = tuple(sorted((m["id"], n["id"])))
            if n["id"] == m["id"] or pair in seen:
                continue
            if n["similarity"] >= cfg.merge_similarity or n["fingerprint"] == m["fingerprint"]:
                seen.add(pair)
                keep, dup = _survivor(m, n)
                if _protected(dup):
                    continue  # never propose hiding what the person edited or pinned
                extra = [e for e in (dup["provenance"] or []) if e not in (keep["provenance"] or [])]
                if extra:
                    steps.append(Step("provenance", "apply", keep["scope"], "absorb a duplicate's evidence",
                                      keep["id"], dup["id"], ids=extra))
                steps.append(Step("merge", "propose", keep["scope"], f"near-duplicate (similarity {n['similarity']:.2f})",
                                  dup["id"], keep["id"]))
                continue
            subj = subject_key(m)
            if subj and n["similarity"] >= xcfg.supersede_similarity and subject_key(n) == subj \
                    and m["status"] == n["status"] == "active":
                seen.add(pair)
                old, new = (m, n) if m["created_at"] < n["created_at"] else (n, m)
                if not _protected(old):
                    steps.append(Step("supersede", "propose", old["scope"], "newer value for the same subject",
                                      old["id"], new["id"]))
    return steps


def _plan_crystallise(store: Store, changed: list[dict], cfg: DreamConfig,
                      stop: threading.Event | None = None) -> list[Step]:
    """Candidates for patterns that repeat across episodic memories."""
    steps: list[Step] = []
    used: set[str] = set()
    episodes = [r for r in changed if r["type"] == "episodic"]
    around = _near(store, episodes, "episodic", cfg.neighbours + 4, stop)
    for m in episodes:
        _check(stop)
        if m["id"] in used:
            continue
        near = [n for n in around[m["id"]] if n["id"] != m["id"] and n["similarity"] >= cfg.crystallise_similarity]
        if len(near) + 1 < cfg.crystallise_min_repeats:
            continue
        cluster = [m] + near
        texts = [c["text"] for c in cluster]
        mtype = "procedural" if any(find_commands(t) for t in texts) else "semantic"
        known = neighbours(store, m["vector"], mtype, m["scope"], k=3,
                           statuses=("candidate", "active", "superseded", "rejected"))
        if any(k["similarity"] >= cfg.crystallise_similarity for k in known):
            continue  # already crystallised (or the person rejected it): do not propose again
        base = min(texts, key=len)
        text = f"Recurring: {base}"
        details = {"subject": "recurring pattern", "fact": text} if mtype == "semantic" else {"goal": text}
        # Provenance: the episodes' evidence, and the episodes themselves (a person's own notes have no evidence).
        prov = list(dict.fromkeys([e for c in cluster for e in (c["provenance"] or [])] + [c["id"] for c in cluster]))
        used.update(c["id"] for c in cluster)
        steps.append(Step("crystallise", "apply", m["scope"], f"{len(cluster)} similar episodes",
                          m["id"], None, ids=[c["id"] for c in cluster],
                          spec={"text": text, "type": mtype, "details": details, "provenance": prov}))
    return _drop_forbidden(store, steps)


def _drop_forbidden(store: Store, steps: list[Step]) -> list[Step]:
    # Never recreate what the person deleted: by fingerprint, or from evidence whose derivation they deleted.
    if not steps:
        return steps
    dead = tombstoned_fps(store, [fingerprint(_spec(s)["text"]) for s in steps])
    # The ledger's source ids include the episodes' memory ids, so a deleted crystallisation of a
    # person's own notes stays deleted too; any blocked source is enough to stay away.
    blocked = blocked_derivations(store, sorted({e for s in steps for e in _spec(s)["provenance"]}))
    return [s for s in steps if fingerprint(_spec(s)["text"]) not in dead and _spec(s)["provenance"]
            and not any((e, _spec(s)["type"]) in blocked for e in _spec(s)["provenance"])]


def _crossing(col: str, since: datetime | None, until: datetime, age: timedelta) -> F.Where | None:
    """Rows whose `col` + age fell inside (since, until]: each boundary is crossed in exactly one pass."""
    return F.and_(F.at_or_before(col, until - age), F.after(col, since - age) if since else None)


def _plan_decay(store: Store, since: datetime | None, until: datetime, cfg: DreamConfig) -> list[Step]:
    """Halve salience once per half-life of age (per type); pinned memories keep theirs."""
    steps = []
    for mtype in _TYPES:
        hl = timedelta(days=getattr(cfg.half_life_days, mtype))
        for k in range(1, cfg.max_half_lives + 1):
            if since is None and until - k * hl < datetime(1970, 1, 2):
                break
            where = F.and_(F.equals("type", mtype), F.one_of("status", VISIBLE), F.equals("pinned", False),
                           _crossing("created_at", since, until, k * hl))
            # This device's memories: every device sharing a scope runs its own pass, so a shared memory decayed
            # here would be halved once per device (Store.decay_salience).
            rows = store.rows("memory", where, ["id", "scope"], local=True)
            if rows:
                steps.append(Step("decay", "apply", rows[0]["scope"], f"{mtype}: half-life {k}",
                                  ids=[r["id"] for r in rows]))
    return steps


def _plan_archive(store: Store, since: datetime | None, until: datetime, cfg: DreamConfig) -> list[Step]:
    """Unreviewed candidates past the retention limit: propose archiving (rejecting) them."""
    where = F.and_(F.equals("status", "candidate"), F.equals("pinned", False), F.equals("user_edited", False),
                   _crossing("created_at", since, until, timedelta(days=cfg.candidate_retention_days)))
    return [Step("archive", "propose", r["scope"], f"unreviewed for {cfg.candidate_retention_days:g} days", r["id"])
            for r in store.rows("memory", where, ["id", "scope"])]


def _open_proposal_keys(store: Store, steps: list[Step]) -> set[tuple]:
    targets = sorted({s.target_id for s in steps if s.action == "propose" and s.target_id is not None})
    if not targets:
        return set()
    return {(r["kind"], r["target_id"], r["other_id"])
            for r in store.rows(T.PROPOSALS, F.id_in(targets, "target_id"), ["kind", "target_id", "other_id"])}


def plan_dream(store: Store, now: datetime | None = None, stop: threading.Event | None = None) -> DreamPlan:
    """Build the plan for the next pass (reads only). Decay steps come first (see the module doc)."""
    cfg, xcfg = store.config.dream, store.config.extraction
    since, until = load_checkpoint(store), now or utcnow()
    decayed_to = load_checkpoint(store, "decayed_to")
    decay_since = decayed_to if decayed_to and (since is None or decayed_to > since) else since
    changed = _changed(store, since, until)
    plan = DreamPlan(since=_iso_us(since), until=_iso_us(until), changed=len(changed), dry_run=True)
    steps = _plan_decay(store, decay_since, until, cfg)
    steps += _plan_pairs(store, changed, cfg, xcfg, stop) + _plan_crystallise(store, changed, cfg, stop)
    steps += _plan_archive(store, since, until, cfg)
    done = _open_proposal_keys(store, steps)  # a proposal made (or dismissed) once is not made again
    plan.steps = [s for s in steps if s.action != "propose" or (s.kind, s.target_id, s.other_id) not in done]
    return plan


def run_dream(store: Store, dry_run: bool = False, now: datetime | None = None,
              stop: threading.Event | None = None) -> DreamPlan:
    """Plan a pass and, unless dry_run, apply what is safe and file the rest as proposals.

    stop: a threading.Event; once set, the pass ends before its next step (never inside the decay
    steps, which run first and together) and says where in `plan.stopped`; the next pass does the rest.
    """
    start = time.monotonic()
    try:
        plan = plan_dream(store, now, stop)
    except _Stopped:
        plan = DreamPlan(since=_iso_us(load_checkpoint(store)), until=_iso_us(now or utcnow()), changed=0,
                         dry_run=dry_run, stopped="while planning, before any write")
        log.info("dream stopped %s", plan.stopped)
        return plan
    plan.dry_run = dry_run
    if not dry_run:
        n_decay = sum(s.kind == "decay" for s in plan.steps)
        for k, step in enumerate(plan.steps):
            if k == n_decay and n_decay:
                # The interval's decay is done: a stop from here on must not let the next pass repeat it.
                _save_checkpoint(store, load_checkpoint(store), plan, decayed_to=parse_time(plan.until))
            if k >= n_decay and stop is not None and stop.is_set():
                plan.stopped = f"after {k} of {len(plan.steps)} steps"
                break
            done = _apply_one(store, step)
            plan.applied += int(done == "apply")
            plan.proposed += int(done == "propose")
        if plan.stopped is None:
            _save_checkpoint(store, parse_time(plan.until), plan)
    plan.seconds = round(time.monotonic() - start, 3)
    log.info("dream%s: %d changed, %s (%.2fs)%s", " (dry run)" if dry_run else "", plan.changed, plan.counts(),
             plan.seconds, f"; stopped {plan.stopped}" if plan.stopped else "")
    return plan


def apply_steps(store: Store, steps: list[Step]) -> tuple[int, int]:
    """Apply planned steps outside a pass, e.g. one client's scope over MCP: (applied, proposed).

    The checkpoint is left alone, so the next full pass still covers every scope; it finds these steps
    already done. Decay is refused: halving salience is not idempotent, and only a pass records that an
    interval's decay is done."""
    if any(s.kind == "decay" for s in steps):
        raise InputError("decay steps run only inside a dream pass (run_dream)")
    done = [_apply_one(store, step) for step in steps]
    return done.count("apply"), done.count("propose")


def _apply_one(store: Store, step: Step) -> str | None:
    """Apply one planned step: "apply" or "propose" as it was done, None if it no longer fits the store."""
    try:
        _APPLY[step.kind](store, step)
    except (InputError, NotFoundError) as e:  # a row changed or vanished since planning: skip it
        log.info("dream step %s on %s skipped: %s", step.kind, step.target_id, e)
        return None
    return "apply" if step.action == "apply" else "propose"


def _apply_provenance(store: Store, step: Step) -> None:
    assert step.target_id is not None  # a provenance step names the memory that keeps the evidence (_plan_pairs)
    store.update_memory(step.target_id, actor=ACTOR, provenance_add=step.ids)


def _apply_decay(store: Store, step: Step) -> None:
    store.decay_salience(step.ids)
    store.write_audit([audit_row(ACTOR, "decay", "memory", step.ids[0] if len(step.ids) == 1 else f"batch:{len(step.ids)}",
                            step.scope, after={"ids": step.ids, "salience": "x0.5", "reason": step.reason})])


def _apply_crystallise(store: Store, step: Step) -> None:
    s = _spec(step)
    spec = MemorySpec(text=s["text"], type=s["type"], scope=step.scope, details=s["details"], status="candidate",
                      confidence=0.5, provenance=s["provenance"], origin="dream:crystallise")
    row = store.add_memories([spec], actor=ACTOR)[0]
    record_derivations(store, [(row["id"], e, row["type"]) for e in row["provenance"]], ACTOR)


def _apply_proposal(store: Store, step: Step) -> None:
    assert step.target_id is not None  # a proposal is about one memory (_plan_pairs, _plan_archive)
    row = {"id": "prp_" + uuid.uuid4().hex[:24], "kind": step.kind, "target_id": step.target_id,
           "other_id": step.other_id, "scope": step.scope, "reason": step.reason, "status": "open",
           "created_at": utcnow(), "decided_at": None}
    store.add_rows(T.PROPOSALS, [row])
    store.write_audit([audit_row(ACTOR, "propose", "memory", step.target_id, step.scope,
                            after={"proposal": row["id"], "kind": step.kind, "other": step.other_id})])


_APPLY = {"provenance": _apply_provenance, "decay": _apply_decay, "crystallise": _apply_crystallise,
          "merge": _apply_proposal, "supersede": _apply_proposal, "archive": _apply_proposal}


def list_proposals(store: Store, status: str | None = "open", scopes: Iterable[str] | None = None) -> list[dict]:
    """Proposals for review, newest first (status None = all)."""
    rows = store.rows(T.PROPOSALS, F.equals("status", status) if status else None,
                      [f.name for f in T.proposals_schema()], scopes=scopes)
    return sorted(rows, key=lambda r: r["created_at"], reverse=True)


def decide_proposal(store: Store, proposal_id: str, accept: bool, actor: str = "person") -> dict:
    """Accept (hide the target: superseded, or rejected for archive; for a conflict, make the person's kept edit
    current again) or dismiss a proposal. People only."""
    from memory.store.audit import ACTORS_AUTOMATED

    if actor in ACTORS_AUTOMATED:
        raise InputError(f"{actor} may propose but not decide; a person accepts or dismisses proposals")
    rows = list(store.get_many(T.PROPOSALS, [proposal_id], [f.name for f in T.proposals_schema()]).values())
    if not rows or rows[0]["status"] != "open":
        raise NotFoundError(f"no open proposal {proposal_id}",
                            hint=Hint(cli="list them with `mirador dream --proposals`"))
    p = rows[0]
    if accept and p["kind"] == "conflict":
        # Two people edited one shared memory at once (memory/store/remote_conflicts.py): the person's own edit,
        # kept as an earlier version, becomes the current one again — an edit made now, on top of the winner.
        mine = store.get(p["other_id"])
        store.update_memory(p["target_id"], actor=actor, text=mine["text"], title=mine["title"],
                            details=mine["details"])
    elif accept:
        # Superseded keeps the chain: what replaced it (one write, wherever the memory lives).
        store.set_status(p["target_id"], "rejected" if p["kind"] == "archive" else "superseded", actor=actor,
                         superseded_by=p["other_id"] if p["kind"] != "archive" else None)
        if p["kind"] == "supersede" and p["other_id"]:
            from memory.graph.relations import UPDATES, add_relation

            add_relation(store, p["other_id"], UPDATES, p["target_id"], actor=actor, confidence=0.9, origin="dream")
    status = "accepted" if accept else "dismissed"
    now = utcnow()
    store.update_rows(T.PROPOSALS, F.id_is(proposal_id), {"status": status, "decided_at": now})
    store.write_audit([audit_row(actor, status, "memory", p["target_id"], p["scope"], after={"proposal": proposal_id})])
    return {**p, "status": status, "decided_at": now}
