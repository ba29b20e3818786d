"""The part of a long text that a query is about: its lines that share the most words with the query.

Why: a screen capture's first line is a menu bar or a channel name, a transcript's first sentence a
greeting; the line that answers ("No space left on device") is further down. Recall's summaries and
the MCP search results show these lines instead of the text's start.
"""

from __future__ import annotations

import re

# A line ends at a newline, or a sentence at its stop followed by a space.
SEGMENT_END = re.compile(r"(?<=[.!?。！？])\s|\n")
_WORD = re.compile(r"[^\W_]+")
_STOP = frozenset("the and for with that this what when where which who whom whose why how did does was were are "
                  "has have had not but you your our their his her its they them she him from into about after "
                  "before then than there here some any all can could would should will just".split())


def stems(text: str) -> frozenset[str]:
    """Content words, crudely stemmed ("failed", "fails" -> "fail")."""
    out = set()
    for w in _WORD.findall(text.lower()):
        if len(w) < 3 or w in _STOP:
            continue
        for suffix in ("ing", "ed", "es", "s"):
            if w.endswith(suffix) and len(w) - len(suffix) >= 3:
                w = w[: -len(suffix)]
                break
        out.add(w[:6])
    return frozenset(out)


def focused(text: str, query_stems: frozenset[str], max_chars: int) -> str | None:
    """The lines (or sentences) of `text` sharing the most words with the query, in their order, with
    "…" where lines were left out, in about max_chars; None when no line shares a word.

    The best line is always there, whole (a caller cuts it to its room); others join while they fit.
    """
    segs = [x for x in (s.strip() for s in SEGMENT_END.split(text)) if x]
    if not query_stems or len(segs) < 2:
        return None
    # A line with none of the stems inside it scores 0 without being split into words (a long capture
    # has hundreds of lines, and recall summarises several items).
    scores = [len(stems(x) & query_stems) if any(st in x.lower() for st in query_stems) else 0 for x in segs]
    order = sorted((i for i in range(len(segs)) if scores[i]), key=lambda i: (-scores[i], i))
    if not order:
        return None
    best = order[0]
    if len(segs[best]) > max_chars:  # one long line (OCR without line breaks): start near its first match
        segs[best] = _from_first_match(segs[best], query_stems, max_chars)
    picked, room = {best}, max_chars - len(segs[best])
    for i in order[1:]:
        if len(segs[i]) + 3 <= room:
            picked.add(i)
            room -= len(segs[i]) + 3
    out, last = [], -1
    for i in sorted(picked):
        out.append(("… " if i != last + 1 else "") + segs[i])
        last = i
    return " ".join(out) + (" …" if last < len(segs) - 1 else "")


CHROME_SCAN = 12  # the lines of a screen capture looked at for where its content starts


def past_chrome(text: str) -> str:
    """A screen capture's text from its first line that reads like content rather than window chrome
    (a menu bar, a tab strip, a toolbar: under four words of three letters or more, or all of them
    capitalised), "… " marking the cut; the text as it is when no such line comes within CHROME_SCAN
    lines.

    For when no line shares a word with the query (focused() is None): the capture matched by meaning,
    and "File Edit Selection View Go Run" says nothing about why.
    """
    lines = text.split("\n")
    for i, line in enumerate(lines[:CHROME_SCAN]):
        words = [w for w in _WORD.findall(line) if len(w) >= 3 and not w.isdigit()]
        if len(words) >= 4 and not all(w[:1].isupper() for w in words):
            return text if i == 0 else "… " + "\n".join(lines[i:])
    return text


def _from_first_match(line: str, query_stems: frozenset[str], max_chars: int) -> str:
    """`line` from a few words before its first word the query shares, when that word would fall
    outside the first max_chars characters; "… " marks the cut."""
    for m in _WORD.finditer(line):
        if stems(m.group()) & query_stems:
            if m.end() <= max_chars * 2 // 3:
                return line  # already near the start
            start = line.rfind(" ", 0, max(0, m.start() - max_chars // 6)) + 1
            return "… " + line[start:]
    return line
