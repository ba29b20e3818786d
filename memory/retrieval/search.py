"""Hybrid search: vector + full-text, fused by reciprocal rank. Filters run inside each LanceDB query."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memory.errors import InputError
from memory.graph.reinforcement import boost_scores
from memory.scopes import in_scopes
from memory.store import tables as T
from memory.store.reads import Leg, fetch_rows
from memory.store.rows import public_evidence, public_memory, public_vault
from memory.store.tables import EVIDENCE_COLS, MEMORY_COLS, VAULT_COLS

if TYPE_CHECKING:
    from memory.retrieval.rank import RankConfig
    from memory.store.core import Store

__all__ = ["Hit", "check_query", "fetch_rows", "rrf", "search_evidence", "search_memories", "search_vault"]

# What a memory hit carries: public_memory drops the index text, so it is never read for one.
_MEMORY_HIT_COLS = [c for c in MEMORY_COLS if c != "search_text"]

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


def _vault_leg(store: Store, query: str, scopes: Iterable[str] | None, limit: int, since: datetime | None = None,
               until: datetime | None = None) -> Leg:
    # Labels only (values are never indexed), and the whole row at once: vault tables are small and
    # a label search returns few rows, so a second fetch would cost more than it saves.
    return Leg(T.VAULT, store.where("vault", scopes=scopes, since=since, until=until), (*VAULT_COLS, "_score"),
               limit,
               text=query, fts_column="label")


def _vault_in_scope(store: Store, scopes: Iterable[str] | None, version: int | None = None) -> bool:
    """Whether any vault entry lies in these scopes. A label search costs CPU at every call, also on
    an empty vault; the set of scopes in use is kept until the vault table changes."""
    present = store.versioned("_vault_scopes", T.VAULT,
                              lambda: frozenset(r["scope"] for r in store.rows("vault", None, ["scope"])), version)
    return any(in_scopes(s, scopes) for s in present)


def _vault_hits(rows: list[dict]) -> list[Hit]:
    # Scored like one list of the memory fusion (rrf over one list), so the two merge on one scale.
    scores = rrf([[r["id"] for r in rows]])
    hits = []
    for r in rows:
        v = public_vault(r)  # drops `_score` with the other underscore keys
        hits.append(Hit(r["id"], "vault", v["scope"], v["label"], scores[r["id"]], type="vault", row=v))
    return hits


# Up to this many candidates per leg, the legs read the hit columns themselves and no fetch follows:
# a second fetch would cost more than reading a few columns of a small pool. Recall's larger legs are
# cheaper reading ids and taking the winners' columns after (bench/scale.py times both).
INLINE_MAX_POOL = 40


def search_memories(store: Store, query: str, *, scopes: Iterable[str] | None = None,
                    types: Iterable[str] | None = None, statuses: Iterable[str] | None = None,
                    since: datetime | None = None, until: datetime | None = None, limit: int = 10,
                    cols: list[str] | None = None) -> list[Hit]:
    """Hybrid search over memories (and vault labels when the type filter allows vault).

    cols: the memory columns a hit carries (default all public ones); each column read costs time per
    hit, so recall() and the MCP search tool ask only for what they show.
    """
    query = check_query(query)
    limit = _check_limit(limit)
    pool = max(limit * 3, 30)
    types = list(types) if types else None
    mem_types = [t for t in types if t != "vault"] if types else None
    want_memories = types is None or bool(mem_types)
    versions = store.reader.versions(T.VAULT, T.USAGE)  # both snapshots' checks in one hop
    want_vault = (types is None or "vault" in types) and _vault_in_scope(store, scopes, versions[T.VAULT])
    hit_cols = list(dict.fromkeys(["id", *(cols or _MEMORY_HIT_COLS)]))
    # Small pools bring the hit columns with the legs (from the row cache when it holds them, so the
    # legs read scores only); large ones take the winners' columns after the fusion (from the cache too).
    cached = store.reader.covers(T.MEMORIES, hit_cols)
    inline = pool <= INLINE_MAX_POOL
    leg_cols = tuple(hit_cols) if inline else ("id",)
    where = None
    legs: list[Leg] = []
    if want_memories:
        where = store.where("memory", scopes=scopes, types=mem_types, statuses=statuses, since=since, until=until)
        qv = store.embedder.embed_query(query)
        by_address = cached or not inline
        # Candidates come back sealed; only the winners are opened, below.
        legs += [Leg(T.MEMORIES, where, (*leg_cols, "_distance"), pool, vector=qv, row_ids=by_address, opened=False),
                 Leg(T.MEMORIES, where, (*leg_cols, "_score"), pool, text=query, fts_column="search_text",
                     row_ids=by_address, opened=False)]
    if want_vault:
        legs.append(_vault_leg(store, query, scopes, pool, since, until))
    # Every leg in one hop, side by side (memory/store/reads.py).
    found = store.reader.run(*legs)
    scores: dict[str, float] = {}
    seen: dict[str, dict] = {}
    shared: dict[str, dict] = {}  # hits in shared scopes: ids and scores (memory/store/remote.py)
    if want_memories:
        vec_rows, fts_rows = found[0], found[1]
        # Shared scopes' memories, under the same filter; merged into each list by its own score, so
        # one fusion ranks local and shared rows together.
        rvec, rfts = store.remotes.search(scopes, where, qv, query, hit_cols, pool)
        if rvec or rfts:
            shared = {r["id"]: r for r in (*rvec, *rfts)}
            vec_rows = sorted([*vec_rows, *rvec], key=lambda r: r["_distance"])[:pool]
            fts_rows = sorted([*fts_rows, *rfts], key=lambda r: -r["_score"])[:pool]
        seen = {r["id"]: r for r in (*vec_rows, *fts_rows)}
        # Averaged over the two lists, so memory scores and vault label scores (one list) share a scale.
        scores = {k: v / 2 for k, v in rrf([[r["id"] for r in vec_rows], [r["id"] for r in fts_rows]]).items()}
        # memories answers used rank above equally relevant unused ones
        scores = boost_scores(store, scores, version=versions[T.USAGE])
    vault = _vault_hits(found[-1]) if want_vault else []
    ranked = sorted([(s, id_, None) for id_, s in scores.items()] + [(h.score, h.id, h) for h in vault],
                    key=lambda x: x[0], reverse=True)[:limit]
    winners = [id_ for _, id_, h in ranked if h is None]
    if inline:
        rows = {i: seen[i] for i in winners}  # public_memory drops the leg's `_distance` / `_score`
        store.reader.open(T.MEMORIES, [rows[i] for i in winners if i not in shared])
    else:
        local = [i for i in winners if i not in shared]
        rows = fetch_rows(store, T.MEMORIES, local, where, hit_cols, {i: seen[i]["_rowid"] for i in local},
                          have=seen)
        rows.update((i, shared[i]) for i in winners if i in shared)
    # Shared hits came as ids and scores: one read of the winners' columns (queued rows have them).
    thin = [i for i in winners if i in shared and not all(c in shared[i] for c in hit_cols)]
    if thin:
        got = store.remotes.fetch(scopes, thin, hit_cols)
        for i in thin:
            rows.pop(i, None)
            if i in got:
                rows[i] = got[i]
    hits: list[Hit] = []
    for s, id_, vault_hit in ranked:
        if vault_hit is not None:
            hits.append(vault_hit)
        elif id_ in rows:
            m = public_memory(rows[id_])
            hits.append(Hit(id_, "memory", m["scope"], m["text"], s, type=m["type"], row=m))
    return hits


def search_evidence(store: Store, query: str, *, scopes: Iterable[str] | None = None,
                    sources: Iterable[str] | None = None, apps: Iterable[str] | None = None,
                    since: datetime | None = None, until: datetime | None = None, limit: int = 10,
                    now: datetime | None = None, rank: RankConfig | None = None,
                    cols: list[str] | None = None) -> list[Hit]:
    """Hybrid search over evidence rows, boosted for people and dates the query names (memory/retrieval/rank.py).

    now: the time relative dates in the query ("yesterday") are resolved against; default the current time.
    rank: a memory.retrieval.rank.RankConfig overriding the measured defaults.
    cols: the evidence columns a hit carries (default all public ones).
    """
    from memory.retrieval.rank import rank_evidence

    query = check_query(query)
    limit = _check_limit(limit)
    where = store.where("evidence", scopes=scopes, sources=sources, apps=apps, since=since, until=until)
    ranked = rank_evidence(store, query, where, cols or EVIDENCE_COLS, limit, now=now, cfg=rank, scopes=scopes)
    hits = []
    for id_, s, row in ranked:
        e = public_evidence(row)
        hits.append(Hit(id_, "evidence", e["scope"], e["text"], s, source=e["source"], row=e))
    return hits


def search_vault(store: Store, query: str, *, scopes: Iterable[str] | None = None, limit: int = 10) -> list[Hit]:
    """Full-text search over vault labels only; values are never indexed."""
    query, limit = check_query(query), _check_limit(limit)
    if not _vault_in_scope(store, scopes):
        return []
    return _vault_hits(store.reader.run(_vault_leg(store, query, scopes, limit))[0])


def _check_limit(limit: int) -> int:
    if not 1 <= int(limit) <= 1000:
        raise InputError(f"limit must be between 1 and 1000, got {limit}")
    return int(limit)
