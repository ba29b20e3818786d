"""Budgeted recall: the memories and evidence that best answer a query, packed into a token budget.

Candidates come from the hybrid searches (memory/retrieval/search.py) with the scope filter and the visible
statuses (candidate, active) inside the queries. Each is scored relevance x recency x confidence,
chosen greedily with a redundancy penalty against what is already chosen (MMR-style), and rendered
at the richest level the budget left allows: full text, a summary, or a one-line header that still
names the id, so a client can fetch the rest with `mirador show ID`.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from memory.errors import Hint, InputError
from memory.retrieval.rank import embedded_text
from memory.retrieval.search import Hit, check_query, search_evidence, search_memories
from memory.retrieval.snippets import SEGMENT_END as _SENTENCE_END
from memory.retrieval.snippets import focused, past_chrome, stems
from memory.retrieval.tokens import CONSTANT as TOKEN_CONSTANT
from memory.retrieval.tokens import count_joined, count_tokens, truncate_to_tokens
from memory.store.audit import utcnow
from memory.store.rows import parse_time
from memory.types import MemoryType, parse_type

if TYPE_CHECKING:
    from memory.config import RecallConfig
    from memory.store.core import Store

log = logging.getLogger(__name__)

MIN_BUDGET = 20
MAX_BUDGET = 32_000
_SEP = "\n\n"
MIN_SUMMARY_WORDS = 4  # fewer ("… blocker:…") tells a reader no more than the header does
_CHARS_PER_TOKEN_MAX = 12  # no real tokenizer packs more; longer text cannot fit, so skip counting it
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)


@dataclass
class RecallItem:
    """One memory or evidence row as rendered into the recall block."""

    id: str
    kind: str  # memory | evidence
    type: str  # memory type, or evidence source
    time: str | None  # ISO 8601, UTC
    provenance: str
    level: str  # full | summary | header
    text: str  # exactly what this item contributes to the block
    tokens: int
    score: float
    scope: str = ""

    def to_dict(self) -> dict:
        """JSON-safe dict."""
        d = asdict(self)
        d["score"] = round(self.score, 6)
        return d


@dataclass
class RecallResult:
    """The context block and what went into it."""

    query: str
    budget_tokens: int
    used_tokens: int
    items: list[RecallItem] = field(default_factory=list)
    text: str = ""

    def to_dict(self) -> dict:
        """JSON-safe dict."""
        return {"query": self.query, "budget_tokens": self.budget_tokens, "used_tokens": self.used_tokens,
                "items": [i.to_dict() for i in self.items], "text": self.text}


@dataclass
class _Cand:
    id: str
    kind: str
    type: str
    scope: str
    time: datetime | None
    provenance: str
    body: str
    score: float
    words: frozenset = frozenset()


def check_budget(budget_tokens: int) -> int:
    """Reject a budget outside MIN_BUDGET..MAX_BUDGET tokens."""
    try:
        b = int(budget_tokens)
    except (TypeError, ValueError):
        raise InputError(f"budget must be a whole number of tokens, got {budget_tokens!r}") from None
    if not MIN_BUDGET <= b <= MAX_BUDGET:
        raise InputError(f"budget must be between {MIN_BUDGET} and {MAX_BUDGET:,} tokens, got {b:,} "
                         "— pass e.g. --budget 1000")
    return b


def _memory_types(types: Iterable[str] | None) -> list[str]:
    if not types:
        return [t.value for t in MemoryType if t != MemoryType.VAULT]
    out = [parse_type(t).value for t in types]
    if MemoryType.VAULT.value in out:
        raise InputError("recall never includes vault entries",
                         hint=Hint(cli="drop --type vault (use `mirador search --type vault`)",
                                   mcp='leave vault out of types (memory_search with types=["vault"] finds vault '
                                       "entries)"))
    return out


def recall(store: Store, query: str, budget_tokens: int = 1000, scopes: Iterable[str] | None = None, *,
           types: Iterable[str] | None = None, include_evidence: bool = True, now: datetime | None = None
           ) -> RecallResult:
    """The best memories and evidence for query, rendered into a block that fits budget_tokens."""
    budget = check_budget(budget_tokens)
    query = check_query(query)
    cfg = store.config.recall
    now = now or utcnow()
    pool = min(cfg.max_candidates, max(10, budget // 25))
    mem_types = _memory_types(types)
    cands, reasons = _candidates(store, query, scopes, mem_types, include_evidence, pool, now)
    items = _pack(_with_reasons(_select(cands, cfg), reasons), budget, cfg, query)
    used = count_joined([i.text for i in items], _SEP)
    while used > budget and items:  # per-item counts sum to more than the block's, so this is a backstop
        items.pop()
        used = count_joined([i.text for i in items], _SEP)
    text = _SEP.join(i.text for i in items)
    return RecallResult(query=query, budget_tokens=budget, used_tokens=used, items=items, text=text)


# ---- candidates and scores ------------------------------------------------------------------------

RECALL_THREADS = 8
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            # The pool is shared by every recall in the process: the MCP server runs many at once, and with
            # two workers each recall's evidence search queued behind the others' (they wait on LanceDB,
            # not on the GIL, so more threads cost little).
            _pool = ThreadPoolExecutor(max_workers=RECALL_THREADS, thread_name_prefix="mirador-recall")
        return _pool



# What candidates are built from (_memory_cand, _evidence_cand, _recency, _confidence): reading only
# these, not every column, keeps the winners' fetch small (bench/scale.py times recall).
_MEMORY_READ = ["id", "type", "scope", "text", "valid_from", "created_at", "updated_at", "provenance", "origin",
                "confidence"]
_EVIDENCE_READ = ["id", "scope", "text", "source", "app", "window", "speaker", "captured_at"]


def _candidates(store: Store, query: str, scopes: Iterable[str] | None, mem_types: list[str], include_evidence: bool,
                pool: int, now: datetime) -> tuple[list[_Cand], dict[str, list[_Cand]]]:
    """The scored candidates, best first, and the reasons of the memory candidates (see _reasons)."""
    # Both searches' query vectors at once, before the threads (they then hit the embedder's cache): the
    # evidence search embeds the question without a speaker it names, and a batch of two costs less.
    texts = [query, embedded_text(store, query, now)] if include_evidence else [query]
    store.embedder.embed_queries(texts)
    # The two searches are independent LanceDB queries that release the GIL: run them side by side.
    ev_future = _executor().submit(search_evidence, store, query, scopes=scopes, limit=pool, now=now,
                                   cols=_EVIDENCE_READ) if include_evidence else None
    mem_hits = search_memories(store, query, scopes=scopes, types=mem_types, statuses=["candidate", "active"],
                               limit=pool, cols=_MEMORY_READ)
    # Reasons need only the memory ids: look them up while the evidence search is still running.
    reasons = _reasons(store, [h.id for h in mem_hits], scopes, mem_types)
    ev_hits = ev_future.result() if ev_future is not None else []
    cfg = store.config.recall
    out = []
    for hits in (mem_hits, ev_hits):
        # Scores of the two searches need not share a scale: each list is relative to its own best hit.
        top = max((h.score for h in hits), default=0.0) or 1.0
        for h in hits:
            c = _memory_cand(h) if h.kind == "memory" else _evidence_cand(h)
            half_life = getattr(cfg.half_life_days, "evidence" if h.kind == "evidence" else c.type)
            c.score = (h.score / top) * _recency(c, h.row, now, half_life, cfg.recency_floor) * _confidence(h)
            c.words = frozenset(w.lower() for w in _WORD.findall(c.body))
            out.append(c)
    out.sort(key=lambda c: c.score, reverse=True)
    return out, reasons


def _recency(c: _Cand, row: dict, now: datetime, half_life: float, floor: float) -> float:
    # Decay from the last time a memory was touched (edits, corroboration), or an evidence capture.
    t = parse_time(row.get("updated_at")) if c.kind == "memory" else c.time
    if t is None:
        return 1.0
    age_days = max((now - t).total_seconds() / 86400.0, 0.0)
    return floor + (1.0 - floor) * math.pow(0.5, age_days / half_life)


def _confidence(hit: Hit) -> float:
    if hit.kind != "memory":
        return 1.0
    conf = hit.row.get("confidence")
    return float(conf) if conf is not None else 1.0


def _memory_cand(h: Hit) -> _Cand:
    r = h.row
    prov = list(r.get("provenance") or [])
    if prov:
        provenance = "from " + prov[0] + (f" +{len(prov) - 1}" if len(prov) > 1 else "")
    else:
        provenance = f"by {r.get('origin') or 'person'}"
    return _Cand(h.id, "memory", h.type or r.get("type", "semantic"), h.scope,
                 parse_time(r.get("valid_from") or r.get("created_at")), provenance, h.text or "", 0.0)


def _evidence_cand(h: Hit) -> _Cand:
    r = h.row
    where = " — ".join(x for x in (r.get("app"), r.get("window")) if x)
    who = r.get("speaker") or ""
    provenance = " ".join(x for x in (where, f"speaker {who}" if who else "") if x) or "captured"
    return _Cand(h.id, "evidence", h.source or r.get("source", "manual"), h.scope,
                 parse_time(r.get("captured_at")), provenance, h.text or "", 0.0)


def _overlap(a: frozenset, b: frozenset) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)  # Jaccard without building the union: MMR calls this ~700 times a recall
    return shared / (len(a) + len(b) - shared)


def _reasons(store: Store, ids: list[str], scopes: Iterable[str] | None, mem_types: list[str]
             ) -> dict[str, list[_Cand]]:
    """Per memory candidate id, the memories it is BECAUSE of (memory/graph/relations.py), visible in scopes and
    candidate/active: one edge query and one memory query for the whole pool."""
    from memory.graph.relations import reasons_for

    out: dict[str, list[_Cand]] = {}
    for src, rows in reasons_for(store, ids, scopes, mem_types).items():
        out[src] = [_Cand(r["id"], "memory", r["type"], r["scope"],
                          parse_time(r.get("valid_from") or r.get("created_at")), f"reason for {src}",
                          r["text"] or "", 0.0) for r in rows]
    return out


def _with_reasons(ordered: Iterable[tuple[_Cand, int]], reasons: dict[str, list[_Cand]]
                  ) -> Iterator[tuple[_Cand, int]]:
    """The ranked picks, each followed by its reasons (a decision's "because"), each memory once.

    A reason goes straight after what it explains, so it is packed while budget is left, at whatever
    level still fits (full, summary or header); it never displaces a pick already packed.
    """
    shown: set[str] = set()
    for c, after in ordered:
        if c.id in shown:
            continue
        shown.add(c.id)
        yield c, after
        for r in reasons.get(c.id, ()):
            if r.id not in shown:
                shown.add(r.id)
                r.score = c.score
                yield r, after


def _select(cands: list[_Cand], cfg: RecallConfig) -> Iterator[tuple[_Cand, int]]:
    """Greedy MMR, lazily: (pick, candidates left) with the best adjusted score first; each pick
    penalises the remaining ones that repeat it. Lazy so packing stops paying once the budget is full."""
    left = list(cands)
    worst = [0.0] * len(left)  # highest overlap of each remaining candidate with anything chosen
    while left:
        adj = [c.score * (1.0 - cfg.redundancy_penalty * w) for c, w in zip(left, worst, strict=True)]
        i = max(range(len(left)), key=adj.__getitem__)
        pick = left.pop(i)
        worst.pop(i)
        keep = []
        for j, c in enumerate(left):
            o = _overlap(pick.words, c.words)
            if o >= cfg.duplicate_overlap or c.body.strip() == pick.body.strip():
                continue  # a near-copy (same screen captured twice) adds nothing
            worst[j] = max(worst[j], o)
            keep.append(j)
        left = [left[j] for j in keep]
        worst = [worst[j] for j in keep]
        yield pick, len(left)


# ---- rendering --------------------------------------------------------------------------------------


def _iso(t: datetime | None) -> str | None:
    return t.isoformat(timespec="seconds") + "Z" if t else None


def _headers(c: _Cand) -> list[str]:
    """Header lines, richest first: id, type, time and provenance; shorter ones for tiny budgets."""
    minute = c.time.strftime("%Y-%m-%dT%H:%MZ") if c.time else "undated"
    day = c.time.strftime("%Y-%m-%d") if c.time else "undated"
    return [f"[{c.id}] {c.type} {minute} · {c.provenance}", f"[{c.id}] {c.type} {day}", f"[{c.id}] {c.type}"]


def _clean(text: str) -> str:
    # Blank lines and runs of spaces cost tokens and carry nothing for a reader.
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _summary_source(body: str, max_tokens: int, query_stems: frozenset[str] = frozenset(),
                    screen: bool = False) -> str:
    """What a summary of at most max_tokens shows: the lines that share the most words with the query
    (memory/retrieval/snippets.py), or the first sentence when none does (a screen's first past its chrome)."""
    # 3 characters a token is the fewest that OCR text and code take: the lines picked surely fit,
    # so the token truncation after this never cuts the best line away.
    lines = focused(body, query_stems, max_tokens * 3)
    if lines is not None:
        return lines[: max_tokens * _CHARS_PER_TOKEN_MAX]
    if screen:
        body = past_chrome(body)
    m = _SENTENCE_END.search(body)
    first = body[: m.start()].strip() if m else body
    return first[: max_tokens * _CHARS_PER_TOKEN_MAX]


def _summary(head: str, head_n: int, body: str, summary_room: int, cfg: RecallConfig,
             query_stems: frozenset[str], screen: bool = False) -> tuple[str, str, int] | None:
    """(level, text, tokens) of head plus a summary within summary_room, or None when the room holds
    fewer than MIN_SUMMARY_WORDS words: a header alone says as much and costs less."""
    room_n = summary_room - head_n
    source = _summary_source(body, min(cfg.summary_tokens, room_n), query_stems, screen)
    # Every count carries the counter's constant once (memory/retrieval/tokens.py); head_n already paid it, so
    # the summary alone may count that much more. The joined count decides, and a miss retries once.
    allow = room_n + TOKEN_CONSTANT - 1
    for _ in range(2):
        short = truncate_to_tokens(source, allow)
        if short != body and sum(1 for w in short.split() if w.strip("…")) < MIN_SUMMARY_WORDS:
            return None
        text = head + "\n" + short
        n = count_tokens(text)
        if n <= summary_room:
            return ("full" if short == body else "summary"), text, n
        allow -= n - summary_room
    return None


def _render(c: _Cand, remaining: int, reserve: int, cfg: RecallConfig, first: bool,
            query_stems: frozenset[str] = frozenset()) -> tuple[str, str, int] | None:
    """(level, text, tokens) of the richest rendering that fits, or None if not even a header does."""
    head = _headers(c)
    body = _clean(c.body)
    room = remaining - reserve
    full = head[0] + "\n" + body
    # The best item may fill what the reserve leaves; later ones only a share, so several get shown.
    cap = room if first else min(room, int(remaining * cfg.full_share))
    if body and len(full) <= cap * _CHARS_PER_TOKEN_MAX:
        n = count_tokens(full)
        if n <= cap:
            return "full", full, n
    head_n = count_tokens(head[0])
    summary_room = min(room, head_n + cfg.summary_tokens)
    if body and summary_room > head_n + 4:
        got = _summary(head[0], head_n, body, summary_room, cfg, query_stems,
                       screen=c.kind == "evidence" and c.type == "screen")
        if got is not None:
            return got
    for h in head:
        n = head_n if h is head[0] else count_tokens(h)
        if n <= remaining:
            return "header", h, n
    return None


def _pack(ordered: Iterable[tuple[_Cand, int]], budget: int, cfg: RecallConfig, query: str = "") -> list[RecallItem]:
    """Render in rank order; each item gets the richest level that leaves room for two more headers;
    a summary shows the lines that share most words with `query`."""
    query_stems = stems(query)
    items: list[RecallItem] = []
    remaining = budget
    header_n = 0
    for c, after in ordered:
        sep = 2 if items else 0  # "\n\n" between items, counted generously
        header_n = header_n or count_tokens(_headers(c)[1]) + 2  # ids have one length: count once
        # Room for two more headers, but never more than 30% of what is left: a small budget is better
        # spent on the best item's text than on ids.
        reserve = min(min(after, 2) * header_n, int(0.3 * remaining))
        got = _render(c, remaining - sep, reserve, cfg, first=not items, query_stems=query_stems)
        if got is None:
            if remaining - sep < header_n:
                break  # every other candidate needs a header of about this length too: stop counting
            continue  # another item's header may still be shorter
        level, text, n = got
        items.append(RecallItem(c.id, c.kind, c.type, _iso(c.time), c.provenance, level, text, n, c.score, c.scope))
        remaining -= n + sep
        if remaining < 20:
            break
    return items
