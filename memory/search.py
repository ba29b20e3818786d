"""Hybrid search: vector + full-text, fused by reciprocal rank. Filters run inside each LanceDB query."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime

from memory.errors import InputError
from memory.reads import Leg
from memory.rows import public_evidence, public_memory, public_vault, sql_literal_id
from memory.reinforcement import boost_scores
from memory.store import _EVIDENCE_COLS, _MEMORY_COLS, _VAULT_COLS

# What a memory hit carries: public_memory drops the index text, so it is never read for one.
_MEMORY_HIT_COLS = [c for c in _MEMORY_COLS if c != "search_text"]

MAX_QUERY_CHARS = 2_000
RRF_K = 60


@dataclass
class Hit:
    """One search result: enough to show it and to ask for more by id."""

    id: str
    kind: str  # memory | evidence | vault
    scope: str
    text: str
    score: float
    type: str | None = None
    source: str | None = None
    row: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(d.pop("row"))
        d["score"] = round(self.score, 6)
        return d


def check_query(query: str) -> str:
    """Reject an empty or oversized query."""
    q = (query or "").strip()
    if not q:
        raise InputError("empty query: give some words to search for")
    if len(q) > MAX_QUERY_CHARS:
        raise InputError(f"query is {len(q):,} characters; the limit is {MAX_QUERY_CHARS:,}")
    return q


def rrf(ranked_lists: Iterable[list[str]], k: int = RRF_K, weights: Iterable[float] | None = None) -> dict[str, float]:
    """Reciprocal-rank fusion: sum of w / (k + rank) over the lists an id appears in."""
    scores: dict[str, float] = {}
    lists = list(ranked_lists)
    ws = list(weights) if weights is not None else [1.0] * len(lists)
    for w, ids in zip(ws, lists, strict=True):
        for rank, id_ in enumerate(ids, start=1):
            scores[id_] = scores.get(id_, 0.0) + w / (k + rank)
    return scores


_LEGS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="search-leg")


def fetch_rows(store, table, ids: list[str], where: str | None, cols: list[str]) -> dict[str, dict]:
    """Full rows of the chosen ids, still under the caller's filter; a row deleted meanwhile is dropped.

    The ranking legs select only ids: materialising every column of 30-100 candidates per leg cost
    more than the search itself at 100k rows, and most candidates are thrown away by the fusion.
    """
    if not ids:
        return {}
    f = "id IN (" + ", ".join(sql_literal_id(i) for i in ids) + ")"
    rows = store.reader.run(Leg(table.name, f"({where}) AND {f}" if where else f, tuple(cols), len(ids)))[0]
    return {r["id"]: r for r in rows}


def _hybrid(store, table, query: str, where: str | None, fts_col: str, pool: int,
            vector: bool = True) -> dict[str, float]:
    """RRF scores of the ids the vector and full-text legs found (ids only; see fetch_rows)."""
    fts = Leg(table.name, where, ("id", "_score"), pool, text=query, fts_column=fts_col)
    if not vector:
        return rrf([[r["id"] for r in store.reader.run(fts)[0]]])
    qv = store.embedder.embed_query(query)
    # Both legs in one hop, side by side (memory/reads.py).
    vec_rows, fts_rows = store.reader.run(Leg(table.name, where, ("id", "_distance"), pool, vector=qv), fts)
    # Averaged over the two lists, so this and a label-only vault search (one list) produce scores
    # on the same scale and can be merged.
    return {k: v / 2 for k, v in rrf([[r["id"] for r in vec_rows], [r["id"] for r in fts_rows]]).items()}


def search_memories(store, query: str, *, scopes=None, types=None, statuses=None, since: datetime | None = None,
                    until: datetime | None = None, limit: int = 10, cols: list[str] | None = None) -> list[Hit]:
    """Hybrid search over memories (and vault labels when the type filter allows vault).

    cols: the memory columns a hit carries (default all public ones); each column read costs ~0.5 ms
    at 100k rows, so recall() asks only for what it renders.
    """
    query = check_query(query)
    limit = _check_limit(limit)
    pool = max(limit * 3, 30)
    types = list(types) if types else None
    mem_types = [t for t in types if t != "vault"] if types else None
    scores: dict[str, float] = {}
    where = None
    # The vault's label search is small and independent: it runs beside the memory legs.
    vault_f = _LEGS.submit(search_vault, store, query, scopes=scopes, limit=pool) \
        if types is None or "vault" in types else None
    if types is None or mem_types:
        where = store.where("memory", scopes=scopes, types=mem_types, statuses=statuses, since=since, until=until)
        scores = _hybrid(store, store.memories, query, where, "search_text", pool)
        scores = boost_scores(store, scores)  # memories answers used rank above equally relevant unused ones
    vault = vault_f.result() if vault_f is not None else []
    ranked = sorted([(s, id_, None) for id_, s in scores.items()] + [(h.score, h.id, h) for h in vault],
                    key=lambda x: x[0], reverse=True)[:limit]
    rows = fetch_rows(store, store.memories, [id_ for _, id_, h in ranked if h is None], where,
                      cols or _MEMORY_HIT_COLS)
    hits: list[Hit] = []
    for s, id_, vault_hit in ranked:
        if vault_hit is not None:
            hits.append(vault_hit)
        elif id_ in rows:
            m = public_memory(rows[id_])
            hits.append(Hit(id_, "memory", m["scope"], m["text"], s, type=m["type"], row=m))
    return hits


def search_evidence(store, query: str, *, scopes=None, sources=None, apps=None, since: datetime | None = None,
                    until: datetime | None = None, limit: int = 10, now: datetime | None = None,
                    rank=None, cols: list[str] | None = None) -> list[Hit]:
    """Hybrid search over evidence rows, boosted for people and dates the query names (memory/rank.py).

    now: the time relative dates in the query ("yesterday") are resolved against; default the current time.
    rank: a memory.rank.RankConfig overriding the measured defaults.
    cols: the evidence columns a hit carries (default all public ones).
    """
    from memory.rank import rank_evidence

    query = check_query(query)
    limit = _check_limit(limit)
    where = store.where("evidence", scopes=scopes, sources=sources, apps=apps, since=since, until=until)
    ranked = rank_evidence(store, query, where, cols or _EVIDENCE_COLS, limit, now=now, cfg=rank)
    hits = []
    for id_, s, row in ranked:
        e = public_evidence(row)
        hits.append(Hit(id_, "evidence", e["scope"], e["text"], s, source=e["source"], row=e))
    return hits


def search_vault(store, query: str, *, scopes=None, limit: int = 10) -> list[Hit]:
    """Full-text search over vault labels only; values are never indexed."""
    where = store.where("vault", scopes=scopes)
    scores = _hybrid(store, store.vault, check_query(query), where, "label", limit, vector=False)
    rows = fetch_rows(store, store.vault, list(scores), where, _VAULT_COLS)
    hits = []
    for id_, s in scores.items():
        if id_ not in rows:
            continue
        v = public_vault(rows[id_])
        hits.append(Hit(id_, "vault", v["scope"], v["label"], s, type="vault", row=v))
    return hits


def _check_limit(limit: int) -> int:
    if not 1 <= int(limit) <= 1000:
        raise InputError(f"limit must be between 1 and 1000, got {limit}")
    return int(limit)
