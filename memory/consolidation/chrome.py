"""Prose or chrome? The shape of a line of evidence, read without knowing what app it came from.

Screen text is mostly not something anyone said: menus, file listings, progress bars, month grids,
form labels, log lines, column headers. A person keeps statements; a statement has a predicate ("the
launch moved to May", "run make release") or, in a record, a label with a value ("Booking number
4471.902.331"). Chrome has neither. It is told apart here by three things that hold whatever the app:

- token shape: each token is a word (lower case, capitalised, upper case, a function word), or a
  number, a measure (`76.4 kB`, `43%`, `2.1 MB/s`), a time, a date, a permission string, a hash, a
  key chord, a glyph (`▾`, `⚙`, `━`), a bar (`=====>`, `████`), a path, a URL;
- the predicate: an auxiliary or a finite verb after a subject, or an imperative verb that takes an
  object — from a small English verb lexicon and its inflections, not from a list of screens;
- layout: the line cut into cells by runs of spaces or separators (a menu is many one-word cells),
  and across the lines of one evidence row, repeated shape signatures (a table or listing), grids of
  small numbers and day names (a calendar), and label-only lines (a form).

`line_signs` and `row_signs` give these as numbers for the salience model (salience.py), which
weighs them with MiniLM's reading of the words; `chrome_reason` is the hard rule for what is
chrome beyond doubt (it never looks at what a value means, only at its shape).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

# Words that glue a sentence together. A line of prose has some; a menu or a table row has none.
FUNCTION_WORDS = frozenset("""
a an the this that these those my your our their his her its to of in on at for with from by about into onto over
under after before between through during without within and or but nor so if then than because while when where
as is are was were be been being am has have had do does did will would can could shall should may might must
i you he she we they it me him us them what which who whom whose there here not no""".split())
_AUX = frozenset("""is are was were be been being am has have had do does did will would can could shall should may
might must isn't aren't wasn't weren't hasn't haven't hadn't don't doesn't didn't won't wouldn't can't cannot couldn't
shouldn't mustn't i'm i've i'll i'd you're you've you'll we're we've we'll they're they've they'll it's that's
there's he's she's let's""".split())
_SUBJECTS = frozenset("i you he she we they it this that there who which".split())
# Common English verbs (base forms). Their inflections are derived below; a line is judged to have a
# predicate from these and the auxiliaries, so a label ("Date Modified", "New tab") does not.
_VERB_BASES = """
accept add agree allow apply approve arrive ask assign attach avoid bake become begin block book break bring
build buy call cancel change charge check choose clean clear click close come commit compile configure confirm connect
contain continue copy cost cover crash create cut decide delete deliver deploy describe design die disable discuss do
download drink drive drop eat email enable end enter escalate expire explain fail feel fetch fill find finish fix
fly follow forget format forward get give go grow happen hate have hear help hide hit hold hurt import include install
invite join keep know land launch learn leave let like limit list live load lock log look lose love make manage mark
mean measure meet merge migrate miss move need notice open order own pack pass pay pick pin plan play point post
prefer prepare print promote publish pull push put raise reach read receive recommend record reduce refund reject
release remember remind remove rename renew rent reopen repeat replace reply report request require reset resolve
restart restore retry return review revert roll rotate run save say schedule see sell send serve set share ship
show shut sign sit skip sleep solve sort speak spend split start stay stop store study submit suggest support swap
switch take talk teach tell test think throw track train transfer travel try turn update upgrade upload use
verify visit wait wake walk want warn watch wear win work worry write""".split()
_IRREGULAR = frozenset("""
ate became began bought brought built came caught chose cost cut did drank drove fell felt flew forgot found gave got
gotten went gone grew held heard hid hit hurt kept knew known laid led left lent let lost made meant met paid put
quit ran read rode rang rose said sat saw seen sent set shook shot shut slept sold spent spoke stood stole stuck
swam taken took taught thought threw told understood woke won wore wrote written""".split())
_INTRO = frozenset("please pls then just also now first next always never don't".split())


def _inflections(base: str) -> set[str]:
    out = {base + "s", base + "ed", base + "d" if base.endswith("e") else base + "ed"}
    if base.endswith("y") and base[-2:-1] not in "aeiou":
        out |= {base[:-1] + "ies", base[:-1] + "ied"}
    if base.endswith(("s", "sh", "ch", "x", "z", "o")):
        out.add(base + "es")
    if re.fullmatch(r".*[^aeiou][aeiou][bdgklmnprt]", base) and len(base) <= 5:
        out.add(base + base[-1] + "ed")  # stop → stopped, plan → planned
    return out


VERB_BASES = frozenset(_VERB_BASES)
FINITE = frozenset(f for b in _VERB_BASES for f in _inflections(b)) | _IRREGULAR

_WEEKDAY = re.compile(r"(?i)^(?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day|sday|nesday|rsday|urday)?[.,]?$")
_MONTH = re.compile(r"(?i)^(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*[.,]?$")
_IP = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?$")
_VERSION = re.compile(r"^v?\d+\.\d+\.\d+(?:[-+.][\w.]+)?[,;:)]?$")
_NUM = re.compile(r"^[(\[]?[+\-−±]?\d[\d,.'’ ]*[)\].,:]?$")
_MEASURE = re.compile(r"(?i)^[(\[]?[+\-−~]?\d[\d.,]*(?:/\d[\d.,]*)?\s?(?:%|[kmgtp]i?b|b|[kmg]b?/s|kb/s|ms|s|sec|secs|min|mins|"
                      r"h|hrs?|d|px|pt|°c?|x|k|m|g|mib|gib|kib|fps|hz|mhz|ghz|w)[)\],]?$")
_RATIO = re.compile(r"^[(\[]?\d+/\d+[)\]]?$|^\d+(?:\.\d+)?/\d+(?:\.\d+)?$")
_TIME = re.compile(r"(?i)^[(\[]?\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?(?:am|pm)?[)\],]?$|^\d+[hms](?:\d+[ms])?$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}(?:[T ]\S*)?$|^\d{1,2}[/.-]\d{1,2}[/.-]\d{2,4},?$|^\d{1,2}-[A-Za-z]{3}-\d{4}$|"
                   r"^\[?\d{1,2}/[A-Za-z]{3}/\d{4}(?::\d{2}){0,3}$")
_PERM = re.compile(r"^[dlcbps-][rwxsStT-]{9}[.+@]?$")
_HEX = re.compile(r"^(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}(?:\.\.\.)?$")
_KEY = re.compile(r"^(?:[⌘⇧⌥⌃]+\w{0,3}|(?:ctrl|alt|shift|cmd|f\d{1,2})\+\S+|f\d{1,2}[a-z]*)$", re.I)
_BAR = re.compile(r"[━─█▓▒░▏▕■□▍▌▋▊▉]|[=#>.\-_*|]{4,}|^\[[=#>. -]+\]$")
_URL = re.compile(r"(?i)^(?:https?://|www\.)\S+$")
_PATH = re.compile(r"^(?:~|\.{1,2})?/\S*$|^[A-Za-z]:\\\S*$|^\S+/\S+/\S*$")
_LOWER = re.compile(r"^[a-zà-ÿ][a-zà-ÿ'’-]*[.,;:!?]?$")
_CAP = re.compile(r"^[A-ZÀ-Þ][a-zà-ÿ'’-]+[.,;:!?]?$")
_UPPER = re.compile(r"^[A-ZÀ-Þ][A-ZÀ-Þ0-9'’-]+[.,;:!?]?$")
_CELL_GAP = re.compile(r"\s{2,}|\t|\s[|·•│┃]\s|\s[|·•]$")
_TOKEN = re.compile(r"\S+")
# A row of a calendar grid or day header: small numbers, day or month names, single letters.
_GRIDCELL = re.compile(r"^(?:\d{1,2}|[A-Za-z]|[.·])$")

# Shapes that are not words. A line made mostly of these, without a predicate, says nothing by itself.
NONWORD = frozenset({"ip", "num", "measure", "ratio", "time", "date", "perm", "hex", "key", "glyph", "bar"})


def token_shape(tok: str) -> str:
    """The shape class of one whitespace-separated token (see the module docstring)."""
    t = tok.strip("\"'“”‘’()[]{}<>")
    if not t:
        return "glyph"
    if any(c.isdigit() for c in t) and t[-1] in ".,;:!?" and len(t) > 1:
        t = t.rstrip(".,;:!?")  # "sec).", "12," : the number's shape is what counts
    if _BAR.search(tok) and not any(c.isalpha() for c in tok):
        return "bar"
    if all(not c.isalnum() for c in t):
        return "glyph"
    if _KEY.match(t):
        return "key"  # ⌘K, Ctrl+S: a shortcut shown beside a menu item
    if any(_is_glyph(c) for c in t) and sum(c.isalnum() for c in t) <= 2:
        return "glyph"
    if _PERM.match(t):
        return "perm"
    if _URL.match(t):
        return "url"
    if _TIME.match(t):
        return "time"
    if _DATE.match(t):
        return "date"
    if _MEASURE.match(t):
        return "measure"
    if _RATIO.match(t):
        return "ratio"
    if _IP.match(t):
        return "ip"  # an address: a detail worth keeping in a note, the first column of an access log
    if _VERSION.match(t):
        return "code"  # 3.4.0, v2.14.0: an id a person looks for, not a count
    if _NUM.match(t):
        return "num"
    if _HEX.match(t):
        return "hex"
    if _WEEKDAY.match(t) or _MONTH.match(t) and t[:1].isupper():
        return "day"
    if _PATH.match(t) and ("/" in t[1:] or "\\" in t):
        return "path"
    low = t.lower().rstrip(".,;:!?")
    if low in FUNCTION_WORDS and not (len(low) > 1 and t.isupper()):  # "AM", "IT", "US" are not "am", "it", "us"
        return "func"
    if _LOWER.match(t):
        return "lower"
    if _CAP.match(t):
        return "cap"
    if _UPPER.match(t) and not any(c.isdigit() for c in t):
        return "upper"
    return "code"  # ids, file names, versions, mixed forms: kept apart from words and from chrome


def _is_glyph(c: str) -> bool:
    cat = unicodedata.category(c)
    return cat in ("So", "Sk", "Sm", "Co", "Cn") or 0x2190 <= ord(c) <= 0x2BFF or ord(c) >= 0x1F000


@dataclass(frozen=True)
class LineSigns:
    """What a line is made of (see line_signs)."""

    tokens: int
    shapes: tuple[str, ...]
    predicate: float  # 1: an auxiliary, or a finite verb after a subject, or an imperative with an object; 0.5: weak
    nonword: float  # share of tokens that are not words (numbers, measures, times, glyphs, bars, ...)
    label: float  # share of tokens that are capitalised or upper-case words with no function word beside them
    function: float  # share of function words
    cells: int  # pieces of the line between runs of spaces or separators
    cell_words: float  # mean tokens per cell
    grid: bool  # a row of a calendar grid or its day header, or a sheet's column letters
    bar: bool  # a progress bar or a table rule
    words: tuple[str, ...] = ()  # the tokens, lower case, without surrounding punctuation
    status: str = ""  # its first word when that is a capitalised -ing or -ed word with no subject ("Compiling")

    @property
    def signature(self) -> str:
        """The coarse shape sequence, runs collapsed: lines of one table or listing share it."""
        coarse = {"lower": "w", "cap": "w", "upper": "w", "func": "w", "day": "d", "code": "c", "path": "c",
                  "url": "c", "num": "n", "measure": "n", "ratio": "n", "hex": "n", "ip": "n", "time": "t", "date": "t"}
        out: list[str] = []
        for s in self.shapes:
            c = coarse.get(s, "g")
            if not out or out[-1] != c:
                out.append(c)
        return "".join(out)


@lru_cache(maxsize=8192)
def line_signs(line: str) -> LineSigns:
    """Token shapes, predicate and layout of one line (or statement) of evidence."""
    toks = _TOKEN.findall(line)
    shapes = tuple(token_shape(t) for t in toks)
    n = max(len(toks), 1)
    cells = [c for c in _CELL_GAP.split(line.strip()) if c.strip()]
    count = Counter(shapes)
    words = [t.lower().strip("\"'“”‘’()[]{}.,;:!?") for t in toks]
    nonword = sum(count[s] for s in NONWORD) / n
    func = count["func"] / n
    label = (count["cap"] + count["upper"]) / n if not count["func"] else 0.0
    grid = len(toks) >= 3 and all(_GRIDCELL.match(t) or s == "day" for t, s in zip(toks, shapes, strict=True)) \
        and (len(toks) >= 4 and any(s in ("num", "day") for s in shapes) or all(len(t) == 1 and t.isalpha() for t in toks))
    predicate = _predicate(toks, words, shapes)
    if len(cells) >= 2 and predicate:
        # Cells are separate things (buttons, menu items, columns): a verb in one says something only when
        # the cell is a clause of its own ("Save page as…", "Don't use audio" are buttons, at most 0.5).
        per_cell = []
        for c in cells:
            ct = _TOKEN.findall(c)
            p = _predicate(ct, [t.lower().strip("\"'“”‘’()[]{}.,;:!?") for t in ct], tuple(token_shape(t) for t in ct))
            per_cell.append(p if len(ct) > 3 else min(p, 0.5))
        predicate = max(per_cell)
    first = next((t for t, sh in zip(toks, shapes, strict=True) if sh in ("cap", "lower", "upper", "func", "day")), "")
    word = first.rstrip(".:…,")
    status = word if word[:1].isupper() and word.lower().endswith(("ing", "ed")) and predicate < 1 else ""
    return LineSigns(tokens=len(toks), shapes=shapes, predicate=predicate, status=status, words=tuple(words), nonword=round(nonword, 3),
                     label=round(label, 3), function=round(func, 3), cells=len(cells),
                     cell_words=round(len(toks) / max(len(cells), 1), 3), grid=grid, bar="bar" in count)


def _predicate(toks: list[str], words: list[str], shapes: tuple[str, ...]) -> float:
    if any(w in _AUX for w in words):
        return 1.0
    for i, w in enumerate(words):
        if w in FINITE and toks[i][:1].islower() and i > 0 and (words[i - 1] in _SUBJECTS or shapes[i - 1] in ("lower", "cap", "code", "upper")
                                      and words[i - 1] not in FUNCTION_WORDS and words[i - 1] not in VERB_BASES):
            return 1.0  # "the launch moved", "lena merged 4 commits"
        if w in VERB_BASES and toks[i][:1].islower() and i > 0 and i + 1 < len(words) and (
                words[i - 1] in _SUBJECTS or shapes[i - 1] == "lower" and words[i - 1].endswith("s")
                and words[i - 1] not in FUNCTION_WORDS):
            return 1.0  # "we log user data", "uploads go through the resumable endpoint"
    # An imperative: a base verb first (after "please", "then", a label such as "Deploy:"), and an object
    # that is more than one more label ("run make release", "hold Go for 10 s"; not "Send message").
    start = 0
    while start < len(words) - 1 and (words[start] in _INTRO or toks[start].endswith(":") or shapes[start] == "glyph"):
        start += 1
    if start < len(words) and words[start] in VERB_BASES and words[start + 1:start + 2] not in (["or"], ["and"]) \
            and not toks[start].isupper():  # "PLAY [webservers]", "RUN": a tag, not an imperative
        rest = shapes[start + 1:]
        if len(rest) >= 2 and any(s in ("func", "lower", "code", "path", "num", "measure", "url") for s in rest):
            return 1.0
        if rest:
            return 0.5
    return 0.0


@dataclass(frozen=True)
class RowSigns:
    """What the lines of one evidence row are made of, together (see row_signs)."""

    lines: int
    chrome: float  # share of lines that chrome_reason calls chrome
    prose: float  # share of lines with a clear predicate
    tabular: float  # share of lines whose shape signature (3+ cells) another line of the row repeats
    short: float  # share of lines of at most four tokens and no predicate (labels, buttons, form fields)
    repeated: frozenset[str] = frozenset()  # shape signatures two or more lines share (rows of one table)


def row_signs(lines: list[str]) -> RowSigns:
    """Signs of the row as a whole: a listing, a form or a page of chrome, or prose with chrome around it."""
    lines = [ln.strip() for ln in lines if ln.strip()]
    signs = [line_signs(ln) for ln in lines]
    n = max(len(signs), 1)
    sig = Counter(s.signature for s in signs if s.cells >= 3 or s.tokens >= 4)
    return RowSigns(
        lines=len(signs),
        chrome=round(sum(why is not None for why in chrome_lines(lines)) / n, 3),
        prose=round(sum(s.predicate >= 1 for s in signs) / n, 3),
        tabular=round(sum(1 for s in signs if (s.cells >= 3 or s.tokens >= 4) and sig[s.signature] >= 2) / n, 3),
        short=round(sum(1 for s in signs if s.tokens <= 4 and s.predicate < 1) / n, 3),
        repeated=frozenset(k for k, v in sig.items() if v >= 2),
    )


# A logger's level tag near the start of a line: routine chatter of a running program ("[INFO] Building",
# "npm WARN deprecated", "level":"debug"). Errors and failures are not in it: they are often the fact.
_LEVEL = re.compile(r"^.{0,40}?(?:(?<![\w-])(?:INFO|DEBUG|TRACE|VERBOSE|NOTICE|WARN|WARNING)(?![\w-])|"
                    r"\[(?:info|debug|trace|notice|warn|warning)\]|npm (?:notice|warn|http)|"
                    r"\"level\"\s*:\s*\"(?:info|debug|trace)\")")
# Separators a breadcrumb or a path of pages puts between its steps.
_STEP = frozenset({">", "›", "»", "/", "→", "❯", "▸", "\\"})
# A shell, REPL or console prompt before a command.
_PROMPT = re.compile(r"^\s*(?:[$>#%]|>>>|PS [A-Z]:\\[^>]*>|[\w.-]+@[\w.-]+:\S*[$#%]|\[[\w.-]+@[\w.-]+ [^\]]*\][$#]|"
                     r"[\w.-]+(?: [\w~/.-]+)?[$%#>]|\w+=>)\s+\S")
_TIMING = re.compile(r"(?i)\(?\b(?:in|took)\s+\d+(?:[.,]\d+)?\s?(?:ms|s|secs?|seconds)\b")
_STAMP = re.compile(r"\b\d{1,2}:\d{2}:\d{2}\b")
_ERROR = re.compile(r"(?i)\b(?:error|fail(?:ed|ure)?|fatal|panic|exception|traceback|refused|denied|timed? ?out)\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}\b")
_BYTES = re.compile(r"(?i)\d\s?(?:[kmgt]i?b|bytes|[kmgt])\b")
_ELLIPSIS = re.compile(r"(?:\.\.\.|…)\s*(?:done\.?)?$|\bdone\.?$", re.I)
_WORDS = frozenset({"lower", "cap", "upper", "func", "day"})


def prompt_line(line: str) -> bool:
    """Does the line start with a shell, REPL or console prompt and a command?"""
    return bool(_PROMPT.match(line))


def chrome_reason(line: str) -> str | None:
    """Why this line is chrome beyond doubt, by shape alone (None: it may be a statement).

    Only shapes that no statement takes: a logger's level tag; and, with no predicate, a bar, a
    calendar grid, glyphs and numbers with no word, a permission string (a file listing), a program
    timing itself ("in 1873 ms"), a status word ending in -ing or -ed with an ellipsis or a measure
    (progress), a size beside a date (a file listing), steps between separators (a
    breadcrumb), a row of many one-or-two-word cells of words alone (a menu, a tab strip, a nav bar).
    """
    s = line_signs(line)
    if not s.tokens:
        return "empty"
    if _LEVEL.match(line):
        return "log chatter"
    if s.predicate >= 1:
        return None
    if s.bar:
        return "progress or rule"  # "━━━━ 76.4/76.4 kB", "TASK [Gathering Facts] *****": a bar or a rule
    if s.grid:
        return "calendar grid"
    if s.tokens >= 4 and sum(sh == "day" for sh in s.shapes) >= 0.5 * s.tokens:
        return "calendar header"  # "Mon Tue Wed Thu Fri ... Today Week Month": day names, not a date
    words = [i for i, sh in enumerate(s.shapes) if sh in _WORDS]
    if s.tokens >= 2 and not words and not {"code", "path", "url"} & set(s.shapes) and "glyph" in s.shapes:
        return "glyphs and numbers"
    if "perm" in s.shapes:
        return "file listing"
    toks = _TOKEN.findall(line)
    if _TIMING.search(line) and not re.search(r"(?i)\b(?:i|my|we)\b", line):
        return "timing report"  # "compiled successfully in 1873 ms", "Restored X (in 1.92 sec)": a program's own report
    if words and toks[words[0]][:1].isupper() and toks[words[0]].lower().rstrip(".:…").endswith(("ing", "ed")) \
            and (_ELLIPSIS.search(line) or {"measure", "ratio", "bar"} & set(s.shapes)):
        return "progress"  # "Downloading … 41%", "Resolved 6 packages in 212ms": a program's status
    if {"measure", "num"} & set(s.shapes) and _BYTES.search(line) and ({"date", "day"} & set(s.shapes) or _CLOCK.search(line)):
        return "file listing"  # a size beside a date: a row of a file manager or `ls -l`
    steps = sum(t in _STEP for t in toks)
    rest = [sh for t, sh in zip(toks, s.shapes, strict=True) if t not in _STEP]
    if steps >= 2 and len(rest) <= 3 * (steps + 1) and sum(sh in NONWORD for sh in rest) <= 0.2 * len(rest) \
            and not any(t.endswith(":") for t in toks):
        return "breadcrumb"
    cells = [c for c in _CELL_GAP.split(line.strip()) if c.strip()]
    plain = sum(all(token_shape(t) in (*_WORDS, "glyph", "key") for t in _TOKEN.findall(c)) for c in cells)
    if s.cells >= 4 and s.cell_words <= 2.5 and s.function <= 0.1 and plain >= 0.6 * len(cells):
        return "menu"  # mostly words: a table row has values in its cells, and is left to the model
    return None


def chrome_lines(lines: list[str], screen: bool = False) -> list[str | None]:
    """chrome_reason for each line of one evidence row, and what only the row shows:

    - a form or a dialog: three or more bare labels (at most six words, no value, no predicate, no
      "label: value") making up half the row or more;
    - an enumeration: three or more lines in a row of one value each, alone or beside one repeated word
      (an hour axis "6 AM, 7 AM, ...", a list of tags or versions);
    - machine output: three or more lines without a predicate that start with one status word
      ("Compiling", "Restored") or, six tokens long or more, with two non-word tokens (a timestamp);
      three or more lines stamped to the second near their start (a log), errors excepted;
    - a routine command: a prompt line whose output (up to the next prompt) is chrome, all of it or all
      but a quarter of it that has no predicate and names nothing (a listing and its "total 72K"; not
      "+ @atlas/ui@4.2.0", the package a publish made);
    - on screen (screen=True), the software talking to its user: a line that tells "you" what to do or
      what happened to "your" things ("Try adjusting your search", "Please wait while we load your
      content") and names nothing specific. A note the person wrote names what it is about.
    """
    reasons = [chrome_reason(ln) for ln in lines]
    if screen:
        for i, ln in enumerate(lines):
            if reasons[i] is None and addresses_reader(ln) and not anchored(ln):
                reasons[i] = "talks to the user"
    signs = [line_signs(ln) for ln in lines]
    bare = [i for i, (ln, s) in enumerate(zip(lines, signs, strict=True)) if _bare_label(ln, s)]
    if len(bare) >= 3 and len(bare) >= 0.5 * len(lines):
        for i in bare:
            reasons[i] = reasons[i] or "form or dialog"
    for run in _runs(signs):
        for j in run:
            reasons[j] = reasons[j] or "enumeration"
    # Log lines: a clock with seconds near the start of three lines or more ("10:00:01.008", "14:02:11"). A
    # person writes times to the minute; a program stamps its lines to the second. Errors stay for the model.
    stamped = [i for i, ln in enumerate(lines) if _STAMP.search(" ".join(_TOKEN.findall(ln)[:5])) and not _ERROR.search(ln)]
    if len(stamped) >= 3:
        for i in stamped:
            reasons[i] = reasons[i] or "machine output"
    machine = Counter(_machine_key(s) for s in signs)
    for i, s in enumerate(signs):
        key = _machine_key(s)
        if key and machine[key] >= 3:
            reasons[i] = reasons[i] or "machine output"
    # In a page that is mostly chrome, what is left is chrome too unless it names something specific (an
    # anchor: a time, a number, an id, a name): a form's "Use a private window to sign in" goes, a calendar's
    # "08:15 MOT test — Autocentro Lumiar" stays for the model to judge.
    if len(lines) >= 3 and sum(r is not None for r in reasons) >= 0.5 * len(lines):
        for i in range(len(lines)):
            if reasons[i] is None and not anchored(lines[i]):
                reasons[i] = "amid chrome"
    prompts = [i for i, ln in enumerate(lines) if _PROMPT.match(ln)]
    for n, i in enumerate(prompts):
        out = range(i + 1, prompts[n + 1] if n + 1 < len(prompts) else len(lines))
        rest = [j for j in out if reasons[j] is None]
        # Output that is chrome, but for a summary line or two that say nothing as a clause ("total 72K"):
        # the command only looked around or fetched, and its output is not worth a memory either.
        if len(out) and len(rest) <= 0.25 * len(out) and all(
                signs[j].predicate < 1 and not {"code", "path", "url", "hex", "ip"} & set(signs[j].shapes) for j in rest):
            for j in [i, *rest]:
                reasons[j] = reasons[j] or "routine command"
    # A heading over nothing but chrome ("total 48" over `ls -l` rows) heads chrome.
    if len(lines) >= 2 and reasons[0] is None and not _PROMPT.match(lines[0]) and all(r is not None for r in reasons[1:]):
        reasons[0] = "heading of chrome"
    return reasons


_YOU = re.compile(r"(?i)\b(?:you|your|you're|you've|you'll|yours)\b")


def addresses_reader(line: str) -> bool:
    """Is the line said to its reader: "you"/"your", "please", or an order (a base verb first)?"""
    if _YOU.search(line) or re.match(r"(?i)\W*please\b", line):
        return True
    label = re.match(r"^[^:]{1,30}:\s+", line)  # "Notice period: the tenant may ..." is a field, not an order
    toks = _TOKEN.findall(line[label.end():] if label else line)
    words = [t.lower().strip("\"'“”‘’()[]{}.,;:!?") for t in toks]
    i = 0
    while i < len(toks) - 1 and (token_shape(toks[i]) == "glyph" or words[i] in _INTRO):
        i += 1
    return bool(toks) and words[i] in VERB_BASES and not toks[i].isupper() and len(toks) - i >= 2 \
        and words[i + 1] not in ("or", "and")


_ANCHORS = frozenset({"ip", "num", "measure", "ratio", "time", "date", "day", "code", "path", "url", "hex"})


def anchored(line: str) -> bool:
    """Does the line name something specific: a number, a date or time, an id, a path or link, or a name
    (a capitalised word that does not start a sentence), or speak of "I"/"my"?"""
    toks = _TOKEN.findall(line)
    for i, t in enumerate(toks):
        sh = token_shape(t)
        if sh in _ANCHORS:
            return True
        if sh in ("cap", "upper") and i > 0 and not re.search(r"[.!?]$", toks[i - 1]):
            return True
    return bool(re.search(r"(?i)\b(?:i|i'm|i've|i'll|my|me|mine)\b", line))


_VALUES = NONWORD | {"code", "path", "url"}


def _runs(signs: list[LineSigns]) -> list[list[int]]:
    """Runs of three or more lines that enumerate: one token each of one non-word shape ("v0.7.2", "v0.7.3",
    ...), or one value beside one repeated word ("6 AM", "7 AM", ...). A word that changes from line to line
    ("Rent 1,240", "Savings 500") makes a table of values, which is left to the model."""
    out: list[list[int]] = []
    run: list[int] = []

    def same(a: int, b: int) -> bool:
        sa, sb = signs[a], signs[b]
        if sa.tokens != sb.tokens or sa.signature != sb.signature:
            return False
        words_a = [w for w, sh in zip(sa.words, sa.shapes, strict=True) if sh not in _VALUES]
        words_b = [w for w, sh in zip(sb.words, sb.shapes, strict=True) if sh not in _VALUES]
        return words_a == words_b

    for i, s in enumerate(signs):
        fits = 1 <= s.tokens <= 2 and (s.tokens == 2 or s.shapes[0] in _VALUES) and any(sh in _VALUES for sh in s.shapes)
        if fits and run and same(run[-1], i):
            run.append(i)
            continue
        if len(run) >= 3:
            out.append(run)
        run = [i] if fits else []
    if len(run) >= 3:
        out.append(run)
    return out


def _machine_key(s: LineSigns) -> str:
    """What lines of one program's output share: a status word ("Compiling", "Installing"), or a prefix of two
    non-word tokens (a timestamp, an address) on a long line; "" when it is not such a line. A table a person
    reads (a budget, a timetable) has neither, and is left to the model."""
    if s.predicate >= 1 or s.tokens < 3:
        return ""
    if s.status:
        return "status:" + s.status
    if s.tokens >= 6 and s.shapes[0] in NONWORD and s.shapes[1] in NONWORD:
        return "prefix:" + "".join(sh[0] for sh in s.shapes[:2])
    return ""


def _bare_label(line: str, s: LineSigns) -> bool:
    kinds = [sh for sh in s.shapes if sh != "glyph"]
    return 1 <= len(kinds) <= 6 and s.predicate < 1 and all(sh in ("lower", "cap", "upper", "func") for sh in kinds) \
        and not re.search(r"\w:\s+\S", line)
