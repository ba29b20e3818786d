"""The default extraction engine: the evidence's own statements, judged by MiniLM, kept verbatim.

Evidence rows → statements (statements.py) → worth keeping? which type? is the whole row noise?
(salience.py) → one draft per kept statement or record, whose text is the evidence's words (so no
detail is lost and none is invented) and whose fields (when, who, link, path) are read from those
words by the rules.
Without the fitted weights (another embedder, a damaged install) the rule scores decide.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

import numpy as np
import numpy.typing as npt

from memory.consolidation.chrome import RowSigns, row_signs
from memory.consolidation.rules import Draft, find_paths, find_people, find_urls, resolve_date
from memory.consolidation.salience import (
    SalienceModel,
    features,
    load_model,
    row_features,
    rule_score,
    rule_type,
    vetoes,
)
from memory.consolidation.statements import NEIGHBOUR_WORDS, Segment, compose, line_words, render, segment_row
from memory.types import MemoryType, build_details

log = logging.getLogger(__name__)

RULE_THRESHOLD = 0.5  # keep score a statement needs when the rules alone judge it
MAX_CHARS = 600  # a record longer than this becomes several memories, each under its title
RECORD_LINES = 8  # a record or message of at most this many lines is kept whole once one of its lines is


class StatementEngine:
    """Drafts for a batch of evidence rows; embed(texts) → vectors (the store's embedder)."""

    def __init__(self, embed: Callable[[list[str]], npt.NDArray[np.float32]] | None = None,
                 embedder_name: str | None = None, model: SalienceModel | None = None,
                 max_chars: int = 4000) -> None:
        self.embed = embed
        self.model = model if model is not None else load_model()
        self.max_chars = max_chars
        self.noise_rows = 0  # rows the row gate has read as noise throughout (extraction reports them)
        if self.model is not None and (embed is None or embedder_name != self.model.embedder):
            log.info("salience weights fit %s, not %s: judging statements by rules alone", self.model.embedder,
                     embedder_name)
            self.model = None

    @property
    def judged_by(self) -> str:
        """"model" when the fitted weights judge, "rules" when the counted signs alone do."""
        return "model" if self.model is not None else "rules"

    def drafts(self, items: list[dict]) -> list[Draft]:
        """One draft per kept statement group of each row (rows never share a draft: provenance stays exact)."""
        segs: list[Segment] = []
        feats: list[list[float]] = []
        signs_of: dict[int, RowSigns] = {}
        for n, r in enumerate(items):
            row = segment_row(r.get("text") or "", r.get("source") or "", n, self.max_chars)
            lines = len({s.line for s in row})
            signs = signs_of[n] = row_signs((r.get("text") or "")[: self.max_chars].splitlines())
            for s in row:
                segs.append(s)
                feats.append(features(s, r.get("source") or "", lines, row=signs))
        if not segs:
            return []
        vetoed = np.asarray(vetoes(segs, {n: r.get("source") or "" for n, r in enumerate(items)}))
        types: list[str]
        vectors = None
        if self.model is not None and self.embed is not None:
            vectors = np.asarray(self.embed([s.text for s in segs]), dtype=np.float32)
            x = self.model.design(vectors, np.asarray(feats, dtype=np.float32))
            scores = self.model.keep_scores(x) * ~vetoed
            types = self.model.types(x)
            threshold = self.model.threshold
        else:
            scores = np.asarray([rule_score(f) for f in feats]) * ~vetoed
            types = [rule_type(s.text) for s in segs]
            threshold = RULE_THRESHOLD
        by_row: dict[int, list[int]] = {}
        for i, s in enumerate(segs):
            by_row.setdefault(s.row, []).append(i)
        out: list[Draft] = []
        for n, r in enumerate(items):
            idx = by_row.get(n, [])
            if not idx:
                continue
            if self.model is not None and vectors is not None and self.model.gate is not None:
                gate = self.model.noise_row(vectors[idx], row_features(scores[idx], vetoed[idx], signs_of[n],
                                                                       r.get("source") or "", threshold))
                if gate >= self.model.gate_threshold:
                    self.noise_rows += 1
                    log.debug("evidence row %s reads as noise throughout (%.2f): no memory from it", r.get("id"), gate)
                    continue
            row_segs = [segs[i] for i in idx]
            keep = whole_records(row_segs, [bool(scores[i] >= threshold) for i in idx], [bool(vetoed[i]) for i in idx])
            for g in memory_groups(row_segs, keep):
                text = _cap(render(row_segs, g))  # only a single statement longer than MAX_CHARS is cut
                # The type is the kept body's, not its title's: under `$ curl ...` the output is the fact.
                body = [j for j in g if not row_segs[j].is_title] or g
                best = idx[max(body, key=lambda j: scores[idx[j]])]
                conf = float(np.mean([scores[idx[j]] for j in g if scores[idx[j]] > 0] or [scores[best]]))
                out.append(_draft(text, types[best], conf, r))
        return out


def memory_groups(segs: list[Segment], keep: list[bool]) -> list[list[int]]:
    """compose's groups, with a record too long for one memory split into several at statement boundaries: each
    part keeps the record's title and holds up to MAX_CHARS, so no kept line is lost at a cut."""
    out: list[list[int]] = []
    for g in compose(segs, keep):
        if len(render(segs, g)) <= MAX_CHARS:
            out.append(g)
            continue
        titles = [j for j in g if segs[j].is_title]
        part: list[int] = []
        for j in g:
            if segs[j].is_title:
                continue
            if part and len(render(segs, sorted(titles + part + [j]))) > MAX_CHARS:
                out.append(sorted(titles + part))
                part = []
            part.append(j)
        out.append(sorted(titles + part))
    return out


def whole_records(segs: list[Segment], keep: list[bool], vetoed: list[bool]) -> list[bool]:
    """A record worth keeping is kept whole: its other field lines ("Assignee: ...") go with the kept one,
    as do the other lines of a kept chat message and the other sentences of a kept written line (they share
    one memory, so this adds detail, not memories)."""
    out = list(keep)
    blocks: dict[tuple, list[int]] = {}
    for i, s in enumerate(segs):
        if s.title:
            blocks.setdefault(("title", s.title), []).append(i)
        elif s.speaker:
            blocks.setdefault(("speaker", s.speaker), []).append(i)
        elif not s.spoken:
            blocks.setdefault(("line", s.line), []).append(i)
    for members in blocks.values():
        if any(keep[i] for i in members) and len(members) <= RECORD_LINES:
            for i in members:
                out[i] = out[i] or not vetoed[i]
    # On a screen a value stands under or beside its label ("Check-in  Fri 2 Apr" under the hotel's address):
    # a kept written line takes a short neighbouring line along, into the same memory (compose joins them).
    prose = [not s.spoken and not s.title and not s.speaker for s in segs]
    words = line_words(segs)
    kept_lines = {segs[i].line for i in range(len(segs)) if keep[i] and prose[i]}
    for i, s in enumerate(segs):
        if prose[i] and not out[i] and not vetoed[i] and words[(s.row, s.line)] <= NEIGHBOUR_WORDS \
                and (s.line - 1 in kept_lines or s.line + 1 in kept_lines):
            out[i] = True
    return out


def _cap(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    cut = text[:MAX_CHARS]
    return cut[: max(cut.rfind("; "), cut.rfind(". "), MAX_CHARS // 2)].rstrip(" ;")


def _draft(text: str, mtype: str, confidence: float, row: dict) -> Draft:
    """A draft whose text is the statement and whose typed fields are read from it."""
    t = MemoryType(mtype)
    captured = row.get("captured_at")
    fields: dict = {}
    if t is MemoryType.EPISODIC:
        when = resolve_date(text, captured if isinstance(captured, datetime) else None)
        fields = {"event": text, "who": find_people(text)[:5], **({"when": when} if when else {})}
    elif t is MemoryType.SEMANTIC:
        fields = {"fact": text}
    elif t is MemoryType.PROCEDURAL:
        fields = {"goal": text}
    elif t is MemoryType.RESOURCE:
        urls, paths = find_urls(text), find_paths(text)
        fields = {"title": text[:160], **({"uri": urls[0]} if urls else {}), **({"path": paths[0]} if paths and not urls else {})}
    elif t is MemoryType.CORE:
        fields = {"content": text}
    details = build_details(t, None, fields).model_dump(mode="json", exclude_none=True)
    return Draft(type=t.value, text=text, subject=None, details=details, confidence=round(min(max(confidence, 0.0), 1.0), 3),
                 evidence_ids=[row["id"]], engine="statements", kind="statement")
