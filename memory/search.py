"""Hybrid search: vector + full-text, fused by reciprocal rank. Filters run inside each LanceDB query."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime

from memory.errors import InputError
from memory.rows import public_evidence, public_memory, public_vault, sql_literal_id
from memory.reinforcement import boost_scores
from memory.store import _EVIDENCE_COLS, _MEMORY_COLS, _VAULT_COLS

MAX_QUERY_CHARS = 2_000
RRF_K = 60
NPROBES = 20


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


def _run(builder, where: str | None, cols: list[str], limit: int) -> list[dict]:
    if where:
        builder = builder.where(where, prefilter=True)
    if hasattr(builder, "nprobes"):
        # Vector queries: IVF partitions probed once a table has an index (memory/indexes.py); 20 of
        # ~sqrt(n) partitions kept recall@10 at 0.99 of brute force on 100k rows (bench/scale.py).
        # Rows added since the last build are always scanned as well (no fast_search).
        builder = builder.nprobes(NPROBES)
    return builder.select(cols).limit(limit).to_list()


_LEGS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="search-leg")


def fetch_rows(table, ids: list[str], where: str | None, cols: list[str]) -> dict[str, dict]:
    """Full rows of the chosen ids, still under the caller's filter; a row deleted meanwhile is dropped.

    The ranking legs select only ids: materialising every column of 30-100 candidates per leg cost
    more than the search itself at 100k rows, and most candidates are thrown away by the fusion.
    """
    if not ids:
        return {}
    f = "id IN (" + ", ".join(sql_literal_id(i) for i in ids) + ")"
    rows = table.search().where(f"({where}) AND {f}" if where else f).select(cols).limit(len(ids)).to_list()
    return {r["id"]: r for r in rows}


def _hybrid(store, table, query: str, where: str | None, fts_col: str, pool: int,
            vector: bool = True) -> dict[str, float]:
    """RRF scores of the ids the vector and full-text legs found (ids only; see fetch_rows)."""
    fts_q = table.search(query, query_type="fts", fts_columns=fts_col)
    if not vector:
        # Inline, never on the leg pool: a label-only search itself runs there (search_memories), and
        # a pool task waiting on another pool task could deadlock.
        return rrf([[r["id"] for r in _run(fts_q, where, ["id", "_score"], pool)]])
    # The two legs run side by side: LanceDB releases the GIL, so the wall time is the slower leg.
    fts = _LEGS.submit(_run, fts_q, where, ["id", "_score"], pool)
    qv = store.embedder.embed_query(query)
    vec_rows = _run(table.search(qv, vector_column_name="vector").distance_type("cosine"), where,
                    ["id", "_distance"], pool)
    # Averaged over the two lists, so this and a label-only vault search (one list) produce scores
    # on the same scale and can be merged.
    return {k: v / 2 for k, v in rrf([[r["id"] for r in vec_rows], [r["id"] for r in fts.result()]]).items()}


def search_memories(store, query: str, *, scopes=None, types=None, statuses=None, since: datetime | None = None,
                    until: datetime | None = None, limit: int = 10) -> list[Hit]:
    """Hybrid search over memories (and vault labels when the type filter allows vault)."""
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
    rows = fetch_rows(store.memories, [id_ for _, id_, h in ranked if h is None], where, _MEMORY_COLS)
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
                    rank=None) -> list[Hit]:
    """Hybrid search over evidence rows, boosted for people and dates the query names (memory/rank.py).

    now: the time relative dates in the query ("yesterday") are resolved against; default the current time.
    rank: a memory.rank.RankConfig overriding the measured defaults.
    """
    from memory.rank import rank_evidence

    query = check_query(query)
    limit = _check_limit(limit)
    where = store.where("evidence", scopes=scopes, sources=sources, apps=apps, since=since, until=until)
    ranked = rank_evidence(store, query, where, _EVIDENCE_COLS, limit, _run, now=now, cfg=rank)
    hits = []
    for id_, s, row in ranked:
        e = public_evidence(row)
        hits.append(Hit(id_, "evidence", e["scope"], e["text"], s, source=e["source"], row=e))
    return hits


def search_vault(store, query: str, *, scopes=None, limit: int = 10) -> list[Hit]:
    """Full-text search over vault labels only; values are never indexed."""
    where = store.where("vault", scopes=scopes)
    scores = _hybrid(store, store.vault, check_query(query), where, "label", limit, vector=False)
    rows = fetch_rows(store.vault, list(scores), where, _VAULT_COLS)
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
