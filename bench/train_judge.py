"""Experiment (not shipped): a statement judge, MiniLM reading a statement beside the start of its evidence row.

Why it was tried: the salience model (memory/consolidation/salience.py) judges each statement by its own
vector and counted signs. A version number, a file size or a date reads like a fact alone; beside the rest
of its row (a build log, a download page) it plainly is not. Here MiniLM reads the pair (statement, the
row's first CONTEXT_CHARS characters) as one input, with low-rank adapters (--rank) on every linear layer
of its encoder and a linear "worth keeping" head on its sentence vector, trained on the statements of the
`train` split only, weighted as train_salience weighs them.

--cv trains one judge per fold of train_salience's folds (the same seed) and saves every statement's
vector under each fold's judge; `bench/train_salience.py --judge-cv FILE` then fits and scores each fold's
keep model on its own judge's vectors, so no item is scored by a judge that saw it. What it measured is in
bench/results/dropped.json: fewer noise memories at lower recall, none at the recall the threshold is
chosen for, so it was not shipped. --out writes the adapters as a models/tuning.py delta. Needs the dev
extra (torch); about 5 minutes per fold on 2 cores.

    .venv/bin/python bench/train_judge.py --cv /tmp/judge_cv.npz [--rank 8 --lr 5e-4 --epochs 2]
    .venv/bin/python bench/train_salience.py --judge-cv /tmp/judge_cv.npz
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import train_salience as TS  # noqa: E402
from extract_quality import load_items  # noqa: E402

os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

CONTEXT_CHARS = 400  # the start of the row the judge reads beside each statement
MAX_TOKENS = 192  # statement and context together, truncated longest first
RANK = 8
SCALE = 2.0  # the adapters' update is SCALE * B @ A (LoRA's alpha / rank, alpha = 2 * rank)
EPOCHS = 2
BATCH = 16
LR = 5e-4
SEED = 11
TARGETS = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
           "intermediate.dense", "output.dense")


def context_of(row_text: str) -> str:
    """What the judge reads beside a statement of this row: its first CONTEXT_CHARS characters."""
    return " ".join((row_text or "")[:CONTEXT_CHARS].split())


def lora_model(model_dir: Path, rank: int = RANK):
    """(encoder with adapters, head, {weight name: (A, B) parameters}) on the bundled weights."""
    import torch
    from transformers import AutoModel

    torch.manual_seed(SEED)
    enc = AutoModel.from_pretrained(str(model_dir))
    for p in enc.parameters():
        p.requires_grad_(False)
    adapters = {}
    for name, mod in enc.named_modules():
        if isinstance(mod, torch.nn.Linear) and name.startswith("encoder.layer.") and name.split(".", 3)[3] in TARGETS:
            a = torch.nn.Parameter(torch.randn(rank, mod.in_features) / math.sqrt(mod.in_features))
            b = torch.nn.Parameter(torch.zeros(mod.out_features, rank))
            adapters[f"{name}.weight"] = (a, b)
            mod.register_forward_hook(_adapter_hook(a, b))
    head = torch.nn.Linear(enc.config.hidden_size, 1)
    return enc, head, adapters


def _adapter_hook(a, b):
    def hook(mod, inputs, out):
        return out + SCALE * (inputs[0] @ a.T @ b.T)
    return hook


def pooled(enc, batch):
    """sentence-transformers' Pooling(mean) -> Normalize of the encoder's last layer."""
    import torch

    h = enc(**batch).last_hidden_state
    m = batch["attention_mask"].unsqueeze(-1).to(h.dtype)
    v = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(v, dim=-1)


def tokenize(tok, pairs: list[tuple[str, str]]):
    return tok([p[0] for p in pairs], [p[1] for p in pairs], padding=True, truncation="longest_first",
               max_length=MAX_TOKENS, return_tensors="pt")


def train(model_dir: Path, pairs: list[tuple[str, str]], y: np.ndarray, w: np.ndarray, log=print,
          rank: int = RANK, lr: float = LR, epochs: int = EPOCHS):
    """The adapters trained on these labelled pairs: (encoder with adapters, adapters)."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    enc, head, adapters = lora_model(model_dir, rank)
    params = [p for ab in adapters.values() for p in ab] + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    steps = epochs * math.ceil(len(pairs) / BATCH)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (0.06 * steps)) * max(0.0, 1 - s / steps))
    rng = np.random.default_rng(SEED)
    enc.train()
    step, t0 = 0, time.monotonic()
    # Pairs of like length share a batch (little padding): shuffle, then sort within chunks of 50 batches.
    lengths = np.asarray([len(a) + min(len(b), CONTEXT_CHARS) for a, b in pairs])
    for _ in range(epochs):
        order = rng.permutation(len(pairs))
        chunks = [order[k:k + 50 * BATCH] for k in range(0, len(order), 50 * BATCH)]
        batches = [c[np.argsort(lengths[c])][j:j + BATCH] for c in chunks for j in range(0, len(c), BATCH)]
        rng.shuffle(batches)
        for idx in batches:
            batch = tokenize(tok, [pairs[i] for i in idx])
            logit = head(pooled(enc, batch) * 10).squeeze(-1)
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(
                logit, torch.tensor(y[idx], dtype=torch.float32), reduction="none")
                * torch.tensor(w[idx], dtype=torch.float32)).sum() / float(w[idx].sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0:
                log(f"  step {step}/{steps} loss {loss.item():.3f} {time.monotonic() - t0:.0f}s")
    enc.eval()
    return enc, tok, adapters


def vectors(enc, tok, pairs: list[tuple[str, str]]) -> np.ndarray:
    """The judge's vector of every pair."""
    import torch

    out = np.zeros((len(pairs), enc.config.hidden_size), dtype=np.float32)
    order = np.argsort([len(a) + min(len(b), CONTEXT_CHARS) for a, b in pairs])
    with torch.inference_mode():
        for k in range(0, len(order), 64):
            idx = order[k:k + 64]
            out[idx] = pooled(enc, tokenize(tok, [pairs[i] for i in idx])).numpy()
    return out


def examples(items: list[dict], d: dict, which: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices, labels and weights of the statements of these items the judge learns from (as train_salience's
    fit weighs them: unvetoed; other statements of fact-bearing items count OTHER_WEIGHT; classes balanced)."""
    idx = np.where(np.isin(d["item"], which) & ~d["vetoed"])[0]
    y = d["keep"][idx]
    return idx, y, TS.keep_weights(y, d["noise_item"][idx])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, help="train on the whole train split and write the adapters here")
    ap.add_argument("--cv", type=Path, help="train one judge per fold and write every statement's vectors here")
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--rank", type=int, default=RANK)
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    args = ap.parse_args(argv)
    settings = {"rank": args.rank, "lr": args.lr, "epochs": args.epochs}
    if not args.out and not args.cv:
        ap.error("give --out or --cv")
    import torch

    from memory.store.core import Store
    from models.locate import embedder_dir
    from models.onnx_encoder import fingerprint
    from models.tuning import write_delta

    torch.set_num_threads(os.cpu_count() or 2)
    t0 = time.monotonic()
    base = embedder_dir()
    with tempfile.TemporaryDirectory() as home:
        emb = Store(Path(home)).embedder
    items = load_items("train")
    d = TS.dataset(items, emb)
    pairs = [(s.text, context_of(items[n]["text"])) for s, n in zip(d["segs"], d["item"], strict=True)]
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    report: dict = {"bench": "train_judge", "statements": len(pairs), **settings}
    if args.cv:
        fold_of = TS.fold_assignment(len(items), args.folds)
        vecs = np.zeros((args.folds, len(pairs), 384), dtype=np.float16)
        for k in range(args.folds):
            idx, y, w = examples(items, d, np.where(fold_of != k)[0])
            log(f"fold {k}: {len(idx)} statements")
            enc, tok, _ = train(base, [pairs[i] for i in idx], y, w, log, **settings)
            vecs[k] = vectors(enc, tok, pairs)
        args.cv.parent.mkdir(parents=True, exist_ok=True)
        np.savez(args.cv, vecs=vecs, fold_of=fold_of, statements=len(pairs))
        report["cv"] = str(args.cv)
    if args.out:
        idx, y, w = examples(items, d, np.arange(len(items)))
        log(f"all: {len(idx)} statements")
        _, _, adapters = train(base, [pairs[i] for i in idx], y, w, log, **settings)
        meta = {"base_fingerprint": fingerprint(base / "model.safetensors"), "scale": SCALE, "rank": args.rank,
                "trained_on": "the train split of bench/data/extraction/ (Mirador's own set), bench/train_judge.py",
                "what": "statement judge: (statement, start of its evidence row) -> vector for the keep model",
                "context_chars": CONTEXT_CHARS, "max_tokens": MAX_TOKENS}
        write_delta(args.out, meta, {name: (b.detach().numpy(), a.detach().numpy()) for name, (a, b) in adapters.items()})
        report["written"] = str(args.out)
    report["seconds"] = round(time.monotonic() - t0, 1)
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
