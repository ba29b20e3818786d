"""Offline token counting that errs high, so a budgeted context never overflows a real tokenizer.

No tiktoken (it downloads its vocabularies). The count is the bundled MiniLM WordPiece tokenizer's
count plus corrections for what byte-level BPE tokenizers pay for and WordPiece does not see
(runs of whitespace, digits split one by one, multi-byte characters), times a safety margin.

Measured by `bench/tokens_accuracy.py` on 49 varied texts (prose, chat, OCR, code, JSON, logs,
URLs, numbers, European/CJK/Cyrillic text, emoji, recall blocks) against two real BPE tokenizers
available offline — Gemma 3 (262k vocab, llama.cpp) and GPT-2/Whisper (50k vocab): no text was
undercounted; see the bench output for mean and max over-count.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Fitted on bench/token_samples.py so that the raw estimate comes close to the real count's worst
# case on block-sized texts; short texts spread more, which the margin and the constant cover.
_EXTRA_WS = 0.75  # every whitespace char after the first in a run (BPE pays for indentation)
_CTRL_WS = 0.25  # tabs and newlines
_DIGIT = 0.4  # Gemma/Llama split numbers into single digits; WordPiece keeps chunks
_NONASCII_BYTE = 0.5  # byte-level BPE splits rare scripts and emoji into bytes
MARGIN = 1.15
CONSTANT = 6
_WS_RUN = re.compile(r"\s{2,}")
_DIGITS = re.compile(r"\d")


@functools.lru_cache(maxsize=1)
def _wordpiece() -> Any:  # a tokenizers.Tokenizer (the package ships no types), or None
    """The bundled MiniLM tokenizer without padding/truncation, or None when unavailable."""
    try:
        from tokenizers import Tokenizer

        from models.locate import embedder_dir

        path = Path(embedder_dir(None)) / "tokenizer.json"
        tok = Tokenizer.from_file(str(path))
    except Exception as e:  # missing package or file: fall back to the byte heuristic
        log.warning("token counting falls back to a byte heuristic (%s)", e)
        return None
    tok.no_padding()
    tok.no_truncation()
    return tok


def _corrections(text: str) -> float:
    extra_ws = sum(len(m.group()) - 1 for m in _WS_RUN.finditer(text))
    ctrl = text.count("\n") + text.count("\t") + text.count("\r")
    digits = len(_DIGITS.findall(text))  # one regex pass in C, not a Python loop over characters
    nonascii = len(text.encode("utf-8")) - len(text) if not text.isascii() else 0
    return _EXTRA_WS * extra_ws + _CTRL_WS * ctrl + _DIGIT * digits + _NONASCII_BYTE * nonascii


def _finish(raw: float) -> int:
    return math.ceil(raw * MARGIN) + CONSTANT


def _fallback(text: str) -> int:
    # A byte-level BPE token is at least one byte, so the byte count is a hard upper bound. Wasteful
    # (several times the real count on English) but only used when the bundled tokenizer is missing.
    return len(text.encode("utf-8"))


def count_tokens(text: str) -> int:
    """A token count for text that is at least what Gemma / GPT-2 BPE tokenizers report (measured)."""
    if not text:
        return 0
    if _wordpiece() is None:
        return _fallback(text)
    return _finish(_raw(text))


def count_joined(parts: list[str], sep: str) -> int:
    """count_tokens(sep.join(parts)), from the parts' cached counts when that is exact.

    It is when sep is whitespace and no part is empty or starts or ends with whitespace: WordPiece
    splits at whitespace, so no token spans a separator, and each correction counts characters or
    whitespace runs that the separator neither joins nor splits. Recall counts its whole block this
    way after counting every item, so no text is tokenized twice in one recall.
    """
    if _wordpiece() is None or not sep.isspace() or any(not p or p != p.strip() for p in parts):
        return count_tokens(sep.join(parts))
    if not parts:
        return 0
    if len(parts) == 1:
        # Exactly the part's own count: the margin below rounds a count that lands on a whole number
        # one higher, and a single item sized to the whole budget would then be dropped as too long.
        return count_tokens(parts[0])
    # The sums run in another order than one count of the joined text would: a hair more, so float
    # rounding can only round up.
    return _finish(sum(_raw(p) for p in parts) + (len(parts) - 1) * _corrections(sep) + 1e-9)


def _raw(text: str) -> float:
    # Recall renders the same headers and bodies for every query that finds them, so counts are
    # cached — keyed by a digest, so a forgotten memory's words do not linger in the cache.
    key = hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
    raw = _COUNTS.get(key)
    if raw is None:
        raw = len(_wordpiece().encode(text, add_special_tokens=False).ids) + _corrections(text)
        with _COUNTS_LOCK:
            if len(_COUNTS) >= _COUNTS_MAX:
                _COUNTS.pop(next(iter(_COUNTS)))  # oldest first: dicts keep insertion order
            _COUNTS[key] = raw
    return raw


_COUNTS: dict[bytes, float] = {}  # digest -> WordPiece count + corrections, before the margin
_COUNTS_LOCK = threading.Lock()
_COUNTS_MAX = 8192


def count_many(texts: list[str]) -> list[int]:
    """count_tokens for many texts in one tokenizer call (the Rust tokenizer batches in parallel)."""
    tok = _wordpiece()
    if tok is None:
        return [_fallback(t) if t else 0 for t in texts]
    encs = tok.encode_batch(list(texts), add_special_tokens=False)
    return [_finish(len(e.ids) + _corrections(t)) if t else 0 for t, e in zip(texts, encs, strict=True)]


def truncate_to_tokens(text: str, budget: int, suffix: str = "…") -> str:
    """The longest prefix of text (plus suffix) whose count fits budget, cut at a word if one is near; '' if none fits."""
    if count_tokens(text) <= budget:
        return text
    lo = _fit_by_offsets(text, budget, suffix)
    if lo is None:  # no tokenizer, or its estimate did not hold: search on characters
        lo = _fit_by_chars(text, budget, suffix)
    if lo == 0:
        return ""
    cut = text[:lo]
    space = cut.rfind(" ")
    if space > lo * 0.6:  # prefer a word boundary when it costs little
        cut = cut[:space]
    return cut.rstrip() + suffix


def _fit_by_chars(text: str, budget: int, suffix: str) -> int:
    lo, hi = 0, len(text)  # binary search on characters kept: works for text without spaces too (CJK)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid].rstrip() + suffix) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _fit_by_offsets(text: str, budget: int, suffix: str) -> int | None:
    """Characters to keep, found with one tokenizer pass instead of one per probe of a binary search.

    A prefix that ends where WordPiece token k ends has k tokens, so its count is _finish(k + the
    suffix's tokens + the prefix's corrections) without tokenizing it again. The result is checked
    with count_tokens; None when that check fails (then the caller searches on characters).
    """
    tok = _wordpiece()
    if tok is None:
        return None
    ends = [e for _, e in tok.encode(text, add_special_tokens=False).offsets]
    suffix_wp = len(tok.encode(suffix, add_special_tokens=False).ids) if suffix else 0

    def fits(k: int) -> bool:
        prefix = text[: ends[k - 1]].rstrip() + suffix
        return _finish(k + suffix_wp + _corrections(prefix)) <= budget

    lo, hi = 0, len(ends)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    keep = ends[lo - 1] if lo else 0
    if keep and count_tokens(text[:keep].rstrip() + suffix) > budget:
        return None
    return keep
