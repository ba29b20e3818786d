"""Search terms of a text, as the sealed full-text index holds them: keyed hashes of normalised words.

A sealed store cannot index its words as they are (LanceDB's inverted index writes every token in the clear).
It indexes, for each word of a row's index text, a keyed hash of the word's normalised form instead, and a
query is normalised and hashed the same way, so BM25 ranks the same rows in the same order as an index of
the stems would: equal stems give equal hashes and nothing else does (bench/sealed_search.py compared both on
the LoCoMo dev turns: the same top 10).

Normalising is what LanceDB's analyser did for the plaintext index (memory/store/indexes.py): words split on
anything that is not a letter or digit, lower case, ASCII folding, words of 40 characters or more dropped,
the Snowball English stemmer, then English stop words dropped (matched against the stems, as LanceDB does).
"""

from __future__ import annotations

import base64
import hashlib
import re
import threading
import unicodedata
from functools import lru_cache
from typing import Any

# NLTK's English stop words, as LanceDB's analyser drops them (after stemming).
STOP_WORDS = frozenset("""a about above after again against ain all am an and any are aren as at be because been before
being below between both but by can couldn d did didn do does doesn doing don down during each few for from further
had hadn has hasn have haven having he her here hers herself him himself his how i if in into is isn it its itself
just ll m ma me mightn more most mustn my myself needn no nor not now o of off on once only or other our ours
ourselves out over own re s same shan she should shouldn so some such t than that the their theirs them themselves
then there these they this those through to too under until up ve very was wasn we were weren what when where
which while who whom why will with won wouldn y you your yours yourself yourselves""".split())
MAX_WORD = 40  # LanceDB's simple tokenizer drops longer tokens
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_local = threading.local()  # a PyStemmer stemmer is not safe to share between threads


def _stemmer() -> Any:  # a PyStemmer Stemmer (the package ships no types)
    st = getattr(_local, "stemmer", None)
    if st is None:
        import Stemmer  # PyStemmer: the Snowball algorithms in C

        st = _local.stemmer = Stemmer.Stemmer("english")
    return st


def words(text: str) -> list[str]:
    """The normalised words (stems) of text that a search matches on, in order, stop words left out."""
    if not text:
        return []
    folded = unicodedata.normalize("NFKD", text.lower()).encode("ascii", "ignore").decode("ascii")
    found = [w for w in _WORD.findall(folded) if len(w) < MAX_WORD]
    return [s for s in _stemmer().stemWords(found) if s not in STOP_WORDS]


class TermHasher:
    """Keyed hashes of stems: 13 lowercase base32 letters (64 bits) each, one token per stem."""

    def __init__(self, key: bytes) -> None:
        self._key = key
        self.hash = lru_cache(maxsize=65_536)(self._hash)  # words repeat: most texts hash few new ones

    def _hash(self, stem: str) -> str:
        mac = hashlib.blake2b(stem.encode("utf-8"), key=self._key, digest_size=8).digest()
        return base64.b32encode(mac).decode("ascii").rstrip("=").lower()

    def terms(self, text: str | None) -> str:
        """The index tokens of text, space separated ("" when it has no searchable word)."""
        return " ".join(self.hash(w) for w in words(text or ""))
