"""Reinforcement: memories an answer actually used gain salience; without use it decays back.

Use is recorded in its own table, `memory_usage` (migration m006): one row per memory with the
number of uses, the strength at the last use and when that was. Strength halves every half-life
(per memory type, `[reinforcement.half_life_days]`) since the last use, so its value at any moment
is a pure function of the row and `now`: deterministic under a fixed clock, and no background job
has to rewrite it. A separate table rather than columns on `memories`: every memory write rewrites
the whole row (merge_insert), so counters there would race with edits and be wiped by them. Usage
rows hold ids and numbers only, never content.

    strength after a use   = strength_then * 0.5 ** (days since last use / half_life) + step
    level                  = s / (s + saturation)                     (0 unused .. →1 used a lot)
    effective salience     = base + (1 - base) * level                (base: memories.salience)
    search score           = score * (1 + rank_weight * level)

`base` is the salience column the dream pass halves as a memory ages; use only ever adds on top.
Of two equally relevant memories the used one ranks first; an unused memory is not affected.

Appearing in a search or a recall is not use unless `[reinforcement] count_search_as_use = true`
(then it adds the smaller `search_step`): a memory that is shown but never used must not climb
just because it keeps being shown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING

from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import audit_row, utcnow
from memory.store.rows import iso, kind_of

if TYPE_CHECKING:
    from memory.config import ReinforcementConfig
    from memory.store.core import Store

log = logging.getLogger(__name__)

MAX_IDS = 200
NOT_VISIBLE = "no memory with this id is visible here (it never existed, is outside your scopes, or was forgotten)"
NOT_MEMORY = "not a memory id (mem_…): only memories are reinforced"


def strength_at(strength: float, last_used_at: datetime | None, mtype: str, now: datetime, cfg: ReinforcementConfig) -> float:
    """A stored strength decayed from its last use to `now` (half-life per memory type)."""
    if not strength or last_used_at is None:
        return 0.0
    half_life = getattr(cfg.half_life_days, mtype, None) or cfg.half_life_days.semantic
    age_days = max((now - last_used_at).total_seconds() / 86400.0, 0.0)
    return float(strength) * 0.5 ** (age_days / half_life)


def level(strength: float, cfg: ReinforcementConfig) -> float:
    """How used a memory is, 0 (never or long ago) up towards 1."""
    return strength / (strength + cfg.saturation) if strength > 0 else 0.0


def effective_salience(base: float, strength: float, cfg: ReinforcementConfig) -> float:
    """The memory's own salience raised by use: base + (1 - base) * level."""
    base = min(max(float(base or 0.0), 0.0), 1.0)
    return base + (1.0 - base) * level(strength, cfg)


def usage_rows(store: Store, ids: Iterable[str]) -> dict[str, dict]:
    """Stored usage rows of these memory ids (ids absent from the table are absent here)."""
    ids = sorted(set(ids))
    if not ids:
        return {}
    cols = [f.name for f in T.usage_schema()]
    rows = store.rows(T.USAGE, F.id_in(ids, "memory_id"), cols, limit=len(ids))
    return {r["memory_id"]: r for r in rows}


def _usage_snapshot(store: Store, version: int | None = None) -> dict[str, dict]:
    """Every usage row, re-read only when the table's version moves.

    Ranking runs inside every memory search; a lookup query there was a sequential LanceDB round
    trip in every search, while the table changes only when something is reinforced or forgotten. It
    holds ids and numbers, never memory text.
    """
    cols = [f.name for f in T.usage_schema()]
    return store.versioned("_usage_snapshot", T.USAGE,
                           lambda: {r["memory_id"]: r for r in store.rows(T.USAGE, None, cols)}, version)


def rank_factors(store: Store, ids: Iterable[str], now: datetime | None = None,
                 version: int | None = None) -> dict[str, float]:
    """Score multipliers 1 + rank_weight * level for memory ids that have been used; others are absent (1)."""
    cfg = store.config.reinforcement
    ids = [i for i in ids if isinstance(i, str) and i.startswith("mem_")]
    if not ids or cfg.rank_weight <= 0:
        return {}
    used = _usage_snapshot(store, version)
    rows = {i: used[i] for i in ids if i in used}
    now = now or utcnow()
    out = {}
    for id_, r in rows.items():
        s = strength_at(r["strength"], r["last_used_at"], r["type"], now, cfg)
        if s > 0:
            out[id_] = 1.0 + cfg.rank_weight * level(s, cfg)
    return out


def boost_scores(store: Store, scores: dict[str, float], now: datetime | None = None,
                 version: int | None = None) -> dict[str, float]:
    """Memory search scores (id -> score) multiplied by their use factor; unused ids keep theirs.

    version: the usage table's latest version, when the search has just read it (Reader.versions)."""
    if not scores:
        return scores
    try:
        factors = rank_factors(store, scores, now, version)
    except Exception:  # e.g. a table locked by another writer: rank without use rather than fail the search
        log.warning("usage lookup failed; ranking without reinforcement", exc_info=True)
        return scores
    return {k: v * factors.get(k, 1.0) for k, v in scores.items()} if factors else scores


def _visible(store: Store, ids: list[str], scopes: Iterable[str] | None) -> dict[str, dict]:
    # The scope check runs inside the query (principle 5).
    return store.get_many("memory", ids, ["id", "type", "scope", "salience", "status"], scopes=scopes)


def _split_ids(ids: Iterable[str]) -> tuple[list[str], list[dict]]:
    wanted, rejected = [], []
    for i in dict.fromkeys(ids):
        try:
            ok = kind_of(i) == "memory"
        except Exception:
            ok = False
        if ok:
            wanted.append(i)
        else:
            rejected.append({"id": i, "reason": NOT_MEMORY})
    return wanted, rejected


def reinforce(store: Store, ids: Iterable[str], actor: str = "person", scopes: Iterable[str] | None = None, now: datetime | None = None,
              step: float | None = None, action: str = "reinforce") -> dict:
    """Record one use of each memory visible in `scopes`; ids that are not are reported, never skipped silently.

    Returns {"reinforced": [...new usage per id...], "not_found": [{"id", "reason"}]}. One audit row
    for the call (ids and new use counts, no content).
    """
    from memory.errors import InputError

    ids = list(ids)
    if len(ids) > MAX_IDS:
        raise InputError(f"{len(ids)} ids given; reinforce at most {MAX_IDS} at a time")
    cfg = store.config.reinforcement
    now = now or utcnow()
    step = cfg.step if step is None else float(step)
    wanted, not_found = _split_ids(ids)
    found = _visible(store, wanted, scopes) if wanted else {}
    not_found += [{"id": i, "reason": NOT_VISIBLE} for i in wanted if i not in found]
    if not found:
        return {"reinforced": [], "not_found": not_found}
    old = usage_rows(store, found)
    rows, out = [], []
    for id_, m in found.items():
        prev = old.get(id_)
        s = step + (strength_at(prev["strength"], prev["last_used_at"], m["type"], now, cfg) if prev else 0.0)
        rows.append({"memory_id": id_, "type": m["type"], "scope": m["scope"], "uses": (prev["uses"] if prev else 0) + 1,
                     "strength": s, "first_used_at": prev["first_used_at"] if prev else now, "last_used_at": now})
        out.append({"id": id_, "type": m["type"], "scope": m["scope"], "uses": rows[-1]["uses"],
                    "strength": round(s, 6), "salience": round(float(m["salience"]), 6),
                    "effective_salience": round(effective_salience(m["salience"], s, cfg), 6),
                    "last_used_at": iso(now)})
    store.upsert_rows(T.USAGE, rows, on="memory_id")
    scopes_seen = ",".join(sorted({r["scope"] for r in rows}))
    entity = rows[0]["memory_id"] if len(rows) == 1 else f"batch:{len(rows)}"
    store.write_audit([audit_row(actor, action, "memory", entity, scopes_seen,
                            after={"ids": [r["memory_id"] for r in rows], "uses": {r["memory_id"]: r["uses"] for r in rows},
                                   "step": step})])
    log.info("%s: %s %d memories (%d not found)", actor, action, len(rows), len(not_found))
    return {"reinforced": out, "not_found": not_found}


def note_appearances(store: Store, ids: Iterable[str], actor: str, scopes: Iterable[str] | None = None, now: datetime | None = None) -> dict | None:
    """Count memories shown by a search, recall or hook as used — only if count_search_as_use is on."""
    cfg = store.config.reinforcement
    ids = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i.startswith("mem_")]
    if not cfg.count_search_as_use or not ids:
        return None
    try:
        return reinforce(store, ids[:MAX_IDS], actor=actor, scopes=scopes, now=now, step=cfg.search_step,
                         action="appeared")
    except Exception:  # a read must not fail because its side effect did
        log.warning("could not record search appearances", exc_info=True)
        return None


def usage_of(store: Store, ids: Iterable[str], scopes: Iterable[str] | None = None, now: datetime | None = None) -> list[dict]:
    """Use count, decayed strength and effective salience of visible memories (unused ones included)."""
    wanted, _ = _split_ids(ids)
    found = _visible(store, wanted, scopes) if wanted else {}
    rows = usage_rows(store, found)
    cfg = store.config.reinforcement
    now = now or utcnow()
    out = []
    for id_ in wanted:
        if id_ not in found:
            continue
        m, r = found[id_], rows.get(id_)
        s = strength_at(r["strength"], r["last_used_at"], m["type"], now, cfg) if r else 0.0
        out.append({"id": id_, "type": m["type"], "scope": m["scope"], "uses": r["uses"] if r else 0,
                    "last_used_at": iso(r["last_used_at"]) if r else None, "strength": round(s, 6),
                    "salience": round(float(m["salience"]), 6),
                    "effective_salience": round(effective_salience(m["salience"], s, cfg), 6)})
    return out


def forget_usage(store: Store, ids: Iterable[str]) -> None:
    """Drop the usage rows of erased memories (ids only; called when memories are forgotten)."""
    ids = list(ids)
    if not ids or not store.has_table(T.USAGE):
        return
    for start in range(0, len(ids), 500):
        store.delete_rows(T.USAGE, F.id_in(ids[start:start + 500], "memory_id"))
