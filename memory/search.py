"""Hybrid search: vector + full-text, fused by reciprocal rank. Filters run inside each LanceDB query."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime

from memory.errors import InputError
from memory.rows import public_evidence, public_memory, public_vault
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


def _hybrid(store, table, query: str, where: str | None, cols: list[str], fts_col: str, pool: int,
            vector: bool = True) -> tuple[dict[str, float], dict[str, dict]]:
    # The two legs run side by side: LanceDB releases the GIL, and at 100k rows each leg is
    # 20-25 ms with the scope prefilter, so running them one after the other doubled latency.
    fts = _LEGS.submit(_run, table.search(query, query_type="fts", fts_columns=fts_col), where,
                       cols + ["_score"], pool)
    rows: dict[str, dict] = {}
    lists = []
    if vector:
        qv = store.embedder.embed_query(query)
        vec_rows = _run(table.search(qv, vector_column_name="vector").distance_type("cosine"), where,
                        cols + ["_distance"], pool)
        lists.append([r["id"] for r in vec_rows])
        rows.update({r["id"]: r for r in vec_rows})
    fts_rows = fts.result()
    lists.append([r["id"] for r in fts_rows])
    for r in fts_rows:
        rows.setdefault(r["id"], r)
    # Averaged over the lists used, so a label-only vault search and a two-list memory search
    # produce scores on the same scale and can be merged.
    return {k: v / len(lists) for k, v in rrf(lists).items()}, rows


def search_memories(store, query: str, *, scopes=None, types=None, statuses=None, since: datetime | None = None,
                    until: datetime | None = None, limit: int = 10) -> list[Hit]:
    """Hybrid search over memories (and vault labels when the type filter allows vault)."""
    query = check_query(query)
    limit = _check_limit(limit)
    pool = max(limit * 3, 30)
    hits: list[Hit] = []
    types = list(types) if types else None
    mem_types = [t for t in types if t != "vault"] if types else None
    if types is None or mem_types:
        where = store.where("memory", scopes=scopes, types=mem_types, statuses=statuses, since=since, until=until)
        scores, rows = _hybrid(store, store.memories, query, where, _MEMORY_COLS, "search_text", pool)
        for id_, s in scores.items():
            m = public_memory(rows[id_])
            hits.append(Hit(id_, "memory", m["scope"], m["text"], s, type=m["type"], row=m))
    if types is None or "vault" in types:
        hits.extend(search_vault(store, query, scopes=scopes, limit=pool))
    hits.sort(key=lambda h: h.score, reverse=True)
    return hits[:limit]


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
    scores, rows = _hybrid(store, store.vault, check_query(query), where, _VAULT_COLS, "label", limit, vector=False)
    hits = []
    for id_, s in scores.items():
        v = public_vault(rows[id_])
        hits.append(Hit(id_, "vault", v["scope"], v["label"], s, type="vault", row=v))
    return hits


def _check_limit(limit: int) -> int:
    if not 1 <= int(limit) <= 1000:
        raise InputError(f"limit must be between 1 and 1000, got {limit}")
    return int(limit)
