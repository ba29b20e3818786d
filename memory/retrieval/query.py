"""Query analysis for evidence search: what to embed, what to full-text match, who is named, when.

Rules only (no model): questions are short and the cost must stay in microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from memory.store.timeparse import Window, find_windows

# Question scaffolding that carries no topic. BM25 drops common stop words itself; these are the
# question-shaped ones it keeps ("kind", "type", "name") and that otherwise match everywhere.
_QUESTION_WORDS = {
    "what", "when", "where", "who", "whom", "whose", "which", "why", "how", "did", "does", "do", "is",
    "are", "was", "were", "has", "have", "had", "kind", "type", "sort", "name", "many", "much", "long",
    "would", "could", "likely", "might", "say", "said", "mention", "mentioned", "tell", "told", "talk",
    "talked", "about", "the", "a", "an", "of", "to", "in", "on", "for", "and", "or", "it", "that", "this",
}
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’\-]*")
_POSSESSIVE = re.compile(r"(?i)['’]s\b")


@dataclass
class QueryPlan:
    """How one question is searched."""

    text: str  # as asked
    vec: str  # what gets embedded
    fts: str  # what the full-text index matches
    names: set[str] = field(default_factory=set)  # lower-cased capitalised words: maybe people
    windows: list[Window] = field(default_factory=list)  # dates the question refers to


def analyze(query: str, now: datetime, rewrite: bool = True, speakers: set[str] | frozenset = frozenset()) -> QueryPlan:
    """Split a question into its embedding text, full-text terms, named people and time windows.

    speakers: lower-case names of known speakers (memory/store/speakers.py). The embedded text says "they"
    where the question names one: the speaker column matches the person, the vector the topic.
    """
    windows = find_windows(query, now)
    names = {_POSSESSIVE.sub("", w).lower() for w in _WORD.findall(query) if w[:1].isupper()}
    names -= _QUESTION_WORDS
    if not rewrite:
        return QueryPlan(query, query, query, names, windows)
    words = [_POSSESSIVE.sub("", w) for w in _WORD.findall(query)]
    terms = [w for w in words if w.lower() not in _QUESTION_WORDS]
    fts = " ".join(terms) or query
    return QueryPlan(query, _without_speakers(query, names & set(speakers)), fts, names, windows)


def _without_speakers(query: str, named: set[str]) -> str:
    if not named:
        return query
    is_name = lambda w: _POSSESSIVE.sub("", w).lower() in named  # noqa: E731
    if all(is_name(w) or w.lower() in _QUESTION_WORDS for w in _WORD.findall(query)):
        return query  # nothing but the name: it is the topic
    return _WORD.sub(lambda m: "they" if is_name(m.group(0)) else m.group(0), query)
