"""Evidence text → statements, before anything judges them (verbatim-first extraction).

A memory keeps the person's own words: an id, a number or a date cannot be lost or invented when
the memory text is the evidence's sentence, cleaned. So extraction first cuts the evidence into
statements with rules — lines, sentences (not at "Dr." or "no. 12"), speaker turns of a meeting
transcript, the author line of a chat message, the title of a record (an issue, an invoice, a
note's heading) — and only then asks which statements are worth keeping
(memory/consolidation/salience.py). What is kept is put back together here: a field line of a
record goes with the record's title ("ACME-3340 Migrate cron jobs — Assignee: Svetlana Ivanova;
Due: 2027-01-15"), a chat line with its author, an answer with its question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memory.consolidation.chrome import chrome_reason

# Words a sentence may end in without ending: "Dr. Okafor", "no. 12", "e.g. this", "C. Moreau".
_ABBREV = {"mr", "mrs", "ms", "dr", "st", "no", "nr", "vs", "etc", "e.g", "i.e", "eg", "ie", "approx", "incl",
           "jr", "sr", "prof", "fig", "ca", "cf", "dept", "est", "min", "max", "tel", "ph", "ref", "ave", "rd"}
_SENT_END = re.compile(r"(?<=[.!?])[\"'’”)\]]*\s+(?=[\"'“(\[]?[A-Z0-9#@$€£])")
# A transcript is often all lower case ("hmm, one sec. okay, the gate code is 4471"): there a full stop
# followed by any word ends a sentence, or small talk and a fact would be judged as one statement.
_SENT_END_SPOKEN = re.compile(r"(?<=[.!?])[\"'’”)\]]*\s+(?=[\"'“(\[]?[A-Za-z0-9#@$€£])")
_SPEAKER = re.compile(r"^\s*(?P<name>[A-Z][\w'’.-]{0,20}(?: [A-Z][\w'’.-]{0,20}){0,2}):\s+(?P<text>\S.*)$")
_TURN = re.compile(r"(?<=[.!?])\s+(?=[A-Z][\w'’-]{1,20}(?: [A-Z][\w'’-]{1,20})?:\s)")
_TIME = r"\d{1,2}[:.]\d{2}(?:\s?[AaPp]\.?[Mm]\.?)?"
# A chat message's author line, as Slack, Teams or Discord show it: "Priya Nair  10:42 AM", "Kofi A. 12:01 PM".
_AUTHOR = re.compile(rf"^\s*(?P<name>[A-Z][\w'’.-]*(?: [A-Z][\w'’.-]*){{0,2}})\s*(?:[·•|,-]\s*)?"
                     rf"(?:\[?{_TIME}\]?|(?:Today|Yesterday)(?: at)? {_TIME})\s*$")
# Field names of records that are fields, not titles ("From: ...", "Status: Accepted").
_FIELD = re.compile(r"^\s*[A-Z][\w /-]{0,24}:\s+\S")
_COMMAND = re.compile(r"^\s*(?:[$>#%]|>>>|\w+@[\w.-]+:\S*[$#]|\w+=>)\s")
_FILLER = re.compile(r"(?i)(?<![\w'])(?:u+h+|u+m+|e+r+m+|h+m+|a+h+|you know|i mean)(?![\w'])[,.]?\s*")
_LEAD = re.compile(r"(?i)^(?:(?:so|okay|ok|well|right|alright|and|yeah|oh)\b[,.]?\s+)+")
_REPEAT = re.compile(r"(?i)\b(\w+)(?:[,]?\s+\1\b)+")
_SPACES = re.compile(r"[ \t]+")
_WORD = re.compile(r"[A-Za-zÀ-ÿ][\w'’-]*")
# A written line this short is a label or a value ("Check-in  Fri 2 Apr 2027"): it joins the kept line beside it.
# Two longer lines each say something of their own and stay two memories.
NEIGHBOUR_WORDS = 12
RUN_CHARS = 300  # joined lines stop here: a long list of facts is not one memory cut short at its end


@dataclass
class Segment:
    """One statement of one evidence row, as written (cleaned), with where it stands."""

    text: str
    row: int  # index of the evidence row in the batch
    line: int  # line number within the row
    speaker: str = ""  # the speaker of a transcript turn or the author of a chat message
    title: str = ""  # the title of the record it belongs to ("" for prose)
    is_title: bool = False
    is_field: bool = False  # "Key: value" or a short fragment of a record
    question: bool = False
    raw: str = ""  # the line it stands on, as captured (runs of spaces kept: they are the layout of a menu or table)
    spoken: bool = False  # a transcript's sentence: its "line" is a whole turn or recording, not a line on a screen
    features: dict = field(default_factory=dict)

    @property
    def words(self) -> int:
        return len(_WORD.findall(self.text))


def clean_spoken(text: str) -> str:
    """Drop fillers and stutters from a transcript sentence ("so, uh, the the gym" → "the gym")."""
    t = _FILLER.sub("", text)
    t = _REPEAT.sub(r"\1", t)
    t = _LEAD.sub("", t.strip())
    t = _SPACES.sub(" ", t).strip(" ,")
    return t[:1].upper() + t[1:] if t else t


def split_sentences(line: str, spoken: bool = False) -> list[str]:
    """Sentences of one line; a full stop after an abbreviation or an initial does not end one."""
    out, start = [], 0
    for m in (_SENT_END_SPOKEN if spoken else _SENT_END).finditer(line):
        before = line[start:m.start()].rstrip(".!?\"'’”)]")
        last = before.rsplit(None, 1)[-1] if before.split() else ""
        if last.lower().rstrip(".") in _ABBREV or (len(last) == 1 and last.isupper()) or re.fullmatch(r"\d{1,2}", last) \
                and line[m.end():m.end() + 1].isdigit():
            continue
        out.append(line[start:m.start()].strip())
        start = m.end()
    out.append(line[start:].strip())
    return [s for s in out if s]


def _is_title(line: str, n_lines: int) -> bool:
    if n_lines < 2:
        return False
    s = line.strip()
    if s.startswith("#"):
        body = s.lstrip("#").strip()
        return bool(body) and s[1:2] in (" ", "#") and len(body.split()) <= 8 and not body.endswith((".", ";"))
    if re.match(r"^[A-Z][A-Z0-9]*-\d+:\s", s):  # "ADR-012: Event bus"
        return True
    if _COMMAND.match(s) or _AUTHOR.match(s) or _FIELD.match(s) or s.endswith((".", "?", "!", ":", ";", ",")):
        return False
    if chrome_reason(s) is not None:
        return False  # a menu or tab strip on top of a page titles nothing: glued to a fact it would only be noise
    words = s.split()
    return 1 <= len(words) <= 12 and any(c.isalpha() for c in s)


def segment_row(text: str, source: str, row: int = 0, max_chars: int = 4000) -> list[Segment]:
    """The statements of one evidence row in reading order."""
    text = text[:max_chars]
    spoken = source == "audio"
    if spoken:
        # A transcript is one long line; speaker turns ("Ana: ...") start new statements.
        text = _TURN.sub("\n", text)
    lines = [ln for ln in (raw.strip() for raw in text.splitlines()) if ln]
    out: list[Segment] = []
    title, speaker = "", ""
    for i, ln in enumerate(lines):
        if i == 0 and not spoken and _is_title(ln, len(lines)):
            title = ln.lstrip("#").strip()
            out.append(Segment(_SPACES.sub(" ", title), row, i, title=title, is_title=True, raw=ln))
            continue
        if not spoken and _COMMAND.match(ln):
            # A shell or REPL command titles the output under it: "412" means something only next to the query.
            title = _SPACES.sub(" ", ln)
            out.append(Segment(title, row, i, title=title, is_title=True, raw=ln))
            continue
        a = _AUTHOR.match(ln)
        if a and not spoken:
            speaker = a.group("name").strip()
            continue
        m = _SPEAKER.match(ln)
        if m and (spoken or not _FIELD.match(ln) or len(m.group("name").split()) > 1 and m.group("name")[0].isupper()
                  and not _looks_field_name(m.group("name"))):
            speaker, ln = m.group("name"), m.group("text")
        sentences = split_sentences(ln, spoken)
        merged: list[str] = []
        for s in sentences:
            # "Carpenter." alone says nothing: a fragment of two words or fewer stays with the sentence before it.
            if merged and len(_WORD.findall(s)) <= 2 and not s.endswith("?"):
                merged[-1] = f"{merged[-1]} {s}"
            else:
                merged.append(s)
        for s in merged:
            t = clean_spoken(s) if spoken else _SPACES.sub(" ", s).strip()
            if not t or not any(c.isalnum() for c in t):
                continue
            out.append(Segment(t, row, i, speaker=speaker, title=title, is_field=bool(_FIELD.match(s)) or len(
                _WORD.findall(t)) <= 4, question=t.rstrip().endswith("?"), raw=ln, spoken=spoken))
    return out


def _looks_field_name(name: str) -> bool:
    return name.lower() in {"status", "due", "assignee", "owner", "priority", "date", "subject", "from", "to", "cc",
                            "labels", "milestone", "sprint", "reviewers", "resolved", "state", "total", "amount",
                            "note", "notes", "decision", "reason", "goal", "fix", "root cause", "action items",
                            "attendees", "location", "when", "where", "time", "phone", "email", "address", "tags"}


def line_words(segments: list[Segment]) -> dict[tuple[int, int], int]:
    """Words of each line, by (row, line): a short one is a label or a value (NEIGHBOUR_WORDS)."""
    words: dict[tuple[int, int], int] = {}
    for s in segments:
        words[(s.row, s.line)] = words.get((s.row, s.line), 0) + s.words
    return words


def compose(segments: list[Segment], keep: list[bool]) -> list[list[int]]:
    """Group the kept segments into memories: lists of segment indices, in reading order.

    - A record (a row with a title) gives one memory: its title and every kept line of it.
    - A chat message gives one memory: its author and its kept lines.
    - Prose gives one memory per kept line of a screen, note or import (its sentences say one thing: "we
      go with Parcelwise, not FastBox. 0,38 € per label"), joined by the next line when either of the two
      is short (a value under its label), up to RUN_CHARS (a long list stays several memories); one per kept sentence of a transcript; an answer takes its
      question along.
    """
    groups: list[list[int]] = []
    open_by_key: dict[tuple, int] = {}
    words = line_words(segments)
    for i, (s, k) in enumerate(zip(segments, keep, strict=True)):
        if not k:
            continue
        if s.title:
            key: tuple = ("title", s.row, s.title)
        elif s.speaker and not _is_transcript(segments, s.row):
            key = ("author", s.row, s.speaker, _message_start(segments, i))
        elif not s.spoken:
            key = ("line", s.row, s.line)
        else:
            key = ("sentence", i)
        if key in open_by_key:
            groups[open_by_key[key]].append(i)
            continue
        prev_seg = segments[groups[-1][-1]] if groups else None
        if key[0] == "line" and prev_seg is not None and _adjacent_line(prev_seg, s) \
                and min(words[(s.row, prev_seg.line)], words[(s.row, s.line)]) <= NEIGHBOUR_WORDS \
                and sum(len(segments[j].text) for j in groups[-1]) + len(s.text) <= RUN_CHARS:
            groups[-1].append(i)  # a label and its value on the next line
            open_by_key[key] = len(groups) - 1
            continue
        members = [i]
        prev = i - 1
        if key[0] in ("sentence", "line") and prev >= 0 and segments[prev].row == s.row and segments[prev].question \
                and not s.question and segments[prev].speaker != s.speaker:
            members.insert(0, prev)  # "what about the search fix?" — "that's in, it merged yesterday."
        open_by_key[key] = len(groups)
        groups.append(members)
    return groups


def _adjacent_line(prev: Segment, s: Segment) -> bool:
    return prev.row == s.row and not prev.spoken and not prev.title and not prev.speaker and s.line - prev.line == 1


def _is_transcript(segments: list[Segment], row: int) -> bool:
    speakers = {s.speaker for s in segments if s.row == row and s.speaker}
    lines = {s.line for s in segments if s.row == row}
    return len(speakers) > 1 and len(lines) > 1 and all(s.speaker for s in segments if s.row == row)


def _message_start(segments: list[Segment], i: int) -> int:
    j = i
    while j > 0 and segments[j - 1].row == segments[i].row and segments[j - 1].speaker == segments[i].speaker:
        j -= 1
    return j


def render(segments: list[Segment], members: list[int]) -> str:
    """The memory text of one group: the evidence's own words, with the title or speaker they need."""
    parts = [segments[i] for i in members]
    first = parts[0]
    body_parts = [p for p in parts if not p.is_title]
    body = "; ".join(p.text.rstrip(";") for p in body_parts)
    if first.title:
        if not body:
            return first.title
        if first.title.lower() in body.lower():
            return body
        return f"{first.title} — {body}"
    if first.speaker and all(p.speaker == first.speaker for p in parts):
        return f"{first.speaker}: {' '.join(p.text for p in parts)}"
    return " ".join(f"{p.speaker}: {p.text}" if p.speaker else p.text for p in parts)
