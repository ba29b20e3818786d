"""Extraction: unextracted evidence → typed memories with provenance (docs/architecture.md "Flows").

Evidence is read in capture order and cut into batches of one scope, one app and one source
kind, close together in time. By default (engine auto) each batch goes to the statement engine
(memory/consolidation/verbatim.py: the evidence's own sentences, judged by MiniLM, kept verbatim);
engine llm sends it to the LLM (few-shot prompt + JSON grammar), and engine rules, or an LLM that
is missing or fails, to the rule-based extractor. The write policy
(memory/consolidation/write_policy.py) decides what each draft becomes. Screen text is untrusted input:
from it extraction only creates candidates or corroborates. Then the batch is marked extracted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memory.consolidation.prompts import SCHEMA, build_prompt, parse_output
from memory.consolidation.rules import Draft, rule_extract
from memory.consolidation.write_policy import WritePolicy
from memory.store import filters as F
from memory.store.audit import utcnow

log = logging.getLogger(__name__)

ACTOR = "extractor"
_EV_COLS = ["id", "captured_at", "source", "app", "window", "speaker", "scope", "text"]


@dataclass
class ExtractionReport:
    """What one extraction run did."""

    evidence: int = 0
    batches: int = 0
    llm_calls: int = 0
    llm_failures: int = 0
    engines: dict = field(default_factory=dict)  # batches per engine (llm, rules)
    created: int = 0  # active
    candidates: int = 0
    corroborated: int = 0
    superseded: int = 0
    relations: int = 0  # edges written between memories (memory/graph/relations.py)
    skipped: int = 0
    skip_reasons: dict = field(default_factory=dict)
    noise_rows: int = 0  # evidence rows the statement engine's row gate read as noise throughout: no draft from them
    memory_ids: list[str] = field(default_factory=list)
    seconds: float = 0.0
    model: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready."""
        return asdict(self)


class JsonCompleter(Protocol):
    """What the extractor asks of a model: models.llm.LLM, or the scheduler's stop-aware wrapper of one."""

    def complete_json(self, prompt: str, schema: dict[str, Any]) -> Completion: ...


class Extractor:
    """Turns one batch of evidence rows into drafts: the LLM when it works, the rules otherwise."""

    def __init__(self, llm: JsonCompleter | None = None, engine: str = "auto", max_chars: int = 500,
                 statements: StatementEngine | None = None) -> None:
        self.llm, self.engine, self.max_chars = llm, engine, max_chars
        self.statements = statements  # a StatementEngine (engine auto/statements)
        self.llm_calls = self.llm_failures = 0
        self._llm_broken = False

    @property
    def model_name(self) -> str | None:
        """Name of the loaded model, if any."""
        if self.statements is not None:
            return f"statements ({self.statements.judged_by})"
        info = getattr(self.llm, "info", None)
        return getattr(info, "name", None)

    @property
    def noise_rows(self) -> int:
        """Evidence rows this extractor has read as noise throughout so far (the statement engine's row gate)."""
        return self.statements.noise_rows if self.statements is not None else 0

    def close(self) -> None:
        """Stop the model's worker process when a one-shot command is done with it (models.llm.LLM has close();
        the scheduler's stop-aware wrapper has none: its owner closes the model it wraps)."""
        close = getattr(self.llm, "close", None)
        if close is not None:
            close()

    def drafts(self, items: list[dict]) -> tuple[list[Draft], str]:
        """(drafts, engine used) for one batch."""
        if self.statements is not None:
            return self.statements.drafts(items), "statements"
        if self.engine != "rules" and self.llm is not None and not self._llm_broken:
            got = self._llm_drafts(items)
            if got is not None:
                return got, "llm"
        return rule_extract(items), "rules"

    def _llm_drafts(self, items: list[dict]) -> list[Draft] | None:
        from models.llm import LLMError
        from models.locate import ModelNotFound

        assert self.llm is not None  # drafts() asks the LLM only when there is one
        self.llm_calls += 1
        try:
            out = self.llm.complete_json(build_prompt(items, self.max_chars), SCHEMA)
        except (LLMError, ModelNotFound) as e:
            self.llm_failures += 1
            if isinstance(e, ModelNotFound) or "could not load" in str(e):
                self._llm_broken = True  # no point retrying a missing model for every batch
            log.warning("LLM extraction failed, using rules for this batch: %s", e)
            return None
        if out.data is None:
            self.llm_failures += 1
            log.warning("LLM output cut short (%s, %.1fs); using rules for this batch",
                        "timeout" if out.timed_out else out.finish_reason, out.seconds)
            return None
        drafts, dropped = parse_output(out.data, items)
        if dropped:
            log.info("dropped %d LLM drafts: %s", len(dropped), ", ".join(sorted(set(dropped))))
        # Rules still catch links, paths and commands a small model misses or mangles, and cover
        # rows the model produced nothing for (a small model often answers for one row of a batch).
        cited = {e for d in drafts for e in d.evidence_ids}
        # Rule drafts tied by a cue word ("because", "fixed by") come along too: the edge needs both ends.
        kinds = {"url", "path", "command"}
        rules = rule_extract(items)
        linked = {k for d in rules for _, k, _ in d.links}
        return drafts + [d for d in rules if d.kind in kinds or d.links or d.key in linked
                         or d.evidence_ids[0] not in cited]


if TYPE_CHECKING:
    from collections.abc import Iterable

    from memory.config import Config
    from memory.consolidation.verbatim import StatementEngine
    from memory.store.core import Store
    from models.llm import LLM, Completion

_shared: dict[tuple, LLM] = {}
_shared_lock = threading.Lock()


def shared_llm(config: Config, home: Path) -> LLM:
    """One LLM per settings per process (loading weights is the slow part)."""
    from models.llm import LLM

    x, m = config.extraction, config.models
    key = (str(m.llm_path), str(home), x.llm_threads, x.llm_batch_threads, x.llm_context, x.llm_timeout_seconds, x.llm_instruct,
           x.llm_isolated, x.llm_max_tokens)
    with _shared_lock:
        if key not in _shared:
            # New settings for this store replace the old LLM: retire it, or its worker process keeps
            # the previous model in memory for as long as the app runs.
            for old in [k for k in _shared if k[1] == key[1]]:
                _shared.pop(old).retire()
            _shared[key] = LLM(m.llm_path, Path(home) / "models", n_threads=x.llm_threads,
                               n_threads_batch=x.llm_batch_threads, n_ctx=x.llm_context,
                               timeout=x.llm_timeout_seconds, instruct=x.llm_instruct, max_tokens=x.llm_max_tokens,
                               isolated=x.llm_isolated)
        return _shared[key]


def make_extractor(store: Store, engine: str | None = None, llm: JsonCompleter | None = None) -> Extractor:
    """The extractor the config asks for (engine auto|statements|llm|rules)."""
    x = store.config.extraction
    engine = engine or x.engine
    if engine in ("auto", "statements") and llm is None:
        from memory.consolidation.verbatim import StatementEngine

        emb = store.embedder
        return Extractor(engine=engine, max_chars=x.max_chars_per_item,
                         statements=StatementEngine(emb.embed, emb.name, max_chars=x.statement_max_chars))
    if engine != "rules" and llm is None:
        llm = shared_llm(store.config, store.home)
    return Extractor(llm=llm if engine != "rules" else None, engine=engine, max_chars=x.max_chars_per_item)


def pending_count(store: Store) -> int:
    """Evidence rows not yet extracted."""
    return store.count("evidence", F.is_null("extracted_at"), local=True)


def load_evidence(store: Store, all_evidence: bool, limit: int | None,
                  scopes: Iterable[str] | None = None) -> list[dict]:
    """Evidence to extract, oldest first (every row with all_evidence, else extracted_at null); scopes: only
    rows in these scopes and below (None: every scope)."""
    # This device's capture only (local=True below): another device extracts the evidence it captured, and a
    # shared copy of it here is never marked extracted.
    where = F.and_(None if all_evidence else F.is_null("extracted_at"), F.scope_in(scopes))
    if limit:
        # After a large import most rows are pending: choose the oldest by id and time alone, then read
        # the full rows of those only, instead of every pending row's text.
        keys = store.scan("evidence", where, ["id", "captured_at"], local=True).to_pylist()
        keys.sort(key=lambda r: (r["captured_at"], r["id"]))
        ids = [r["id"] for r in keys[:limit]]
        # Still under the filter: a row another process extracted meanwhile is not taken twice.
        rows = list(store.get_many("evidence", ids, _EV_COLS, where=where, local=True).values())
    else:
        rows = store.rows("evidence", where, _EV_COLS, local=True)
    rows.sort(key=lambda r: (r["captured_at"], r["id"]))
    return rows


def batches(rows: list[dict], size: int, window: timedelta) -> list[list[dict]]:
    """Cut rows (oldest first) into batches of one scope, app and source, at most `window` apart."""
    out: list[list[dict]] = []
    open_: dict[tuple, list[dict]] = {}
    for r in rows:
        key = (r["scope"], r["app"] or "", r["source"])
        cur = open_.get(key)
        if cur and (len(cur) >= size or r["captured_at"] - cur[-1]["captured_at"] > window):
            out.append(cur)
            cur = None
        if cur is None:
            cur = open_[key] = []
        cur.append(r)
    out.extend(b for b in open_.values() if b)
    out.sort(key=lambda b: b[0]["captured_at"])
    return out


def mark_extracted(store: Store, ids: list[str]) -> None:
    """Set extracted_at on these evidence rows (one update)."""
    if not ids:
        return
    store.mark_extracted(ids, utcnow())


def run_extraction(store: Store, *, all_evidence: bool = False, extractor: Extractor | None = None,
                   limit: int | None = None, scopes: Iterable[str] | None = None) -> ExtractionReport:
    """Extract memories from pending evidence (or all of it; scopes: only in these) and return what happened."""
    x = store.config.extraction
    start = time.monotonic()
    rows = load_evidence(store, all_evidence, None if all_evidence else (limit or x.max_items_per_run), scopes)
    report = ExtractionReport(evidence=len(rows))
    if not rows:
        return report
    extractor = extractor or make_extractor(store)
    policy = WritePolicy(store, x, actor=ACTOR)
    engines: Counter = Counter()
    reasons: Counter = Counter()
    noise_before = extractor.noise_rows
    for batch in batches(rows, x.batch_size, timedelta(minutes=x.batch_window_minutes)):
        drafts, engine = extractor.drafts(batch)
        engines[engine] += 1
        result = policy.apply(drafts, {r["id"]: r for r in batch}, batch[0]["scope"])
        for o in result.outcomes:
            if o.action == "skipped":
                reasons[o.reason.split(" (")[0]] += 1
            elif o.memory_id:
                report.memory_ids.append(o.memory_id)
        c = result.counts()
        report.created += c.get("created", 0)
        report.candidates += c.get("candidate", 0)
        report.corroborated += c.get("corroborated", 0)
        report.superseded += c.get("superseded", 0)
        report.relations += len(result.relations)
        report.skipped += c.get("skipped", 0)
        mark_extracted(store, [r["id"] for r in batch])
        report.batches += 1
    report.engines, report.skip_reasons = dict(engines), dict(reasons)
    report.llm_calls, report.llm_failures = extractor.llm_calls, extractor.llm_failures
    report.model = extractor.model_name
    report.noise_rows = extractor.noise_rows - noise_before
    report.seconds = round(time.monotonic() - start, 3)
    log.info("extraction: %d evidence in %d batches → %d active, %d candidates, %d corroborated, %d superseded, "
             "%d skipped, %d rows read as noise (%.1fs)", report.evidence, report.batches, report.created,
             report.candidates, report.corroborated, report.superseded, report.skipped, report.noise_rows,
             report.seconds)
    return report
