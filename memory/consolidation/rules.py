"""Rule-based extraction: dates, people, decisions, commands, URLs and file paths.

It runs when no LLM is available or a call fails, so evidence always becomes something.
Every draft points at the one evidence row it came from. Patterns are deliberately
conservative: a missed fact stays findable in the evidence; a wrong one costs review time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memory.types import MemoryType, build_details


@dataclass
class Draft:
    """A memory an extractor proposes, before the write policy decides what happens to it."""

    type: str
    text: str
    subject: str | None
    details: dict
    confidence: float
    evidence_ids: list[str]
    engine: str = "rules"
    kind: str = ""  # which rule or prompt produced it, for reports
    key: str = ""  # unique within a batch, so drafts can name each other in links
    links: list[tuple[str, str, float]] = field(default_factory=list)  # (relation, other draft's key, confidence)
    same_as: str | None = None  # set by the write policy when this draft merged into another one


URL_RE = re.compile(r"\bhttps?://[^\s<>\"'`)\]}]+", re.IGNORECASE)
PATH_RE = re.compile(r"(?<![\w/:.~-])(~?/(?:[\w.@+-]+/)*[\w.@+-]*[\w@+-]|[A-Za-z]:\\(?:[\w .-]+\\)*[\w.-]+)")
_TOOLS = (
    "git|make|pip|pip3|python|python3|npm|npx|yarn|pnpm|docker|kubectl|cargo|go|curl|wget|ssh|scp|rsync|"
    "systemctl|sudo|brew|apt|apt-get|redis-cli|psql|mysql|mirador|pytest|terraform|helm|aws|gcloud|uv|"
    "poetry|node|mvn|gradle|ls|cd|cp|mv|rm|tar|grep|journalctl|export|source|chmod|chown|ffmpeg|ansible"
)
# A command: after a shell prompt, inside backticks, or after "run"; starts with a known tool name.
CMD_RE = re.compile(rf"(?:^\s*[$#>]\s*|`|\brun\s+|\btype\s+|\bexecute\s+)((?:{_TOOLS})\b[^`\n;]*)", re.MULTILINE)
TOOL_START = re.compile(rf"(?:{_TOOLS})\b")
_GOAL_RE = re.compile(r"\b(?:to|To|in order to)\s+([a-z][\w -]{2,50}?)\s*[,:]?\s+(?:run|use|type|execute|do)\b")
DECISION_RE = re.compile(
    r"\b(decided|decision|agreed|we chose|chose to|settled on|going with|go with|will use|switch(?:ed)? to|"
    r"standardi[sz]e on|from now on)\b", re.IGNORECASE)
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
ISO_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
DATE_RE = re.compile(
    rf"\b(\d{{4}}-\d{{2}}-\d{{2}}|today|tomorrow|yesterday|tonight|next week|this week|"
    rf"(?:next |this |on )?(?:{'|'.join(_WEEKDAYS)})|(?:{_MONTHS})\.? \d{{1,2}}(?:st|nd|rd|th)?|"
    rf"\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{_MONTHS})|\d{{1,2}}(?::\d{{2}})? ?(?:am|pm)|\d{{1,2}}:\d{{2}})\b",
    re.IGNORECASE)
EVENT_WORDS = re.compile(
    r"\b(meet|meeting|met|call|called|review|sync|standup|stand-up|lunch|dinner|interview|deadline|due|"
    r"launch|launched|demo|release|released|shipped|deploy(?:ed)?|presentation|appointment|flight|trip)\b",
    re.IGNORECASE)
_NAME = r"([A-Z][a-z]{1,20}(?: [A-Z][a-z]{1,20})?)"
PEOPLE_RES = [
    re.compile(rf"\b{_NAME},? (?:said|says|asked|mentioned|wrote|told|agreed|suggested|thinks|will|wants|replied)\b"),
    re.compile(rf"\b(?:with|from|by|cc|asked|told|ping|and|to|met) {_NAME}\b"),
    re.compile(r"(?<![\w.])@([A-Za-z][\w.-]{1,30}[A-Za-z0-9])"),
]
_NOT_PEOPLE = {w.capitalize() for w in _WEEKDAYS} | {
    m.capitalize() for m in _MONTHS.split("|")} | {
    "The", "This", "That", "These", "Those", "It", "We", "I", "You", "They", "He", "She", "Our", "My", "Your",
    "Today", "Tomorrow", "Yesterday", "Then", "Also", "And", "But", "So", "Next", "Last", "If", "When", "Please",
    "Thanks", "Hi", "Hello", "Team", "Everyone", "All", "Docs", "See", "Run", "To", "In", "On", "At", "For"}
CORE_RE = re.compile(r"\b(I prefer|I like|I don't like|I dislike|I always|I never|my name is|I am a|I'm a|I work as|"
                     r"I work at|call me)\b", re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_I = re.IGNORECASE
_BE = r"(?:\s+(?:was|were|is|are|got|has been|have been))?"
# Cue words that link two clauses of one sentence as `a RELATION b` (memory/graph/relations.py reads the
# relation names). Tried in order; "fixed by" before "fixed". "since" only after a comma, where it
# gives a reason rather than a time ("since Monday").
CUES: list[tuple[re.Pattern, str]] = [
    (re.compile(r"^(?:because|since|due to)\s+(?P<b>.+?),\s*(?P<a>.+)$", _I), "BECAUSE"),
    (re.compile(r"^(?P<a>.+?),?\s+(?:because(?: of)?|due to|so that)\s+(?P<b>.+)$", _I), "BECAUSE"),
    (re.compile(r"^(?P<a>.+?),\s+since\s+(?P<b>.+)$", _I), "BECAUSE"),
    (re.compile(rf"^(?P<b>.+?){_BE}\s+(?:fixed|resolved|solved)\s+by\s+(?P<a>.+)$", _I), "RESOLVES"),
    (re.compile(r"^(?P<a>.+?)\s+(?:resolves|resolved|fixes|fixed|solves|solved)\s+(?P<b>.+)$", _I), "RESOLVES"),
    (re.compile(rf"^(?P<b>.+?){_BE}\s+triggered\s+by\s+(?P<a>.+)$", _I), "TRIGGERED"),
    (re.compile(r"^after\s+(?P<a>.+?),\s*(?P<b>(?:we|i|they|he|she|the team)\b.+)$", _I), "TRIGGERED"),
    (re.compile(r"^(?P<a>.+?)\s+triggered\s+(?P<b>.+)$", _I), "TRIGGERED"),
    (re.compile(r"^(?P<a>.+?)\s+(?:replaces|replaced|supersedes)\s+(?P<b>.+)$", _I), "UPDATES"),
    (re.compile(r"^(?P<a>.+?)\s+instead of\s+(?P<b>.+)$", _I), "UPDATES"),
]
_STOP = {"the", "a", "an", "to", "of", "for", "on", "in", "and", "or", "we", "i", "that", "this", "is", "are",
         "be", "will", "with", "it", "our", "use", "using", "decided", "agreed", "going", "go", "from", "now"}


def sentences(text: str) -> list[str]:
    """Split text into trimmed sentences / lines."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text or "") if s and len(s.strip()) > 2]


def find_urls(text: str) -> list[str]:
    """URLs in order of appearance, trailing punctuation removed."""
    return list(dict.fromkeys(u.rstrip(".,;:!?") for u in URL_RE.findall(text or "")))


def find_paths(text: str) -> list[str]:
    """Absolute, home-relative and Windows file paths (not URL paths)."""
    bare = URL_RE.sub(" ", text or "")
    out = []
    for p in PATH_RE.findall(bare):
        p = p.rstrip(".,;:!?")
        if p.count("/") + p.count("\\") >= 2 or p.startswith("~/"):
            out.append(p)
    return list(dict.fromkeys(out))


def find_commands(text: str) -> list[str]:
    """Shell commands: after a prompt sign, in backticks, or after 'run'; known tools only."""
    cmds = []
    for c in CMD_RE.findall(text or ""):
        c = re.split(r"[.!?]\s+(?=[A-Z])", c)[0]  # a sentence after the command is prose
        # "run make build then kubectl apply -f x" is two steps; prose after a command is not part of it.
        for i, piece in enumerate(re.split(r",?\s+(?:then|and then|and|to|so|which|after that|before|after)\s+", c.strip())):
            piece = piece.strip().rstrip(".,;:!?")
            if i and not TOOL_START.match(piece):
                break
            if piece and len(piece) <= 200:
                cmds.append(piece)
    return list(dict.fromkeys(cmds))


def find_people(text: str) -> list[str]:
    """Names of people mentioned (capitalised names near speech/meeting verbs, @handles)."""
    out = []
    for rx in PEOPLE_RES:
        for m in rx.findall(text or ""):
            name = m.strip()
            first = name.split()[0]
            if first in _NOT_PEOPLE or name in _NOT_PEOPLE:
                continue
            out.append(name)
    return list(dict.fromkeys(out))


def resolve_date(text: str, captured_at: datetime | None) -> datetime | None:
    """The first date the text names, resolved against the capture time; None if it names none."""
    m = ISO_DATE_RE.search(text or "")
    if m:
        try:
            return datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        except ValueError:
            return None
    if captured_at is None:
        return None
    low = (text or "").lower()
    day = captured_at.replace(hour=0, minute=0, second=0, microsecond=0)
    for word, delta in (("yesterday", -1), ("tomorrow", 1), ("today", 0), ("tonight", 0)):
        if re.search(rf"\b{word}\b", low):
            return day + timedelta(days=delta)
    for i, name in enumerate(_WEEKDAYS):
        if re.search(rf"\b{name}\b", low):
            ahead = (i - day.weekday()) % 7
            return day + timedelta(days=ahead)
    return None


def subject_of(sentence: str) -> str | None:
    """A short subject for a decision: 'use X for Y' → Y, else the first content words."""
    m = re.search(r"\bfor (?:the )?([\w -]{3,40}?)(?:[.,;]|$)", sentence)
    if m:
        return m.group(1).strip().lower()
    words = [w for w in re.findall(r"[A-Za-z][\w-]+", sentence) if w.lower() not in _STOP]
    return " ".join(words[:3]).lower() or None


def _draft(mtype: MemoryType, details: dict, conf: float, ev_id: str, kind: str, subject: str | None = None) -> Draft:
    d = build_details(mtype, None, details)
    dumped = d.model_dump(mode="json", exclude_none=True)
    return Draft(type=mtype.value, text=d.summary(), subject=subject, details=dumped, confidence=conf,
                 evidence_ids=[ev_id], engine="rules", kind=kind)


def _resources(text: str, ev_id: str) -> list[Draft]:
    out = []
    for url in find_urls(text):
        line = next((s for s in sentences(text) if url in s), "")
        title = " ".join(line.replace(url, " ").split()).strip(" .:-–—()[]") or url.split("//", 1)[-1]
        out.append(_draft(MemoryType.RESOURCE, {"title": title[:160], "uri": url, "kind": "link"}, 0.85, ev_id, "url"))
    for path in find_paths(text):
        name = path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or path
        out.append(_draft(MemoryType.RESOURCE, {"title": name, "path": path, "kind": "file"}, 0.75, ev_id, "path"))
    return out


def _procedure(text: str, ev_id: str) -> list[Draft]:
    cmds = find_commands(text)
    if not cmds:
        return []
    m = _GOAL_RE.search(text)
    goal = m.group(1).strip() if m else f"run {cmds[0].split()[0]}"
    conf = 0.8 if m else 0.6
    return [_draft(MemoryType.PROCEDURAL, {"goal": goal, "steps": cmds[:10]}, conf, ev_id, "command",
                   subject=goal.lower())]


def _clause(text: str) -> str | None:
    t = text.strip(" ,;:-–—.!?")
    if len(re.findall(r"[A-Za-z][\w'-]*", t)) < 2:
        return None  # "instead of flake8" names a thing, not a statement worth its own memory
    return t[0].upper() + t[1:] + "."


def split_cue(sentence: str) -> tuple[str, str, str] | None:
    """(relation, a, b) when a cue word links two clauses as `a RELATION b`; None if none does."""
    s = sentence.strip().rstrip(".!?")
    for rx, relation in CUES:
        m = rx.match(s)
        if m:  # the first cue that matches decides, so "was triggered by" is never read as "triggered"
            a, b = _clause(m.group("a")), _clause(m.group("b"))
            return (relation, a, b) if a and b else None
    return None


def _linked(a: str, b: str, relation: str, ev_id: str, n: int, decision: bool) -> list[Draft]:
    """Two semantic drafts, `a RELATION b`, on the same evidence row (a decision keeps its subject)."""
    first = _draft(MemoryType.SEMANTIC, {"subject": subject_of(a), "fact": a} if decision else {"fact": a}, 0.75,
                   ev_id, "decision" if decision else "clause", subject=subject_of(a) if decision else None)
    # The reason gets no subject: it must not supersede (or be superseded by) the decision it explains.
    second = _draft(MemoryType.SEMANTIC, {"fact": b}, 0.7, ev_id, "reason" if relation == "BECAUSE" else "clause")
    first.key, second.key = f"{ev_id}#{n}a", f"{ev_id}#{n}b"
    first.links.append((relation, second.key, 0.7))
    return [first, second]


def extract_one(ev: dict) -> list[Draft]:
    """Drafts from one evidence row (id, text, source, captured_at)."""
    text, ev_id = ev.get("text") or "", ev["id"]
    drafts = _resources(text, ev_id) + _procedure(text, ev_id)
    first_person_ok = ev.get("source") in ("manual", "audio")  # on screen, "I" is usually someone else
    own_words = ev.get("source") in ("manual", "audio", "import")
    for n, s in enumerate(sentences(text)):
        if URL_RE.search(s) and len(URL_RE.sub("", s).split()) < 3:
            continue  # a bare link line is covered by the resource draft
        cue = split_cue(s)
        if DECISION_RE.search(s):
            if cue and cue[0] == "BECAUSE":  # the decision and its reason, linked
                drafts.extend(_linked(cue[1], cue[2], "BECAUSE", ev_id, n, decision=True))
                continue
            drafts.append(_draft(MemoryType.SEMANTIC, {"subject": subject_of(s), "fact": s}, 0.75, ev_id,
                                 "decision", subject=subject_of(s)))
        elif first_person_ok and CORE_RE.search(s):
            block = "preferences" if re.search(r"prefer|like|always|never", s, re.IGNORECASE) else "user"
            drafts.append(_draft(MemoryType.CORE, {"block": block, "content": s}, 0.75, ev_id, "core", subject=block))
        elif DATE_RE.search(s) and (EVENT_WORDS.search(s) or find_people(s)):
            who = find_people(s)
            when = resolve_date(s, ev.get("captured_at"))
            details = {"event": s, "who": who, **({"when": when.isoformat()} if when else {})}
            drafts.append(_draft(MemoryType.EPISODIC, details, 0.7 if who else 0.6, ev_id, "event"))
        elif cue and own_words:  # screen prose says "because" all the time; only the person's own notes count
            drafts.extend(_linked(cue[1], cue[2], cue[0], ev_id, n, decision=False))
    return drafts


def rule_extract(items: list[dict]) -> list[Draft]:
    """Drafts from a batch of evidence rows; each draft's provenance is its own row."""
    out: list[Draft] = []
    for ev in items:
        out.extend(extract_one(ev))
    return out
