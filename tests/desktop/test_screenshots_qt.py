"""Screenshots of the browser, review queue, timeline and settings with realistic data, for the README.

Asserts they are real images of the windows, not blank captures. They are written to the test's
temp dir; `make screenshots` (MIRADOR_UPDATE_SCREENSHOTS=1) writes them to assets/screenshots/ and
the tray icons to assets/icons/, so that `make test` leaves the checkout as it found it.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont
from PySide6.QtCore import Qt

from desktop.ui import icons
from desktop.ui.browser import MemoryBrowser
from desktop.ui.qt_models import now_utc
from desktop.ui.review import ReviewQueue
from desktop.ui.settings_dialog import SettingsDialog
from desktop.ui.settings_tokens import TokensPanel
from desktop.ui.timeline import EvidenceTimeline
from tests.desktop.conftest import wait_idle

ROOT = Path(__file__).resolve().parents[2]
UPDATE = os.environ.get("MIRADOR_UPDATE_SCREENSHOTS") == "1"


@pytest.fixture
def assets(tmp_path) -> Path:
    """Where the images go: the repo's assets/ when updating them, a temp dir otherwise."""
    return ROOT / "assets" if UPDATE else tmp_path / "assets"
MONO = "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf"
SANS = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def _font(path, size):
    try:
        return ImageFont.truetype(path, size)
    except OSError:
        return ImageFont.load_default()


def _screen(path: Path, lines: list[str], dark: bool, title: str) -> str:
    img = Image.new("RGB", (1280, 800), "#1e1f22" if dark else "#f6f7f9")
    d = ImageDraw.Draw(img)
    d.rectangle((0, 0, 1280, 36), fill="#2b2d31" if dark else "#4a154b")
    d.text((16, 8), title, fill="white", font=_font(SANS, 18))
    font = _font(MONO if dark else SANS, 22)
    for i, line in enumerate(lines):
        d.text((24, 60 + i * 34), line, fill="#d4d4d4" if dark else "#1d1c1d", font=font)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return str(path)


def _morning_anchor() -> datetime:
    """Now, or 03:00 local time today when it is earlier: the populated day spans 160 minutes before the
    anchor, and the timeline shows one local day, so a run just after midnight must not push frames into
    yesterday (CI failed that way at 01:xx)."""
    now = now_utc()
    local = now.replace(tzinfo=timezone.utc).astimezone()
    three = local.replace(hour=3, minute=0, second=0, microsecond=0)
    return max(now, three.astimezone(timezone.utc).replace(tzinfo=None))


def _populate(store, home: Path) -> dict:
    t = _morning_anchor()
    f1 = _screen(home / "frames" / "term.png", ["$ psql ledger -c 'select version()'",
                                                 " PostgreSQL 16.2 on x86_64-pc-linux-gnu", "(1 row)", "",
                                                 "$ git log --oneline -3", "a41c2e9 ledger: move to pg16",
                                                 "9be01d3 ci: cache wheels"], True, "Terminal — ledger")
    f2 = _screen(home / "frames" / "slack.png", ["Maya Chen  10:42", "Standup moves to 9:30 from Monday,",
                                                  "the 9:00 slot clashes with the EU sync.", "",
                                                  "Sam Ortiz  10:44", "works for me, thanks"], False, "Slack — #ledger-team")
    e1 = store.add_evidence("$ psql ledger -c 'select version()' PostgreSQL 16.2 on x86_64-pc-linux-gnu",
                            source="screen", app="Terminal", window="ledger — psql", frame_path=f1,
                            captured_at=t - timedelta(minutes=50), scope="work/acme")
    e2 = store.add_evidence("Maya Chen: Standup moves to 9:30 from Monday, the 9:00 slot clashes with the EU sync.",
                            source="screen", app="Slack", window="#ledger-team", frame_path=f2,
                            captured_at=t - timedelta(minutes=20), scope="work/acme")
    # The rest of a working morning, so the timeline's strip and slider look like a real day.
    day = [
        ("VS Code", "ledger/migrations/0042_pg16.sql", True, ["-- 0042: move ledger to PostgreSQL 16",
                                                            "ALTER TABLE entries", "  ALTER COLUMN amount TYPE numeric(18,4);",
                                                            "CREATE INDEX CONCURRENTLY entries_booked_at", "  ON entries (booked_at);"]),
        ("Firefox", "PostgreSQL 16 release notes", False, ["PostgreSQL 16 Release Notes", "",
                                                           "Logical replication from standbys",
                                                           "Parallel FULL and RIGHT joins", "pg_stat_io view for I/O statistics"]),
        ("Thunderbird", "Re: ledger cut-over window", False, ["From: Maya Chen", "Subject: Re: ledger cut-over window", "",
                                                             "Friday 18:00 works, ops will freeze deploys", "from 17:30. I'll post in #ledger-team."]),
        ("Terminal", "ledger — pytest", True, ["$ pytest -q tests/ledger", "........................ [100%]",
                                               "212 passed in 41.3s"]),
        ("Slack", "#ops", False, ["Priya Nair  09:58", "Deploy freeze for ledger: Fri 17:30 to 20:00.",
                                  "", "Maya Chen  10:01", "thanks! cut-over at 18:00 sharp"]),
        ("Firefox", "Grafana — ledger latency", False, ["Grafana · ledger / latency", "", "p50 12 ms   p95 48 ms   p99 110 ms",
                                                        "errors 0.02 %   rps 340"]),
        ("VS Code", "ledger/settings.py", True, ["DATABASE_URL = env('LEDGER_DB_URL')", "POOL_SIZE = 20",
                                                 "STATEMENT_TIMEOUT_MS = 5000"]),
    ]
    for k, (app, window, dark, lines) in enumerate(day):
        frame = _screen(home / "frames" / f"day{k}.png", lines, dark, f"{app} — {window}")
        store.add_evidence(" ".join(lines), source="screen", app=app, window=window, frame_path=frame,
                           captured_at=t - timedelta(minutes=160 - 15 * k), scope="work/acme")
    e3 = store.add_evidence("Let's keep the retry budget at three attempts and page on the fourth.",
                            source="audio", speaker="Sam", captured_at=t - timedelta(hours=26), scope="work/acme")
    store.add_evidence("Firefox: LanceDB docs — merge_insert upserts", source="screen", app="Firefox",
                       captured_at=t - timedelta(hours=27), scope="work")
    pg = store.add_memory("The ledger service runs on PostgreSQL 16", scope="work/acme", provenance=[e1["id"]],
                          details={"subject": "ledger"}, origin="extractor", confidence=0.93)
    store.add_memory("Rotate the signing key", type="procedural", scope="work/acme",
                     details={"steps": ["generate a new key in Vault", "upload to the CI secrets", "revoke the old key"]})
    store.add_memory("Prefers TypeScript for front-end work and Python for tooling", type="core", scope="personal",
                     details={"block": "preferences"})
    store.add_memory("On-call runbook", type="resource", scope="work/acme",
                     details={"uri": "https://wiki.example.com/ledger/on-call"})
    store.add_memory("Shipped the pg16 migration with Maya", type="episodic", scope="work/acme",
                     details={"who": ["Maya Chen"]}, provenance=[e1["id"]])
    store.add_memory("Dentist appointment is on the 14th at 08:15", type="episodic", scope="personal")
    store.add_memory("Retry budget is three attempts; page on the fourth", scope="work/acme",
                     provenance=[e3["id"]], origin="extractor", confidence=0.88)
    c1 = store.add_memory("Standup moves to 9:30 from Monday", type="episodic", status="candidate",
                          origin="extractor", provenance=[e2["id"]], confidence=0.72, scope="work/acme",
                          details={"who": ["Maya Chen", "Sam Ortiz"]})
    store.add_memory("The team's database of record is PostgreSQL", status="candidate", origin="dream",
                     provenance=[e1["id"]], confidence=0.81, scope="work/acme")
    store.add_memory("Sam prefers pairing on Thursdays", status="candidate", origin="extractor",
                     confidence=0.44, scope="work/acme")
    store.add_memory("The ledger service runs on PostgreSQL 17 since the March upgrade", scope="work/acme",
                     details={"subject": "ledger"}, origin="extractor", confidence=0.9)
    from memory.consolidation.dream import run_dream

    run_dream(store)  # proposes superseding the PostgreSQL 16 fact: the review window's second tab
    return {"pg": pg, "candidate": c1}


def _save(widget, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(path), "PNG")
    img = Image.open(path)
    assert img.width >= 600 and len(img.convert("L").getcolors(1 << 16) or []) > 20, "looks blank"
    return path


def test_screenshots(qtbot, jobs, store, mirador_home, assets):
    shots = assets / "screenshots"
    icons.export(assets / "icons")
    ids = _populate(store, mirador_home)

    browser = MemoryBrowser(jobs, store)
    qtbot.addWidget(browser)
    browser.resize(1280, 760)
    browser.show()
    qtbot.waitUntil(lambda: browser.model.rowCount() == 11, timeout=30_000)
    browser.select_id(ids["pg"]["id"])
    qtbot.waitUntil(lambda: browser.detail.row is not None and bool(browser.detail.row["_evidence"]), timeout=30_000)
    wait_idle(qtbot, jobs)
    _save(browser, shots / "browser.png")

    browser.search.setText("which database does the ledger use")
    browser.reload()
    qtbot.waitUntil(lambda: browser.model.rowCount() > 0 and browser.model.row_at(0)["id"] == ids["pg"]["id"],
                    timeout=30_000)
    browser.select_id(ids["pg"]["id"])
    qtbot.waitUntil(lambda: browser.detail.row is not None, timeout=30_000)
    wait_idle(qtbot, jobs)
    _save(browser, shots / "browser-search.png")

    review = ReviewQueue(jobs, store)
    qtbot.addWidget(review)
    review.resize(1200, 680)
    review.show()
    qtbot.waitUntil(lambda: review.model.rowCount() == 3, timeout=30_000)
    idx = review.table.model().mapFromSource(review.model.index(review.model.index_of(ids["candidate"]["id"]), 0))
    qtbot.mouseClick(review.table.viewport(), Qt.MouseButton.LeftButton, pos=review.table.visualRect(idx).center())
    qtbot.waitUntil(lambda: review.detail.row is not None, timeout=30_000)
    wait_idle(qtbot, jobs)
    _save(review, shots / "review.png")
    review.tabs.setCurrentIndex(1)
    qtbot.waitUntil(lambda: review.proposals.model.rowCount() >= 1, timeout=30_000)
    review.proposals.table.selectRow(0)
    qtbot.waitUntil(lambda: review.proposals.detail.row is not None, timeout=30_000)
    wait_idle(qtbot, jobs)
    _save(review, shots / "review-proposals.png")

    timeline = EvidenceTimeline(jobs, store)
    qtbot.addWidget(timeline)
    timeline.resize(1280, 860)
    timeline.show()
    qtbot.waitUntil(lambda: timeline.model.rowCount() == 9, timeout=30_000)
    qtbot.waitUntil(lambda: timeline.preview.frame.pixmap() is not None and not timeline.preview.frame.pixmap().isNull(),
                    timeout=30_000)
    strip = timeline.strip.strip
    qtbot.waitUntil(lambda: strip.rowCount() > 0 and all(strip.thumb(k) is not None for k in range(strip.rowCount())),
                    timeout=30_000)  # every thumbnail decoded, not the grey placeholder
    wait_idle(qtbot, jobs)
    _save(timeline, shots / "timeline.png")
    qtbot.keyClicks(timeline.search, "standup")  # the preview of a search hit: the words marked under the frame
    qtbot.keyClick(timeline.search, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: timeline.match_label.text() == "match 1 of 1", timeout=30_000)
    wait_idle(qtbot, jobs)
    _save(timeline, shots / "timeline-preview.png")

    settings = SettingsDialog(home=mirador_home, extra_tabs=[("MCP tokens", TokensPanel(jobs, mirador_home))])
    qtbot.addWidget(settings)
    settings.resize(760, 700)
    settings.show()
    qtbot.waitExposed(settings)
    _save(settings, shots / "settings.png")
    settings.fields["capture.interval_seconds"].widget.setText("0.1")
    settings.validate()
    _save(settings, shots / "settings-invalid.png")
    wait_idle(qtbot, jobs)
