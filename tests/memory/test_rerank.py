"""The evidence reranker: its NumPy evaluator, its model file, and what it may and may not change."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory.config import Config
from memory.errors import ConfigError
from memory.retrieval import rerank
from memory.retrieval.rank import DEFAULT
from memory.retrieval.search import search_evidence
from memory.store.core import EvidenceSpec, Store
from memory.store.erasure import forget

T0 = datetime(2024, 5, 2, 9, 0)
# The LoCoMo-trained reranker: an optional file outside every package (docs/models.md), loaded only
# when models.reranker_path names it.
LOCOMO_MODEL = Path(__file__).resolve().parents[2] / "optional" / "locomo-reranker" / "evidence_reranker.json"


@pytest.fixture
def store(mirador_home):
    """A store that ranks evidence with the optional LoCoMo-trained reranker."""
    cfg = Config()
    cfg.models.reranker_path = LOCOMO_MODEL
    return Store(mirador_home, config=cfg)


def _lightgbm_model(seed: int = 0):
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, len(rerank.FEATURES)))
    X[:, 5] = rng.integers(0, 3, size=600)  # a few repeated values, as counts and flags are
    y = (X[:, 0] + 0.5 * X[:, 8] - X[:, 25] + rng.normal(scale=0.3, size=600) > 0.5).astype(float)
    data = lgb.Dataset(X, y, group=[20] * 30, feature_name=list(rerank.FEATURES))
    params = {"objective": "lambdarank", "num_leaves": 7, "min_data_in_leaf": 5, "verbose": -1, "seed": seed}
    return lgb.train(params, data, 30), rng.normal(size=(200, len(rerank.FEATURES)))


def test_numpy_evaluator_matches_lightgbm():
    model, X = _lightgbm_model()
    ens = rerank.TreeEnsemble(rerank.from_lightgbm(model.dump_model()))
    X[:5, 5] = [0, 1, 2, 1, 0]  # values exactly on thresholds go left, as in LightGBM
    np.testing.assert_allclose(ens.predict(X), model.predict(X), rtol=0, atol=1e-9)


def test_the_trees_of_several_models_score_their_sum():
    """bench/train_reranker.py ships bagged models as one file of all their trees."""
    (a, X), (b, _) = _lightgbm_model(0), _lightgbm_model(1)
    spec = rerank.from_lightgbm(a.dump_model())
    spec["trees"] += rerank.from_lightgbm(b.dump_model())["trees"]
    np.testing.assert_allclose(rerank.TreeEnsemble(spec).predict(X), a.predict(X) + b.predict(X), rtol=0, atol=1e-9)


def test_conversion_refuses_other_features():
    model, _ = _lightgbm_model()
    dump = model.dump_model()
    dump["feature_names"] = dump["feature_names"][:-1] + ["something_else"]
    with pytest.raises(ValueError, match="FEATURES"):
        rerank.from_lightgbm(dump)


def test_shipped_model_loads_and_scores_every_candidate():
    ens = rerank.TreeEnsemble.load(LOCOMO_MODEL)
    assert ens.meta["trained_on"] and ens.meta["held_out_recall"]["recall@5"]
    s = ens.predict(np.zeros((3, len(rerank.FEATURES))))
    assert s.shape == (3,) and np.isfinite(s).all()


def test_shipped_model_was_trained_on_this_first_stage():
    """Its splits are thresholds on the first stage's scores: change a default, retrain the model."""
    from memory.retrieval.rank import first_stage_settings

    ens = rerank.TreeEnsemble.load(LOCOMO_MODEL)
    assert ens.meta["first_stage"] == first_stage_settings(DEFAULT)
    assert rerank.check_first_stage(ens, first_stage_settings(DEFAULT))


def test_the_shipped_model_never_ranks_a_better_match_lower():
    """Raising a score by which the candidate matches better (or lowering a rank) must not lower it."""
    ens = rerank.TreeEnsemble.load(LOCOMO_MODEL)
    assert ens.meta["monotone"] == rerank.MONOTONE
    rng = np.random.default_rng(7)
    X = rng.uniform(0, 1, size=(400, len(rerank.FEATURES)))
    X[:, [rerank.FEATURES.index(f) for f in ("fused_rank", "first_rank", "overlap_n", "query_words")]] *= 30
    base = ens.predict(X)
    for name, sign in rerank.MONOTONE.items():
        k = rerank.FEATURES.index(name)
        for step in (0.01, 0.3, 5.0):
            better = X.copy()
            better[:, k] += sign * step
            assert (ens.predict(better) >= base - 1e-12).all(), f"a better {name} ranked lower"


def test_another_first_stage_is_reported_once(caplog):
    from memory.retrieval.rank import first_stage_settings

    ens = rerank.TreeEnsemble.load(LOCOMO_MODEL)
    other = first_stage_settings(replace(DEFAULT, speaker_boost=0.25))
    with caplog.at_level(logging.WARNING, logger="memory.retrieval.rerank"):
        assert not rerank.check_first_stage(ens, other)
        assert not rerank.check_first_stage(ens, other)
    warned = [r for r in caplog.records if "another first stage" in r.message]
    assert len(warned) == 1 and "speaker_boost" in warned[0].message


@pytest.mark.parametrize("content, message", [
    (None, "no reranker there"),
    ("{not json", "cannot read the reranker"),
    (json.dumps({"format": "something/1"}), "not a Mirador reranker"),
    (json.dumps({"format": rerank.FORMAT, "features": ["vec"], "trees": []}), "other features"),
    (json.dumps({"format": rerank.FORMAT, "features": list(rerank.FEATURES), "trees": [{"feature": [0]}]}),
     "malformed"),
    (json.dumps({"format": rerank.FORMAT, "features": list(rerank.FEATURES), "meta": {"sources": "import"},
                 "trees": []}), "meta.sources must list evidence sources"),
    (json.dumps({"format": rerank.FORMAT, "features": list(rerank.FEATURES), "meta": {"sources": ["scren"]},
                 "trees": []}), "meta.sources must list evidence sources"),
    (json.dumps({"format": rerank.FORMAT, "features": list(rerank.FEATURES), "meta": {"sources": [["import"]]},
                 "trees": []}), "meta.sources must list evidence sources"),
])
def test_a_bad_model_file_is_refused_with_what_to_do(tmp_path, content, message):
    path = tmp_path / "model.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message) as err:
        rerank.TreeEnsemble.load(path)
    assert "models.reranker" in str(err.value) or "train_reranker" in str(err.value)


def _chat(store, scope="chat"):
    lines = [
        ("Ana", "Did you finish the kitchen shelves this weekend?"),
        ("Ben", "Yes! I built them from the old oak boards, they hold all the jars now."),
        ("Ana", "Wow, nice!"),
        ("Ben", "The oak needed two coats of oil before it looked right."),
        ("Ana", "Are you going to build the garden bench next?"),
        ("Ben", "Maybe in June, once the oak for the bench arrives."),
    ] + [(who, f"Filler line {i} about the weather and the traffic on the way home.")
         for i, who in enumerate(["Ana", "Ben"] * 12)]
    specs = [EvidenceSpec(text=t, source="audio", speaker=w, scope=scope, captured_at=T0 + timedelta(seconds=20 * i))
             for i, (w, t) in enumerate(lines)]
    return store.add_evidence_batch(specs)


def test_reranking_reorders_the_first_stage_top_and_keeps_its_scores(store):
    from memory.retrieval.rank import reranker

    assert reranker(store, DEFAULT) is not None  # the optional model, loaded
    _chat(store)
    q = "What did Ben build from the oak boards?"
    first = replace(DEFAULT, rerank=False)
    n = DEFAULT.rerank_top
    a = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=n)
    b = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=n, rank=first)
    assert {h.id for h in a} == {h.id for h in b}  # the same candidates, maybe another order
    assert [h.score for h in a] == [h.score for h in b]  # the first stage's scale, position by position
    assert "oak boards" in a[0].text


def test_reranked_search_keeps_the_scope_filter_and_forgets(store):
    rows = _chat(store)
    _chat(store, scope="other")
    gone = next(r for r in rows if "oak boards" in r["text"])
    forget(store, [gone["id"]])
    hits = search_evidence(store, "What did Ben build from the oak boards?", scopes=["chat"],
                           now=T0 + timedelta(days=1), limit=30)
    assert hits and all(h.scope == "chat" for h in hits)
    assert gone["id"] not in {h.id for h in hits}
    assert all("oak boards" not in h.text for h in hits)


def _ranks_as_the_first_stage(store: Store) -> None:
    _chat(store)
    q = "What did Ben build from the oak boards?"
    got = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=10)
    first = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=10,
                            rank=replace(DEFAULT, rerank=False))
    assert [h.id for h in got] == [h.id for h in first]


def test_the_default_install_ranks_without_a_reranker(mirador_home):
    """No reranker ships (the one trained so far is LoCoMo-derived): by default none is loaded and the
    search is the first stage's."""
    from memory.retrieval.rank import reranker

    plain = Store(mirador_home)
    assert plain.config.models.reranker_path is None and reranker(plain, DEFAULT) is None
    _ranks_as_the_first_stage(plain)


def test_search_works_without_the_model_and_says_why(mirador_home, caplog, tmp_path):
    cfg = Config()
    cfg.models.reranker_path = tmp_path / "missing.json"
    store = Store(mirador_home, config=cfg)
    _chat(store)
    with caplog.at_level(logging.WARNING, logger="memory.retrieval.rerank"):
        hits = search_evidence(store, "What did Ben build from the oak boards?", scopes=["chat"],
                               now=T0 + timedelta(days=1), limit=5)
    assert "oak boards" in hits[0].text
    assert any("reranker off" in r.message and "models.reranker_path" in r.message for r in caplog.records)


def test_switched_off_the_first_stage_ranks_alone(mirador_home):
    cfg = Config()
    cfg.models.reranker_path = LOCOMO_MODEL
    cfg.models.reranker = False
    _ranks_as_the_first_stage(Store(mirador_home, config=cfg))


def test_a_larger_limit_keeps_the_first_stage_order_below_the_reranked_top(store):
    _chat(store)
    q = "What did Ben build from the oak boards?"
    n = 5
    cfg = replace(DEFAULT, rerank_top=n)
    a = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=20, rank=cfg)
    b = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=20, rank=replace(cfg, rerank=False))
    assert {h.id for h in a[:n]} == {h.id for h in b[:n]}
    assert [h.id for h in a[n:]] == [h.id for h in b[n:]]


def test_doctor_says_when_the_reranker_cannot_load(mirador_home, tmp_path):
    from desktop.cli.doctor import check_reranker
    from memory.config import save_config

    cfg = Config()
    cfg.models.reranker_path = tmp_path / "missing.json"
    save_config(cfg, mirador_home)
    status, detail, fix = check_reranker()
    assert status == "WARN" and "no reranker there" in detail and "models.reranker" in fix


def test_too_few_candidates_rank_by_the_first_stage(store):
    """Out of the model's range (it learned from full lists): a handful of rows keeps the first stage."""
    specs = [EvidenceSpec(text=t, source="audio", speaker="Sam", scope="chat", captured_at=T0 + timedelta(minutes=i))
             for i, t in enumerate(["The oak shelves are done.", "Wow, nice!", "Oak oil needs two coats?",
                                    "Coffee first.", "The bench waits for June."])]
    store.add_evidence_batch(specs)
    q = "What did Sam build from oak?"
    on = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=5)
    off = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=5,
                          rank=replace(DEFAULT, rerank=False))
    assert len(on) == 5 and [h.id for h in on] == [h.id for h in off]


def _down_the_best(tmp_path) -> Path:
    """A one-split model that marks down the first stage's best row."""
    from memory.retrieval.rank import first_stage_settings

    k = rerank.FEATURES.index("first_rank")
    spec = {"format": rerank.FORMAT, "features": list(rerank.FEATURES),
            "meta": {"first_stage": first_stage_settings(DEFAULT)},
            "trees": [{"feature": [k], "threshold": [0.5], "left": [~0], "right": [~1], "value": [-1.0, 0.0]}]}
    path = tmp_path / "down_the_best.json"
    path.write_text(json.dumps(spec))
    return path


def _store_with(mirador_home, model: Path) -> Store:
    cfg = Config()
    cfg.models.reranker_path = model
    return Store(mirador_home, config=cfg)


def test_the_model_decides_the_order_of_the_top(mirador_home, tmp_path):
    """A model that marks down the first stage's best row: search must follow the model, not the
    first stage (features -> predict -> reorder), and keep the first stage's scores by position."""
    store = _store_with(mirador_home, _down_the_best(tmp_path))
    _chat(store)
    q = "What did Ben build from the oak boards?"
    n = DEFAULT.rerank_top
    got = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=n + 5)
    first = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=n + 5,
                            rank=replace(DEFAULT, rerank=False))
    assert [h.id for h in got[:n - 1]] == [h.id for h in first[1:n]]  # everyone else moves up one
    assert got[n - 1].id == first[0].id  # the marked-down row ends the reordered top
    assert [h.id for h in got[n:]] == [h.id for h in first[n:]]  # below the top: untouched
    assert [h.score for h in got] == [h.score for h in first]


def test_screen_captures_keep_their_places_while_chat_turns_move(mirador_home, tmp_path):
    """The model learned from chat turns. In a store of both, the screen captures among the top keep
    the first stage's places; the turns move among the places the turns held."""
    store = _store_with(mirador_home, _down_the_best(tmp_path))
    _chat(store)
    screens = [f"Hardware store - Oak boards 2x4, {p} EUR per meter - Add to cart - Ben's saved list"
               for p in (3, 4, 5, 6, 7, 8)]
    store.add_evidence_batch([EvidenceSpec(text=t, source="screen", app="Firefox", window="Oak boards", scope="chat",
                                           captured_at=T0 + timedelta(hours=2, minutes=i))
                              for i, t in enumerate(screens)])
    q = "What did Ben build from the oak boards?"
    n = DEFAULT.rerank_top
    got = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=n)
    first = search_evidence(store, q, scopes=["chat"], now=T0 + timedelta(days=1), limit=n,
                            rank=replace(DEFAULT, rerank=False))
    places = [k for k, h in enumerate(first) if h.source == "screen"]
    turns = [k for k, h in enumerate(first) if h.source != "screen"]
    assert len(places) == len(screens) and turns[0] == 0, "precondition: captures in the top, a turn first"
    assert [got[k].id for k in places] == [first[k].id for k in places]  # not one capture moved
    # The best turn is marked down: the other turns move up one place among the turns' places.
    assert [got[k].id for k in turns] == [first[k].id for k in turns[1:]] + [first[0].id]
    assert [h.score for h in got] == [h.score for h in first]


def test_a_workday_of_screen_captures_ranks_as_the_first_stage_does(store, tmp_path):
    """On a made-up workday of screen captures (bench/screen_retrieval.py) the model, allowed to move
    them, put two answers lower and none higher; the search leaves them where the first stage does."""
    from bench import screen_retrieval as S
    from memory.retrieval.rank import first_stage

    day = S.load()
    ids = S.ingest(store, day)
    stage = first_stage(store, day["questions"][0]["q"], store.where("evidence", scopes=[S.SCOPE]), T0, DEFAULT)
    assert len(stage.ranked) >= DEFAULT.rerank_top, "precondition: enough candidates for the reranker to run"
    first = S.ranks(store, day, ids, replace(DEFAULT, rerank=False))
    assert S.ranks(store, day, ids, DEFAULT) == first
    store.config.models.reranker_path = S.screen_too(tmp_path)
    assert S.ranks(store, day, ids, DEFAULT) != first, "precondition: the model would move some"
