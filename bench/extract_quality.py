"""Extraction quality on the labelled set in bench/data/extraction/: prints one JSON object.

Each item of the chosen split becomes one evidence row (source, app, window, captured_at as
labelled) in a fresh store; then the scheduler's extraction job (memory/consolidation/scheduler.py
job_extract) runs exactly as it does in the app, and the memories it wrote are read back with
their provenance (the evidence ids each derives from) and scored against the labels:

- fact_recall: share of expected facts for which one memory derived from that item holds all the
  fact's key terms (case-insensitive, whitespace-normalised);
- typed_recall: the same, and the memory's type is one of the fact's acceptable types;
- noise_memories: memories derived from a noise item (one labelled with no facts);
- unsupported_rate: share of memories holding a number, date or capitalised proper name that is
  absent from the text of the evidence they derive from (invented detail); a capitalised word
  that starts a sentence is not checked, since it may be an ordinary word;
- memories_per_fact: memories derived from fact-bearing items / expected facts (duplication);
- typed_ceiling: the typed recall if every memory took the one type acceptable to most of the facts it
  holds: what a perfect type model would reach with these memories (a memory has one type);
- type_confusion (per source): for each set of acceptable types, how many facts got which type (an
  acceptable one when any memory holding the fact has one), or "missed";
- items_per_min: evidence items through the job per minute (model load excluded: the app keeps
  its model loaded), and the same figures per source and per kind.

    .venv/bin/python bench/extract_quality.py [--split dev|train|heldout|heldout2|all] [--limit N] [--engine auto|statements|llm|rules] [--no-weights]

The annotation guide is bench/data/extraction/README.md. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

DATA = Path(__file__).resolve().parent / "data" / "extraction"
SOURCES = ("audio", "screen", "manual", "import")
TYPES = ("episodic", "semantic", "procedural", "resource", "core")
FIELDS = ("id", "split", "source", "app", "window", "kind", "captured_at", "text", "facts")

# Words that start with a capital in ordinary extracted text without naming anything: a memory
# that says "The user ..." or "I ..." invents no name.
_COMMON_CAPS = {
    "i", "i'm", "i've", "i'd", "i'll", "the", "a", "an", "user", "user's", "they", "we", "he", "she", "it", "this",
    "that", "there", "these", "those", "to", "in", "on", "at", "for", "from", "with", "and", "or", "but", "if",
    "when", "my", "our", "his", "her", "their", "its", "note", "notes", "todo", "deploy", "run", "use", "meeting",
}
_NUM = re.compile(r"\d+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’\-]*")
_TOKEN = re.compile(r"[^\s,;()\[\]\"]+")  # a word, or a URL / id / path as a whole
_DIGIT_SEP = re.compile(r"(?<=\d)[,.\s'’](?=\d{3}\b)")
_SENT_START = re.compile(r"(^|[.!?:;\n•\-–—\"(\[]\s*)$")


SPLITS = ("train", "dev", "heldout", "heldout2")
# Splits nothing may train or tune on; each lives in a file of its own name and "all" leaves it out.
HELD_OUT = ("heldout", "heldout2")


def load_items(split: str = "dev", folder: Path = DATA) -> list[dict]:
    """Items of the split, in a fixed order that mixes kinds (so --limit samples them all).

    "all" is train and dev only: the held-out splits (heldout.jsonl, heldout2.jsonl) are read only when
    asked for by name, so nothing that trains or tunes on "all" can see them by accident."""
    if split not in (*SPLITS, "all"):
        raise ValueError(f"unknown split {split!r}; one of {', '.join(SPLITS)} or all")
    items = []
    for path in sorted(folder.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as e:
                raise SystemExit(f"error: {path.name}:{n} is not valid JSON ({e}); fix that line") from e
            if item["split"] == split or split == "all" and item["split"] not in HELD_OUT:
                items.append(item)
    items.sort(key=lambda it: hashlib.sha1(it["id"].encode()).hexdigest())
    return items


def norm(text: str) -> str:
    """Lower case, one space between words (OCR and transcripts break lines anywhere)."""
    return " ".join(str(text).lower().split())


def holds(memory_text: str, keys: list[str]) -> bool:
    """Every key term survives in the memory text (case-insensitive, whitespace-normalised)."""
    t = norm(memory_text)
    return all(norm(k) in t for k in keys)


def unsupported_terms(memory_text: str, evidence_text: str) -> list[str]:
    """Numbers, dates and capitalised names in the memory that its evidence does not contain."""
    ev = norm(evidence_text)
    ev_nums = set(_NUM.findall(ev)) | set(_NUM.findall(_DIGIT_SEP.sub("", ev)))  # "1,240" also as "1240"
    out = [n for n in _NUM.findall(memory_text) if n not in ev_nums and n.lstrip("0") not in ev_nums]
    for m in _TOKEN.finditer(memory_text):
        w = re.sub(r"['’]s$", "", m.group(0).rstrip(".,;:!?)]\"'’")).strip("'’-")  # "Priya's" names Priya
        if not _WORD.fullmatch(w) or not w[0].isupper() or w.lower() in _COMMON_CAPS:
            continue  # not a name: a URL, an id, a path (their digits are checked above) or a common word
        if _SENT_START.search(memory_text[: m.start()]):
            continue  # a capital at the start of a sentence names nothing by itself
        if not re.search(rf"(?<![a-z0-9]){re.escape(w.lower())}(?![a-z0-9])", ev):
            out.append(w)
    return out


def best_types(texts: list[str], facts: list[dict]) -> list[str | None]:
    """Per memory text, the type acceptable to most of the item's facts it holds (None when it holds none)."""
    out: list[str | None] = []
    for text in texts:
        votes = Counter(t for f in facts if holds(text, f["keys"]) for t in f["types"])
        out.append(max(TYPES, key=lambda t: votes[t]) if votes else None)
    return out


def score(items: list[dict], memories: list[dict], ev_id_of: dict[str, str]) -> dict:
    """The figures for these items, given the memories (with provenance) and evidence row id → item id."""
    by_item: dict[str, list[dict]] = defaultdict(list)
    for m in memories:
        for p in m.get("provenance") or []:
            if p in ev_id_of:
                by_item[ev_id_of[p]].append(m)
    noise_ids = {it["id"] for it in items if not it["facts"]}
    fact_ids = {it["id"] for it in items if it["facts"]}
    text_of = {it["id"]: it["text"] for it in items}
    facts = found = typed = ceiling = 0
    missed = []
    confusion: dict = defaultdict(lambda: defaultdict(int))
    for it in items:
        mems = by_item.get(it["id"], [])
        best = best_types([m["text"] for m in mems], it["facts"])
        for f in it["facts"]:
            facts += 1
            hits = [m for m in mems if holds(m["text"], f["keys"])]
            found += bool(hits)
            typed += any(m["type"] in f["types"] for m in hits)
            ceiling += any(b in f["types"] for m, b in zip(mems, best, strict=True) if holds(m["text"], f["keys"]))
            # acceptable types → the type given (an acceptable one if any memory holding it has one), or "missed"
            given = next((m["type"] for m in hits if m["type"] in f["types"]), hits[0]["type"] if hits else "missed")
            confusion["/".join(sorted(f["types"]))][given] += 1
            if not hits:
                missed.append({"id": it["id"], "keys": f["keys"]})
    mine = [m for m in memories if any(ev_id_of.get(p) in text_of for p in m.get("provenance") or [])]
    unsupported = []
    for m in mine:
        ev = "\n".join(text_of[ev_id_of[p]] for p in m["provenance"] if ev_id_of.get(p) in text_of)
        bad = unsupported_terms(m["text"], ev)
        if bad:
            unsupported.append({"text": m["text"], "terms": bad})
    from_noise = [m for m in mine if any(ev_id_of.get(p) in noise_ids for p in m["provenance"])]
    from_facts = [m for m in mine if any(ev_id_of.get(p) in fact_ids for p in m["provenance"])]
    return {
        "items": len(items), "noise_items": len(noise_ids), "facts": facts, "memories": len(mine),
        "fact_recall": round(found / facts, 3) if facts else None,
        "typed_recall": round(typed / facts, 3) if facts else None,
        "typed_ceiling": round(ceiling / facts, 3) if facts else None,
        "noise_memories": len(from_noise),
        "unsupported_rate": round(len(unsupported) / len(mine), 3) if mine else 0.0,
        "memories_per_fact": round(len(from_facts) / facts, 3) if facts else None,
        "type_confusion": {k: dict(sorted(v.items())) for k, v in sorted(confusion.items())},
        "_missed": missed, "_unsupported": unsupported, "_noise": [m["text"] for m in from_noise],
    }


def breakdown(items: list[dict], memories: list[dict], ev_id_of: dict[str, str], field: str,
              confusion: bool = False) -> dict:
    """score() per value of an item field (source, kind), without the example lists; the type confusion
    (acceptable types → type given, or "missed") only where asked for (per source)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for it in items:
        groups[it[field]].append(it)
    return {k: {n: v for n, v in score(g, memories, ev_id_of).items()
                if not n.startswith("_") and (confusion or n != "type_confusion")}
            for k, g in sorted(groups.items())}


class _JobLog(logging.Handler):
    """Counts what the extraction job logs: batches, and batches the LLM could not answer (rules used)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.batches = self.llm_fallbacks = 0

    def emit(self, record: logging.LogRecord) -> None:
        msg = str(record.msg)
        if msg.startswith("extraction:") and record.args:
            self.batches += int(record.args[1])
        elif record.levelno >= logging.WARNING and "using rules" in msg:
            self.llm_fallbacks += 1


def run(items: list[dict], engine: str, weights: bool = True) -> dict:
    """Write the items as evidence in a temp store, run the scheduler's extraction job, score the result.

    weights=False: the statement engine judges by its rule scores alone, as it does when the store's
    embedder is not the one its weights were fitted with."""
    from memory.consolidation.extraction import shared_llm
    from memory.consolidation.scheduler import job_extract
    from memory.store.core import EvidenceSpec, Store

    with tempfile.TemporaryDirectory() as home:
        store = Store(Path(home))
        store.config.extraction.engine = engine
        # More items than a scheduled run takes: the job would stop after max_items_per_run.
        store.config.extraction.max_items_per_run = max(store.config.extraction.max_items_per_run, len(items))
        model, load_s = None, 0.0
        if engine in ("auto", "statements"):
            from memory.consolidation import salience, verbatim

            if not weights:
                verbatim.load_model = lambda: None  # the engine then judges by rule scores
            model = "statements, judged by " + ("MiniLM salience weights" if weights and salience.load_model() else "rules")
        if engine == "llm":
            t0 = time.monotonic()
            try:  # load (and assemble the bundled GGUF) before timing: the app keeps its model loaded
                model = shared_llm(store.config, store.home).load().name
            except Exception as e:  # the job falls back to the rules, as in the app
                print(f"LLM not available ({e}); the job will use the rules", file=sys.stderr)
            load_s = time.monotonic() - t0
        store.embedder.embed(["warm up"])
        specs = [EvidenceSpec(text=it["text"], source=it["source"], app=it["app"], window=it["window"],
                              captured_at=datetime.fromisoformat(it["captured_at"])) for it in items]
        rows = store.add_evidence_batch(specs)
        ev_id_of = {r["id"]: it["id"] for r, it in zip(rows, items, strict=True)}
        print(f"{len(items)} evidence items written; extracting with engine={engine} ...", file=sys.stderr)
        joblog, xlog = _JobLog(), logging.getLogger("memory.consolidation.extraction")
        xlog.addHandler(joblog)
        level = xlog.level
        xlog.setLevel(logging.INFO)
        t0 = time.monotonic()
        try:
            detail = job_extract(store)
        finally:
            secs = time.monotonic() - t0
            xlog.removeHandler(joblog)
            xlog.setLevel(level)
        print(f"extraction: {detail} in {secs:.1f}s", file=sys.stderr)
        # Everything the report needs is read here, while the temp store exists.
        memories = store.list("memory", limit=1_000_000)
        statuses = defaultdict(int)
        for m in store.list("memory", statuses=[], limit=1_000_000):
            statuses[m["status"]] += 1
        if engine == "llm":
            try:
                shared_llm(store.config, store.home).close()
            except Exception:
                pass
    overall = score(items, memories, ev_id_of)
    out = {"benchmark": "extract_quality", "engine": engine, "model": model,
           **{k: v for k, v in overall.items() if not k.startswith("_") and k != "type_confusion"},
           "items_per_min": round(len(items) / secs * 60, 2) if secs else None,
           "extraction_seconds": round(secs, 2), "model_load_seconds": round(load_s, 2), "job": detail,
           "batches": joblog.batches, "llm_fallback_batches": joblog.llm_fallbacks,
           "memory_statuses": dict(statuses),
           "per_source": breakdown(items, memories, ev_id_of, "source", confusion=True),
           "per_kind": breakdown(items, memories, ev_id_of, "kind"),
           "examples": {"missed": [f"{m['id']}: {' | '.join(m['keys'])}" for m in overall["_missed"][:15]],
                        "unsupported": [f"{u['text']}  [{', '.join(u['terms'])}]" for u in overall["_unsupported"][:10]],
                        "from_noise": overall["_noise"][:10]}}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=[*SPLITS, "all"], default="dev",
                    help="heldout, heldout2: evidence never trained or tuned on (measure it once, at the end); "
                         "heldout2 was written by another author after issue 44's first round")
    ap.add_argument("--limit", type=int, default=0, help="only the first N items (a fixed mix of kinds)")
    ap.add_argument("--engine", choices=["auto", "statements", "llm", "rules"], default="auto")
    ap.add_argument("--no-weights", action="store_true",
                    help="statement engine without its fitted weights (the rules judge), as with another embedder")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    items = load_items(a.split)
    if a.limit:
        items = items[: a.limit]
    if not items:
        print(f"error: no items in split {a.split!r} under {DATA}; check the data folder", file=sys.stderr)
        return 2
    out = {"split": a.split, **run(items, a.engine, weights=not a.no_weights)}
    print(json.dumps(out, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
