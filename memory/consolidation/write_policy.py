"""What an automated pass may do with a draft memory (docs/architecture.md principle 2).

For each draft, in order:
1. never recreate what the person deleted: skip if its content fingerprint is tombstoned, if all
   of its evidence is gone, or if the person deleted a memory of the same type derived from the
   same evidence (the `derivations` ledger keeps ids only, so a re-run with a different model or
   batching cannot bring a paraphrase of it back);
2. a paraphrase of a visible memory (cosine >= corroborate_similarity, same type and scope)
   corroborates it: confidence up, provenance added — allowed even on edited/pinned rows since
   neither changes their text; a paraphrase of a superseded or rejected one is dropped;
3. a changed value for the same subject supersedes the old row (closed validity, link, both kept)
   only when the draft is trusted enough to be active and the old row is not edited or pinned;
   otherwise the draft becomes a candidate for the person to decide;
4. anything else is created: active only when confident and every source is trusted (audio,
   manual by default — never screen text), else a candidate.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from memory.consolidation.rules import Draft
from memory.store import filters as F
from memory.store import tables as T
from memory.store.audit import utcnow
from memory.store.core import MemorySpec
from memory.store.fingerprint import fingerprint, normalise

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    import numpy.typing as npt

    from memory.config import ExtractionConfig
    from memory.store.core import Store

log = logging.getLogger(__name__)

SOURCE_BONUS = {"audio": 0.1, "manual": 0.1}
_NEIGHBOUR_COLS = ["id", "type", "scope", "text", "details", "status", "provenance", "confidence", "user_edited",
                   "pinned", "fingerprint", "created_at"]


@dataclass
class Outcome:
    """What happened to one draft."""

    action: str  # created | candidate | corroborated | superseded | skipped
    reason: str
    memory_id: str | None = None
    draft: Draft | None = None
    previous_id: str | None = None


@dataclass
class WriteReport:
    """Outcomes of one batch, counted by action."""

    outcomes: list[Outcome] = field(default_factory=list)
    relations: list[dict] = field(default_factory=list)  # edges written (memory/graph/relations.py)

    def counts(self) -> dict:
        """Number of drafts per action."""
        return dict(Counter(o.action for o in self.outcomes))


def blocked_derivations(store: Store, evidence_ids: list[str]) -> set[tuple[str, str]]:
    """(evidence id, type) pairs whose derived memory the person deleted."""
    if not evidence_ids or not store.has_table(T.DERIVATIONS):
        return set()
    rows = store.rows(T.DERIVATIONS, F.id_in(evidence_ids, "evidence_id"), ["memory_id", "evidence_id", "type"])
    if not rows:
        return set()
    mem_ids = sorted({r["memory_id"] for r in rows})
    dead = set(store.get_many(T.TOMBSTONES, mem_ids, ["id"]))
    return {(r["evidence_id"], r["type"]) for r in rows if r["memory_id"] in dead}


def record_derivations(store: Store, pairs: list[tuple[str, str, str]], actor: str) -> None:
    """Append (memory id, evidence id, type) rows to the ledger."""
    if not pairs:
        return
    now = utcnow()
    store.add_rows(T.DERIVATIONS, [{"memory_id": m, "evidence_id": e, "type": t, "actor": actor, "created_at": now}
                                   for m, e, t in pairs])


def tombstoned_fps(store: Store, fps: list[str]) -> set[str]:
    """Which of these fingerprints belong to something the person deleted (one query)."""
    return store.tombstoned(fingerprints=fps) if fps else set()


_ALL_STATUSES = ("candidate", "active", "superseded", "rejected")
_DIGITS = re.compile(r"\d+")
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w'’-]*[\w]")
_NOT_NAMES = {"i", "i'm", "i've", "i'll", "i'd", "the", "a", "an", "we", "it", "this", "that", "my", "our"}


def detail_terms(text: str) -> set[str]:
    """The numbers and names a text states (lower case): what makes two similar sentences different facts."""
    t = " ".join(str(text).split())
    names = {m.group(0).lower() for m in _NAME.finditer(t)} - _NOT_NAMES
    return set(_DIGITS.findall(t)) | names


def _neighbour_filter(mtype: str, scope: str, statuses: Iterable[str]) -> F.Where | None:
    return F.and_(F.equals("type", mtype), F.equals("scope", scope), F.one_of("status", statuses))


def neighbours(store: Store, vec: npt.ArrayLike, mtype: str, scope: str, k: int = 5,
               statuses: Iterable[str] = _ALL_STATUSES) -> list[dict]:
    """Nearest memories of one type in exactly one scope, with cosine similarity (filter inside the query)."""
    # A shared scope's memories too (Store.nearest): its duplicates are found wherever they live.
    rows = store.nearest("memory", np.asarray(vec, dtype=np.float32), _neighbour_filter(mtype, scope, statuses),
                         _NEIGHBOUR_COLS, k, scopes=[scope])
    for r in rows:
        r["similarity"] = 1.0 - float(r["_distance"])
    return rows


def neighbours_many(store: Store, vecs: list[npt.ArrayLike],
 mtype: str, scope: str, k: int = 5,
                    statuses: Iterable[str] = _ALL_STATUSES) -> list[list[dict]]:
    """neighbours() for many vectors at once: one LanceDB query for the batch, the lists in input order.

    Why: a dream pass looks up the neighbours of every changed memory; one query per vector pays
    LanceDB's per-query cost every time, a batch pays it once (bench/dream_stop.py).
    """
    vecs = [np.asarray(v, dtype=np.float32) for v in vecs]
    if not vecs:
        return []
    if len(vecs) == 1:  # a single vector is not a batch to LanceDB (no query_index column)
        return [neighbours(store, vecs[0], mtype, scope, k, statuses)]
    rows = store.nearest("memory", vecs, _neighbour_filter(mtype, scope, statuses), _NEIGHBOUR_COLS, k, scopes=[scope])
    out: list[list[dict]] = [[] for _ in vecs]
    for r in rows:
        r["similarity"] = 1.0 - float(r["_distance"])
        out[r.pop("query_index")].append(r)
    for lst in out:
        lst.sort(key=lambda r: r["_distance"])
    return out


def subject_key(row_or_draft: Draft | dict) -> str | None:
    """Normalised subject of a memory row (details.subject / core block) or a draft."""
    if isinstance(row_or_draft, Draft):
        subj = row_or_draft.subject or row_or_draft.details.get("subject")
    else:
        d = json.loads(row_or_draft.get("details") or "{}")
        subj = d.get("subject") or (d.get("block") if row_or_draft.get("type") == "core" else None)
    return normalise(subj) if subj else None


def status_for(draft: Draft, sources: list[str], cfg: ExtractionConfig) -> tuple[str, float]:
    """(status, confidence) under the policy: active only if confident and every source is trusted."""
    bonus = min(SOURCE_BONUS.get(s, 0.0) for s in sources) if sources else 0.0
    conf = round(min(1.0, draft.confidence + bonus), 4)
    trusted = bool(sources) and all(s in cfg.active_sources for s in sources)
    return ("active" if trusted and conf >= cfg.active_min_confidence else "candidate"), conf


class WritePolicy:
    """Applies the rules above to the drafts of one batch of evidence (all from one scope)."""

    def __init__(self, store: Store, cfg: ExtractionConfig, actor: str = "extractor") -> None:
        self.store, self.cfg, self.actor = store, cfg, actor

    def apply(self, drafts: list[Draft], evidence: dict[str, dict], scope: str) -> WriteReport:
        """Decide and write every draft; evidence maps id → row (source, scope) of the live batch."""
        report = WriteReport()
        if not drafts:
            return report
        live = self._live_evidence(list(evidence))
        dead_fps = tombstoned_fps(self.store, [fingerprint(d.text) for d in drafts])
        blocked = blocked_derivations(self.store, sorted(live))
        vecs = self.store.embedder.embed([d.text for d in drafts])
        pending: list[tuple[Draft, np.ndarray, str, float]] = []
        seen: list[tuple[Draft, np.ndarray]] = []  # every draft decided so far, so the outcome is order-stable
        for d, vec in zip(drafts, vecs, strict=True):
            d.evidence_ids = [e for e in dict.fromkeys(d.evidence_ids) if e in live]
            skip = self._skip_reason(d, dead_fps, blocked)
            if skip:
                report.outcomes.append(Outcome("skipped", skip, draft=d))
                continue
            dup = next((p for p in seen if float(np.dot(p[1], vec)) >= self.cfg.corroborate_similarity
                        and p[0].type == d.type and detail_terms(d.text) <= detail_terms(p[0].text)), None)
            if dup:  # two drafts of the same thing in one batch: one memory, both sources
                dup[0].evidence_ids = list(dict.fromkeys(dup[0].evidence_ids + d.evidence_ids))
                d.same_as = dup[0].key or None  # its links now start or end at the merged memory
                report.outcomes.append(Outcome("skipped", "same as another draft in this batch", draft=d))
                continue
            seen.append((d, vec))
            status, conf = status_for(d, [evidence[e]["source"] for e in d.evidence_ids], self.cfg)
            outcome = self._against_store(d, vec, scope, status, conf)
            if outcome is None:
                pending.append((d, vec, status, conf))
            else:
                report.outcomes.append(outcome)
        report.outcomes.extend(self._create(pending, scope))
        report.relations = link_outcomes(self.store, report.outcomes, self.actor)
        return report

    def _live_evidence(self, ids: list[str]) -> set[str]:
        # Re-read just before writing: evidence the person deleted meanwhile must not be cited.
        if not ids:
            return set()
        return set(self.store.get_many("evidence", ids, ["id"]))

    def _skip_reason(self, d: Draft, dead_fps: set[str], blocked: set[tuple[str, str]]) -> str | None:
        if d.type == "vault":
            return "automated passes never write the vault"
        if not d.evidence_ids:
            return "derived only from deleted evidence"
        if fingerprint(d.text) in dead_fps:
            return "the person deleted this memory (tombstone)"
        if all((e, d.type) in blocked for e in d.evidence_ids):
            return "the person deleted what this evidence produced"
        return None

    def _paraphrase(self, text: str, near: dict) -> bool:
        """Says the same as `near`: close in meaning and no detail of its own. Vectors barely tell "SK 4615"
        from "SK 4616", so a number or name the memory lacks makes it news; the same details in other
        words ("Reminder: the Oslo flight SK 4615 leaves at 07:20" after "My flight to Oslo is SK 4615 ...")
        are a paraphrase at a lower similarity."""
        mine, theirs = detail_terms(text), detail_terms(near["text"])
        if not mine <= theirs:
            return False
        if near["similarity"] >= self.cfg.corroborate_similarity:
            return True
        return bool(mine) and mine == theirs and near["similarity"] >= self.cfg.paraphrase_similarity

    def _against_store(self, d: Draft, vec: npt.ArrayLike, scope: str, status: str, conf: float) -> Outcome | None:
        near = neighbours(self.store, vec, d.type, scope, k=5)
        fp = fingerprint(d.text)
        same = [n for n in near if n["fingerprint"] == fp or self._paraphrase(d.text, n)]
        if same:
            best = max(same, key=lambda n: (n["status"] in ("candidate", "active"), n["similarity"]))
            if best["status"] not in ("candidate", "active"):
                return Outcome("skipped", f"already {best['status']} ({best['id']})", best["id"], d)
            new_ids = [e for e in d.evidence_ids if e not in (best["provenance"] or [])]
            if not new_ids:
                return Outcome("skipped", "already known from this evidence", best["id"], d)
            self.store.update_memory(best["id"], actor=self.actor, provenance_add=new_ids,
                                     confidence=min(1.0, float(best["confidence"]) + self.cfg.corroborate_boost))
            return Outcome("corroborated", f"paraphrase (similarity {best['similarity']:.2f})", best["id"], d)
        subj = subject_key(d)
        if not subj:
            return None
        old = next((n for n in near if n["status"] == "active" and subject_key(n) == subj
                    and n["similarity"] >= self.cfg.supersede_similarity), None)
        if old is None:
            return None
        if old["user_edited"] or old["pinned"] or status != "active":
            why = "edited or pinned by the person" if (old["user_edited"] or old["pinned"]) else "not trusted enough"
            new = self._spec(d, scope, "candidate", conf)
            created = self.store.add_memories([new], actor=self.actor)[0]
            record_derivations(self.store, [(created["id"], e, d.type) for e in d.evidence_ids], self.actor)
            return Outcome("candidate", f"changes {old['id']} ({why}); left for review", created["id"], d, old["id"])
        _, created = self.store.supersede(old["id"], self._spec(d, scope, "active", conf), actor=self.actor)
        record_derivations(self.store, [(created["id"], e, d.type) for e in d.evidence_ids], self.actor)
        return Outcome("superseded", f"new value for '{subj}'", created["id"], d, old["id"])

    def _spec(self, d: Draft, scope: str, status: str, conf: float) -> MemorySpec:
        return MemorySpec(text=d.text, type=d.type, scope=scope, details=d.details, status=status, confidence=conf,
                          salience=0.5, provenance=list(d.evidence_ids), origin=f"{self.actor}:{d.engine}")

    def _create(self, pending: list[tuple[Draft, np.ndarray, str, float]], scope: str) -> list[Outcome]:
        if not pending:
            return []
        specs = [self._spec(d, scope, status, conf) for d, _, status, conf in pending]
        rows = self.store.add_memories(specs, actor=self.actor)
        record_derivations(self.store, [(r["id"], e, r["type"]) for r in rows for e in r["provenance"]], self.actor)
        return [Outcome("created" if r["status"] == "active" else "candidate", "new", r["id"], d)
                for r, (d, _, _, _) in zip(rows, pending, strict=True)]


def _memory_of(outcomes: list[Outcome]) -> Callable[[str | None], str | None]:
    """draft key → the memory it became (created, confirmed or merged into another draft's)."""
    ids, alias = {}, {}
    for o in outcomes:
        d = o.draft
        if d is None or not d.key:
            continue
        if o.memory_id and (o.action != "skipped" or o.reason.startswith("already known")):
            ids[d.key] = o.memory_id
        elif d.same_as:
            alias[d.key] = d.same_as

    def resolve(key: str | None) -> str | None:
        for _ in range(len(alias) + 1):  # alias chains are short; the bound makes a loop impossible
            if key is None or key in ids:
                return ids.get(key) if key else None
            key = alias.get(key)
        return None

    return resolve


def link_outcomes(store: Store, outcomes: list[Outcome], actor: str) -> list[dict]:
    """Write the edges of a batch: the drafts' own links (cue words, the LLM), UPDATES from a memory to the
    one it superseded, CONTRADICTS from a candidate to the active memory it would change. Never fails a batch."""
    from memory.errors import MiradorError
    from memory.graph.relations import CONTRADICTS, UPDATES, EdgeSpec, add_relations

    resolve = _memory_of(outcomes)
    by_key = {o.draft.key: o.draft for o in outcomes if o.draft is not None and o.draft.key}
    specs = []
    for o in outcomes:
        d = o.draft
        if d is None:
            continue
        origin = f"{actor}:{d.engine}"
        if o.previous_id and o.memory_id and o.action in ("superseded", "candidate"):
            rel, conf = (UPDATES, 0.8) if o.action == "superseded" else (CONTRADICTS, 0.6)
            specs.append(EdgeSpec(o.memory_id, rel, o.previous_id, list(d.evidence_ids), conf, origin))
        src = resolve(d.key) if d.key else None
        for rel, other, conf in d.links:
            dst = resolve(other)
            if src and dst and src != dst:
                prov = list(dict.fromkeys(d.evidence_ids + (by_key[other].evidence_ids if other in by_key else [])))
                specs.append(EdgeSpec(src, rel, dst, prov, conf, origin))
    if not specs:
        return []
    try:
        return add_relations(store, specs, actor=actor)
    except MiradorError as e:  # an end forgotten meanwhile: the memories stand, the edge is dropped
        log.warning("relations of this batch not written: %s", e)
        return []
