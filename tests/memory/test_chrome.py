"""Chrome by structure (memory/consolidation/chrome.py): what is chrome by its shape, and what must never be.

The lines here are written for this test (not taken from bench/data), and the rules must hold for any app:
a rule that eats a statement with a predicate or a value is a bug, however much chrome it also catches.
"""

from __future__ import annotations

import pytest

from memory.consolidation.chrome import anchored, chrome_lines, chrome_reason, line_signs, token_shape


@pytest.mark.parametrize(("token", "shape"), [
    ("drwxr-xr-x", "perm"), ("09:12", "time"), ("2026-03-18", "date"), ("76.4/76.4", "ratio"), ("2.1MB/s", "measure"),
    ("43%", "measure"), ("▾", "glyph"), ("━━━━━━━━", "bar"), ("==========>", "bar"), ("a41c9e2", "hex"),
    ("v2.14.0", "code"), ("192.168.1.20", "ip"), ("https://example.org/x", "url"), ("~/src/app", "path"),
    ("Tue", "day"), ("the", "func"), ("AM", "upper"), ("Dentist", "cap"), ("booked", "lower"), ("⌘K", "key"),
])
def test_token_shapes(token, shape):
    assert token_shape(token) == shape


@pytest.mark.parametrize("line", [
    "Deploy: run make release then tag v2.3",
    "the launch moved to the 14th of May because the provider needs two more weeks",
    "lena merged 4 commits into main",
    "We're going with PostgreSQL, not Mongo.",
])
def test_a_clause_has_a_predicate(line):
    assert line_signs(line).predicate == 1.0


@pytest.mark.parametrize("line", [
    "Date Modified        Size     Kind", "Sign up", "Email or phone", "Home  Insert  Draw  Design  Layout  Review",
    "Save page as…   Select all   Take screenshot", "PLAY [webservers] ******",
])
def test_labels_and_buttons_have_none(line):
    assert line_signs(line).predicate < 1.0


@pytest.mark.parametrize(("line", "why"), [
    ("Back  Forward  Reload  Bookmark this page  Save page as…  Inspect", "menu"),
    ("Sun   Mon   Tue   Wed   Thu   Fri   Sat", "calendar grid"),
    ("12    13    14    15    16    17    18", "calendar grid"),
    ("Mon Tue Wed Thu Fri Sat Sun Today Day Week Month", "calendar header"),
    ("     ━━━━━━━━━━━━━━━━━━━━━━━━━ 12.0/48.3 MB 3.1 MB/s eta 0:00:11", "progress or rule"),
    ("-rw-r--r--  1 kim  staff  2048 Jan  9 08:15 notes.md", "file listing"),
    ("Resolving deltas:  38% (411/1080)", "progress"),
    ("[INFO] Building shop-api 2.0.1", "log chatter"),
    ("Console > Billing > Invoices > Credit notes", "breadcrumb"),
    ("✓ compiled successfully in 912 ms", "timing report"),
    ("⊗ 0  ⚠ 2   ▶  ⏸  ⏹", "glyphs and numbers"),
])
def test_chrome_by_shape(line, why):
    assert chrome_reason(line) == why


@pytest.mark.parametrize("line", [
    "Deploy: run make release then tag v2.3",
    "Rent           1,150      due on the 1st",
    "2    Electricity      78.40       direct debit, 5th",
    "08:15 MOT test — Autocentro Lumiar",
    "search-indexer-7d9f6-kq2lx    0/1     CrashLoopBackOff   37         3h",
    "Status: In Progress · Assignee: Tim Adeyemi · Due: Dec 10",
    "Tracking number 1Z 999 AA1 01 2345 6784",
    "Bike lock code 2719",
    "3.4.0 — 2026-11-05",
])
def test_statements_and_values_are_never_chrome_by_shape(line):
    assert chrome_reason(line) is None


def test_a_sign_in_form_is_chrome_line_by_line():
    form = ["Sign in to Acme", "Username or email address", "Password", "Forgot password?", "Sign in",
            "New to Acme? Create an account"]
    reasons = chrome_lines(form, screen=True)
    assert all(r is not None for r in reasons[1:5]), reasons
    assert reasons[0] is not None or reasons[5] is not None  # what is left names only the site, at most


def test_a_listing_under_a_command_goes_with_its_total():
    rows = ["$ ls -l ~/notes", "total 24", "-rw-r--r--  1 kim  staff  1824 Jan 14 10:02 inbox.md",
            "-rw-r--r--  1 kim  staff   933 Jan 12 21:40 ideas.md", "drwxr-xr-x  5 kim  staff   160 Jan  9 08:15 journal"]
    assert all(r is not None for r in chrome_lines(rows))


def test_an_hour_axis_is_an_enumeration_but_a_table_of_values_is_not():
    assert chrome_lines(["6 AM", "7 AM", "8 AM", "9 AM"]) == ["enumeration"] * 4
    assert chrome_lines(["Rent 1,240", "Childcare 610", "Savings 500"]) == [None] * 3


def test_a_command_that_said_something_keeps_its_output():
    rows = ["% git push origin v0.9.0", "Enumerating objects: 1, done.", " * [new tag]   v0.9.0 -> v0.9.0"]
    assert chrome_lines(rows)[0] is None


def test_screen_text_that_talks_to_its_user_is_chrome_unless_it_names_something():
    lines = ["Please wait while we load your content.", "Your appointment is on 16 March at 10:30."]
    assert chrome_lines(lines, screen=True) == ["talks to the user", None]
    assert chrome_lines(lines) == [None, None]  # a spoken or written note is the person's own words


def test_anchors():
    assert anchored("Bike lock code 2719") and anchored("ask Omar about it") and anchored("I hate cilantro")
    assert not anchored("Forgot password?") and not anchored("try adjusting your search")


def test_log_lines_stamped_to_the_second_are_machine_output_but_errors_stay():
    log = ["7:M 02 Jun 2026 09:00:01.004 * 10 changes in 60 seconds. Saving...",
           "7:M 02 Jun 2026 09:00:01.005 * Background saving started by pid 311",
           "311:C 02 Jun 2026 09:00:01.019 * DB saved on disk",
           "7:M 02 Jun 2026 09:00:02.110 # Error: write failed, disk full on /var/lib/redis"]
    reasons = chrome_lines(log)
    assert reasons[1:3] == ["machine output"] * 2 and reasons[0] is not None  # the first also times itself
    assert reasons[3] is None
    # A person writes times to the minute: a day's plan is not a log.
    assert chrome_lines(["08:15 MOT test", "12:30 lunch with Ana", "19:00 choir"]) == [None] * 3


def test_a_publish_keeps_what_it_made_and_a_commit_log_is_not_looking_around():
    rows = ["% npm publish --access public", "npm notice 📦  @acme/kit@1.4.0", "npm notice package size:  12.1 kB",
            "npm notice total files:   9", "+ @acme/kit@1.4.0"]
    reasons = chrome_lines(rows)
    assert reasons[0] is None and reasons[4] is None  # "+ @acme/kit@1.4.0" names the package it made
    from memory.consolidation.salience import vetoes
    from memory.consolidation.statements import segment_row

    log = segment_row("kim@box:~/src/fw$ git log --oneline -2\nb71c0de (tag: fw-2.0.1) Fix watchdog reset\n"
                      "9a0e1f2 Bump SDK", "screen")
    assert not any(vetoes(log, {0: "screen"})[1:])
