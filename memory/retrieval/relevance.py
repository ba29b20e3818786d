"""Whether a search hit is about the query at all, and how close it is — shared by MCP search and the browser.

Fused ranks say only which memory is closest, not whether any is close: a query about something never
stored would still return the nearest memories. A hit is kept when it shares a word stem with the query
or its embedding is at least RELEVANCE_FLOOR similar (cosine). Measured with the bundled
all-MiniLM-L6-v2 on the MCP tests' seeds: the memory a query is about scores 0.5-0.8, unrelated pairs
stay below 0.25 (so does a loose paraphrase sharing no word; the word-stem test keeps every hit that
shares one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory.retrieval.snippets import stems

if TYPE_CHECKING:
    import numpy.typing as npt

    from memory.store.core import Store

__all__ = ["RELEVANCE_FLOOR", "Relevance", "cosine", "judge", "relevant"]

RELEVANCE_FLOOR = 0.3
_TABLE = {"memory": "memory", "evidence": "evidence"}  # hit kinds that carry a vector (vault labels do not)


@dataclass(frozen=True)
class Relevance:
    """How one hit relates to the query: the query's word stems it shares and its embedding similarity."""

    words: frozenset[str]
    similarity: float | None  # cosine; None when not measured (a vault label, or words already decide)

    @property
    def kept(self) -> bool:
        """True when the hit shares a word with the query or is similar enough in meaning."""
        return bool(self.words) or (self.similarity is not None and self.similarity >= RELEVANCE_FLOOR)


def _hit_text(h: object) -> str:
    row = getattr(h, "row", None) or {}
    return f"{row.get('title') or row.get('label') or ''} {row.get('text') or getattr(h, 'text', '') or ''}"


def judge(store: Store, query: str, hits: list, *, measure_all: bool = False) -> dict[str, Relevance]:
    """Relevance of each hit by id. Similarity is measured for hits sharing no word with the query, or for
    every memory and evidence hit when measure_all (a view that shows it); vault hits match by label words."""
    q_stems = stems(query)
    words = {h.id: q_stems & stems(_hit_text(h)) for h in hits}
    want: dict[str, list[str]] = {}
    for h in hits:
        if h.kind in _TABLE and (measure_all or not words[h.id]):
            want.setdefault(_TABLE[h.kind], []).append(h.id)
    sims: dict[str, float] = {}
    if want:
        qv = store.embedder.embed_query(query)
        for table, ids in want.items():
            vecs = store.get_many(table, ids, ["id", "vector"])
            sims.update({i: cosine(qv, vecs[i]["vector"]) if i in vecs else 0.0 for i in ids})
    out = {}
    for h in hits:
        sim = sims.get(h.id)
        if h.kind not in _TABLE and not words[h.id]:
            sim = 1.0  # a vault hit comes from the full-text index over its label: it matched the words
        out[h.id] = Relevance(frozenset(words[h.id]), sim)
    return out


def relevant(store: Store, query: str, hits: list) -> list:
    """The memory hits that are about the query (see the module doc); other kinds of hit are kept as they are."""
    mem = [h for h in hits if h.kind == "memory"]
    if not mem:
        return hits
    verdict = judge(store, query, mem)
    return [h for h in hits if h.kind != "memory" or verdict[h.id].kept]


def cosine(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Cosine similarity of two vectors (0 when either is all zeros)."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    n = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / n if n else 0.0
