"""What evidence is indexed as: its own text plus speaker, resolved dates and (for the vector) its
neighbours. The stored `text` never changes; this builds the separate `search_text` column (full-text
index) and the text that gets embedded. Called from Store.add_evidence_batch, so live capture,
imports and MCP writes are all indexed the same way.

Why: a turn like "Yesterday I finally went!" is unfindable on its own. Its speaker, its date
("yesterday" → 7 May 2023) and the turn before it ("Did you go to the support group?") say what it is about.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from memory.store.timeparse import find_windows

if TYPE_CHECKING:  # the store calls into this module: no import of it at run time
    from memory.store.core import Store

# A stream: (scope, source, app, window) of a row, the key rows are grouped by.
StreamKey = tuple[str, ...]


@dataclass(frozen=True)
class ContextConfig:
    """How evidence is indexed. The defaults are what bench/locomo.py measured best."""

    speaker: bool = True  # "Sam: ..." — lets a question naming a person match what they said
    dates: bool = True  # "(yesterday = 7 May 2023)" appended for relative dates in the text
    capture_date: bool = False  # "[8 May 2023]" — the capture day itself
    # Turns before/after whose text joins the embedded text. 0: on LoCoMo dev a turn embedded with its
    # neighbours matched questions worse than embedded alone (bench/RESULTS.md, Tried and dropped); context
    # now enters at query time instead, through run positions (place_in_runs, memory/retrieval/rank.py).
    neighbours_embed: int = 0
    neighbours_fts: int = 0  # same, for the full-text-indexed search_text
    max_gap: timedelta = timedelta(minutes=30)  # neighbours further apart in time are unrelated
    max_neighbour_chars: int = 300  # a long neighbour (a screen of OCR) must not drown the row itself


DEFAULT = ContextConfig()


def own_text(row: dict[str, Any], cfg: ContextConfig = DEFAULT) -> str:
    """The row's text with its speaker and resolved relative dates — content of this row only."""
    text = row["text"]
    parts = [f"{row['speaker']}: {text}" if cfg.speaker and row.get("speaker") else text]
    when = row.get("captured_at")
    if cfg.dates and when is not None:
        notes = [f"{w.phrase} = {w.label()}" for w in find_windows(text, when) if w.relative]
        if notes:
            parts.append("(" + "; ".join(notes) + ")")
    if cfg.capture_date and when is not None:
        parts.append(f"[{when.day} {when.strftime('%B %Y')}]")
    return " ".join(parts)


def _neighbour_text(row: dict[str, Any], cfg: ContextConfig) -> str:
    text = row["text"]
    if len(text) > cfg.max_neighbour_chars:
        text = text[: cfg.max_neighbour_chars].rsplit(" ", 1)[0] + " …"
    return f"{row['speaker']}: {text}" if cfg.speaker and row.get("speaker") else text


def _groups(rows: list[dict[str, Any]]) -> dict[StreamKey, list[int]]:
    """Rows of one stream (same scope, source, app, window), in the order they were captured."""
    groups: dict[StreamKey, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r["scope"], r["source"], r.get("app") or "", r.get("window") or ""), []).append(i)
    for idx in groups.values():
        idx.sort(key=lambda i: rows[i]["captured_at"])  # stable: equal times keep batch order
    return groups


def _with_neighbours(rows: list[dict[str, Any]], own: list[str], order: list[int], pos: int, n: int,
                     cfg: ContextConfig) -> str:
    i = order[pos]
    t0 = rows[i]["captured_at"]
    def near(j: int) -> bool:
        return bool(abs(rows[j]["captured_at"] - t0) <= cfg.max_gap)
    before = [order[p] for p in range(max(0, pos - n), pos) if near(order[p])]
    after = [order[p] for p in range(pos + 1, min(len(order), pos + 1 + n)) if near(order[p])]
    if not before and not after:
        return own[i]
    return " | ".join([_neighbour_text(rows[j], cfg) for j in before] + [own[i]]
                      + [_neighbour_text(rows[j], cfg) for j in after])


def index_texts(rows: list[dict[str, Any]], cfg: ContextConfig | None = None) -> tuple[list[str], list[str]]:
    """(search_text, embed_text) for each row of one batch, in row order."""
    cfg = cfg or DEFAULT
    own = [own_text(r, cfg) for r in rows]
    fts, emb = list(own), list(own)
    if cfg.neighbours_embed or cfg.neighbours_fts:
        for order in _groups(rows).values():
            for pos, i in enumerate(order):
                if cfg.neighbours_fts:
                    fts[i] = _with_neighbours(rows, own, order, pos, cfg.neighbours_fts, cfg)
                if cfg.neighbours_embed:
                    emb[i] = _with_neighbours(rows, own, order, pos, cfg.neighbours_embed, cfg)
    return fts, emb


def place_in_runs(rows: list[dict[str, Any]], tails: dict[StreamKey, tuple[str, int, datetime]],
                  cfg: ContextConfig | None = None) -> list[tuple[str, int]]:
    """(run_id, run_pos) for each row, in row order. A run is a stretch of one stream (same scope,
    source, app, window) with no gap over max_gap; run_pos counts along it, so two rows are k turns
    apart when they share run_id and their positions differ by k. Search credits a row with the
    scores of the turns around it that way (memory/retrieval/rank.py) without a query per neighbour.

    `tails` holds the last row written per stream by earlier batches of this process and is updated,
    so runs continue across batches. Run ids are random, never a row's id: forgetting a row leaves
    only a gap in the positions, and nothing that names it.
    """
    cfg = cfg or DEFAULT
    out: list[tuple[str, int]] = [("", 0)] * len(rows)
    for key, order in _groups(rows).items():
        last: tuple[str, int, datetime] | None = tails.get(key)
        for i in order:
            t = rows[i]["captured_at"]
            if last is not None and timedelta(0) <= t - last[2] <= cfg.max_gap:
                last = (last[0], last[1] + 1, t)
            else:
                last = ("run_" + uuid.uuid4().hex[:16], 0, t)
            out[i] = (last[0], last[1])
        if last is not None:  # a group has at least one row
            tails[key] = last
    return out


Span = tuple[dict[str, Any], datetime, datetime, list[datetime]]  # (stream row, start, end, removed times)


def _intervals(removed: list[dict[str, Any]], reach: timedelta) -> list[Span]:
    """Removed rows merged into (stream row, start, end, removed times) spans, one query each."""
    from memory.store.rows import parse_time

    streams: dict[StreamKey, list[tuple[datetime, dict[str, Any]]]] = {}
    for r in removed:
        t = parse_time(r["captured_at"]) if isinstance(r["captured_at"], str) else r["captured_at"]
        if t is None:  # never captured: in no stream, so no neighbour indexed it
            continue
        key = tuple(r.get(c) or "" for c in ("scope", "source", "app", "window"))
        streams.setdefault(key, []).append((t, r))
    spans: list[Span] = []
    for items in streams.values():
        items.sort(key=lambda x: x[0])
        cur: Span | None = None
        for t, r in items:
            if cur is not None and t - reach <= cur[2]:
                cur = (cur[0], cur[1], t + reach, cur[3] + [t])
                spans[-1] = cur
            else:
                cur = (r, t - reach, t + reach, [t])
                spans.append(cur)
    return spans


def refresh_neighbours(store: Store, removed: list[dict[str, Any]], cfg: ContextConfig | None = None) -> int:
    """Re-index the rows that had a removed row as a neighbour, so none of its words stay in their vector
    or search_text (principle 3). Call after the removed rows are deleted; returns rows re-indexed."""
    from memory.store import filters as F
    from memory.store.tables import EVIDENCE, EVIDENCE_COLS

    cfg = cfg or DEFAULT
    # At least one: rows written by versions (or configs) that indexed neighbours still carry the
    # removed text, whatever the config is now.
    n = max(cfg.neighbours_embed, cfg.neighbours_fts, 1)
    if not removed:
        return 0
    near = cfg.max_gap * n  # a row further than this from every removed row never had it as context
    touched: dict[str, dict[str, Any]] = {}
    for r, start, end, times in _intervals(removed, near + cfg.max_gap):
        # The app and window columns are sealed so that equal values seal equally (memory/store/sealer.py):
        # compared sealed (and as they are, for a row an older version wrote before its migration).
        stream = [F.sealed_one_of(c, store.equal_forms(EVIDENCE, c, [r.get(c) or ""])) if c in ("app", "window")
                  else F.equals(c, r.get(c) or "") for c in ("scope", "source", "app", "window")]
        where = F.and_(*stream, F.at_or_after("captured_at", start), F.at_or_before("captured_at", end))
        rows = store.table_rows(store.evidence, where, EVIDENCE_COLS, None)
        affected = [i for i, row in enumerate(rows) if any(abs(row["captured_at"] - t) <= near for t in times)]
        if not affected:
            continue
        fts, emb = index_texts(rows, cfg)
        vecs = store.embedder.embed([emb[i] for i in affected])
        for i, vec in zip(affected, vecs, strict=True):
            touched[rows[i]["id"]] = {**rows[i], "search_text": fts[i], "vector": vec}
    if touched:
        store.merge_rows(store.evidence, list(touched.values()))
    return len(touched)
