"""Fit the statement salience and type models (memory/consolidation/salience.py) on Mirador's own set.

Only the `train` split of bench/data/extraction/ (written for this project, so the weights may ship
under the project's licence) is used. Each item is cut into statements exactly as extraction cuts
it; a statement is "worth keeping" when it holds a key term of one of the item's facts, and its
type is that fact's first acceptable type. Noise items give only negatives.

Cross-validation over items (5 folds) picks the regularisation and the keep threshold: the best
fact recall less NOISE_COST per memory drawn from a noise item of a held-out fold, measured end to end through
statements.compose/render and the bench's own scoring (bench/extract_quality.py's `holds`).
Prints one JSON object with the CV figures; --out writes the weights.

    .venv/bin/python bench/train_salience.py [--out memory/consolidation/data/salience.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from extract_quality import holds, load_items, norm  # noqa: E402

from memory.consolidation.salience import FEATURES, TYPES, features, vetoes  # noqa: E402
from memory.consolidation.statements import compose, render, segment_row  # noqa: E402
from memory.consolidation.verbatim import whole_records  # noqa: E402

CS = (0.1, 0.3, 1.0)
NOISE_COST = 0.015
# A sign seen on a handful of statements must not outweigh the rest: standardising a rare 0/1 sign by its
# tiny spread would give it a huge value.
STD_FLOOR = 0.3
THRESHOLDS = [round(x, 2) for x in np.arange(0.2, 0.96, 0.025)]


def dataset(items: list[dict], embedder) -> dict:
    """Statements of the items with their signs, vectors and labels."""
    segs, feats, keep, types, item_of, vetoed = [], [], [], [], [], []
    for n, it in enumerate(items):
        ss = segment_row(it["text"], it["source"])
        lines = len({s.line for s in ss})
        for s in ss:
            held = [f for f in it["facts"] if any(norm(k) in norm(s.text) for k in f["keys"])]
            segs.append(s)
            feats.append(features(s, it["source"], lines))
            keep.append(int(bool(held)))
            types.append(sorted({t for f in held for t in f["types"]}))
            item_of.append(n)
        vetoed.extend(vetoes(ss))
    vecs = np.asarray(embedder.embed([s.text for s in segs]), dtype=np.float32)
    return {"segs": segs, "feats": np.asarray(feats, dtype=np.float32), "vecs": vecs, "keep": np.asarray(keep),
            "types": types, "item": np.asarray(item_of), "vetoed": np.asarray(vetoed)}


def design(d: dict, mean, std, idx=None) -> np.ndarray:
    idx = np.arange(len(d["keep"])) if idx is None else idx
    return np.hstack([d["vecs"][idx], (d["feats"][idx] - mean) / std])


def fit(d: dict, idx: np.ndarray, c: float):
    """(mean, std, keep model, type models): keep on statements no noise sign vetoes; one model per type
    for "is this type acceptable", on the statements that hold a fact."""
    from sklearn.linear_model import LogisticRegression

    idx = idx[~d["vetoed"][idx]]
    mean = d["feats"][idx].mean(axis=0)
    std = np.maximum(d["feats"][idx].std(axis=0), STD_FLOOR)
    x = design(d, mean, std, idx)
    keep = LogisticRegression(C=c, max_iter=3000, class_weight="balanced").fit(x, d["keep"][idx])
    pos = idx[d["keep"][idx] == 1]
    xp = design(d, mean, std, pos)
    typ = {}
    for t in TYPES:
        y = np.asarray([t in d["types"][i] for i in pos], dtype=int)
        if 5 <= y.sum() < len(y):
            typ[t] = LogisticRegression(C=c, max_iter=3000).fit(xp, y)
    return mean, std, keep, typ


def predict(d: dict, mean, std, keep, typ, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep scores (0 where a noise sign vetoes) and types for these statements."""
    x = design(d, mean, std, idx)
    scores = keep.predict_proba(x)[:, 1] * ~d["vetoed"][idx]
    names = list(typ)
    logits = np.stack([typ[t].decision_function(x) for t in names], axis=1)
    return scores, np.asarray([names[j] for j in logits.argmax(axis=1)], dtype=object)


def evaluate(items: list[dict], d: dict, idx_items: list[int], scores: np.ndarray, types: np.ndarray,
             threshold: float) -> dict:
    """fact/typed recall, noise memories and memories per fact for these items at this threshold."""
    facts = found = typed = noise = mems = 0
    for n in idx_items:
        it = items[n]
        rows = np.where(d["item"] == n)[0]
        segs = [d["segs"][i] for i in rows]
        keep = whole_records(segs, [bool(scores[i] >= threshold) for i in rows], [bool(d["vetoed"][i]) for i in rows])
        groups = compose(segs, keep)
        out = []
        for g in groups:
            body = [j for j in g if not segs[j].is_title] or g
            best = max(body, key=lambda j: scores[rows[j]])
            out.append((render(segs, g), types[rows[best]]))
        if not it["facts"]:
            noise += len(out)
            continue
        mems += len(out)
        for f in it["facts"]:
            facts += 1
            hits = [t for text, t in out if holds(text, f["keys"])]
            found += bool(hits)
            typed += any(t in f["types"] for t in hits)
    return {"fact_recall": found / max(facts, 1), "typed_recall": typed / max(facts, 1), "noise_memories": noise,
            "memories_per_fact": mems / max(facts, 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="write the fitted weights here")
    ap.add_argument("--folds", type=int, default=5)
    args = ap.parse_args(argv)
    import tempfile

    from memory.store.core import Store

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as home:
        emb = Store(Path(home)).embedder  # what a new store embeds with, so what extraction will see
    items = load_items("train")
    d = dataset(items, emb)
    n_items = len(items)
    fold_of = np.arange(n_items) % args.folds
    rng = np.random.default_rng(7)
    rng.shuffle(fold_of)
    best = None
    report = {}
    for c in CS:
        scores = np.zeros(len(d["keep"]))
        types = np.empty(len(d["keep"]), dtype=object)
        for k in range(args.folds):
            test_items = np.where(fold_of == k)[0]
            test = np.isin(d["item"], test_items)
            mean, std, keep, typ = fit(d, np.where(~test)[0], c)
            scores[test], types[test] = predict(d, mean, std, keep, typ, np.where(test)[0])
        rows = []
        for th in THRESHOLDS:
            r = evaluate(items, d, list(range(n_items)), scores, types, th)
            rows.append({"threshold": th, **{k: round(v, 3) for k, v in r.items()}})
        # Each memory from a noise item costs NOISE_COST of fact recall: noise is what a person notices first,
        # but a threshold that lets none through on held-out folds keeps a fraction of the facts.
        pick = max(rows, key=lambda r: (r["fact_recall"] - NOISE_COST * r["noise_memories"], r["typed_recall"]))
        report[str(c)] = {"pick": pick, "curve": rows[::4]}
        value = pick["fact_recall"] - NOISE_COST * pick["noise_memories"]
        if best is None or value > best[1]["fact_recall"] - NOISE_COST * best[1]["noise_memories"]:
            best = (c, pick)
    c, pick = best
    mean, std, keep, typ = fit(d, np.arange(len(d["keep"])), c)
    out = {"bench": "train_salience", "statements": len(d["keep"]), "positives": int(d["keep"].sum()),
           "items": n_items, "C": c, "threshold": pick["threshold"], "cv": report,
           "seconds": round(time.monotonic() - t0, 1)}
    if args.out:
        spec = {"about": "Statement salience and type for memory/consolidation/salience.py; fitted by "
                         "bench/train_salience.py on the train split of bench/data/extraction/ (Mirador's own set).",
                "embedder": emb.name, "features": list(FEATURES), "threshold": pick["threshold"],
                "feature_mean": [round(float(v), 6) for v in mean], "feature_std": [round(float(v), 6) for v in std],
                "keep": {"coef": [round(float(v), 6) for v in keep.coef_[0]], "intercept": float(keep.intercept_[0])},
                "type": {"classes": list(typ),
                         "coef": [[round(float(v), 6) for v in m.coef_[0]] for m in typ.values()],
                         "intercept": [float(m.intercept_[0]) for m in typ.values()]},
                "types_known": list(TYPES)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(spec) + "\n", encoding="utf-8")
        out["written"] = str(args.out)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
