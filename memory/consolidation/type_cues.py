"""Cues of a memory's type, read from its text (the annotation guide's definitions, as counted signs).

bench/data/extraction/README.md says what each type is: episodic, an event that happened or is
planned (a date, a time, a day, and something happening on it); semantic, a fact or decision;
procedural, how to do something (a command, an imperative, steps, "to do X, ..."); resource, where
something is (a link or path the statement points to); core, about the user themself ("I", "my"
with a preference, health, habit or family word). The type model (salience.py) weighs these cues
with MiniLM's reading of the words; `cue_type` is the guide applied as plain rules, one of its inputs.
"""

from __future__ import annotations

import re

from memory.consolidation.chrome import VERB_BASES, prompt_line
from memory.consolidation.rules import CMD_RE, EVENT_WORDS, PATH_RE, TOOL_START, URL_RE

_MONTHS = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*"
WEEKDAY = re.compile(r"(?i)\b(?:mon|tues?|wed(?:nes)?|thu(?:rs)?|fri|sat(?:ur)?|sun)(?:day)?s?\b")
DAY_OF_MONTH = re.compile(rf"(?i)\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS}\b|\b{_MONTHS}\.?\s+\d{{1,2}}\b|"
                          r"\bthe \d{1,2}(?:st|nd|rd|th)\b|\b\d{4}-\d{2}-\d{2}\b")
CLOCK = re.compile(r"(?i)\b\d{1,2}[:.]\d{2}\b|\b\d{1,2}\s?(?:am|pm)\b|\bnoon\b")
RELATIVE_DAY = re.compile(r"(?i)\b(?:today|tomorrow|tonight|yesterday|next (?:week|month|sprint|year)|this (?:week|weekend|"
                          r"morning|afternoon|evening)|end of (?:the )?(?:month|week|day|quarter)|(?:\d+|two|three) "
                          r"(?:hours?|days?|weeks?|minutes?) ago|\d+[mhd] ago)\b")
HABIT = re.compile(r"(?i)\b(?:every|daily|weekly|monthly|always|usually|each|per (?:hour|day|week|month)|an hour|a month|"
                   r"a year|/year|/month)\b")
HAPPENING = re.compile(r"(?i)\b(?:merged|shipped|released|deployed|promoted|launched|finished|completed|published|submitted|"
                       r"ran|failed|crashed|broke|fixed|resolved|closed|rolled back|renewed|booked|scheduled|cancell?ed|"
                       r"moved|postponed|rescheduled|arrives?|arriving|lands?|leaves?|departs?|starts?|begins?|meet(?:ing)?|"
                       r"visit|appointment|interview|concert|dinner|lunch|party|flight|train|trip|deadline|due)\b")
DONE = re.compile(r"(?i)\b(?:merged|shipped|released|deployed|promoted|finished|completed|published|submitted|ran|failed|"
                  r"crashed|fixed|resolved|rolled back|renewed|booked)\b")
FUTURE = re.compile(r"(?i)\b(?:will|going to|gonna|is coming|are coming|'ll|shall|plan to|planned|scheduled)\b")
FIRST_PERSON = re.compile(r"(?i)\b(?:i|i'm|i've|i'd|i'll|my|me|mine)\b")
ABOUT_ME = re.compile(r"(?i)\b(?:allergic|allergy|prefer|favou?rite|hate|love|vegetarian|vegan|size|blood type|birthday|born|"
                      r"my (?:doctor|dentist|wife|husband|partner|son|daughter|mum|mom|dad|sister|brother|kids?)|i work|"
                      r"i live|i usually|i always|i never|i don't|i take|i'm on|dose|mg|medication)\b")
GOAL = re.compile(r"(?i)^(?:to|how to)\s+[a-z]+\b.*?(?:,|:|\byou\b|\brun\b|\bthen\b)")
STEPS = re.compile(r"(?i)\b(?:then (?:run|do|restart|start|stop|push|tag|wait|press|hold|click)|first\b.*\bthen\b|step \d|"
                   r"hold (?:the )?\w+ (?:for|until))\b")
BACKTICK = re.compile(r"`[^`]+`")
LOCATED = re.compile(r"(?i)\b(?:lives? (?:at|in|on|under)|is at|are at|can be found|link|docs? (?:at|in)|stored (?:in|at|under)|"
                     r"saved (?:in|at|to)|in the vault|under \S+/\S+)\b")
# Base verbs that more often name a thing than give an order at the start of a line ("Email", "Release 2.14").
_NOUNISH = frozenset({"email", "call", "book", "list", "record", "report", "sign", "post", "order", "test", "release",
                      "review", "plan", "design", "support", "return", "update", "share", "reply", "track", "train",
                      "visit", "change", "check", "set", "start", "end", "note", "work", "show", "log"})
TYPES = ("episodic", "semantic", "procedural", "resource", "core")
NAMES = ("dated", "clock", "relative_day", "habit", "happening", "future", "first_person", "about_me", "goal", "steps",
         "imperative", "command", "located", "link") + tuple(f"cue_{t}" for t in TYPES)


def _sentences(body: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;])\s+", body) if s]


def imperative(sentence: str) -> bool:
    """Does the sentence give an order: a base verb first (after a "Label:", "please", "then" or a step number)?"""
    toks = sentence.split()
    i = 0
    while i < len(toks) - 1 and (toks[i].endswith(":") or toks[i].lower() in ("please", "then", "just", "now", "-", "•", "*")
                                 or re.fullmatch(r"\d+[.)]", toks[i])):
        i += 1
    word = toks[i].lower().strip(",.") if toks else ""
    return word in VERB_BASES and word not in _NOUNISH and not toks[i].isupper() and len(toks) - i >= 2


def _command(text: str, sentences: list[str]) -> bool:
    return bool(prompt_line(text) or CMD_RE.search(text) or BACKTICK.search(text) or any(TOOL_START.match(s) for s in sentences)
                or re.search(rf":\s+{TOOL_START.pattern}", text))


def cue_type(text: str) -> str:
    """The guide's definitions as rules, in order: core, procedural, episodic, resource, else semantic."""
    body = text.split(" — ", 1)[-1]  # the title of a record says what it is about, the body what it says
    sentences = _sentences(body)
    dated = bool(WEEKDAY.search(body) or DAY_OF_MONTH.search(body) or CLOCK.search(body) or RELATIVE_DAY.search(body))
    if FIRST_PERSON.search(body) and ABOUT_ME.search(body):
        return "core"
    if GOAL.search(body) or STEPS.search(body) or any(imperative(s) for s in sentences):
        return "procedural"
    if _command(text, sentences) and not HAPPENING.search(body):
        return "procedural"
    if dated and not HABIT.search(body) and (HAPPENING.search(body) or FUTURE.search(body) or EVENT_WORDS.search(body)
                                            or WEEKDAY.search(body) or DAY_OF_MONTH.search(body)):
        return "episodic"
    if DONE.search(body):
        return "episodic"
    if (URL_RE.search(body) or PATH_RE.search(body)) and (LOCATED.search(body) or len(body.split()) <= 6):
        return "resource"
    return "semantic"


def cues(text: str) -> list[float]:
    """The cues of a memory text, in NAMES order (0/1 each), the last five the one-hot of cue_type."""
    body = text.split(" — ", 1)[-1]
    sentences = _sentences(body)
    guess = cue_type(text)
    return [float(bool(x)) for x in (
        WEEKDAY.search(body) or DAY_OF_MONTH.search(body), CLOCK.search(body), RELATIVE_DAY.search(body),
        HABIT.search(body), HAPPENING.search(body), FUTURE.search(body), FIRST_PERSON.search(body), ABOUT_ME.search(body),
        GOAL.search(body), STEPS.search(body), any(imperative(s) for s in sentences), _command(text, sentences),
        LOCATED.search(body), URL_RE.search(body) or PATH_RE.search(body),
    )] + [float(guess == t) for t in TYPES]
