"""Average tuned embedders' deltas (a "model soup") and write the result as one delta. Prints JSON.

Two tunings of the same base, trained on the same conversations by different recipes, make different
mistakes; the mean of their weight changes finds more evidence than either (README, Retrieval
quality). The mean of the deltas' changes B @ A is written as a delta like any other (models/tuning.py
merges it), of the inputs' ranks summed: exact. --rank cuts it lower (SVD), but two rank-32 tunings
averaged and cut to 32 lost the gain on one conversation of two (vector R@10 0.783 against 0.794).

    .venv/bin/python bench/average_embedders.py --out models/data/embedder_tuning.npz A.npz B.npz
    .venv/bin/python bench/average_embedders.py --folds OUT DIR_A DIR_B

--folds averages DIR_A/<conversation>.npz with DIR_B/<conversation>.npz per conversation (each a
bench/train_embedder.py --folds DIR) into OUT, and reports each input's and the average's vector-list
R@10 on the conversation left out; bench/train_reranker.py --fold-embedders OUT then measures the
whole search.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import locomo  # noqa: E402


def average(deltas: list[Path], rank: int) -> tuple[dict, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """(meta, pairs) of the deltas' mean change, at `rank` (0: the inputs' ranks summed, exact). They
    must tune the same weights of the same base and have learned from the same conversations."""
    from models.tuning import read_delta

    read = [read_delta(p) for p in deltas]
    first = read[0][0]
    for p, (meta, _pairs) in zip(deltas[1:], read[1:], strict=True):
        for key in ("base_fingerprint", "trained_on", "weights"):
            if meta.get(key) != first.get(key):
                raise SystemExit(f"{p} differs from {deltas[0]} in {key}: average deltas of one base, "
                                 "trained on the same conversations")
    rank = rank or sum(m["rank"] for m, _ in read)
    out = {}
    for name in first["weights"]:
        change = sum(b.astype(np.float64) @ a.astype(np.float64) * m["scale"] for m, ps in read for b, a in [ps[name]])
        u, sv, vt = np.linalg.svd(change / len(read), full_matrices=False)
        out[name] = ((u[:, :rank] * sv[:rank]).astype(np.float32), vt[:rank].astype(np.float32))
    meta = {k: first[k] for k in ("base_fingerprint", "trained_on", "data") if k in first}
    meta.update(scale=1.0, rank=rank, averaged=[
        {"file": p.name, **{k: m[k] for k in ("settings", "epochs", "started_from") if k in m}}
        for p, (m, _) in zip(deltas, read, strict=True)])
    return meta, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", type=Path, help="delta files (--out) or --folds dirs")
    ap.add_argument("--out", type=Path, default=None, help="write the average of these delta files here")
    ap.add_argument("--folds", type=Path, default=None, help="average these --folds dirs per conversation into here")
    ap.add_argument("--rank", type=int, default=0, help="cut the average to this rank (default: exact)")
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA, help="locomo_dev.json (default: %(default)s)")
    ap.add_argument("--held-out", default="", help="--out: JSON of the folds' held_out_vector_r10 to record")
    args = ap.parse_args(argv)
    if bool(args.out) == bool(args.folds):
        ap.error("give --out FILE (average delta files) or --folds DIR (average --folds dirs)")
    if len(args.inputs) < 2:
        ap.error("give at least two deltas (or dirs) to average")
    from models.tuning import write_delta

    if args.out:
        missing = [str(p) for p in args.inputs if not p.is_file()]
        if missing:
            ap.error(f"no delta at {', '.join(missing)}")
        meta, pairs = average(args.inputs, args.rank)
        if args.held_out:
            meta["held_out_vector_r10"] = json.loads(args.held_out)
        write_delta(args.out, meta, pairs)
        print(json.dumps({"wrote": str(args.out), "rank": meta["rank"], "averaged": [str(p) for p in args.inputs]}))
        return 0

    import train_embedder as T
    from sentence_transformers import SentenceTransformer

    from models.locate import embedder_dir
    from models.tuning import tuned_dir

    convs = json.loads(args.data.read_text())
    names = [c["sample_id"] for c in convs]
    missing = [str(d / f"{c}.npz") for d in args.inputs for c in names if not (d / f"{c}.npz").is_file()]
    if missing:
        ap.error(f"no delta at {', '.join(missing)}: each dir must hold one per conversation (train_embedder.py --folds)")
    base = embedder_dir(None)
    folds = {}
    for conv in convs:
        c = conv["sample_id"]
        meta, pairs = average([d / f"{c}.npz" for d in args.inputs], args.rank)
        write_delta(args.folds / f"{c}.npz", meta, pairs)
        data = T.conversation(conv)
        r10 = {str(d): round(T.vector_recall(SentenceTransformer(str(tuned_dir(base, d / f"{c}.npz")), device="cpu"),
                                             data), 4) for d in args.inputs}
        r10["average"] = round(T.vector_recall(SentenceTransformer(str(tuned_dir(base, args.folds / f"{c}.npz")),
                                                                   device="cpu"), data), 4)
        folds[c] = {"questions": sum(q["scored"] for q in data[1]), "r10": r10}
        print(json.dumps({c: folds[c]}), file=sys.stderr, flush=True)
    n = sum(f["questions"] for f in folds.values())
    held = {k: round(sum(f["r10"][k] * f["questions"] for f in folds.values()) / n, 4) for k in folds[names[0]]["r10"]}
    print(json.dumps({"rank": meta["rank"], "held_out_vector_r10": held, "folds": folds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
