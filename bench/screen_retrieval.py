"""Evidence search on screen captures, with and without the reranker: a check, not a benchmark.

The reranker was trained on LoCoMo chat turns. Screen evidence is another kind of row: long OCR text
of terminals, editors, mail and chat windows. bench/data/screen_day.json holds one made-up workday
of 32 such captures and 16 questions, each answered by one capture. It is small and written by the
same people who wrote the search, so it cannot show that either order is good; it shows whether the
reranker puts screen answers lower than the first stage does. tests/memory/test_rerank.py runs the
same data.

    .venv/bin/python bench/screen_retrieval.py

The search leaves screen captures where the first stage puts them (memory/retrieval/rerank.py SOURCES), so
"search" (with the optional LoCoMo-trained reranker, optional/locomo-reranker/; the default install has
none) should equal "first_stage"; "reranker_moving_screen" is that model allowed to move them, as
releases before did.

Prints one JSON object: per configuration, hit@1, hit@3 and the mean reciprocal rank, and each
question's rank (0 = not in the top 10).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DATA = Path(__file__).with_name("data") / "screen_day.json"
SCOPE = "work"


def load(path: Path = DATA) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def ingest(store, day: dict) -> dict[str, str]:
    """Every capture as screen evidence, in time order; returns key -> evidence id."""
    from memory.store.core import EvidenceSpec

    date = datetime.fromisoformat(day["day"])
    rows = sorted(day["rows"], key=lambda r: r["at"])
    specs = [EvidenceSpec(text=r["text"], source="screen", app=r["app"], window=r["window"], scope=SCOPE,
                          captured_at=date + timedelta(hours=int(r["at"][:2]), minutes=int(r["at"][3:])))
             for r in rows]
    written = store.add_evidence_batch(specs, actor="capture")
    return {r["key"]: w["id"] for r, w in zip(rows, written, strict=True)}


def ranks(store, day: dict, ids: dict[str, str], rank=None) -> list[int]:
    """Each question's answer's 1-based rank in the top 10; 0 when it is not there."""
    from memory.retrieval.search import search_evidence

    now = datetime.fromisoformat(day["day"]) + timedelta(hours=20)
    out = []
    for q in day["questions"]:
        hits = [h.id for h in search_evidence(store, q["q"], scopes=[SCOPE], limit=10, now=now, rank=rank)]
        want = ids[q["answer"]]
        out.append(hits.index(want) + 1 if want in hits else 0)
    return out


MODEL = Path(__file__).resolve().parents[1] / "optional" / "locomo-reranker" / "evidence_reranker.json"


def screen_too(where: Path) -> Path:
    """A copy of the optional reranker that may move screen captures too, as every release before
    this one let it: what the search would do without memory.retrieval.rerank.SOURCES."""
    from memory.retrieval import rerank
    spec = json.loads(MODEL.read_text(encoding="utf-8"))
    spec["meta"]["sources"] = [*rerank.SOURCES, "screen"]
    path = where / "reranker_screen_too.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    return path


def summary(rs: list[int]) -> dict:
    return {"hit@1": round(sum(r == 1 for r in rs) / len(rs), 3), "hit@3": round(sum(1 <= r <= 3 for r in rs) / len(rs), 3),
            "mrr": round(sum(1 / r for r in rs if r) / len(rs), 3), "ranks": rs}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--untuned", action="store_true", help="embed with the model as shipped (models.embedder_tuning off)")
    args = ap.parse_args(argv)

    from memory.retrieval import rank as R
    day = load(args.data)
    with tempfile.TemporaryDirectory(prefix="mirador-screen-") as home:
        os.environ["MIRADOR_HOME"] = home
        # A throwaway store: its data key wrapped by a passphrase (sealed at rest since issue 40), never
        # the person's keyring; without one, a machine with no keyring cannot open it.
        os.environ.setdefault("MIRADOR_PASSPHRASE", "bench/screen_retrieval.py")
        from memory.store.core import Store

        if args.untuned:
            Path(home, "config.toml").write_text("[models]\nembedder_tuning = false\n")
        store = Store(Path(home))
        ids = ingest(store, day)
        ranks(store, day, ids)  # warm up: model load and the row cache are not query time
        result = {"rows": len(day["rows"]), "questions": len(day["questions"]), "embedder": store.embedder.name}
        runs = (("first_stage", replace(R.DEFAULT, rerank=False), None), ("search", R.DEFAULT, MODEL),
                ("reranker_moving_screen", R.DEFAULT, screen_too(Path(home))))
        for name, cfg, model in runs:
            store.config.models.reranker_path = model
            t0 = time.perf_counter()
            rs = ranks(store, day, ids, cfg)
            result[name] = summary(rs) | {"mean_query_ms": round((time.perf_counter() - t0) * 1000 / len(rs), 1)}
        store.config.models.reranker_path = MODEL
        result["reranker_ran"] = len(R.first_stage(store, day["questions"][0]["q"], store.where("evidence", scopes=[SCOPE]),
                                                   datetime.fromisoformat(day["day"]), R.DEFAULT).ranked) >= R.DEFAULT.rerank_top
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
