"""Latency at scale: hybrid search, recall() and ingest on synthetic stores of 10k and 100k memories.

    .venv/bin/python bench/scale.py --sizes 10000,100000

Prints one JSON object. Rows are synthetic but varied: sentences generated from templates and a
vocabulary with a fixed seed. Embedding 200k texts with MiniLM on 2 cores takes too long, so only
`--base` distinct sentences go through the real model; each bulk row's text joins 1-3 of them (with
fresh names/numbers) and its vector is the normalised weighted mix of their vectors plus noise.
Bulk rows still enter through the normal ingest path (Store.add_memories / add_evidence_batch),
with precomputed vectors handed to the embedder. Every query is embedded by the real model.
Indexes are built with the app's own maintenance function (memory.store.indexes.maintain).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The bench's stores are throwaway: their data key is wrapped by a passphrase, never put in the person's keyring
# (on a machine without a keyring, as here, that is also the only way to open them without a prompt).
os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
os.environ.setdefault("MIRADOR_PASSPHRASE", "a throwaway passphrase for the bench's stores")

NAMES = ["Sam", "Alex", "Priya", "Jonas", "Mei", "Carlos", "Fatima", "Oliver", "Yuki", "Nadia", "Tom", "Ines",
         "Ravi", "Lena", "Omar", "Grace", "Hugo", "Zoe", "Kwame", "Sofia", "Ben", "Aiko", "Marta", "Luis"]
PROJECTS = ["billing", "onboarding", "search", "mobile app", "data pipeline", "design system", "checkout",
            "analytics", "auth service", "release train", "support portal", "recommendations", "Atlas", "Orion"]
TECH = ["PostgreSQL", "MySQL", "Redis", "Kafka", "LanceDB", "SQLite", "Rust", "Go", "TypeScript", "React",
        "Kubernetes", "Terraform", "gRPC", "GraphQL", "S3", "ClickHouse", "Elasticsearch", "Django", "FastAPI"]
TOPICS = ["the release date", "the Q3 budget", "latency regressions", "the hiring plan", "on-call rotation",
          "the security review", "customer churn", "the pricing page", "test flakiness", "the migration plan",
          "database backups", "the offsite agenda", "API rate limits", "the design review", "incident 4821"]
APPS = [("Slack", "#release"), ("Slack", "#eng"), ("Chrome", "Jira board"), ("VS Code", "main.py"),
        ("Zoom", "weekly sync"), ("Mail", "Inbox"), ("Terminal", "bash"), ("Notion", "Roadmap")]
TEMPLATES = [
    "{n} said {topic} moves to {month} {day}; {n2} needs the final build by the {day2}th.",
    "We picked {t} over {t2} for {p} because it handles {k} better and the team knows it.",
    "Decision: keep {p} on {t} for now and revisit after {topic} is settled.",
    "{n} is worried about {topic} slipping; the {p} team wants a decision by {weekday}.",
    "To deploy {p}, run the {t} migration first, then restart the workers and check the dashboard.",
    "Standup: {n} finished the {p} refactor, {n2} is blocked on {topic}.",
    "The {p} service timed out after {num} ms under load; {n} suspects the {t} connection pool.",
    "{n} prefers {t} for prototypes and {t2} for anything that ships to customers.",
    "Meeting notes on {topic}: agreed to cut scope for {p} and ship on {weekday}.",
    "Reminder from {n}: renew the {t} license before {month} {day}, it costs {num} dollars a year.",
    "Bug {num}: {p} crashes when {t} returns an empty result; {n2} has a fix in review.",
    "{n} asked whether {p} could move from {t2} to {t} to reduce {k}.",
    "Read the postmortem for {topic}: root cause was a misconfigured {t} cluster in {p}.",
    "{n} will present {topic} at the all-hands on {weekday}, slides are in the {p} folder.",
]
KS = ["write throughput", "schema changes", "operational cost", "query latency", "full-text search", "replication"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "September", "October", "November"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
QUESTIONS = [
    "why did we pick {t} for {p}?", "what did {n} say about {topic}?", "when is {topic} due for {p}?",
    "how do I deploy {p}?", "who is blocked on {topic}?", "what went wrong with {t} in {p}?",
    "what does {n} prefer, {t} or {t2}?", "what was decided about {p} and {topic}?",
]
MEMORY_TYPES = ["semantic"] * 5 + ["episodic"] * 3 + ["procedural", "resource", "core"]
SCOPES = ["work"] * 5 + ["work/acme"] * 2 + ["personal"] * 2 + ["work/beta"]
STATUSES = ["active"] * 16 + ["candidate"] * 2 + ["superseded", "rejected"]
QUERY_SCOPES = ["work"]


def _fill(rng: random.Random, template: str) -> str:
    n, n2 = rng.sample(NAMES, 2)
    t, t2 = rng.sample(TECH, 2)
    return template.format(n=n, n2=n2, t=t, t2=t2, p=rng.choice(PROJECTS), topic=rng.choice(TOPICS),
                           k=rng.choice(KS), month=rng.choice(MONTHS), day=rng.randint(1, 28),
                           day2=rng.randint(4, 28), weekday=rng.choice(WEEKDAYS), num=rng.randint(100, 9999))


class BulkEmbedder:
    """The real embedder, except that a batch handed over with arm() is returned instead of computed."""

    def __init__(self, real) -> None:
        self.real = real
        self._armed: np.ndarray | None = None

    dim = property(lambda self: self.real.dim)
    model_dir = property(lambda self: self.real.model_dir)
    name = property(lambda self: self.real.name)  # what embedder.json records (memory/store/reembed.py)
    tuning = property(lambda self: self.real.tuning)

    def arm(self, vectors: np.ndarray) -> None:
        self._armed = vectors

    def embed(self, texts: list[str]) -> np.ndarray:
        if self._armed is not None:
            vecs, self._armed = self._armed, None
            assert len(vecs) == len(texts), (len(vecs), len(texts))
            return vecs
        return self.real.embed(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.real.embed_query(text)

    def embed_queries(self, texts: list[str]) -> list[np.ndarray]:
        return self.real.embed_queries(texts)


class Corpus:
    """Base sentences with real vectors, and rows composed from them."""

    def __init__(self, embedder, n_base: int, seed: int) -> None:
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        texts = list(dict.fromkeys(_fill(self.rng, self.rng.choice(TEMPLATES)) for _ in range(n_base * 2)))[:n_base]
        self.base = texts
        self.vecs = embedder.embed(texts)

    def rows(self, n: int) -> tuple[list[str], np.ndarray]:
        """n texts of 1-3 base sentences each, with vectors mixed from theirs plus noise."""
        k = self.np_rng.integers(1, 4, size=n)
        idx = self.np_rng.integers(0, len(self.base), size=(n, 3))
        w = self.np_rng.dirichlet([2.0, 1.0, 0.5], size=n).astype(np.float32)
        w[k < 3, 2] = 0
        w[k < 2, 1] = 0
        vecs = np.einsum("nk,nkd->nd", w, self.vecs[idx])
        vecs += self.np_rng.normal(0, 0.02, vecs.shape).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        texts = [" ".join(self.base[j] for j in idx[i, : k[i]]) + f" (#{i % 997})" for i in range(n)]
        return texts, vecs.astype(np.float32)


def build(home: Path, size: int, corpus: Corpus, emb: BulkEmbedder, evidence_ratio: float, batch: int,
          rerank: bool = True) -> dict:
    """Fill a fresh store with `size` memories and size*evidence_ratio evidence rows; time the index build."""
    from memory.config import Config
    from memory.store.audit import utcnow
    from memory.store.core import EvidenceSpec, MemorySpec, Store
    from memory.store.indexes import maintain

    cfg = Config()
    cfg.store.optimize_after_writes = 10_000  # maintenance is timed separately below
    cfg.models.reranker = rerank
    store = Store(home, config=cfg, embedder=emb)
    rng = random.Random(size)
    now = utcnow()
    t0 = time.perf_counter()
    if store.count("memory", local=True) >= size:  # --dir with a store built by an earlier run: reuse it
        size = evidence_ratio = 0
    for start in range(0, size, batch):
        n = min(batch, size - start)
        texts, vecs = corpus.rows(n)
        specs = [MemorySpec(text=t, type=rng.choice(MEMORY_TYPES), scope=rng.choice(SCOPES),
                            status=rng.choice(STATUSES), confidence=round(rng.uniform(0.5, 1.0), 2),
                            created_at=now - timedelta(days=rng.uniform(0, 720))) for t in texts]
        emb.arm(vecs)
        store.add_memories(specs, actor="import")
    n_ev = int(size * evidence_ratio)
    for start in range(0, n_ev, batch):
        n = min(batch, n_ev - start)
        texts, vecs = corpus.rows(n)
        specs = []
        for t in texts:
            app, window = rng.choice(APPS)
            specs.append(EvidenceSpec(text=t, source=rng.choice(["screen", "audio", "manual", "import"]), app=app,
                                      window=window, speaker=rng.choice(NAMES), scope=rng.choice(SCOPES),
                                      captured_at=now - timedelta(days=rng.uniform(0, 365))))
        emb.arm(vecs)
        store.add_evidence_batch(specs, actor="import")
    ingest_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = maintain(store)
    return {"store": store, "bulk_ingest_s": round(ingest_s, 1), "maintain_s": round(time.perf_counter() - t0, 1),
            "indexes": report, "memories": store.count("memory", local=True), "evidence": store.count("evidence", local=True)}


def _pct(xs: list[float]) -> tuple[float, float]:
    xs = sorted(xs)
    return round(statistics.median(xs), 2), round(xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))], 2)


def _timed(fn, items) -> list[float]:
    out = []
    for x in items:
        t = time.perf_counter()
        fn(x)
        out.append((time.perf_counter() - t) * 1000)
    return out


def _embed_one_ms(emb, qs: list[str]) -> dict:
    """p50 of embedding one fresh query: as search does it (onnxruntime when ready) and on torch."""
    return {"search_path": _pct(_timed(emb._embed_one, qs[:30]))[0], "torch": _pct(_timed(emb._torch_one, qs[30:]))[0]}


def queries(n: int, seed: int) -> list[str]:
    """n distinct questions, so the embedder's query cache never serves one."""
    rng = random.Random(seed)
    out: dict[str, None] = {}
    while len(out) < n:
        out[_fill(rng, rng.choice(QUESTIONS))] = None
    return list(out)


def measure(store, size_tag: str, qs: list[str], budget: int) -> dict:
    """p50/p95 of hybrid searches (query vector cached) and recall() with fresh and cached queries."""
    from memory.mcp.tools import EVIDENCE_BRIEF_COLS, MEMORY_BRIEF_COLS
    from memory.retrieval.recall import recall
    from memory.retrieval.search import search_evidence, search_memories
    from memory.store import tables as T

    res: dict = {}
    half = len(qs) // 2
    fresh, warm = qs[:half], qs[half:]
    # The row cache a long-running process builds in the background after its first search
    # (memory/store/rowcache.py): built here before timing, and its build time and size reported.
    t0 = time.perf_counter()
    store.reader.warm(T.MEMORIES, T.EVIDENCE)
    res[f"row_cache_build_ms_{size_tag}"] = round((time.perf_counter() - t0) * 1000, 1)
    res[f"row_cache_mb_{size_tag}"] = round(store.reader.cache_nbytes() / 1e6, 1)
    for q in warm[:3]:  # warm caches and the lazy model load; not measured
        recall(store, q, budget, scopes=QUERY_SCOPES)
    # Recall end to end with queries the embedder has never seen: includes embedding the query.
    res[f"recall_p50_ms_{size_tag}"], res[f"recall_p95_ms_{size_tag}"] = _pct(
        _timed(lambda q: recall(store, q, budget, scopes=QUERY_SCOPES), fresh))
    for q in warm:
        store.embedder.embed_query(q)
    res[f"recall_cached_p50_ms_{size_tag}"], res[f"recall_cached_p95_ms_{size_tag}"] = _pct(
        _timed(lambda q: recall(store, q, budget, scopes=QUERY_SCOPES), warm))
    # Hybrid search alone, query vector already cached: the cost of the store, not of the model. Called
    # as the MCP search tools call it (the columns their results show); *_full_rows reads every column.
    res[f"hybrid_p50_ms_{size_tag}"], res[f"hybrid_p95_ms_{size_tag}"] = _pct(
        _timed(lambda q: search_memories(store, q, scopes=QUERY_SCOPES, limit=10, cols=MEMORY_BRIEF_COLS), warm))
    res[f"hybrid_full_rows_p50_ms_{size_tag}"], res[f"hybrid_full_rows_p95_ms_{size_tag}"] = _pct(
        _timed(lambda q: search_memories(store, q, scopes=QUERY_SCOPES, limit=10), warm))
    res[f"hybrid_evidence_p50_ms_{size_tag}"], res[f"hybrid_evidence_p95_ms_{size_tag}"] = _pct(
        _timed(lambda q: search_evidence(store, q, scopes=QUERY_SCOPES, limit=10, cols=EVIDENCE_BRIEF_COLS), warm))
    return res


def ingest_rates(store, corpus: Corpus, n_single: int, n_batched: int, batch: int) -> dict:
    """Evidence rows/s written one at a time vs in batches, both embedded by the real model."""
    from memory.store.core import EvidenceSpec

    store.embedder._armed = None
    texts = [corpus.rows(1)[0][0] + f" single {i}" for i in range(n_single)]
    t = time.perf_counter()
    for tx in texts:
        store.add_evidence(tx, actor="capture", source="screen", app="Slack", window="#eng", scope="work")
    single = n_single / (time.perf_counter() - t)
    texts = [corpus.rows(1)[0][0] + f" batched {i}" for i in range(n_batched)]
    t = time.perf_counter()
    for start in range(0, n_batched, batch):
        store.add_evidence_batch([EvidenceSpec(text=tx, source="screen", app="Slack", window="#eng", scope="work")
                                  for tx in texts[start: start + batch]], actor="capture")
    batched = n_batched / (time.perf_counter() - t)
    return {"ingest_single_rows_per_s": round(single, 1), "ingest_batched_rows_per_s": round(batched, 1),
            "ingest_batch_size": batch}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print one JSON object."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000", help="memory counts, comma-separated")
    ap.add_argument("--evidence-ratio", type=float, default=1.0, help="evidence rows per memory")
    ap.add_argument("--base", type=int, default=2000, help="distinct sentences embedded by the real model")
    ap.add_argument("--queries", type=int, default=60, help="distinct queries per size (half fresh, half cached)")
    ap.add_argument("--budget", type=int, default=1000, help="recall budget in tokens")
    ap.add_argument("--dir", help="where to build the stores (kept, and reused by later runs; "
                                  "default: a temp dir, removed afterwards)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-ingest", action="store_true", help="skip the single vs batched ingest measurement")
    ap.add_argument("--no-rerank", action="store_true", help="evidence search without its second stage "
                                                              "(models.reranker = false), for comparison")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from memory.config import Config
    from models.embedder import Embedder

    sizes = [int(s) for s in a.sizes.split(",") if s.strip()]
    root = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="mirador-scale-"))
    threads = Config().models.embedder_threads  # what a store gets by default
    real = Embedder(threads=threads)
    backend = real.wait_ready(300)  # the onnxruntime query encoder, exported once if missing
    embed_ms = _embed_one_ms(real, queries(60, a.seed + 1))
    t0 = time.perf_counter()
    corpus = Corpus(real, a.base, a.seed)
    out: dict = {"method": (f"{a.base} template sentences embedded with MiniLM; bulk rows join 1-3 of them and "
                            "mix their vectors (Dirichlet weights + N(0,0.02) noise, normalised); queries are "
                            "distinct template questions embedded by the real model; hybrid_* timings use a cached "
                            "query vector and read the columns the MCP search tools show (hybrid_full_rows_*: "
                            "every column), recall_* include embedding the query, recall_cached_* reuse it; "
                            f"scope filter {QUERY_SCOPES}, recall budget {a.budget} tokens"),
                 "base_embed_s": round(time.perf_counter() - t0, 1), "cpu_count": os.cpu_count(),
                 "query_encoder": backend, "embedder_threads": threads, "query_embed_p50_ms": embed_ms,
                 "evidence_reranker": not a.no_rerank}
    try:
        for size in sizes:
            tag = f"{size // 1000}k" if size % 1000 == 0 else str(size)
            emb = BulkEmbedder(real)
            built = build(root / tag, size, corpus, emb, a.evidence_ratio, batch=5000, rerank=not a.no_rerank)
            store = built.pop("store")
            out[f"build_{tag}"] = built
            out.update(measure(store, tag, queries(a.queries, a.seed + size), a.budget))
            if size == max(sizes) and not a.no_ingest:
                out.update(ingest_rates(store, corpus, n_single=40, n_batched=512, batch=128))
        if len(sizes) >= 2:
            lo, hi = sizes[0], sizes[-1]
            lt = f"{lo // 1000}k" if lo % 1000 == 0 else str(lo)
            ht = f"{hi // 1000}k" if hi % 1000 == 0 else str(hi)
            for key in ("hybrid", "hybrid_full_rows", "hybrid_evidence", "recall", "recall_cached"):
                out[f"{key}_ratio_{ht}_{lt}"] = round(out[f"{key}_p50_ms_{ht}"] / out[f"{key}_p50_ms_{lt}"], 2)
    finally:
        if not a.dir:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
