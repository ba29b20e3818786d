"""Evidence ranking. The first stage: vector + full-text candidates fused by normalised score,
credited with the scores of the turns around them, then boosted for the people and the dates a
question names. The second: memory/retrieval/rerank.py reorders the first stage's top 30. Every candidate
query carries the caller's filter (scope first), so both stages only reorder rows the caller may see.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memory.retrieval.query import QueryPlan, analyze
from memory.store import filters as F
from memory.store import tables as T
from memory.store.reads import fetch_rows
from memory.store.rowcache import COLUMNS

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy as np

    from memory.retrieval.rerank import TreeEnsemble
    from memory.store.core import Store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RankConfig:
    """Knobs of evidence ranking. The defaults are what bench/locomo.py measured best (bench/RESULTS.md)."""

    pool: int = 50  # candidates taken from each list (LoCoMo dev: 100 gave the same recall)
    w_vec: float = 0.75
    w_fts: float = 1.0
    w_window: float = 1.0  # the extra lists restricted to the question's dates
    rewrite: bool = True  # strip question scaffolding from the full-text query
    neighbour: float = 0.5  # + b x the best fused score of the turn just before or after (memory/context runs)
    neighbour_decay: float = 0.6  # ... + b x decay x the best two turns away, and so on
    neighbour_hops: int = 4
    speaker_boost: float = 1.0  # + b when the row's speaker is named in the question: what Sam said, first
    date_boost: float = 0.3  # + b when the row was captured inside a date the question names
    window_slack: timedelta = timedelta(days=1)  # "on 8 May" also matches rows captured late on the 7th (time zones)
    rerank: bool = True  # reorder the top candidates with the tree model (memory/retrieval/rerank.py; models.reranker)
    # ... this many: the smallest top that scored as well as a larger one held out on LoCoMo dev
    # (bench/train_reranker.py; bench/RESULTS.md); a larger top only makes the reranker read more text.
    rerank_top: int = 30

    def describe(self) -> dict:
        """JSON-safe summary for benchmarks."""
        d = asdict(self)
        d["window_slack"] = str(self.window_slack)
        return d


DEFAULT = RankConfig()


_FTS_COLUMN: dict[str, str] = {}


def _fts_column(store: Store) -> str:
    # Cached: a table's schema is a round trip to the manifest, and the column only appears by migration.
    col = _FTS_COLUMN.get(T.EVIDENCE)
    if col is None:
        col = _FTS_COLUMN[T.EVIDENCE] = "search_text" if "search_text" in store.columns("evidence") else "text"
    return col


# What the ranking reads from each candidate (kept in memory by memory/store/rowcache.py); every other
# column is fetched for the winners only.
_RANK_COLS = list(COLUMNS["evidence"])


def _lists(store: Store, plan: QueryPlan, where: F.Where | None, cfg: RankConfig,
           scopes: Iterable[str] | None = None) -> tuple[list, dict[str, dict]]:
    """Ranked (id, similarity) lists with their weights, plus the ranking columns of every row seen.

    Evidence other devices share (a binding with evidence = true; memory/store/remote_evidence.py) joins
    each list from the bucket, under the same filter; an id this device holds is taken from its own table.
    scopes: which bindings to ask (None: every one; `where` holds the scope filter either way)."""
    from memory.store.reads import Leg

    table = T.EVIDENCE
    qv = store.embedder.embed_query(plan.vec)
    fts_col = _fts_column(store)
    legs = [(Leg(table, where, (*_RANK_COLS, "_distance"), cfg.pool, vector=qv, row_ids=True), cfg.w_vec),
            (Leg(table, where, (*_RANK_COLS, "_score"), cfg.pool, text=plan.fts, fts_column=fts_col, row_ids=True),
             cfg.w_fts)]
    window_where = _window_filter(plan, cfg)
    if window_where and cfg.w_window:
        # Rows from the named dates join the candidates even when the whole store outranks them.
        w = F.and_(where, window_where)
        legs += [(replace(leg, where=w), cfg.w_window) for leg, _ in legs[:2]]
    shared = store.remotes.evidence.start_search(
        scopes, [{"where": leg.where, "limit": leg.limit, "vector": leg.vector, "text": leg.text} for leg, _ in legs],
        _RANK_COLS)
    local = store.reader.run(*(leg for leg, _ in legs))
    remote = shared.result() if shared is not None else [[] for _ in legs]
    rows: dict[str, dict] = {}
    lists: list[tuple[list[tuple[str, float]], float]] = []
    for found in local:
        for r in found:
            rows.setdefault(r["id"], r)
    for found, extra, (_, weight) in zip(local, remote, legs, strict=True):
        # Similarity, higher is better: BM25 scores as they are, cosine distance turned around.
        ranked = [(r["id"], -r["_distance"] if "_distance" in r else r["_score"]) for r in found]
        if extra:
            # One entry per id, the better score; this device's own copy (its mirror) is the local row.
            best: dict[str, float] = {}
            for id_, s in ranked + [(r["id"], -r["_distance"] if "_distance" in r else r["_score"]) for r in extra]:
                best[id_] = max(s, best.get(id_, s))
            ranked = sorted(best.items(), key=lambda x: x[1], reverse=True)[:cfg.pool]
            for r in extra:
                rows.setdefault(r["id"], r)
        lists.append((ranked, weight))
    return lists, rows


def _fuse(lists: list[tuple[list[tuple[str, float]], float]]) -> dict[str, float]:
    """One score per candidate: each list's own scores min-max normalised to [0, 1], summed by weight.

    Scores, not ranks: a row far ahead in one list keeps its lead, where reciprocal-rank fusion would
    flatten it (RRF measured worse on LoCoMo dev: bench/RESULTS.md, Tried and dropped). A row missing from a list
    gets 0 from it, so the boosts below are in the same units (a list's best row = its weight).
    """
    fused: dict[str, float] = {}
    for found, w in lists:
        if not found:
            continue
        hi, lo = max(s for _, s in found), min(s for _, s in found)
        span = hi - lo
        for id_, s in found:
            fused[id_] = fused.get(id_, 0.0) + w * ((s - lo) / span if span > 0 else 1.0)
    return fused


def _with_neighbours(scores: dict[str, float], rows: dict[str, dict], cfg: RankConfig) -> dict[str, float]:
    """Credit each candidate with the best score k turns before or after it, weighted b x decay^(k-1).

    Conversations answer across turns: the question "what is Tim excited to see?" matches the turn
    that asked it, the answer is the next one, and the topic runs on for a few turns. Only candidates'
    scores count: a turn outside every list adds nothing (fetching the neighbours no list found made
    no difference: bench/RESULTS.md, Tried and dropped). bench/locomo.py --rank measures the hops.
    """
    runs: dict[str, dict[int, float]] = {}
    for id_, s in scores.items():
        r = rows[id_]
        if r.get("run_id"):
            runs.setdefault(r["run_id"], {})[r["run_pos"]] = s
    out = {}
    for id_, s in scores.items():
        r = rows[id_]
        at = runs.get(r.get("run_id") or "")
        if at and len(at) > 1:
            pos, w = r["run_pos"], cfg.neighbour
            for k in range(1, cfg.neighbour_hops + 1):
                s += w * max(at.get(pos - k, 0.0), at.get(pos + k, 0.0))
                w *= cfg.neighbour_decay
        out[id_] = s
    return out


def _window_filter(plan: QueryPlan, cfg: RankConfig) -> str | None:
    if not plan.windows:
        return None
    return F.or_(*(F.and_(F.at_or_after("captured_at", w.start - cfg.window_slack),
                          F.before("captured_at", w.end + cfg.window_slack)) for w in plan.windows))


def _speaker_named(row: dict, names: set[str]) -> bool:
    speaker = (row.get("speaker") or "").lower()
    if not speaker or not names:
        return False
    first = speaker.split()[0]
    # "Mel" names Melanie; at least three letters so "Al" does not name every "Alice".
    return any(n == speaker or n == first or (len(n) >= 3 and first.startswith(n)) for n in names)


def _in_window(row: dict, plan: QueryPlan, cfg: RankConfig) -> bool:
    t = row.get("captured_at")
    return t is not None and any(w.start - cfg.window_slack <= t < w.end + cfg.window_slack for w in plan.windows)


def _plan(store: Store, query: str, now: datetime, cfg: RankConfig) -> QueryPlan:
    return analyze(query, now, rewrite=cfg.rewrite,
                   speakers=store.speaker_names() if cfg.rewrite else frozenset())


def embedded_text(store: Store, query: str, now: datetime, cfg: RankConfig | None = None) -> str:
    """The text an evidence search embeds for query: the question, without a known speaker's name."""
    return _plan(store, query, now, cfg or DEFAULT).vec


@dataclass
class FirstStage:
    """What the hand-weighted first stage found for one query: every candidate, best first."""

    plan: QueryPlan
    lists: list  # [(ranked (id, similarity) list, weight)]: vector, full text (+ the same for dates)
    rows: dict[str, dict]  # ranking columns per candidate
    fused: dict[str, float]  # fused list scores, before neighbour credit and boosts
    ranked: list[tuple[str, float, dict]]  # (id, final score, row), best first
    scopes: Iterable[str] | None = None  # the caller's scopes: which shared stores fetch_head asks for rows only they hold


def first_stage(store: Store, query: str, where: F.Where | None, now: datetime, cfg: RankConfig,
                scopes: Iterable[str] | None = None) -> FirstStage:
    """Candidates from every list, fused, credited by their neighbours, boosted; best first."""
    plan = _plan(store, query, now, cfg)
    lists, rows = _lists(store, plan, where, cfg, scopes)
    total_w = sum(w for _, w in lists) or 1.0
    scores = fused = _fuse(lists)
    if cfg.neighbour:
        scores = _with_neighbours(fused, rows, cfg)
    ranked = []
    for id_, s in scores.items():
        row = rows[id_]
        if cfg.speaker_boost and _speaker_named(row, plan.names):
            s += cfg.speaker_boost
        if cfg.date_boost and plan.windows and _in_window(row, plan, cfg):
            s += cfg.date_boost
        ranked.append((id_, s / total_w, row))
    ranked.sort(key=lambda x: x[1], reverse=True)
    return FirstStage(plan, lists, rows, fused, ranked, scopes)


# What the reranker reads of each of its candidates besides the ranking columns: the indexed text
# (speaker and resolved dates included) scored better on held-out LoCoMo conversations than the bare
# text (bench/train_reranker.py; bench/RESULTS.md). The source
# says which candidates it may move (rerank.moves).
RERANK_COLS = ("text", "search_text", "source")


def rerank_features(stage: FirstStage, top: list[str], full: dict[str, dict], cfg: RankConfig) -> np.ndarray:
    """memory/retrieval/rerank.py's feature matrix for the ids `top` of one first stage; full: their RERANK_COLS."""
    from memory.retrieval import rerank
    plan = stage.plan
    texts = {i: full[i].get("search_text") or full[i].get("text") or "" for i in top}
    return rerank.features(stage.lists, stage.fused, [id_ for id_, _, _ in stage.ranked], top, stage.rows, texts,
                           plan.names, plan.text, plan.fts, bool(plan.windows),
                           lambda r: _speaker_named(r, plan.names), lambda r: _in_window(r, plan, cfg))


def rank_evidence(store: Store, query: str, where: F.Where | None, cols: list[str], limit: int,
                  now: datetime | None = None, cfg: RankConfig | None = None,
                  scopes: Iterable[str] | None = None) -> list[tuple[str, float, dict]]:
    """(id, score, row) best first; row holds `cols`. scopes: the caller's (which shared stores to ask)."""
    from memory.retrieval import rerank
    from memory.store.audit import utcnow

    cfg = cfg or DEFAULT
    if cfg.pool < limit:
        cfg = replace(cfg, pool=limit)
    stage = first_stage(store, query, where, now or utcnow(), cfg, scopes)
    # Only over a full top: the model learned from lists of 50 candidates each, and a handful (a new
    # or narrowly filtered store) puts its ranks and min-max scores outside what it saw. On a 7-row
    # fixture it ranked a budget line, captured last week, 0.05 short of the week's deploy line for
    # "how did the deploy go last week?".
    model = reranker(store, cfg) if len(stage.ranked) >= cfg.rerank_top else None
    want = list(dict.fromkeys([*cols, *RERANK_COLS])) if model else cols
    head, full = fetch_head(store, stage, max(limit, cfg.rerank_top if model else 0), where, want)
    if model and len(head) > 1:
        # Only the top rerank_top: the model was trained on them (a larger limit, as recall asks for,
        # keeps the first stage's order below).
        top = [id_ for id_, _, _ in head[:cfg.rerank_top]]
        order = list(range(len(top)))
        # Only rows of the kinds it learned from move, among the places they hold; screen captures
        # keep the first stage's places (rerank.moves).
        slots = [k for k, id_ in enumerate(top) if rerank.moves(model, full[id_].get("source"))]
        if len(slots) > 1:
            pred = model.predict(rerank_features(stage, top, full, cfg))
            for slot, k in zip(slots, sorted(slots, key=lambda k: (-pred[k], k)), strict=True):
                order[slot] = k
        # Each keeps the first stage's score of its new position: callers that weigh scores (recall:
        # relevance x recency) see the scale they always did, in the model's order.
        head = [(head[k][0], head[n][1], head[k][2]) for n, k in enumerate(order)] + head[len(top):]
    extra = [c for c in RERANK_COLS if c not in cols] if model else []
    return [(id_, s, _without(full[id_], extra)) for id_, s, _ in head[:limit]]


def fetch_head(store: Store, stage: FirstStage, n: int, where: F.Where | None, cols: list[str]) -> tuple[list, dict[str, dict]]:
    """The first stage's top n that still match `where`, and their rows holding `cols` (by id)."""
    head = stage.ranked[:n]
    # A row from a shared store (no local row address) is read there, under the same filter.
    local = [(id_, row) for id_, _, row in head if "_rowid" in row]
    full = fetch_rows(store, T.EVIDENCE, [id_ for id_, _ in local], where, cols,
                      {id_: row["_rowid"] for id_, row in local}, have=stage.rows)
    shared = [id_ for id_, _, row in head if "_rowid" not in row]
    if shared:
        got = store.get_many("evidence", shared, cols, scopes=stage.scopes, where=where)
        full.update((i, r) for i, r in got.items() if i not in full)
    return [x for x in head if x[0] in full], full


def _without(row: dict, cols: list[str]) -> dict:
    # Read for the reranker only: the index text is not part of a hit.
    return {k: v for k, v in row.items() if k not in cols} if cols else row


def reranker(store: Store, cfg: RankConfig) -> TreeEnsemble | None:
    """The second stage's model, or None when it is switched off (or could not be loaded: logged)."""
    from memory.retrieval import rerank
    m = store.config.models
    model = rerank.shared(m.reranker_path) if cfg.rerank and m.reranker and m.reranker_path else None
    if model is not None:
        rerank.check_first_stage(model, first_stage_settings(cfg))
    return model


def first_stage_settings(cfg: RankConfig) -> dict:
    """The settings a reranker learns the scores of (bench/train_reranker.py stores them with it)."""
    return {k: v for k, v in cfg.describe().items() if k not in ("rerank", "rerank_top")}
