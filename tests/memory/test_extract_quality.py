"""The extraction quality bench: its scoring functions, and the labelled set's schema and splits."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime

import pytest

from bench.extract_quality import (
    DATA,
    FIELDS,
    HELD_OUT,
    SOURCES,
    SPLITS,
    TYPES,
    holds,
    load_items,
    norm,
    run,
    score,
    unsupported_terms,
)

ALL = load_items("all")  # train and dev
HELDOUT = load_items("heldout") + load_items("heldout2")


# ---- scoring ---------------------------------------------------------------------------------


def test_holds_needs_every_key_case_and_whitespace_insensitive():
    assert holds("Flight TP 1337 leaves at 06:55", ["tp  1337", "06:55"])
    assert holds("Flight TP\n1337 leaves", ["TP 1337"])
    assert not holds("Flight TP 1337 leaves in the morning", ["TP 1337", "06:55"])
    assert not holds("Flight TP1337", ["TP 1337"])  # a key survives as written, not rewritten


def test_unsupported_terms_flag_invented_numbers_and_names_only():
    ev = "um so the plumber, Rafael, is coming Tuesday between 1 and 3, his number is 0471 22 83 19."
    assert unsupported_terms("The plumber Rafael comes on Tuesday between 1 and 3.", ev) == []
    assert unsupported_terms("Rafael's number is 0471 22 83 19", ev) == []
    assert unsupported_terms("The user said the plumber comes Tuesday at 5.", ev) == ["5"]
    assert unsupported_terms("The plumber, with Marco, comes Tuesday.", ev) == ["Marco"]
    # A capital at the start of a sentence, "I" or "The user" names nobody.
    assert unsupported_terms("Plumber coming. Boiler check. I need to be home.", ev) == []
    # A possessive, or a number written without its thousands separator, is still supported;
    # a name hidden inside a longer word is not.
    assert unsupported_terms("Rafael's visit; rent is 1240 euros", "Rafael comes. Rent: 1,240 euros") == []
    assert unsupported_terms("She met Ana and Al", "she met a banana, also") == ["Ana", "Al"]
    # A URL, an id or a path is not a name (its digits are still checked).
    assert unsupported_terms("Figma (https://figma.com/file/Tr3nLg0)", "Figma: https://figma.com/file/Tr3nLg0") == []
    assert unsupported_terms("Logo in figma.com/file/Tr9nLg0", "Figma: https://figma.com/file/Tr3nLg0") == ["9"]


def _item(id_, facts, text="Dentist on the 14th at 10:30, Dr. Okafor.", source="audio", kind="voice_note"):
    return {"id": id_, "split": "dev", "source": source, "app": "", "window": "", "kind": kind,
            "captured_at": "2026-11-01T09:00:00+00:00", "text": text, "facts": facts}


def test_score_counts_recall_types_noise_invention_and_duplication():
    items = [
        _item("a", [{"keys": ["14th", "10:30"], "types": ["episodic"]}, {"keys": ["Okafor"], "types": ["semantic"]}]),
        _item("n", [], text="File Edit View Help", source="screen", kind="noise_menu"),
    ]
    ev_id_of = {"ev-a": "a", "ev-n": "n"}
    mems = [
        {"text": "Dentist appointment on the 14th at 10:30", "type": "episodic", "provenance": ["ev-a"]},
        {"text": "Dentist appointment on the 14th at 10:30 with Dr. Okafor", "type": "episodic",
         "provenance": ["ev-a"]},
        {"text": "Dentist with Dr. Okafor at 11:00", "type": "semantic", "provenance": ["ev-a"]},
        {"text": "Menu: File, Edit", "type": "resource", "provenance": ["ev-n"]},
        {"text": "Unrelated memory from elsewhere", "type": "semantic", "provenance": ["ev-other"]},
    ]
    s = score(items, mems, ev_id_of)
    assert s["facts"] == 2 and s["items"] == 2 and s["noise_items"] == 1
    assert s["fact_recall"] == 1.0
    assert s["typed_recall"] == 1.0  # "Okafor" is held by a semantic memory
    assert s["noise_memories"] == 1
    assert s["memories"] == 4  # the memory from evidence outside the set is not counted
    assert s["unsupported_rate"] == 0.25  # "11:00" is invented
    assert s["memories_per_fact"] == 1.5  # three memories from the fact-bearing item, two facts
    assert s["type_confusion"] == {"episodic": {"episodic": 1}, "semantic": {"semantic": 1}}

    wrong_type = [{"text": "Dentist on the 14th at 10:30", "type": "procedural", "provenance": ["ev-a"]}]
    s = score(items, wrong_type, ev_id_of)
    assert (s["fact_recall"], s["typed_recall"], s["noise_memories"]) == (0.5, 0.0, 0)
    assert s["_missed"] == [{"id": "a", "keys": ["Okafor"]}]
    assert s["type_confusion"] == {"episodic": {"procedural": 1}, "semantic": {"missed": 1}}


def test_a_memory_counts_for_the_item_it_derives_from_only():
    items = [_item("a", [{"keys": ["Okafor"], "types": ["semantic"]}]),
             _item("b", [{"keys": ["Okafor"], "types": ["semantic"]}])]
    mems = [{"text": "Dr. Okafor is the dentist", "type": "semantic", "provenance": ["ev-b"]}]
    assert score(items, mems, {"ev-a": "a", "ev-b": "b"})["fact_recall"] == 0.5


# ---- the labelled set ------------------------------------------------------------------------


def test_set_has_the_size_and_fields_the_issue_asks_for():
    assert len(ALL) >= 250
    ids = [it["id"] for it in ALL]
    assert len(ids) == len(set(ids)), "ids must be unique"
    ids += [it["id"] for it in HELDOUT]
    assert len(ids) == len(set(ids)), "ids must be unique across every split"
    for it in ALL + HELDOUT:
        assert set(it) == set(FIELDS), it["id"]
        assert it["split"] in SPLITS and it["source"] in SOURCES, it["id"]
        assert it["text"].strip() and isinstance(it["window"], str) and isinstance(it["app"], str)
        assert datetime.fromisoformat(it["captured_at"]).utcoffset() is not None, it["id"]
        for f in it["facts"]:
            assert f["keys"] and f["types"] and set(f["types"]) <= set(TYPES), it["id"]


def test_every_key_occurs_in_its_items_text():
    for it in ALL + HELDOUT:
        for f in it["facts"]:
            for k in f["keys"]:
                assert norm(k) in norm(it["text"]), (it["id"], k)


def test_noise_is_over_a_third_and_only_noise_has_no_facts():
    noise = [it for it in ALL if not it["facts"]]
    assert 0.3 <= len(noise) / len(ALL) <= 0.5  # raised for issue 44: noise of every kind, not a fifth
    assert all(it["kind"].startswith("noise_") for it in noise)
    assert all(it["facts"] for it in ALL if not it["kind"].startswith("noise_"))


def test_every_source_and_app_kind_is_covered_in_both_splits():
    kinds = {it["kind"] for it in ALL}
    assert {"voice_note", "meeting_transcript", "editor", "terminal", "chat", "issue_tracker", "document", "pdf",
            "browser", "noise_menu", "noise_listing", "noise_filler", "noise_cookie"} <= kinds
    for split in ("train", "dev"):
        assert {it["source"] for it in ALL if it["split"] == split} == set(SOURCES), split
        assert any(not it["facts"] for it in ALL if it["split"] == split)


def test_the_heldout_splits_live_in_their_own_files_and_never_in_train_dev_or_all():
    """Held-out evidence was written before the noise signs and weights it measures (issue 44; heldout2 by
    another author, later); nothing that trains or tunes may read it, so each split is in its own file only
    and load_items("all") leaves them out."""
    first = load_items("heldout")
    assert len([it for it in first if not it["facts"]]) >= 3 * 42  # three times noise.jsonl before issue 44
    assert len([it for it in first if it["facts"]]) >= 40  # facts that look like noise, so a filter is caught eating them
    assert {it["split"] for it in load_items("heldout2")} == {"heldout2"}
    heldout_ids = {it["id"] for it in HELDOUT}
    for split in ("train", "dev", "all"):
        assert not heldout_ids & {it["id"] for it in load_items(split)}, split
    for path in sorted(DATA.glob("*.jsonl")):
        splits = {json.loads(line)["split"] for line in path.read_text(encoding="utf-8").splitlines()}
        for held in HELD_OUT:
            assert (splits == {held}) == (path.name == f"{held}.jsonl"), path.name
    with pytest.raises(ValueError):
        load_items("test")


def test_splits_are_about_70_30_stratified_by_kind_and_deterministic():
    by_kind = defaultdict(list)
    for path in sorted(p for p in DATA.glob("*.jsonl") if p.stem not in HELD_OUT):
        for line in path.read_text(encoding="utf-8").splitlines():
            it = json.loads(line)
            by_kind[it["kind"]].append(it)
    for kind, items in by_kind.items():
        for n, it in enumerate(sorted(items, key=lambda x: x["id"])):
            assert it["split"] == ("dev" if n % 10 in (1, 4, 7) else "train"), (kind, it["id"])
    dev = Counter(it["split"] for it in ALL)["dev"] / len(ALL)
    assert 0.25 <= dev <= 0.35
    assert [it["id"] for it in load_items("dev")] == [it["id"] for it in load_items("dev")]


def test_bench_runs_the_scheduler_job_end_to_end_with_the_rules():
    pytest.importorskip("lancedb")
    items = load_items("dev")[:6] + [it for it in load_items("dev") if not it["facts"]][:2]
    out = run(items, "rules")
    for k in ("fact_recall", "typed_recall", "noise_memories", "unsupported_rate", "memories_per_fact",
              "items_per_min", "per_source", "per_kind"):
        assert k in out
    for source in out["per_source"].values():  # the type confusion is given per source
        assert sum(sum(v.values()) for v in source["type_confusion"].values()) == source["facts"]
    assert out["items"] == len(items) and out["engine"] == "rules"
    assert out["job"].startswith(f"{len(items)} evidence")
