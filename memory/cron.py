"""The scheduler's crontab lines (scheduler.dream_cron, scheduler.purge_cron), read in one place: the config
check (memory/config.py), the scheduler (memory/consolidation/scheduler.py) and the settings window's words
(desktop/ui/settings_dialog.py) all go through `trigger`, so what the window says is what runs.

A line is five fields, minute hour day month weekday, in local time. APScheduler's CronTrigger.from_crontab
reads and validates it. One difference from crontab is bridged first: APScheduler 3 numbers weekdays from
Monday = 0, crontab from Sunday = 0 (and 7), so a weekday given as numbers is turned into day names, which
both read alike ("1" is Monday). When both day and weekday are restricted, APScheduler fires only on days
that match both (crontab: either); the settings window calls such a line a custom schedule.
"""

from __future__ import annotations

from typing import Any

DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")  # crontab's order: Sunday is 0 (and 7)
DAY_WORDS = {"sun": "Sunday", "mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday",
             "fri": "Friday", "sat": "Saturday"}


def trigger(expr: str, timezone: Any = None) -> Any:
    """The line as APScheduler's CronTrigger (local time unless `timezone`); ValueError saying what is wrong when
    it is not a valid line."""
    from apscheduler.triggers.cron import CronTrigger

    fields = expr.split()
    if len(fields) == 5:  # any other count: from_crontab says how many it wants
        fields[4] = _weekdays(fields[4])
    return CronTrigger.from_crontab(" ".join(fields), timezone=timezone)


def _weekdays(field: str) -> str:
    """A crontab weekday field with its numbers as day names; names, ranges of names and * read the same in
    APScheduler and are left as they are."""
    if not any(c.isdigit() for c in field):
        return field
    days: set[int] = set()
    for item in field.split(","):
        body, slash, step_text = item.partition("/")
        step = _number(step_text, item) if slash else 1
        if body == "*":
            lo, hi = 0, 6
        else:
            first, dash, last = body.partition("-")
            lo = _day(first, item)
            hi = _day(last, item) if dash else (7 if slash else lo)  # "1/2": from Monday on, every other day
        if step < 1 or hi < lo:
            raise ValueError(f"weekday {item!r} is not a day, a list or a range of days (0 or 7 is Sunday)")
        days.update(d % 7 for d in range(lo, hi + 1, step))
    return "*" if len(days) == 7 else ",".join(DAYS[d] for d in sorted(days))


def _day(text: str, item: str) -> int:
    name = text.lower()[:3]
    if name in DAYS and not text.isdigit():
        return DAYS.index(name)
    day = _number(text, item)
    if not 0 <= day <= 7:
        raise ValueError(f"weekday {item!r} is out of range: 0 to 7 (0 and 7 are Sunday), or mon … sun")
    return day


def _number(text: str, item: str) -> int:
    if not text.isdigit():
        raise ValueError(f"weekday {item!r} is not a day, a list or a range of days (0 or 7 is Sunday)")
    return int(text)


def describe(expr: str) -> str:
    """A line in words, as the trigger reads it: "every night at 03:30", "every Monday at 09:00", "every 15
    minutes"; "not a schedule: …" with the reason when it is not a valid line."""
    try:
        fields = {f.name: str(f) for f in trigger(expr or "", timezone="UTC").fields}
    except ValueError as e:
        return f"not a schedule: {e} (minute hour day month weekday)"
    minute, hour, day, month, weekday = (fields[n] for n in ("minute", "hour", "day", "month", "day_of_week"))
    if minute.startswith("*/") and hour == "*" and (day, month, weekday) == ("*", "*", "*"):
        return f"every {minute[2:]} minutes"
    if minute.isdigit() and hour.startswith("*/") and (day, month, weekday) == ("*", "*", "*"):
        return f"every {hour[2:]} hours at :{int(minute):02d}"
    if not (minute.isdigit() and hour.isdigit()) or month != "*":
        return f"custom schedule ({expr})"
    at = f"{int(hour):02d}:{int(minute):02d}"
    part = "night" if int(hour) < 6 or int(hour) >= 22 else "day"
    if day == "*" and weekday == "*":
        return f"every {part} at {at}"
    if day == "*" and weekday in DAY_WORDS:
        return f"every {DAY_WORDS[weekday]} at {at}"
    if weekday == "*" and day.isdigit():
        return f"on day {int(day)} of every month at {at}"
    return f"custom schedule ({expr})"
