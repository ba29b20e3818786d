"""The default extraction engine (memory/consolidation/verbatim.py) through the scheduler's job, on a real store.

Fixtures are written here (not taken from bench/data): each source kind keeps its key detail intact,
noise yields nothing, no memory holds a number or name its evidence lacks, and the person's deletions
and edits survive re-extraction.
"""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from memory.consolidation.extraction import make_extractor, run_extraction
from memory.consolidation.scheduler import job_extract
from memory.consolidation.statements import compose, render, segment_row, split_sentences
from memory.consolidation.verbatim import StatementEngine
from memory.store.core import EvidenceSpec, Store
from memory.store.erasure import forget

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from extract_quality import holds, unsupported_terms  # noqa: E402

T0 = datetime(2026, 11, 3, 9, 0, tzinfo=timezone.utc)

# (source, app, window, text, key terms that must survive together, acceptable types)
FACTS = [
    ("audio", "microphone", "", "uh, so my flight to Oslo is SK 4615 on the 14th, it leaves at 07:20.",
     ["SK 4615", "07:20"], {"episodic", "semantic"}),
    ("audio", "zoom.us", "Zoom Meeting", "Maria: So for the search service we're going with OpenSearch, not Solr. "
     "Tom: Fine by me, mostly because of the licence. Maria: Tom writes the migration note by Friday.",
     ["OpenSearch", "Solr"], {"semantic", "episodic"}),
    ("screen", "Code", "CHANGELOG.md — billing — Visual Studio Code",
     "## 3.7.2 — 2026-10-30\nFixed rounding of VAT on credit notes (BIL-812).", ["3.7.2", "2026-10-30"],
     {"episodic", "semantic"}),
    ("screen", "Terminal", "deploy@web-2: ~", "$ curl -s localhost:8080/healthz\n{\"status\":\"ok\",\"build\":\"r2291\"}",
     ["r2291"], {"episodic", "semantic"}),
    ("screen", "Slack", "#payments — Acme — Slack", "Irene Walsh  3:12 PM\nthe refund cutoff moves to 18:00 CET "
     "from Monday, finance asked for it", ["Irene", "18:00"], {"episodic", "semantic"}),
    ("screen", "Google Chrome", "PAY-4471 — Jira", "PAY-4471 Refunds fail for split payments\nStatus: In Review\n"
     "Assignee: Omar Haddad\nDue: 2026-11-20", ["PAY-4471", "Omar Haddad"], {"episodic", "semantic"}),
    ("manual", "mirador", "Quick note", "My passport number is X4471920 and it expires in March 2031.",
     ["X4471920"], {"core", "semantic", "resource"}),
    ("import", "notes", "garden.md", "# Garden\nThe apple tree was planted on 12 April 2024 by Hugo.\n"
     "Water the tomatoes every second evening in July.", ["apple tree", "12 April 2024"], {"episodic", "semantic"}),
    ("manual", "mirador", "Quick note", "Deploy: run make release then tag v2.3", ["make release", "v2.3"],
     {"procedural"}),
]
# Facts amid the chrome of the noise below: a filter that reads shapes must not eat them (issue 44). Kept is
# what this asserts; how well their types come out is the bench's measure (bench/extract_quality.py).
LOOKALIKES = [
    ("screen", "Calendar", "Calendar — June 2026", "June 2026      Today  ‹  ›      Day  Week  Month\n"
     "Mon 8   Tue 9   Wed 10   Thu 11   Fri 12\n09:40 Physio — Dr. Lindqvist, Storgatan 12", ["Physio", "Lindqvist"]),
    ("screen", "Terminal", "~/src/shop — zsh", "% ls -l\ntotal 8\n-rw-r--r--  1 kim  staff  2210 Jun  2 10:02 Makefile\n"
     "% # the signing key for releases is in 1Password under Shop Release", ["1Password", "Shop Release"]),
]
# A fact the row gate loses: the page reads as a sign-in form throughout (P(noise row) 0.78, the gate drops from
# 0.7). The gate's price in train CV: 4 of 478 facts, all in rows like this one, for 45 of 102 noise memories.
SIGN_IN_BRANCH = ("screen", "Google Chrome", "Sign in · Bank", "Sign in\nCustomer number\nPassword\nForgot password?\n"
                  "Your customer number is on your card. Branch: Rua Augusta 210, Lisbon", ["Rua Augusta 210"])
NOISE = [
    ("screen", "Safari", "news site", "We value your privacy. We and our 312 partners use cookies to personalise "
     "content and ads. Accept all  Reject all  Manage options"),
    ("screen", "Finder", "Downloads", "Name  Date modified  Type  Size\ninvoice_0931.pdf  Yesterday 18:02  PDF  212 KB\n"
     "IMG_2231.HEIC  Today 08:11  HEIC image  2.4 MB"),
    ("audio", "zoom.us", "Zoom Meeting", "can you hear me? you're on mute. okay, okay now I can hear you. hi everyone."),
    ("screen", "Firefox", "Mozilla Firefox", "File  Edit  View  History  Bookmarks  Tools  Help"),
    # What produced memories on evidence nobody tuned on (issue 44), written again with other words and apps.
    ("screen", "Terminal", "~/photos — zsh", "% ls -la\ntotal 32\ndrwxr-xr-x   6 kim  staff   192 Jun  2 10:02 .\n"
     "drwxr-xr-x  31 kim  staff   992 May 30 18:40 ..\n-rw-r--r--   1 kim  staff  6148 Jun  1 09:12 .DS_Store\n"
     "drwxr-xr-x  48 kim  staff  1536 Jun  2 10:01 2026-05"),
    ("screen", "Terminal", "~/src/web — zsh", "% npm ci\nnpm WARN deprecated rimraf@3.0.2: Rimraf versions prior to v4 "
     "are no longer supported\n[##############....] - reify:esbuild: timing reifyNode:node_modules/esbuild Completed "
     "in 1202ms"),
    ("screen", "Calendar", "Calendar", "Mon  Tue  Wed  Thu  Fri  Sat  Sun    Today   Day  Week  Month  Year\n"
     "1    2    3    4    5    6    7\n8    9    10   11   12   13   14"),
    ("screen", "Google Chrome", "Sign in · Gitea", "Sign in to Gitea\nUsername or email address\nPassword\n"
     "Forgot password?\nSign in\nNeed an account? Register now."),
]


def _add(store: Store, rows: list[tuple]) -> list[dict]:
    specs = [EvidenceSpec(text=r[3], source=r[0], app=r[1], window=r[2], captured_at=T0 + timedelta(hours=3 * i))
             for i, r in enumerate(rows)]
    return store.add_evidence_batch(specs)


@pytest.fixture()
def store(tmp_path):
    s = Store(tmp_path / "home")
    assert s.config.extraction.engine == "auto"
    return s


def _memories_of(store: Store, evidence_id: str) -> list[dict]:
    return [m for m in store.list("memory", limit=10_000) if evidence_id in (m.get("provenance") or [])]


def test_every_source_keeps_its_key_detail_and_noise_gives_nothing(store):
    rows = _add(store, FACTS + NOISE + LOOKALIKES)
    detail = job_extract(store)
    assert detail.startswith(f"{len(rows)} evidence")
    for row, fact in zip(rows[:len(FACTS)], FACTS, strict=True):
        mems = _memories_of(store, row["id"])
        hits = [m for m in mems if holds(m["text"], fact[4])]
        assert hits, f"{fact[4]} lost from {fact[3]!r}: got {[m['text'] for m in mems]}"
        assert any(m["type"] in fact[5] for m in hits), [(m["type"], m["text"]) for m in hits]
    for row in rows[len(FACTS):len(FACTS) + len(NOISE)]:
        assert _memories_of(store, row["id"]) == [], row["text"]
    for row, fact in zip(rows[len(FACTS) + len(NOISE):], LOOKALIKES, strict=True):
        mems = _memories_of(store, row["id"])
        assert any(holds(m["text"], fact[4]) for m in mems), f"{fact[4]} lost from {fact[3]!r}: {mems}"
    # Screen text is untrusted: what it gives waits for review; a spoken note may be active.
    for row, fact in zip(rows, FACTS, strict=False):
        for m in _memories_of(store, row["id"]):
            if fact[0] == "screen":
                assert m["status"] == "candidate"


# Noise the keep model alone turns into memories and the row gate stops (each checked both ways below).
GATED = [
    ("audio", "zoom.us", "Zoom Meeting", "Testing, testing, one two three, is this thing on? Okay, the red light is on."),
    ("screen", "Slack", "Software Update", "Software Update                                   ✕\n"
     "A new version of Slack is available!\nSlack 4.41.105 is now available—you have 4.40.2. Would you like to "
     "download it now?\nSkip This Version   Remind Me Later   Install Update"),
    ("screen", "Stocks", "Stocks", "Markets closed · Prices as of Mar 3, 16:30 GMT · Delayed 15 min\n"
     "FTSE 100  8,412.20  +0.4%\nDAX  18,203.55  −0.2%"),
]


def test_a_row_of_noise_throughout_gives_no_memory_is_counted_and_its_evidence_stays(store):
    from memory.consolidation.salience import SalienceModel, load_model

    shipped = load_model()
    assert shipped is not None and shipped.gate is not None
    without_gate = SalienceModel({k: v for k, v in shipped.spec.items() if k != "gate"})
    assert without_gate.gate is None and without_gate.noise_row([[0.0]], []) == 0.0
    ungated = StatementEngine(store.embedder.embed, store.embedder.name, model=without_gate)
    for src, _, _, text in GATED:
        assert ungated.drafts([{"id": "evd_x", "text": text, "source": src, "captured_at": T0}]), text
    rows = _add(store, GATED + FACTS[:1])
    detail = job_extract(store)
    assert detail.endswith(f", {len(GATED)} read as noise"), detail
    for row in rows[:len(GATED)]:
        assert _memories_of(store, row["id"]) == [], row["text"]
        assert store.get(row["id"])["text"] == row["text"]  # the judgement drops memories, never evidence
    assert any(holds(m["text"], FACTS[0][4]) for m in _memories_of(store, rows[-1]["id"]))


def test_mirador_extract_says_how_many_rows_it_read_as_noise(mirador_home, capsys):
    from desktop.cli.main import main

    _add(Store(mirador_home), GATED)
    assert main(["extract"]) == 0
    out = capsys.readouterr().out
    assert f"read as noise   {len(GATED)} evidence rows (no memory from them; the evidence is kept)" in out, out


def test_a_gate_fitted_on_other_row_features_is_refused():
    from memory.consolidation.salience import SalienceModel, load_model

    spec = dict(load_model().spec)
    spec["gate"] = {**spec["gate"], "features": ["top", "mean"]}
    with pytest.raises(ValueError, match="retrain with bench/train_salience.py"):
        SalienceModel(spec)


@pytest.mark.xfail(strict=True, reason="the row gate reads a sign-in page with a branch address on it as noise "
                                       "throughout (issue 44's trade: 4 of 478 train-CV facts for 45 of 102 noise "
                                       "memories); strict, so a gate that keeps it makes this fail until it is "
                                       "moved back among LOOKALIKES")
def test_a_branch_address_on_a_sign_in_page_is_kept(store):
    row = _add(store, [SIGN_IN_BRANCH])[0]
    job_extract(store)
    assert any(holds(m["text"], SIGN_IN_BRANCH[4]) for m in _memories_of(store, row["id"]))


def test_no_memory_holds_a_number_or_name_its_evidence_lacks(store):
    rows = _add(store, FACTS)
    job_extract(store)
    text_of = {r["id"]: r["text"] for r in rows}
    mems = store.list("memory", limit=10_000)
    assert mems
    for m in mems:
        ev = "\n".join(text_of[p] for p in m["provenance"])
        assert unsupported_terms(m["text"], ev) == [], (m["text"], ev)


def test_one_statement_gives_one_memory_and_a_second_run_adds_nothing(store):
    _add(store, [FACTS[0]])
    job_extract(store)
    first = store.list("memory", limit=100)
    assert len([m for m in first if "SK 4615" in m["text"]]) == 1
    run_extraction(store, all_evidence=True)
    again = store.list("memory", limit=100)
    assert len([m for m in again if "SK 4615" in m["text"]]) == 1


def test_a_deleted_memory_does_not_come_back_and_an_edit_survives(store):
    rows = _add(store, FACTS[:2])
    job_extract(store)
    flight = next(m for m in _memories_of(store, rows[0]["id"]) if "SK 4615" in m["text"])
    decision = next(m for m in _memories_of(store, rows[1]["id"]) if "OpenSearch" in m["text"])
    forget(store, [flight["id"]])
    store.update_memory(decision["id"], text="Search: OpenSearch, not Solr (licence).")
    run_extraction(store, all_evidence=True, extractor=make_extractor(store))
    texts = [m["text"] for m in store.list("memory", limit=100)]
    assert not any("SK 4615" in t for t in texts), texts
    assert store.get(decision["id"])["text"] == "Search: OpenSearch, not Solr (licence)."


def test_the_rules_alone_still_extract_when_the_model_cannot_judge():
    engine = StatementEngine(embed=None, embedder_name=None)
    assert engine.judged_by == "rules"
    row = {"id": "evd_1", "text": FACTS[0][3], "source": "audio", "captured_at": T0}
    drafts = engine.drafts([row])
    assert any(holds(d.text, ["SK 4615", "07:20"]) for d in drafts), [d.text for d in drafts]
    noise = {"id": "evd_2", "text": NOISE[0][3], "source": "screen", "captured_at": T0}
    assert engine.drafts([noise]) == []


def test_weights_for_another_embedder_are_not_used():
    engine = StatementEngine(embed=lambda texts: [], embedder_name="some-other-model")
    assert engine.judged_by == "rules"


def test_sentences_do_not_end_at_abbreviations_or_initials():
    assert split_sentences("Cleaning with Dr. Okafor at 8. Bring the form.") == [
        "Cleaning with Dr. Okafor at 8.", "Bring the form."]
    assert split_sentences("The key is with Mrs. Lindqvist at no. 14. Not under the mat.") == [
        "The key is with Mrs. Lindqvist at no. 14.", "Not under the mat."]


def test_statements_carry_the_author_title_and_question_they_need():
    chat = segment_row("Sam Okoye  6:45 PM\nI'm out from the 21st, Fiona covers on-call", "screen")
    assert [render(chat, g) for g in compose(chat, [True] * len(chat))] == [
        "Sam Okoye: I'm out from the 21st, Fiona covers on-call"]
    record = segment_row("OPS-77 Rotate staging DB credentials\nState: Done\nResolved: 2026-11-12", "screen")
    keep = [not s.is_title for s in record]
    assert [render(record, g) for g in compose(record, keep)] == [
        "OPS-77 Rotate staging DB credentials — State: Done; Resolved: 2026-11-12"]
    term = segment_row("$ psql -c 'select count(*) from jobs'\ncount\n412", "screen")
    keep = [s.text == "412" for s in term]
    assert [render(term, g) for g in compose(term, keep)] == ["$ psql -c 'select count(*) from jobs' — 412"]
    talk = segment_row("Dev: what about the search fix? Lucia: that's in, it merged yesterday.", "audio")
    keep = [not s.question for s in talk]
    assert [render(talk, g) for g in compose(talk, keep)] == [
        "Dev: What about the search fix? Lucia: That's in, it merged yesterday."]



def test_a_written_line_and_its_short_neighbour_make_one_memory_a_transcript_does_not():
    """A decision and its price on one line of an email, an address above its check-in date: one fact a
    person reads as one, so one memory (whole_records keeps the neighbour, compose joins the run)."""
    from memory.consolidation.verbatim import whole_records

    mail = segment_row("From  Joanna  11/03/2027\nOK, to close this: we go with Parcelwise, not FastBox. "
                       "0,38 € per label vs 0,52 €.\n> On 10/03 Marek wrote: quotes attached", "screen")
    keep = whole_records(mail, ["Parcelwise" in s.text for s in mail], [False] * len(mail))
    got = [render(mail, g) for g in compose(mail, keep)]
    assert any(holds(t, ["Parcelwise", "0,38 €"]) for t in got), got
    hotel = segment_row("Confirmation number: 4471.209.358   PIN code: 0916\nHotel Kade — Weesperzijde 112, Amsterdam\n"
                        "Check-in  Fri 2 Apr 2027 (from 15:00)\n" + "Countries Regions Cities Districts " * 4,
                        "screen")
    keep = whole_records(hotel, ["Weesperzijde" in s.text for s in hotel], [False] * len(hotel))
    got = [render(hotel, g) for g in compose(hotel, keep)]
    assert len(got) == 1 and holds(got[0], ["4471.209.358", "Weesperzijde 112", "2 Apr 2027"]), got
    assert "Districts" not in got[0]  # a long line beside it is not a label's value: it stays out
    # A long list of short facts is joined only up to RUN_CHARS: no memory is cut short and loses its end.
    from memory.consolidation.verbatim import MAX_CHARS

    notes = segment_row("Gym locker codes, as of May:\n" + "\n".join(f"- locker {n} code is {4000 + n}" for n in range(40)),
                        "manual")
    keep = whole_records(notes, [True] * len(notes), [False] * len(notes))
    got = [render(notes, g) for g in compose(notes, keep)]
    assert all(len(t) <= MAX_CHARS for t in got) and len(got) > 1, got
    assert all(any(holds(t, [f"locker {n} code is {4000 + n}"]) for t in got) for n in range(40))
    # A record under a title is one memory until it passes MAX_CHARS; then it is several, each under its title,
    # and no line past the first 600 characters is lost.
    from memory.consolidation.verbatim import memory_groups

    record = segment_row("# Flat handover, meter readings\n" + "\n".join(
        f"- meter {n} in room {n % 7} reads {40000 + n} kWh" for n in range(40)), "manual")
    assert record[0].is_title
    got = [render(record, g) for g in memory_groups(record, [True] * len(record))]
    assert len(got) > 1 and all(len(t) <= MAX_CHARS and t.startswith("Flat handover") for t in got), got
    assert all(any(holds(t, [f"reads {40000 + n} kWh"]) for t in got) for n in range(40)), got
    talk = segment_row("the gym renews on the 5th. and the car goes in for service on Monday.", "audio")
    assert len(compose(talk, [True] * len(talk))) == 2  # spoken sentences stay one memory each

def test_fillers_are_cleaned_from_spoken_statements():
    segs = segment_row("so, uh, the the gym membership renews on the 5th, um, 39.90 a month.", "audio")
    assert [s.text for s in segs] == ["The gym membership renews on the 5th, 39.90 a month."]
    assert re.search(r"\buh\b|\bum\b", " ".join(s.text for s in segs)) is None


def test_the_shipped_weights_load_and_fit_the_embedder_a_new_store_uses(tmp_path):
    from memory.consolidation.salience import load_model

    model = load_model()
    assert model is not None, "memory/consolidation/data/salience.json unusable: rerun bench/train_salience.py --out"
    assert model.embedder == Store(tmp_path / "h").embedder.name


def _spoken(store: Store, texts: list[str], start: datetime) -> list[dict]:
    return store.add_evidence_batch([EvidenceSpec(text=t, source="audio", app="microphone", window="",
                                                  captured_at=start + timedelta(hours=i)) for i, t in enumerate(texts)])


def test_a_paraphrase_corroborates_and_a_changed_detail_does_not(store):
    _spoken(store, ["My flight to Oslo is SK 4615 on the 14th, it leaves at 07:20.",
                    "We're going with PostgreSQL, not Mongo, for the billing service."], T0)
    job_extract(store)
    before = {m["id"]: m for m in store.list("memory", limit=100)}
    later = _spoken(store, ["Reminder: the Oslo flight SK 4615 leaves at 07:20 on the 14th.",
                            "For billing we go with PostgreSQL rather than Mongo.",
                            "My flight to Oslo is SK 4616 on the 15th, it leaves at 07:20."], T0 + timedelta(days=1))
    job_extract(store)
    after = {m["id"]: m for m in store.list("memory", limit=100)}
    new = [m for i, m in after.items() if i not in before]
    assert [m["text"] for m in new] == ["My flight to Oslo is SK 4616 on the 15th, it leaves at 07:20."]
    flight = next(m for m in after.values() if "SK 4615" in m["text"])
    db = next(m for m in after.values() if "PostgreSQL" in m["text"])
    assert later[0]["id"] in flight["provenance"] and later[1]["id"] in db["provenance"]
    assert later[2]["id"] not in flight["provenance"]
