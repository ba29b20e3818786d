"""What the default install ships is trained only on data Mirador may redistribute (issue 32).

LoCoMo (CC BY-NC 4.0) is an evaluation set: no bundled weight may name one of its conversations as
training data, and the synthetic set the weights learn from is regenerated from its seed, so it
carries no LoCoMo speaker.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _synth():
    spec = importlib.util.spec_from_file_location("synth_conversations", ROOT / "bench" / "synth_conversations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["synth_conversations"] = module
    spec.loader.exec_module(module)
    return module


def test_bundled_tuning_learned_from_synthetic_conversations_only():
    from models import tuning

    meta = tuning.read_meta(tuning.BUNDLED)
    assert meta["trained_on"] and all(c.startswith("synth-") for c in meta["trained_on"]), meta["trained_on"]
    assert "locomo" not in meta["data"].lower()


def test_no_packaged_file_learned_from_locomo_and_none_is_loaded_by_default():
    """The LoCoMo-trained reranker is an optional file outside every package; by default no reranker loads."""
    from memory.config import Config
    from memory.retrieval import rerank

    for top in ("memory", "models", "capture", "desktop"):
        for p in (ROOT / top).rglob("data/*.json"):
            meta = json.loads(p.read_text(encoding="utf-8")).get("meta", {})
            trained = [*meta.get("trained_on", []), str(meta.get("data", ""))]
            assert not any("locomo" in str(t).lower() or str(t).startswith("conv-") for t in trained), p
    assert Config().models.reranker_path is None
    optional = rerank.TreeEnsemble.load(ROOT / "optional" / "locomo-reranker" / "evidence_reranker.json")
    assert not all(c.startswith("synth-") for c in optional.meta["trained_on"])  # what the file's README says
    assert "CC BY-NC 4.0" in (ROOT / "optional" / "locomo-reranker" / "README.md").read_text(encoding="utf-8")


def test_synthetic_set_is_reproducible_from_its_seed_and_labels_real_turns():
    synth = _synth()
    a, b = synth.generate(7, 2), synth.generate(7, 2)
    assert a == b
    assert synth.generate(8, 2) != a
    for conv in a:
        ids = {t["dia_id"] for k, v in conv["conversation"].items() if k.startswith("session_") and k.count("_") == 1
               for t in v}
        assert conv["qa"] and all(set(q["evidence"]) <= ids for q in conv["qa"])
        assert {q["category"] for q in conv["qa"]} <= {1, 2, 3, 4}


def test_synthetic_speakers_are_none_of_locomos():
    # The ten LoCoMo conversations' speakers (snap-research/locomo), so no name is reused.
    locomo_speakers = {"Caroline", "Melanie", "Jon", "Gina", "John", "Maria", "Joanna", "Nate", "Tim", "Audrey",
                       "Andrew", "James", "Deborah", "Jolene", "Evan", "Sam", "Calvin", "Dave"}
    assert not locomo_speakers & set(_synth().NAMES)
