"""Can search run on sealed text? Full-text search over keyed hashes of normalised terms, side by side with the
plaintext index the store uses today, on the turns of LoCoMo dev conversations (evaluation only: CC BY-NC).

Issue 40's design for memory and evidence text at rest: the full-text index holds HMAC-SHA256(data key, term)
for each normalised term (lower case, ASCII folding, English stop words out, Snowball English stem) instead of
the words, and the vector leg holds vectors turned by a secret orthogonal matrix (cosine scores exact). This
bench measures the full-text half — what hashing costs in recall and latency against LanceDB's own analyser
on the same turns and questions — before the store is changed (the vector half is exact by construction;
`--check-rotation` confirms the top 10 is unchanged on MiniLM vectors).

    .venv/bin/python bench/sealed_search.py --data ../shared/data/locomo/locomo_dev.json > bench/results/sealed_search.json
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import re
import statistics
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The English stop words LanceDB's FTS drops (NLTK's list), matched against the stems: LanceDB filters after
# stemming, so "canned" (stem "can") goes too. Found by indexing every word of the dev turns one per row.
STOP = set("""a about above after again against ain all am an and any are aren as at be because been before being
below between both but by can couldn d did didn do does doesn doing don down during each few for from further had
hadn has hasn have haven having he her here hers herself him himself his how i if in into is isn it its itself just
ll m ma me mightn more most mustn my myself needn no nor not now o of off on once only or other our ours ourselves
out over own re s same shan she should shouldn so some such t than that the their theirs them themselves then there
these they this those through to too under until up ve very was wasn we were weren what when where which while who
whom why will with won wouldn y you your yours yourself yourselves""".split())
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def analyse(text: str) -> list[str]:
    """Terms as LanceDB's FTS config in the store makes them (memory/store/indexes.py), in Python."""
    import snowballstemmer

    stem = analyse.stemmer = getattr(analyse, "stemmer", None) or snowballstemmer.stemmer("english")
    folded = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode()
    return [t for t in stem.stemWords([w for w in _WORD.findall(folded) if len(w) < 40]) if t not in STOP]


def sealed_terms(key: bytes, text: str) -> str:
    """Each term as 13 base32 letters of HMAC-SHA256(key, term): what the sealed index would hold."""
    out = []
    for t in analyse(text):
        mac = hmac.new(key, t.encode(), hashlib.sha256).digest()[:8]
        out.append(base64.b32encode(mac).decode().rstrip("=").lower())
    return " ".join(out)


def turns_of(conv: dict) -> list[tuple[str, str]]:
    c = conv["conversation"]
    out = []
    for k, v in c.items():
        if re.fullmatch(r"session_\d+", k):
            for t in v:
                out.append((t["dia_id"], f"{t['speaker']}: {t['text']}"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--check-rotation", action="store_true", help="also compare vector top 10 under a rotation")
    a = ap.parse_args()

    import lancedb
    import numpy as np
    from lancedb.index import FTS

    key = b"k" * 32
    data = json.loads(Path(a.data).read_text())
    res = {"plain": {"hits5": 0, "hits10": 0, "ms": []}, "sealed": {"hits5": 0, "hits10": 0, "ms": []}}
    n_q, overlap, rot_same, rot_n = 0, [], 0, 0
    with tempfile.TemporaryDirectory() as d:
        db = lancedb.connect(d)
        for ci, conv in enumerate(data):
            turns = turns_of(conv)
            rows = [{"id": i, "text": t, "sealed": sealed_terms(key, t)} for i, t in turns]
            tab = db.create_table(f"c{ci}", rows)
            tab.create_index("text", config=FTS(with_position=False, stem=True, remove_stop_words=True,
                                                lower_case=True, ascii_folding=True))
            tab.create_index("sealed", config=FTS(with_position=False, base_tokenizer="whitespace", stem=False,
                                                  remove_stop_words=False, lower_case=False, ascii_folding=False))
            for qa in conv["qa"]:
                gold = set(qa.get("evidence") or [])
                if not gold or qa.get("category") == 5:
                    continue
                n_q += 1
                got = {}
                for name, col, q in (("plain", "text", qa["question"]),
                                     ("sealed", "sealed", sealed_terms(key, qa["question"]))):
                    t0 = time.perf_counter()
                    hits = [r["id"] for r in tab.search(q, query_type="fts", fts_columns=col).limit(10)
                            .select(["id"]).to_list()] if q.strip() else []
                    res[name]["ms"].append((time.perf_counter() - t0) * 1000)
                    res[name]["hits5"] += bool(gold & set(hits[:5]))
                    res[name]["hits10"] += bool(gold & set(hits[:10]))
                    got[name] = hits
                if got["plain"]:
                    overlap.append(len(set(got["plain"]) & set(got["sealed"])) / len(got["plain"]))
            if a.check_rotation:
                from models.embedder import shared_embedder

                emb = shared_embedder()
                vecs = np.asarray(emb.embed([t for _, t in turns]), dtype=np.float32)
                q_, _ = np.linalg.qr(np.random.default_rng(7).standard_normal((vecs.shape[1],) * 2))
                for qa in conv["qa"][:50]:
                    qv = np.asarray(emb.embed_query(qa["question"]), dtype=np.float32)
                    top = np.argsort(-(vecs @ qv))[:10]
                    top_r = np.argsort(-((vecs @ q_.T) @ (q_ @ qv)))[:10]
                    rot_n += 1
                    rot_same += list(top) == list(top_r)
    out = {"bench": "sealed_search", "date": time.strftime("%Y-%m-%d"), "questions": n_q,
           "command": "bench/sealed_search.py --data ../shared/data/locomo/locomo_dev.json"
           + (" --check-rotation" if a.check_rotation else "")}
    for name, r in res.items():
        out[name] = {"fts_r5": round(r["hits5"] / n_q, 3), "fts_r10": round(r["hits10"] / n_q, 3),
                     "p50_ms": round(statistics.median(r["ms"]), 2)}
    out["top10_overlap_mean"] = round(statistics.mean(overlap), 3)
    if rot_n:
        out["rotation_top10_identical"] = f"{rot_same}/{rot_n}"
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
