"""Find dates in text — absolute ("8 May, 2023", "in July 2023") and relative ("yesterday",
"last week", "3 days ago") — and turn each into a time window, resolved against a reference time.

Used twice: on queries (resolved against the time of asking, to favour evidence captured then) and
on evidence text (resolved against its capture time, so "yesterday" in a turn is indexed as a date).
English only; anything not recognised is simply not a date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = {m: i for i, m in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"], start=1)}
_MON_ABBR = {m[:3]: i for m, i in MONTHS.items()} | {"sept": 9}
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUM_WORDS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
              "eight": 8, "nine": 9, "ten": 10, "couple of": 2, "few": 3}

_MON = r"(?P<mon>jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUM = r"(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|couple of|few)"

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(p, re.I)) for name, p in [
    ("dmy", rf"\b{_DAY}\s+(?:of\s+)?{_MON}\b,?\s*{_YEAR}?"),
    ("mdy", rf"\b{_MON}\s+{_DAY}\b(?!:)(?:,?\s*{_YEAR})?"),
    ("my", rf"\b(?:in|during|of|since|by|early|late|mid)\s+{_MON}(?:,?\s*{_YEAR})?\b"),
    ("month_year", rf"\b{_MON}\s+{_YEAR}\b"),
    ("year", rf"\b(?:in|during|of|since)\s+{_YEAR}\b"),
    ("ago", rf"\b{_NUM}\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
    ("rel", r"\b(?P<rel>yesterday|today|tonight|this morning|this afternoon|this evening|last night|tomorrow)\b"),
    ("last", r"\b(?P<which>last|past|previous|this|next)\s+(?P<unit>week(?:end)?|month|year)\b"),
    ("weekday", r"\b(?P<which>last|this|next|on)?\s*(?P<wd>monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"),
]]


@dataclass(frozen=True)
class Window:
    """A half-open time window [start, end) and the words that produced it."""

    start: datetime
    end: datetime
    phrase: str
    relative: bool  # True when it depended on the reference time ("yesterday"), False for "8 May 2023"

    def label(self) -> str:
        """A human date for indexing: '7 May 2023', 'May 2023' or '2023' (or a range of days)."""
        days = (self.end - self.start).days
        if days <= 1:
            return _fmt_day(self.start.date())
        if self.start.day == 1 and days in (28, 29, 30, 31):
            return self.start.strftime("%B %Y")
        if self.start.month == 1 and self.start.day == 1 and days in (365, 366):
            return str(self.start.year)
        return f"{_fmt_day(self.start.date())} to {_fmt_day((self.end - timedelta(days=1)).date())}"


def _fmt_day(d: date) -> str:
    return f"{d.day} {d.strftime('%B %Y')}"


def _day(d: date, n: int = 1) -> tuple[datetime, datetime]:
    start = datetime(d.year, d.month, d.day)
    return start, start + timedelta(days=n)


def _month(y: int, m: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, 1)
    return start, datetime(y + (m == 12), m % 12 + 1, 1)


def _month_no(token: str) -> int:
    t = token.lower()
    return MONTHS.get(t) or _MON_ABBR[t[:4] if t.startswith("sept") else t[:3]]


def _shift_months(d: date, n: int) -> tuple[int, int]:
    k = d.year * 12 + (d.month - 1) + n
    return k // 12, k % 12 + 1


def _resolve(kind: str, m: re.Match[str], ref: datetime) -> tuple[datetime, datetime] | None:
    g = m.groupdict()
    today = ref.date()
    if kind in ("dmy", "mdy"):
        year = int(g["year"]) if g.get("year") else _year_for_month(_month_no(g["mon"]), today)
        try:
            return _day(date(year, _month_no(g["mon"]), int(g["day"])))
        except ValueError:
            return None
    if kind in ("my", "month_year"):
        mon = _month_no(g["mon"])
        return _month(int(g["year"]) if g.get("year") else _year_for_month(mon, today), mon)
    if kind == "year":
        return datetime(int(g["year"]), 1, 1), datetime(int(g["year"]) + 1, 1, 1)
    if kind == "ago":
        return _ago(_NUM_WORDS.get(g["n"].lower()) or int(g["n"]), g["unit"].lower(), today)
    if kind == "rel":
        rel = g["rel"].lower()
        offset = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(rel, 0)
        return _day(today + timedelta(days=offset))
    if kind == "last":
        return _last(g["which"].lower(), g["unit"].lower(), today)
    if kind == "weekday":
        return _weekday(g.get("which"), g["wd"].lower(), today)
    return None


def _year_for_month(mon: int, today: date) -> int:
    # A bare month means its most recent occurrence ("in June", asked in March 2024 -> June 2023).
    return today.year if mon <= today.month else today.year - 1


def _ago(n: int, unit: str, today: date) -> tuple[datetime, datetime]:
    if unit == "day":
        return _day(today - timedelta(days=n))
    if unit == "week":  # "two weeks ago": the week around that day, loosely
        return _day(today - timedelta(days=7 * n + 3), 7)
    if unit == "month":
        return _month(*_shift_months(today, -n))
    return datetime(today.year - n, 1, 1), datetime(today.year - n + 1, 1, 1)


def _last(which: str, unit: str, today: date) -> tuple[datetime, datetime]:
    step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1}[which]
    if unit == "weekend":
        sat = today - timedelta(days=(today.weekday() - 5) % 7 or 7) if step < 0 else \
            today + timedelta(days=(5 - today.weekday()) % 7)
        return _day(sat, 2)
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return _day(monday, 7)
    if unit == "month":
        return _month(*_shift_months(today, step))
    return datetime(today.year + step, 1, 1), datetime(today.year + step + 1, 1, 1)


def _weekday(which: str | None, wd: str, today: date) -> tuple[datetime, datetime]:
    target = WEEKDAYS.index(wd)
    if (which or "").lower() == "next":
        return _day(today + timedelta(days=(target - today.weekday()) % 7 or 7))
    # "on Friday", "last Friday", "Friday": the most recent one before today
    return _day(today - timedelta(days=(today.weekday() - target) % 7 or 7))


def find_windows(text: str, ref: datetime) -> list[Window]:
    """Every date phrase in text as a window, resolved against ref; overlapping matches keep the first."""
    found: list[tuple[int, int, Window]] = []
    taken: list[tuple[int, int]] = []
    for kind, pat in _PATTERNS:
        for m in pat.finditer(text):
            if any(m.start() < e and s < m.end() for s, e in taken):
                continue
            if kind == "weekday" and not m.group("which") and not _weekday_is_date(text, m):
                continue
            span = _resolve(kind, m, ref)
            if span is None:
                continue
            taken.append((m.start(), m.end()))
            relative = kind in ("ago", "rel", "last", "weekday") or (kind in ("dmy", "mdy", "my") and not m.groupdict().get("year"))
            found.append((m.start(), m.end(), Window(span[0], span[1], m.group(0).strip(), relative)))
    return [w for _, _, w in sorted(found, key=lambda x: x[0])]


def _weekday_is_date(text: str, m: re.Match[str]) -> bool:
    # A bare weekday counts only when it reads as a time ("on Friday", "Friday we met"), not "Fridays".
    after = text[m.end():m.end() + 1]
    return after != "s"
