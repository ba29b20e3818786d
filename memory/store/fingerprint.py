"""Content fingerprints: equal for texts that differ only in case, spacing and punctuation."""

from __future__ import annotations

import hashlib
import re

_PUNCT = re.compile(r"[^\w\s]", re.UNICODE)
_SPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace."""
    return _SPACE.sub(" ", _PUNCT.sub(" ", text.lower())).strip()


def fingerprint(text: str) -> str:
    """sha256 of the normalised text; what a tombstone keeps instead of the content."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def content_hash(text: str) -> str:
    """sha256 of the exact text, for de-duplicating identical evidence."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
