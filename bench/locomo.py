"""LoCoMo turn-level evidence recall for Mirador's evidence search. Prints one JSON object.

Every turn becomes one evidence row through Store.add_evidence_batch (one batch per session,
captured at the session's date/time, speaker recorded, scope `locomo/<conversation>`); every
category 1-4 question with evidence is asked through memory.retrieval.search.search_evidence, the function
the MCP evidence_search tool uses. Metric (../shared/data/locomo/README.md): |evidence ∩ top-k
dia_ids| / |evidence|, averaged over questions. The store lives in a temp dir, never in the repo.

    .venv/bin/python bench/locomo.py [--data PATH] [--limit-convs N]
        [--context '{"neighbours_embed": 0}'] [--rank '{"speaker_boost": 0}']

The default install ranks evidence by its first stage alone: no reranker ships, and the embedder's
tuning (models/tuning.py) learned from synthetic conversations, so this bench's recall is out of sample.
`--reranker optional/locomo-reranker/evidence_reranker.json` adds the optional LoCoMo-trained reranker,
which learned from the dev split: with it the recall is in-sample (config.reranker.in_sample says so);
its held-out figure comes from bench/train_reranker.py --fold-embedders.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_DATA = ROOT / ".." / "shared" / "data" / "locomo" / "locomo_dev.json"
CATEGORIES = (1, 2, 3, 4)


def session_time(text: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> datetime(2023, 5, 8, 13, 56)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y")


def turn_text(turn: dict) -> str:
    """The turn as it was 'captured': its words plus the caption of an image it shared."""
    text = turn.get("text", "").strip()
    caption = (turn.get("blip_caption") or "").strip()
    return f"{text} [shared an image: {caption}]" if caption else text


def sessions(conv: dict) -> list[tuple[int, datetime, list[dict]]]:
    """(number, time, turns) for every session of a conversation, in order."""
    c = conv["conversation"]
    nums = sorted(int(k.split("_")[1]) for k in c if k.startswith("session_") and k.count("_") == 1)
    return [(n, session_time(c[f"session_{n}_date_time"]), c[f"session_{n}"]) for n in nums if c.get(f"session_{n}")]


def scope_of(conv: dict) -> str:
    return f"locomo/{conv['sample_id'].lower()}"


def ingest(store, convs: list[dict], context=None) -> int:
    """Write every turn as evidence, one batch per session; returns the row count."""
    from memory.store.core import EvidenceSpec

    n = 0
    for conv in convs:
        for num, when, turns in sessions(conv):
            specs = [EvidenceSpec(text=turn_text(t), source="import", speaker=t["speaker"], scope=scope_of(conv),
                                  captured_at=when, meta={"dia_id": t["dia_id"], "conversation": conv["sample_id"],
                                                          "session": num})
                     for t in turns if turn_text(t)]
            store.add_evidence_batch(specs, actor="import", context=context)
            n += len(specs)
    store.optimize()
    return n


def questions(conv: dict, categories: tuple[int, ...] = CATEGORIES) -> list[dict]:
    """The questions of these categories (default the scored 1-4) that have evidence, with evidence
    ids cleaned ('D8:6; D9:17' split)."""
    out = []
    for q in conv["qa"]:
        ev = evidence_ids(q.get("evidence") or [])
        if q.get("category") in categories and ev:
            out.append({"question": q["question"], "category": q["category"], "evidence": ev})
    return out


def evidence_ids(evidence) -> set[str]:
    """Turn ids from an evidence field: a list or one string, malformed ones ('D8:6; D9:17') split."""
    return {p.strip() for e in (evidence if isinstance(evidence, list) else [evidence])
            for p in str(e).split(";") if p.strip()}


def evaluate(store, convs: list[dict], rank=None) -> dict:
    """Ask every question; recall@5/@10 overall and per category, and query latency."""
    from memory.retrieval.search import search_evidence

    per: dict[int, list[tuple[float, float]]] = {c: [] for c in CATEGORIES}
    times = []
    for conv in convs:
        # Questions are asked after the conversation: relative words resolve against its last session.
        now = sessions(conv)[-1][1] + timedelta(days=1)
        for q in questions(conv):
            t0 = time.perf_counter()
            hits = search_evidence(store, q["question"], scopes=[scope_of(conv)], limit=10, now=now, rank=rank)
            times.append((time.perf_counter() - t0) * 1000)
            got = [h.row["meta"].get("dia_id") for h in hits]
            ev = q["evidence"]
            per[q["category"]].append((len(ev & set(got[:5])) / len(ev), len(ev & set(got[:10])) / len(ev)))
    everything = [x for v in per.values() for x in v]
    mean = lambda xs, i: round(sum(x[i] for x in xs) / len(xs), 4) if xs else None  # noqa: E731
    return {
        "recall@5": mean(everything, 0),
        "recall@10": mean(everything, 1),
        "per_category": {str(c): {"recall@5": mean(v, 0), "recall@10": mean(v, 1), "n": len(v)} for c, v in per.items()},
        "median_query_ms": round(statistics.median(times), 2) if times else None,
        "p95_query_ms": round(sorted(times)[int(0.95 * (len(times) - 1))], 2) if times else None,
        "n_questions": len(everything),
    }


def reranker_info(store, rank, convs: list[dict]) -> dict | None:
    """Which reranker ranked, and whether it was trained on the conversations just scored. If it was,
    the recall above is in-sample: bench/train_reranker.py reports the held-out figure."""
    from memory.retrieval.rank import reranker

    model = reranker(store, rank)
    if model is None:
        return None
    seen = set(model.meta.get("trained_on", ())) & {c["sample_id"] for c in convs}
    return {"path": model.source, "trained_on": model.meta.get("trained_on"), "in_sample": bool(seen),
            "held_out_recall": model.meta.get("held_out_recall")}


def tuning_info(store, convs: list[dict]) -> dict | None:
    """Whether the embedder's tuning (models/tuning.py) learned from the conversations just scored;
    if so this run is in-sample for it too, and bench/train_reranker.py --fold-embedders gives the
    held-out figure."""
    from models.tuning import read_meta

    if store.embedder.tuning is None:
        return None
    meta = read_meta(store.embedder.tuning)
    seen = set(meta.get("trained_on", ())) & {c["sample_id"] for c in convs}
    return {"path": str(store.embedder.tuning), "trained_on": meta.get("trained_on"), "in_sample": bool(seen)}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo_dev.json (default: %(default)s)")
    ap.add_argument("--limit-convs", type=int, default=None, help="only the first N conversations")
    ap.add_argument("--context", default="{}", help="JSON overrides of memory.store.context.ContextConfig")
    ap.add_argument("--rank", default="{}", help="JSON overrides of memory.retrieval.rank.RankConfig")
    ap.add_argument("--untuned", action="store_true", help="embed with the model as shipped (models.embedder_tuning off)")
    ap.add_argument("--tuning", type=Path, default=None,
                    help="embed with this delta (bench/train_embedder.py --out) instead of the bundled one")
    ap.add_argument("--reranker", type=Path, default=None,
                    help="rank with this reranker (bench/train_reranker.py --out; the default install has none)")
    ap.add_argument("--also-first-stage", action="store_true",
                    help="also score the same store without the reranker (adds \"first_stage\": one ingest, two variants)")
    args = ap.parse_args(argv)

    from memory.retrieval import rank as R
    from memory.store import context as C
    convs = json.loads(args.data.read_text())[: args.limit_convs]
    ctx = replace(C.DEFAULT, **json.loads(args.context))
    rank = replace(R.DEFAULT, **json.loads(args.rank))
    with tempfile.TemporaryDirectory(prefix="mirador-locomo-") as home:
        os.environ["MIRADOR_HOME"] = home
        # A throwaway store: its data key wrapped by a passphrase (sealed at rest since issue 40), never
        # the person's keyring; without one, a machine with no keyring cannot open it.
        os.environ.setdefault("MIRADOR_PASSPHRASE", "bench/locomo.py")
        from memory.store.core import Store

        if args.tuning and args.untuned:
            ap.error("--tuning and --untuned exclude each other")
        models = (["embedder_tuning = false"] if args.untuned else []) + \
            ([f"reranker_path = {json.dumps(str(args.reranker.resolve()))}"] if args.reranker else [])
        if models:
            Path(home, "config.toml").write_text("[models]\n" + "\n".join(models) + "\n")
        embedder = None
        if args.tuning:
            from models.embedder import Embedder

            embedder = Embedder(threads=2, tuning=args.tuning.resolve())
            if embedder.tuning is None:
                ap.error(f"{args.tuning} could not be applied to the bundled embedder (see the log)")
        store = Store(Path(home), embedder=embedder)
        store.embedder.embed_query("warm up")  # model load is not ingest or query time
        store.embedder.wait_ready(300)  # nor the one-off onnxruntime export of the query encoder
        t0 = time.perf_counter()
        rows = ingest(store, convs, context=ctx)
        ingest_s = time.perf_counter() - t0
        result = evaluate(store, convs, rank)
        if args.also_first_stage:
            first = evaluate(store, convs, replace(rank, rerank=False))
            result["first_stage"] = {k: first[k] for k in ("recall@5", "recall@10", "per_category", "median_query_ms")}
        # Everything the report reads from the store is taken while its home exists: once the temp
        # dir is gone, a store that re-checks its embedder record would fail writing into it.
        result.update({
            "ingest_s": round(ingest_s, 1),
            "ingest_rows": rows,
            "conversations": [c["sample_id"] for c in convs],
            "config": {"embedder": store.embedder.name, "query_encoder": store.embedder.backend,
                       "context": {k: str(v) for k, v in asdict(ctx).items()},
                       "rank": rank.describe(), "reranker": reranker_info(store, rank, convs),
                       "embedder_tuning": tuning_info(store, convs)},
        })
        del store
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
