"""Second stage of evidence ranking: a small tree ensemble reorders the first stage's top candidates.

Why: the first stage (memory/retrieval/rank.py) adds hand-weighted scores. Some evidence it cannot weigh that
way: a bare "Wow, nice!" next to a strong match, a turn that asks rather than answers, a session
where many candidates cluster. LambdaMART models over those signals (five, with their own bagging
seeds, summed), trained on LoCoMo dev and scored on each conversation they did not see
(bench/train_reranker.py), find more of the evidence than the tuned first stage alone, though not in
every conversation (bench/RESULTS.md: LoCoMo dev, held out). LoCoMo is CC BY-NC 4.0, so that model is
an optional artifact (optional/locomo-reranker/) a person points models.reranker_path at; the default
install has no reranker, and ones trained on Mirador's synthetic conversations lowered LoCoMo recall.

Only the top `RankConfig.rerank_top` candidates are reordered, because the features read their text,
which the search fetches for its winners anyway; of those, only the kinds of evidence it learned from
(SOURCES) move, among the places they hold. The ensemble is plain JSON, evaluated here with
NumPy: LightGBM is needed to train one, never to search.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from memory.errors import ConfigError
from memory.types import EVIDENCE_SOURCES

log = logging.getLogger(__name__)

FORMAT = "mirador-tree-ensemble/1"

# In this order, the columns of features(). A model names the features it was trained on; loading
# refuses a model whose names differ, so a feature added here cannot silently shift the columns.
FEATURES = (
    "vec", "fts", "win_vec", "win_fts",  # each list's min-max normalised score (0: not in it)
    "vec_raw", "vec_rank", "fts_raw", "fts_rank",  # raw similarity / BM25 and 1/(1+rank) per list
    "fused", "fused_rank", "first_rank",  # the fused score, its rank, the first stage's final rank
    "prev1", "next1", "hop1", "hop2", "hop3", "hop4",  # fused scores of the turns around it
    "run_max", "run_count", "run_sum",  # candidates of its run (session): best, how many, total
    "speaker_named", "any_named", "in_window", "any_window",
    "log_len", "asks", "overlap", "overlap_n",  # its text: length, a question mark, query terms present
    "query_words", "query_when",
)

# Features by which a better match must never rank lower, all else equal: +1 where more is better,
# -1 for ranks (0 is the top). bench/train_reranker.py trains under these constraints. Why: a person's
# own data is not LoCoMo, and a model that may rank a turn lower for matching the query better (as
# an unconstrained one does, between its splits) is hard to trust there. On LoCoMo it also helped:
# held out, recall rose a little (bench/train_reranker.py; bench/RESULTS.md).
MONOTONE = {
    "vec": 1, "fts": 1, "win_vec": 1, "win_fts": 1, "vec_raw": 1, "vec_rank": 1, "fts_raw": 1, "fts_rank": 1,
    "fused": 1, "fused_rank": -1, "first_rank": -1, "overlap": 1, "overlap_n": 1, "speaker_named": 1,
    "in_window": 1,
}
assert set(MONOTONE) <= set(FEATURES), "MONOTONE names a feature FEATURES does not have"

# The kinds of evidence a model reorders unless its meta names others ("sources"). The shipped one
# learned from chat turns (LoCoMo, ingested as "import"); spoken turns, notes and what assistants
# write are short first-person text like them. Screen captures are not: long OCR text of whole
# windows, on which it moved answers of a made-up workday down and none up
# (bench/screen_retrieval.py), so they keep the first stage's places.
SOURCES = ("import", "audio", "manual", "mcp")

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "i me my we our you your he she it they them their a an the and or but is are was were be been to of "
    "in on at for with that this what when where who how did does do have has had about as by from so".split())


def _stem(w: str) -> str:
    for suf in ("ing", "ed", "es", "s"):
        if len(w) > len(suf) + 2 and w.endswith(suf):
            return w[: -len(suf)]
    return w


def terms(text: str) -> set[str]:
    """Lower-cased, crudely stemmed content words: enough to tell whether a query word is present."""
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOP}


def features(lists: list, fused: dict[str, float], first: list[str], top: list[str], rows: dict[str, dict],
             texts: dict[str, str], named: set[str] | None, query: str, fts_query: str,
             any_window: bool, speaker_named: Callable[[dict], bool], in_window: Callable[[dict], bool]) -> np.ndarray:
    """One row of FEATURES per id in `top`.

    lists: [(ranked (id, similarity) list, weight)] as memory/retrieval/rank.py builds them: vector, full text,
    then (when the question names dates) the same two restricted to those dates. fused: every
    candidate's fused score. first: every candidate, in the first stage's final order. rows: ranking
    columns per candidate (run_id, run_pos, speaker, captured_at). texts: the text of each id in top.
    speaker_named(row) / in_window(row): the first stage's own tests.
    """
    norm, raw, rank = [], [], []
    for found, _ in list(lists) + [([], 0.0)] * (4 - len(lists)):
        scores = dict(found)
        hi, lo = (max(scores.values()), min(scores.values())) if scores else (0.0, 0.0)
        span = hi - lo
        norm.append({i: (s - lo) / span if span > 0 else 1.0 for i, s in scores.items()})
        raw.append((scores, lo))
        rank.append({i: k for k, (i, _) in enumerate(found)})
    fused_order = sorted(fused, key=lambda i: fused[i], reverse=True)
    fused_rank = {i: k for k, i in enumerate(fused_order)}
    first_rank = {i: k for k, i in enumerate(first)}
    runs: dict[str, dict[int, float]] = {}
    for i, s in fused.items():
        r = rows[i]
        if r.get("run_id"):
            runs.setdefault(r["run_id"], {})[r["run_pos"]] = s
    run_stats = {k: (max(v.values()), len(v), sum(v.values())) for k, v in runs.items()}
    q_terms = terms(fts_query)
    q_words = len(query.split())
    q_when = float(query.strip().lower().startswith("when"))
    out = np.zeros((len(top), len(FEATURES)))
    for n, i in enumerate(top):
        r = rows[i]
        at = runs.get(r.get("run_id") or "", {})
        pos = r.get("run_pos")
        near = (lambda k, at=at, pos=pos: max(at.get(pos - k, 0.0), at.get(pos + k, 0.0))) \
            if at and pos is not None \
            else (lambda k: 0.0)
        stats = run_stats.get(r.get("run_id") or "", (fused[i], 1, fused[i]))
        text = texts.get(i) or ""
        present = len(q_terms & terms(text))
        (vec, vec_lo), (fts, _) = raw[0], raw[1]
        out[n] = (
            norm[0].get(i, 0.0), norm[1].get(i, 0.0), norm[2].get(i, 0.0), norm[3].get(i, 0.0),
            vec.get(i, vec_lo), 1.0 / (1 + rank[0][i]) if i in rank[0] else 0.0,
            fts.get(i, 0.0), 1.0 / (1 + rank[1][i]) if i in rank[1] else 0.0,
            fused[i], fused_rank[i], first_rank[i],
            at.get(pos - 1, 0.0) if at and pos is not None else 0.0,
            at.get(pos + 1, 0.0) if at and pos is not None else 0.0,
            near(1), near(2), near(3), near(4),
            *stats,
            float(speaker_named(r)), float(bool(named)), float(any_window and in_window(r)), float(any_window),
            math.log1p(len(text)), float("?" in text), present / max(1, len(q_terms)), float(present),
            q_words, q_when,
        )
    return out


class TreeEnsemble:
    """A sum of regression trees (LightGBM's, converted by bench/train_reranker.py), on NumPy."""

    def __init__(self, spec: dict, source: str = "<dict>") -> None:
        if spec.get("format") != FORMAT:
            raise ConfigError(f"{source}: not a Mirador reranker (format {spec.get('format')!r}, want {FORMAT!r}) "
                              "— point models.reranker_path at a file bench/train_reranker.py wrote")
        if tuple(spec.get("features", ())) != FEATURES:
            raise ConfigError(f"{source}: trained on other features than this version computes — "
                              "retrain it with bench/train_reranker.py, or set models.reranker = false")
        self.source = source
        self.meta = spec.get("meta", {})
        sources = self.meta.get("sources", SOURCES)
        if not isinstance(sources, list | tuple) or not all(x in EVIDENCE_SOURCES for x in sources):
            raise ConfigError(f"{source}: meta.sources must list evidence sources ({', '.join(EVIDENCE_SOURCES)}), "
                              f"not {sources!r} — fix it or retrain with bench/train_reranker.py")
        self.sources = frozenset(sources)
        # Every tree's nodes in one set of arrays, so predict walks all trees at once: one NumPy step
        # per tree level for the whole ensemble, instead of one per level of every tree.
        feat: list[int] = []
        thr: list[float] = []
        left: list[int] = []
        right: list[int] = []
        value: list[float] = []
        roots: list[int] = []
        try:
            for t in spec["trees"]:
                f, th, lc, rc, v = (list(t["feature"]), list(t["threshold"]), list(t["left"]), list(t["right"]),
                                    list(t["value"]))
                if len({len(f), len(th), len(lc), len(rc)}) != 1 or not v:
                    raise ValueError("node arrays of different lengths")
                n0, l0 = len(feat), len(value)
                shift = lambda c, n0=n0, l0=l0: int(c) + n0 if c >= 0 else ~(~int(c) + l0)  # noqa: E731
                feat += [int(x) for x in f]
                thr += [float(x) for x in th]
                left += [shift(c) for c in lc]
                right += [shift(c) for c in rc]
                value += [float(x) for x in v]
                roots.append(n0 if f else ~l0)
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(f"{source}: a tree is malformed ({e}) — retrain it with bench/train_reranker.py") from e
        self._feat, self._thr = np.asarray(feat, dtype=np.int64), np.asarray(thr, dtype=np.float64)
        self._left, self._right = np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
        self._value, self._roots = np.asarray(value, dtype=np.float64), np.asarray(roots, dtype=np.int64)
        if len(self._feat) and (self._feat.min() < 0 or self._feat.max() >= len(FEATURES)):
            raise ConfigError(f"{source}: a split names a feature that does not exist — retrain it")

    @classmethod
    def load(cls, path: Path) -> TreeEnsemble:
        try:
            spec = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError as e:
            raise ConfigError(f"{path}: no reranker there — fix models.reranker_path or set models.reranker = false") from e
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path}: cannot read the reranker ({e}) — retrain it with bench/train_reranker.py") from e
        return cls(spec, str(path))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """One score per row of X; higher ranks first. A child index < 0 is leaf ~index."""
        X = np.asarray(X, dtype=np.float64)
        node = np.repeat(self._roots[:, None], len(X), axis=1)  # (trees, rows)
        rows = np.broadcast_to(np.arange(len(X)), node.shape)
        live = node >= 0
        while live.any():
            n = node[live]
            go_left = X[rows[live], self._feat[n]] <= self._thr[n]
            node[live] = np.where(go_left, self._left[n], self._right[n])
            live = node >= 0
        return self._value[~node].sum(axis=0) if len(self._roots) else np.zeros(len(X))


def moves(model: TreeEnsemble, source: str | None) -> bool:
    """Whether `model` may move a candidate of this evidence source."""
    return source in model.sources


_models: dict[str, TreeEnsemble | ConfigError] = {}
_models_lock = threading.Lock()


def shared(path: Path) -> TreeEnsemble | None:
    """The reranker at `path` (models.reranker_path), loaded once per process. Mirador ships none in its
    default install: the one trained so far learned from LoCoMo, whose licence forbids commercial use
    (docs/models.md; optional/locomo-reranker/).

    A missing or broken file does not break search: it is logged once, as a warning that says how to
    fix it, and the first stage's order stands.
    """
    key = str(path)
    with _models_lock:
        got = _models.get(key)
        if got is None:
            try:
                got = TreeEnsemble.load(Path(key))
            except ConfigError as e:
                log.warning("evidence reranker off: %s", e)
                got = e
            _models[key] = got
    return got if isinstance(got, TreeEnsemble) else None


def from_lightgbm(dump: dict, meta: dict | None = None) -> dict:
    """A LightGBM `Booster.dump_model()` as this module's JSON: flat node arrays per tree.

    Only plain numerical splits are accepted ("<=", zeros and NaNs not treated as missing), which is
    what bench/train_reranker.py trains; anything else would be evaluated wrongly here, so it is refused.
    """
    names = dump.get("feature_names") or []
    if tuple(names) != FEATURES:
        raise ValueError(f"trained on {names}, not on memory.retrieval.rerank.FEATURES")
    trees = [_flat_tree(info["tree_structure"]) for info in dump["tree_info"]]
    return {"format": FORMAT, "features": list(FEATURES), "meta": meta or {}, "trees": trees}


def _flat_tree(root: dict) -> dict:
    """One LightGBM tree as flat node arrays: a split node is an index into feature/threshold/left/right,
    a leaf is ~(its index into value)."""
    feat: list[int] = []
    thr: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[float] = []

    def visit(node: dict[str, Any]) -> int:
        if "leaf_value" in node:
            value.append(float(node["leaf_value"]))
            return ~(len(value) - 1)
        if node.get("decision_type") != "<=" or node.get("missing_type") not in ("None", "NaN"):
            raise ValueError(f"unsupported split {node.get('decision_type')} / missing {node.get('missing_type')}")
        k = len(feat)
        feat.append(int(node["split_feature"]))
        thr.append(float(node["threshold"]))
        left.append(0)
        right.append(0)
        left[k] = visit(node["left_child"])
        right[k] = visit(node["right_child"])
        return k

    visit(root)
    return {"feature": feat, "threshold": thr, "left": left, "right": right, "value": value}


_warned: set[tuple[str, str]] = set()


def check_first_stage(model: TreeEnsemble, settings: dict) -> bool:
    """Whether `model` was trained on a first stage with these settings; logs once per pair when not.

    It still runs: a bench may vary the first stage on purpose. But its splits are thresholds on the
    first stage's scores, so they mean something else now.
    """
    trained = model.meta.get("first_stage")
    if trained is None or trained == settings:
        return True
    key = (model.source, json.dumps(settings, sort_keys=True))
    if key not in _warned:
        _warned.add(key)
        diff = sorted(k for k in set(trained) | set(settings) if trained.get(k) != settings.get(k))
        log.warning("evidence reranker %s was trained on another first stage (differs in %s): "
                    "retrain it with bench/train_reranker.py", model.source, ", ".join(diff))
    return False
