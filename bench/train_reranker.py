"""Train the evidence reranker (memory/retrieval/rerank.py) and report how it does on conversations it
did not see. Prints one JSON object; writes the model with --out.

The default install ships no reranker: the one trained on LoCoMo (the default --data; CC BY-NC 4.0)
is optional/locomo-reranker/evidence_reranker.json, outside every package, and ones trained on
Mirador's own synthetic conversations (bench/synth_conversations.py; --data that file, --tuning the
shipped delta) lowered LoCoMo recall (docs/models.md). A model trained on LoCoMo is refused as an --out
inside a package; point models.reranker_path at one written elsewhere.

Every turn is ingested as in bench/locomo.py. For each question, the first stage's top candidates
(RankConfig.rerank_top) become one LambdaMART query group, labelled 1 for the question's evidence turns.
Leave-one-conversation-out: a model trained on the other conversations ranks each conversation, so
the reported recall is what the method does on unseen conversations, the way the shipped model will
be used. The shipped model is then trained on all of them. Each model is the sum of --bag models
trained with different bagging seeds.

With --fold-embedders DIR (bench/train_embedder.py --folds DIR), each conversation gets a store of its
own, embedded with DIR/<conversation>.npz merged in: the tuning trained without it. The features are then
what the tuned first stage finds on a conversation its embedder never saw, as the shipped embedder
meets a person's own conversations, and the held-out recall is that of the whole search.

    .venv/bin/python bench/train_reranker.py [--data PATH] [--out optional/locomo-reranker/evidence_reranker.json]
        [--fold-embedders DIR] [--seeds N] [--bag N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402

PARAMS = {  # chosen on LoCoMo dev by the held-out score; small trees, few rounds: 760 questions
    "objective": "lambdarank", "learning_rate": 0.05, "num_leaves": 7, "min_data_in_leaf": 50,
    "lambdarank_truncation_level": 20, "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1,
    "num_threads": 1, "deterministic": True, "force_row_wise": True, "verbose": -1, "seed": 1,
    # A better match never ranks lower (memory/retrieval/rerank.py MONOTONE); "intermediate" is LightGBM's less
    # restrictive way to enforce it than the default "basic" (held out R@10 0.8498 against 0.8481).
    "monotone_constraints_method": "intermediate",
}
ROUNDS = 100
# Models with different bagging seeds, their trees summed into one ensemble. Why: under the monotone
# constraints the sum of five scored held out R@10 0.8498-0.8519 (six disjoint sets of seeds, mean
# 0.851) where one model scores 0.8468-0.8524 by its seed (mean 0.8498); unconstrained, summing had
# not helped (README).
BAG = 5


def groups(store, convs: list[dict], cfg) -> list[dict]:
    """Per question: its conversation, category, evidence, the first stage's order and the top's features."""
    from memory.retrieval import rank as R
    out = []
    for conv in convs:
        now = locomo.sessions(conv)[-1][1] + timedelta(days=1)
        where = store.where("evidence", scopes=[locomo.scope_of(conv)])
        for q in locomo.questions(conv):
            stage = R.first_stage(store, q["question"], where, now, cfg)
            head, full = R.fetch_head(store, stage, cfg.rerank_top, where, [*R.RERANK_COLS, "meta"])
            top = [i for i, _, _ in head]
            dia = {i: json.loads(full[i]["meta"]).get("dia_id") for i in top}
            rest = [dia_of(store, i) for i, _, _ in stage.ranked[cfg.rerank_top: 10]]  # only when top < 10
            out.append({
                "conv": conv["sample_id"], "cat": q["category"], "ev": q["evidence"], "dia": [dia[i] for i in top],
                "rest": rest, "X": R.rerank_features(stage, top, full, cfg),
                "y": np.array([float(dia[i] in q["evidence"]) for i in top]),
            })
    return out


def build(convs: list[dict], cfg, embedder=None) -> list[dict]:
    """Ingest the conversations into a new store in a temp dir and return groups() of it."""
    with tempfile.TemporaryDirectory(prefix="mirador-rerank-") as home:
        os.environ["MIRADOR_HOME"] = home
        # A throwaway store: its data key wrapped by a passphrase (sealed at rest since issue 40), never
        # the person's keyring; without one, a machine with no keyring cannot open it.
        os.environ.setdefault("MIRADOR_PASSPHRASE", "bench/train_reranker.py")
        from memory.store.core import Store

        store = Store(Path(home), embedder=embedder)
        store.embedder.embed_query("warm up")
        store.embedder.wait_ready(300)
        locomo.ingest(store, convs)
        return groups(store, convs, cfg)


def fold_embedder(delta: Path):
    """The bundled embedder with a fold's delta merged; an error, never the untuned model, if it won't apply."""
    from models.embedder import Embedder

    emb = Embedder(threads=2, tuning=delta)
    if emb.tuning is None:
        raise SystemExit(f"{delta} could not be applied to the bundled embedder (see the log); "
                         "run bench/train_embedder.py --folds again")
    return emb


def untuned_embedder():
    from models.embedder import Embedder

    return Embedder(threads=2)


def dia_of(store, id_: str) -> str | None:
    row = store.get_many("evidence", [id_], ["id", "meta"]).get(id_)
    return json.loads(row["meta"]).get("dia_id") if row else None


def train(gs: list[dict], rounds: int = ROUNDS, params: dict | None = None):
    import lightgbm as lgb

    from memory.retrieval.rerank import FEATURES, MONOTONE

    gs = [g for g in gs if len(g["y"])]
    params = {"monotone_constraints": [MONOTONE.get(f, 0) for f in FEATURES]} | (params or PARAMS)
    data = lgb.Dataset(np.vstack([g["X"] for g in gs]), np.concatenate([g["y"] for g in gs]),
                       group=[len(g["y"]) for g in gs], feature_name=list(FEATURES))
    return lgb.train(params, data, rounds)


def bagged(gs: list[dict], rounds: int = ROUNDS, seeds=range(1, BAG + 1), meta: dict | None = None) -> dict:
    """One model per seed, as memory/retrieval/rerank.py's JSON with all their trees (so the score is their sum)."""
    from memory.retrieval.rerank import from_lightgbm

    spec = None
    for seed in seeds:
        one = from_lightgbm(train(gs, rounds, PARAMS | {"seed": seed}).dump_model(), meta)
        if spec is None:
            spec = one
        else:
            spec["trees"] += one["trees"]
    return spec


def recall(gs: list[dict], score=None) -> dict:
    """R@5/R@10 overall and per category; score(X) reorders each group's top (None: first stage)."""
    per: dict[int, list[tuple[float, float]]] = {}
    for g in gs:
        order = list(range(len(g["dia"])))
        if score is not None and order:
            s = score(g["X"])
            order.sort(key=lambda k: (-s[k], k))
        got = [g["dia"][k] for k in order] + g["rest"]
        ev = g["ev"]
        per.setdefault(g["cat"], []).append((len(ev & set(got[:5])) / len(ev), len(ev & set(got[:10])) / len(ev)))
    mean = lambda xs, i: round(sum(x[i] for x in xs) / len(xs), 4)  # noqa: E731
    every = [x for v in per.values() for x in v]
    return {"recall@5": mean(every, 0), "recall@10": mean(every, 1),
            "per_category": {str(c): {"recall@5": mean(v, 0), "recall@10": mean(v, 1), "n": len(v)}
                             for c, v in sorted(per.items())}}


def held_out(gs: list[dict], rounds: int = ROUNDS, seeds=(1,)) -> dict:
    """Each conversation ranked by a model (one per seed, summed) trained on the others; the first stage
    alongside."""
    from memory.retrieval.rerank import TreeEnsemble

    scores: dict[int, np.ndarray] = {}
    per_conv = {}
    for c in sorted({g["conv"] for g in gs}):
        ens = TreeEnsemble(bagged([g for g in gs if g["conv"] != c], rounds, seeds))  # the search's own evaluator
        mine = [g for g in gs if g["conv"] == c]
        for g in mine:
            scores[id(g["X"])] = ens.predict(g["X"])
        first, mixed = recall(mine), recall(mine, lambda X: scores[id(X)])
        per_conv[c] = {"n": len(mine), "first_stage": [first["recall@5"], first["recall@10"]],
                       "reranked": [mixed["recall@5"], mixed["recall@10"]]}
    return {"seeds": list(seeds), "first_stage": recall(gs), "reranked": recall(gs, lambda X: scores[id(X)]),
            "per_conversation": per_conv}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="locomo_dev.json (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=None, help="write the model trained on every conversation here")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--seeds", type=int, default=3, help="held-out runs, each with its own bagging seeds")
    ap.add_argument("--bag", type=int, default=BAG, help="models (bagging seeds) summed into one (default: %(default)s)")
    ap.add_argument("--fold-embedders", type=Path, default=None,
                    help="dir of leave-one-out tuned embedders, one per conversation (bench/train_embedder.py --folds)")
    ap.add_argument("--tuning", type=Path, default=None,
                    help="embed with this delta (bench/train_embedder.py --out) instead of the bundled one")
    ap.add_argument("--untuned", action="store_true", help="embed with the model as shipped (no tuning)")
    args = ap.parse_args(argv)
    if sum(map(bool, (args.tuning, args.fold_embedders, args.untuned))) > 1:
        ap.error("--tuning, --untuned and --fold-embedders exclude each other")
    if args.tuning and args.fold_embedders:
        ap.error("--tuning and --fold-embedders exclude each other")
    if args.bag < 1 or args.seeds < 1 or args.rounds < 1:
        ap.error("--bag, --seeds and --rounds must be at least 1")

    from memory.retrieval import rank as R
    from memory.retrieval import rerank
    convs = json.loads(args.data.read_text())
    packages = [ROOT / top for top in ("memory", "models", "capture", "desktop")]
    if args.out and any(p in args.out.resolve().parents for p in packages) and \
            any(not c["sample_id"].startswith("synth-") for c in convs):
        ap.error(f"{args.out} would ship in the default install: train it on bench/synth_conversations.py's "
                 "output, not on LoCoMo (CC BY-NC 4.0); write a LoCoMo-trained model elsewhere "
                 "(optional/locomo-reranker/ holds the current one)")
    cfg = replace(R.DEFAULT, rerank=False)
    t0 = time.perf_counter()
    if args.fold_embedders:
        gs = [g for c in convs for g in build([c], cfg, fold_embedder(args.fold_embedders / f"{c['sample_id']}.npz"))]
    else:
        gs = build(convs, cfg, fold_embedder(args.tuning) if args.tuning else untuned_embedder() if args.untuned else None)
    prep_s = time.perf_counter() - t0
    # Held-out run r sums the models of seeds (r-1)*bag+1 .. r*bag: runs share no seed.
    runs = [range(r * args.bag + 1, (r + 1) * args.bag + 1) for r in range(args.seeds)]
    result = {"questions": len(gs), "top": cfg.rerank_top, "rounds": args.rounds, "bag": args.bag,
              "prep_s": round(prep_s, 1), "held_out": [held_out(gs, args.rounds, seeds) for seeds in runs]}
    if args.out:
        spec = bagged(gs, args.rounds, runs[0], meta={
            "trained_on": [c["sample_id"] for c in convs], "data": args.data.name, "rounds": args.rounds,
            "bag": list(runs[0]), "top": cfg.rerank_top, "params": PARAMS, "monotone": rerank.MONOTONE,
            "first_stage": R.first_stage_settings(cfg),
            "sources": list(rerank.SOURCES),  # what it may move: chat-like rows, never screen captures
            "embedder": "tuned, leave-one-out per conversation" if args.fold_embedders else
                        f"tuned with {args.tuning.name}" if args.tuning else "untuned" if args.untuned else "store default",
            "held_out_recall": {k: [h["reranked"][k] for h in result["held_out"]] for k in ("recall@5", "recall@10")}})
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(spec, separators=(",", ":")) + "\n", encoding="utf-8")
        result["wrote"] = str(args.out)
        result["in_sample"] = recall(gs, rerank.TreeEnsemble(spec).predict)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
