"""Which statements are worth keeping, and as what type: small linear models over MiniLM.

Each statement (memory/consolidation/statements.py) is described by the embedder's vector of its
text and a few counted signs of a detail a person would want back — a date or time, a number, an
id, a name, an address, a decision word, "I" or "my" — and of noise: the shape of its line and row
(chrome.py: token shapes, a predicate or none, cells, repeated rows), cookie words, small talk. What
chrome.py or `noise_sign` calls chrome beyond doubt is never kept. A logistic model scores "worth
keeping"; a second one picks the memory type of what is kept; a third, the row gate, reads the evidence row
as a whole (its statements' mean vector and how they scored) and drops every statement of a row that is
noise through and through (the evidence itself stays). All three were fitted on the train split of
Mirador's own labelled set (bench/data/extraction/, written for this project) by bench/train_salience.py;
the weights are plain numbers in data/salience.json, applied here with NumPy.

The weights belong to the embedder they were fitted with. With another embedder (a store made
with other weights) the vectors mean something else, so only the counted signs are used, through
the rule scores in `rule_score`: extraction still works, with less judgement.
"""

from __future__ import annotations

import json
import logging
import math
import re
from functools import lru_cache
from pathlib import Path

import numpy as np

from memory.consolidation.chrome import RowSigns, chrome_lines, chrome_reason, line_signs, row_signs
from memory.consolidation.rules import CMD_RE, CORE_RE, DATE_RE, DECISION_RE, EVENT_WORDS, PATH_RE, TOOL_START, URL_RE
from memory.consolidation.statements import Segment

log = logging.getLogger(__name__)

DATA = Path(__file__).resolve().parent / "data" / "salience.json"
TYPES = ("episodic", "semantic", "procedural", "resource", "core")
SOURCES = ("audio", "screen", "manual", "import")

_NUM = re.compile(r"\d")
_NUMTOK = re.compile(r"\b\d[\d.,:/-]*\b")
_TIME = re.compile(r"\b\d{1,2}[:.]\d{2}\b|\b\d{1,2} ?(?:am|pm)\b", re.I)
_ID = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]{2,}\b|#\d{2,}\b")
_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.]+\b")
_PHONE = re.compile(r"\+?\d[\d ()-]{7,}\d")
_MONEY = re.compile(r"[€$£¥]|\b(?:EUR|USD|GBP|CHF)\b")
_IP = re.compile(r"\b\d{1,3}(?:\.\d{1,3}){3}\b")
_CAPWORD = re.compile(r"(?<=[\w,;:] )[A-Z][\w'’-]+")
_FIRST = re.compile(r"\b(?:I|I'm|I've|I'll|my|me|mine|we|we're|our|us)\b", re.I)
_IMPERATIVE = re.compile(r"^(?:please |pls )?(?:remember|note|don't forget|remind|call|book|buy|send|pay|renew|"
                         r"cancel|ask|check|bring|pick up|order|email|text|tell|make sure)\b", re.I)
_PLAN = re.compile(r"\b(?:will|going to|gonna|need to|have to|must|should|deadline|due|by (?:mon|tue|wed|thu|fri|sat|"
                   r"sun|the|end|next|tomorrow)|until|before|expires?|renews?|appointment|booked|scheduled)\b", re.I)
_PREFERENCE = re.compile(r"\b(?:prefer|favou?rite|allergic|allergy|hate|love|can't stand|always|never|vegetarian|"
                         r"vegan|birthday|size|lactose|gluten)\b", re.I)
_OUTCOME = re.compile(r"\b(?:merged|shipped|released|fixed|resolved|closed|approved|accepted|rejected|deployed|"
                      r"rolled back|failed|broke|down|root cause|because|reason|decided|decision|agreed)\b", re.I)
_NOISE = re.compile(r"(?i)\b(?:cookies?|privacy policy|accept all|sign in|log ?in|sign up|subscribe|newsletter|"
                    r"terms of (?:use|service)|all rights reserved|skip to|menu|settings|help|home|back to top|"
                    r"loading|click here|learn more|share|like|follow|notifications?)\b")
_SYMBOLS = re.compile(r"[▾▸►▼▲◀✓✔✕✖☰⋮…🔔⌘⇧⌥]")
_FILLERS = re.compile(r"(?i)\b(?:uh|um|erm|hmm|like|you know|i mean|sort of|kind of|yeah|okay|ok|so)\b")
_COLS = re.compile(r"\S {2,}\S")
# Signs of screen chrome and small talk, the noise kinds a person never wants as memories.
_LISTING = re.compile(r"(?i)(?:\b[\w-]+\.[a-z0-9]{2,5}\b|^[\w.-]+/|^\S+(?: \S+)?)\s.*(?:\b\d+(?:[.,]\d+)? ?(?:B|KB|MB|GB|TB|"
                      r"KiB|MiB|GiB)\b|\bfile folder\b|\b(?:application|[A-Z]{3,4} image|text|excel|pdf)$|"
                      r"\d{1,2}:\d{2} (?:-|—)$|\b(?:today|yesterday) \d{1,2}:\d{2}\b)")
_SIZE = re.compile(r"\b\d+(?:[.,]\d+)? ?(?:KB|MB|GB|TB|KiB|MiB|GiB|kB)\b")
_HEADER = re.compile(r"^[A-Z][A-Z0-9_/%+#-]*(?:\s+[A-Z][A-Z0-9_/%+#-]*){2,}$")  # three or more upper-case words
_CONSENT = re.compile(r"(?i)\b(?:cookies?|consent|partners|personali[sz]ed? (?:content|ads)|before you continue|"
                      r"accept all|reject all|manage (?:options|preferences)|we value your privacy)\b")
_SMALLTALK = re.compile(r"(?i)\b(?:can you (?:hear|see) me|(?:you're|you are) on mute|still muted|can you see my screen|"
                        r"give it (?:another|a) (?:minute|second)|people to join|let me (?:try again|share)|"
                        r"my internet|is my (?:screen|audio)|hi everyone|good morning everyone|bye everyone|"
                        r"sorry,? (?:i was|you go)|one sec(?:ond)?)\b")
_WEATHER = re.compile(r"\d\s?°|\b(?:sunny|cloudy|rain(?:y)?|showers|humidity|wind)\b", re.I)
_MENU_WORD = re.compile(r"^(?:[A-Z0-9][\w'’.&+-]*|[^\w\s]+|\d+%?)$")
_CONTENT = re.compile(r"(?i)\b(?!(?:uh|um|erm|hmm|huh|mm|yeah|yes|no|okay|ok|totally|right|alright|so|well|like|"
                      r"just|really|the|and|but|you|know|mean|hi|hey|bye|thanks|sorry|your|anyway|ugh|mmm|what|day|test)\b)[a-z]{3,}")
_SYSTEM = re.compile(r"(?i)\b(?:joined|left) #[\w-]+|\bwas added (?:to|by)\b|\bhas (?:joined|left) the (?:channel|call|meeting)\b|"
                     r"\bstop recording\b|\bnever mind\b|\[(?:inaudible|silence|music|laughter|crosstalk|[a-z ]*noise)\]")
# Words of talk that carries no fact: greetings, thanks, audio checks, losing the thread.
_PHATIC = {"thanks", "thank", "everyone", "everybody", "bye", "goodbye", "see", "have", "good", "great", "nice",
           "weekend", "evening", "morning", "afternoon", "hello", "welcome", "sorry", "wait", "where", "was",
           "forgot", "forget", "gonna", "going", "say", "said", "saying", "testing", "one", "two", "three", "this",
           "thing", "can", "hear", "mute", "muted", "unmute", "screen", "share", "sharing", "join", "joined",
           "minute", "second", "moment", "let", "lets", "let's", "try", "again", "still", "there", "here", "back",
           "cool", "fine", "sure", "maybe", "guess", "think", "all", "everything", "stuff", "things", "bit",
           "lag", "lagging", "frozen", "connection", "internet", "audio", "video", "camera", "mic", "microphone",
           "recording", "start", "started", "ready", "hang", "hold", "talk", "later", "soon", "guys", "folks",
           "people", "how", "are", "doing", "today", "well", "what", "who", "now", "then", "got", "get", "yep",
           "nope", "cheers", "bye-bye", "hmm", "mhm", "mm-hmm", "uh-huh", "wow", "oops", "whoops"}
# Commands a person types to look around, whose output is the file system or the prompt, not a fact. (Not
# `git log`: its lines are commits, tags and merged PRs, which the annotation guide counts as facts.)
_LOOK_AROUND = re.compile(r"^\s*(?:[$%#>]|\w+@[\w.-]+:\S*[$#])\s*(?:ls|ll|la|dir|pwd|clear|cd|tree|exit|history|whoami|"
                          r"htop|top|git status|git branch)(?:\s+-\w+)*(?:\s+\S+)?\s*$")
_COLUMN_WORDS = {"name", "date", "modified", "type", "size", "status", "created", "ports", "image", "age", "ready",
                 "restarts", "kind", "owner", "id", "command", "names", "container", "last", "updated", "title"}
_FILE = re.compile(r"[\w.-]+\.(?:[a-z]{2,5}|[A-Z]{3,4})")
_TOC = re.compile(r"^(?:[-*•]\s*)?\[[^\]]+\]\(#[\w-]*\)$|^(?:table of )?contents$|^index of /", re.I)
_UI = re.compile(r"[▾▸►▼▲◀▶✓✔✕✖☰⋮⚙🔍🔔🔀🔁★⏹🐞↗🔋]")
_PROMPT = re.compile(r"^\s*(?:[$%#>]|>>>|PS [A-Z]:\\[^>]*>|\w+@[\w.-]+:\S*[$#]|\w+=>)\s")
_CONFIG = re.compile(r"^\s*[\w.-]+\s*[:=]\s*\S+\s*(?:#.*)?$")
_FUNCTION = re.compile(r"(?i)\b(?:the|a|an|to|of|in|on|at|is|are|was|we|i|for|with|and|but|by|it|this|that|be|will|"
                       r"has|have|not|no|from|our|my|you|he|she|they)\b")

FEATURES = (
    "log_words", "log_chars", "digits", "numbers", "time", "date", "id", "email", "phone", "money", "ip", "url",
    "path", "names", "first_person", "imperative", "plan", "preference", "outcome", "decision", "event", "core",
    "noise_words", "symbols", "fillers", "columns", "alpha", "upper", "field", "title", "question", "speaker",
    "in_title", "row_lines", "position", "listing", "size", "header", "consent", "smalltalk", "weather",
    "no_function_words", "command", "config",
    # shape and layout (chrome.py): of the statement, of the line it stands on, of its evidence row
    "ch_predicate", "ch_nonword", "ch_label", "ch_function", "ch_cells", "ch_cell_words", "ch_grid", "ch_bar",
    "ch_chrome", "ch_repeated", "row_chrome", "row_prose", "row_tabular", "row_short",
) + tuple(f"rule_{t}" for t in TYPES) + tuple(f"src_{s}" for s in SOURCES)


def features(seg: Segment, source: str, row_lines: int, raw: str | None = None, row: RowSigns | None = None) -> list[float]:
    """The counted signs of one statement (FEATURES order); row: row_signs of its evidence row's lines."""
    t = seg.text
    row = row or row_signs([seg.raw or t])
    said, line = line_signs(t), line_signs(seg.raw or t)
    words = max(seg.words, 1)
    letters = sum(c.isalpha() for c in t)
    f = {
        "log_words": math.log1p(seg.words), "log_chars": math.log1p(len(t)),
        "digits": float(bool(_NUM.search(t))), "numbers": min(len(_NUMTOK.findall(t)), 5) / 5,
        "time": float(bool(_TIME.search(t))), "date": float(bool(DATE_RE.search(t))), "id": float(bool(_ID.search(t))),
        "email": float(bool(_EMAIL.search(t))), "phone": float(bool(_PHONE.search(t))),
        "money": float(bool(_MONEY.search(t))), "ip": float(bool(_IP.search(t))), "url": float(bool(URL_RE.search(t))),
        "path": float(bool(PATH_RE.search(t))), "names": min(len(_CAPWORD.findall(t)), 4) / 4,
        "first_person": float(bool(_FIRST.search(t))), "imperative": float(bool(_IMPERATIVE.search(t))),
        "plan": float(bool(_PLAN.search(t))), "preference": float(bool(_PREFERENCE.search(t))),
        "outcome": float(bool(_OUTCOME.search(t))), "decision": float(bool(DECISION_RE.search(t))),
        "event": float(bool(EVENT_WORDS.search(t))), "core": float(bool(CORE_RE.search(t))),
        "noise_words": min(len(_NOISE.findall(t)), 4) / 4, "symbols": float(bool(_SYMBOLS.search(raw or t))),
        "fillers": min(len(_FILLERS.findall(raw or t)) / words, 1.0), "columns": float(bool(_COLS.search(raw or t))),
        "alpha": letters / max(len(t), 1), "upper": sum(c.isupper() for c in t) / max(letters, 1),
        "field": float(seg.is_field), "title": float(seg.is_title), "question": float(seg.question),
        "speaker": float(bool(seg.speaker)), "in_title": float(bool(seg.title)),
        "row_lines": math.log1p(row_lines), "position": min(seg.line, 20) / 20,
        "listing": float(bool(_LISTING.search(t))), "size": float(bool(_SIZE.search(t))),
        "header": float(bool(_HEADER.match(t.strip()))), "consent": float(bool(_CONSENT.search(t))),
        "smalltalk": min(len(_SMALLTALK.findall(raw or t)), 3) / 3, "weather": float(bool(_WEATHER.search(t))),
        "no_function_words": float(seg.words >= 4 and not _FUNCTION.search(t)),
        "command": float(bool(_PROMPT.match(t) or CMD_RE.search(t) or TOOL_START.match(t))),
        "config": float(bool(_CONFIG.match(t))),
        "ch_predicate": said.predicate, "ch_nonword": said.nonword, "ch_label": said.label,
        "ch_function": said.function, "ch_cells": math.log1p(line.cells), "ch_cell_words": math.log1p(line.cell_words),
        "ch_grid": float(line.grid), "ch_bar": float(line.bar), "ch_chrome": float(chrome_reason(seg.raw or t) is not None),
        "ch_repeated": float(line.signature in row.repeated and (line.cells >= 3 or line.tokens >= 4)),
        "row_chrome": row.chrome, "row_prose": row.prose, "row_tabular": row.tabular, "row_short": row.short,
    }
    for s in SOURCES:
        f[f"src_{s}"] = float(source == s)
    guess = rule_type(t)
    for k in TYPES:
        f[f"rule_{k}"] = float(guess == k)
    return [f[k] for k in FEATURES]


# The evidence row as a whole, for the row gate: how its statements scored, how much of it the vetoes took, the
# shape of its lines (chrome.row_signs) and where it came from. A row of noise can hold one statement that reads
# like a fact ("It's 9:02, let's wait a bit"); beside the rest of its row it stands out less.
ROW_FEATURES = ("top", "top3", "mean", "kept_share", "log_kept", "strong_share", "log_statements", "vetoed",
                "row_chrome", "row_prose", "row_tabular", "row_short") + tuple(f"src_{s}" for s in SOURCES)


# The gate reads a row as a whole, and a meeting is mostly small talk around the one thing decided: a row with a
# statement the keep model is this sure of is never dropped, whatever the rest of it looks like.
GATE_YIELDS_AT = 0.8


def row_features(scores: np.ndarray, vetoed: np.ndarray, signs: RowSigns, source: str, threshold: float) -> list[float]:
    """The signs of one evidence row (ROW_FEATURES order) from its statements' keep scores and vetoes."""
    ranked = np.sort(np.asarray(scores, dtype=np.float64))[::-1]
    if ranked.size == 0:
        ranked = np.zeros(1)
    kept = int((ranked >= threshold).sum())
    f = {"top": ranked[0], "top3": ranked[:3].mean(), "mean": ranked.mean(), "kept_share": kept / ranked.size,
         "log_kept": math.log1p(kept), "strong_share": float((ranked >= 0.5).mean()), "log_statements": math.log1p(
             ranked.size), "vetoed": float(np.mean(vetoed)) if len(vetoed) else 0.0, "row_chrome": signs.chrome,
         "row_prose": signs.prose, "row_tabular": signs.tabular, "row_short": signs.short}
    for s in SOURCES:
        f[f"src_{s}"] = float(source == s)
    return [float(f[k]) for k in ROW_FEATURES]


def noise_sign(text: str) -> str | None:
    """Why this statement is screen chrome or small talk, if it plainly is (then it is never kept)."""
    t = text.strip()
    words = t.split()
    if _CONSENT.search(t):
        return "consent banner"
    if _SMALLTALK.search(t) or _SYSTEM.search(t):
        return "small talk"
    caps = sum(1 for w in words if re.fullmatch(r"[A-Z][A-Z0-9_%+#/-]*", w))
    if _HEADER.match(t) or (len(words) >= 5 and caps >= 0.75 * len(words) and not _NUM.search(t)) or (len(words) >= 3 and sum(w.lower().strip(":") in _COLUMN_WORDS for w in words) >= 0.75 * len(words)):
        return "column header"
    if (_LISTING.search(t) and not _FUNCTION.search(t)) or (_SIZE.search(t) and _FILE.search(t)) or _FILE.fullmatch(t):
        return "file listing"
    if _LOOK_AROUND.match(t):
        return "terminal chrome"
    if len(words) >= 6 and sum(1 for w in words if w[:1].isupper()) >= 0.6 * len(words) \
            and not re.search(r"[.,;!?:()\d]", t):
        return "menu"
    if _TOC.match(t):
        return "table of contents"
    if len(_UI.findall(t)) >= 2:
        return "menu"
    lower = sum(1 for w in words if w[:1].islower() and not re.match(r"i[A-Z]", w))  # "iPad" is a name
    if len(words) >= 5 and lower <= 0.15 * len(words) and not _FUNCTION.search(t) and not re.search(r"[\d:.]", t):
        return "menu"
    content = [w.lower() for w in _CONTENT.findall(t)]
    if content and len(words) <= 16 and sum(w in _PHATIC for w in content) >= 0.5 * len(content) \
            and not _NUM.search(t) and not _CAPWORD.search(t):
        return "small talk"
    if _WEATHER.search(t) and re.search(r"\d\s?°", t):
        return "weather widget"
    if len(_CONTENT.findall(t)) < 2 and not _NUM.search(t) and not re.search(r"[A-Z]\w+[A-Z0-9]|[/@:=]", t):
        return "no content"
    return None


def vetoes(segs: list[Segment], sources: dict[int, str] | None = None) -> list[bool]:
    """noise_sign per statement, or chrome by the shape of its line and row (chrome.py; sources: evidence
    source per row, so screen text is read as screen); what stands under a vetoed look-around command or
    column header goes with it."""
    by_row: dict[int, dict[int, str]] = {}
    for s in segs:
        by_row.setdefault(s.row, {})[s.line] = s.raw or s.text
    chrome: dict[tuple[int, int], str | None] = {}
    for row, lines in by_row.items():
        order = sorted(lines)
        screen = (sources or {}).get(row) == "screen"
        for n, why in zip(order, chrome_lines([lines[n] for n in order], screen), strict=True):
            chrome[(row, n)] = why
    out = [noise_sign(s.text) is not None or chrome.get((s.row, s.line)) is not None for s in segs]
    # A block goes with its title when the title is a look-around command, or a row of column names with
    # no value in it (a process or file table: "PID USER ... Command").
    dead = {(s.row, s.title) for s, v in zip(segs, out, strict=True)
            if v and s.is_title and (_LOOK_AROUND.match(s.text) or noise_sign(s.text) == "column header"
                                     and not _NUM.search(s.text))}
    return [v or (s.row, s.title) in dead for s, v in zip(segs, out, strict=True)]


def rule_score(feats: list[float]) -> float:
    """Worth keeping without the embedder's judgement: a detail, a cue, and no sign of noise (0–1)."""
    f = dict(zip(FEATURES, feats, strict=True))
    detail = max(f["time"], f["date"], f["id"], f["email"], f["phone"], f["money"], f["ip"], f["url"], f["path"],
                 f["numbers"] > 0, f["names"] > 0)
    cue = max(f["plan"], f["preference"], f["outcome"], f["decision"], f["imperative"], f["core"], f["event"],
              f["first_person"] * 0.5)
    noise = max(f["noise_words"], f["symbols"], f["fillers"] * 2 > 1)
    size = 1.0 if 4 <= math.expm1(f["log_words"]) <= 60 else 0.3
    return float(max(0.0, min(1.0, (0.5 * detail + 0.5 * cue) * size - 0.6 * noise)))


def rule_type(text: str) -> str:
    """A type from cue words alone, for when the model cannot be used."""
    if CORE_RE.search(text) or _PREFERENCE.search(text):
        return "core" if re.search(r"\b(?:I|my)\b", text) else "semantic"
    if re.search(r"(?:^|\s)[$>]\s|\b(?:run|install|to (?:\w+ ){0,3}(?:run|use|set))\b", text):
        return "procedural"
    if DATE_RE.search(text) or _TIME.search(text) or EVENT_WORDS.search(text) or _OUTCOME.search(text):
        return "episodic"
    if URL_RE.search(text) or PATH_RE.search(text):
        return "resource"
    return "semantic"


class SalienceModel:
    """The fitted weights (data/salience.json) and how to apply them."""

    def __init__(self, spec: dict) -> None:
        self.spec = spec
        self.embedder = spec["embedder"]
        self.threshold = float(spec["threshold"])
        self.mean = np.asarray(spec["feature_mean"], dtype=np.float32)
        self.std = np.asarray(spec["feature_std"], dtype=np.float32)
        self.keep_w = np.asarray(spec["keep"]["coef"], dtype=np.float32)
        self.keep_b = float(spec["keep"]["intercept"])
        self.type_w = np.asarray(spec["type"]["coef"], dtype=np.float32)
        self.type_b = np.asarray(spec["type"]["intercept"], dtype=np.float32)
        self.type_names = list(spec["type"]["classes"])
        if list(spec["features"]) != list(FEATURES):
            raise ValueError("salience weights were fitted on other features; retrain with bench/train_salience.py")
        gate = spec.get("gate")  # weights fitted before the row gate existed have none: every row is read
        if gate is not None and list(gate["features"]) != list(ROW_FEATURES):
            raise ValueError("the row gate was fitted on other row features; retrain with bench/train_salience.py")
        self.gate = gate
        if gate is not None:
            self.gate_w = np.asarray(gate["coef"], dtype=np.float32)
            self.gate_b = float(gate["intercept"])
            self.gate_mean = np.asarray(gate["feature_mean"], dtype=np.float32)
            self.gate_std = np.asarray(gate["feature_std"], dtype=np.float32)
            self.gate_threshold = float(gate["threshold"])

    def design(self, vectors: np.ndarray, feats: np.ndarray) -> np.ndarray:
        """The model input: embedding and standardised signs, side by side."""
        return np.hstack([np.asarray(vectors, dtype=np.float32), (feats - self.mean) / self.std])

    def keep_scores(self, x: np.ndarray) -> np.ndarray:
        """P(worth keeping) per row of the design matrix."""
        return 1.0 / (1.0 + np.exp(-(x @ self.keep_w + self.keep_b)))

    def noise_row(self, vectors: np.ndarray, row_feats: list[float]) -> float:
        """P(the evidence row holds nothing worth keeping) from its statements' mean vector and its row features
        (row_features); 0 when the weights have no row gate or a statement scored GATE_YIELDS_AT or more."""
        if self.gate is None or (len(row_feats) and row_feats[ROW_FEATURES.index("top")] >= GATE_YIELDS_AT):
            return 0.0
        raw = np.concatenate([np.asarray(vectors, dtype=np.float32).mean(axis=0), np.asarray(row_feats, dtype=np.float32)])
        x = (raw - self.gate_mean) / self.gate_std  # every column standardised, the vector's too
        return float(1.0 / (1.0 + np.exp(-(x @ self.gate_w + self.gate_b))))

    def types(self, x: np.ndarray) -> list[str]:
        """The most likely memory type per row of the design matrix."""
        logits = x @ self.type_w.T + self.type_b
        return [self.type_names[i] for i in np.argmax(logits, axis=1)]


@lru_cache(maxsize=4)
def load_model(path: str = str(DATA)) -> SalienceModel | None:
    """The shipped weights, or None (logged) when they are missing or unreadable: the rules take over."""
    try:
        return SalienceModel(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError) as e:
        log.warning("salience weights %s unusable (%s); statements are judged by rules alone", path, e)
        return None
