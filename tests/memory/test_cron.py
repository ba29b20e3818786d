"""The scheduler's crontab lines have one reader (memory/cron.py): the config check, the scheduler and the
settings window's words agree, with APScheduler's validation and crontab's weekdays (0 and 7 are Sunday)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from memory import cron
from memory.config import Config
from memory.errors import ConfigError


def fires(expr: str, n: int = 3) -> list[str]:
    """The weekdays of the next n runs after a Wednesday (UTC), as names."""
    t, at, out = cron.trigger(expr, timezone="UTC"), datetime(2026, 12, 2, tzinfo=timezone.utc), []
    for _ in range(n):
        at = t.get_next_fire_time(None, at)
        out.append(at.strftime("%a"))
        at = at.replace(second=1)
    return out


@pytest.mark.parametrize(("expr", "days"), [
    ("0 9 * * 1", ["Mon", "Mon", "Mon"]),
    ("0 9 * * 0", ["Sun", "Sun", "Sun"]),
    ("0 9 * * 7", ["Sun", "Sun", "Sun"]),
    ("0 9 * * mon", ["Mon", "Mon", "Mon"]),
    ("0 9 * * 1-5", ["Wed", "Thu", "Fri"]),
    ("0 9 * * 5-7", ["Fri", "Sat", "Sun"]),
    ("0 9 * * 0,6", ["Sat", "Sun", "Sat"]),
    ("0 9 * * */2", ["Thu", "Sat", "Sun"]),  # crontab: 0, 2, 4, 6 — Sunday, Tuesday, Thursday, Saturday
])
def test_weekdays_run_as_crontab_reads_them(expr, days):
    assert fires(expr) == days


def test_the_window_says_what_the_scheduler_runs():
    assert cron.describe("15 9 * * 1") == "every Monday at 09:15"
    assert cron.describe("15 9 * * 0") == cron.describe("15 9 * * 7") == "every Sunday at 09:15"
    assert cron.describe("30 3 * * *") == "every night at 03:30"
    assert cron.describe("*/15 * * * *") == "every 15 minutes"
    assert cron.describe("0 */2 * * *") == "every 2 hours at :00"
    assert cron.describe("0 9 1 * *") == "on day 1 of every month at 09:00"
    assert cron.describe("0 9 * * 1-5").startswith("custom schedule")


@pytest.mark.parametrize(("expr", "why"), [
    ("* * *", "Wrong number of fields"),
    ("61 3 * * *", "higher than the maximum"),
    ("0 3 * * 8", "weekday '8' is out of range"),
    ("0 3 * * 5-1", "not a day, a list or a range"),
    ("0 3 32 * *", "higher than the maximum"),
])
def test_a_bad_line_is_refused_by_apschedulers_validation_everywhere(expr, why):
    assert cron.describe(expr).startswith("not a schedule: ") and why in cron.describe(expr)
    with pytest.raises(ValueError, match=why):
        cron.trigger(expr)
    with pytest.raises((ValueError, ConfigError), match=why):
        Config.model_validate({"scheduler": {"dream_cron": expr}})
