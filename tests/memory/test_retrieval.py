"""Evidence retrieval quality on small fixtures: dates, speakers, neighbours, scopes."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from memory.retrieval.query import analyze
from memory.retrieval.search import search_evidence
from memory.store import filters as F
from memory.store.context import ContextConfig, index_texts
from memory.store.core import EvidenceSpec
from memory.store.timeparse import find_windows

NOW = datetime(2024, 3, 14, 15, 0)  # a Thursday


def _ev(text, speaker, when, scope="work/acme", **kw):
    return EvidenceSpec(text=text, source="audio", speaker=speaker, scope=scope, captured_at=when, **kw)


@pytest.fixture
def team(store):
    """Sam and Priya talk about the deploy and the budget over several days; one other scope."""
    days = {"today": NOW - timedelta(hours=2), "yesterday": NOW - timedelta(days=1),
            "last_week": NOW - timedelta(days=8), "two_months": NOW - timedelta(days=60)}
    specs = [
        _ev("The deploy is blocked on the database migration, we roll back tonight.", "Sam", days["yesterday"]),
        _ev("The deploy went fine, all green on the dashboards.", "Sam", days["last_week"]),
        _ev("Deploy freeze starts Friday, nothing ships after noon.", "Sam", days["two_months"]),
        _ev("The deploy checklist needs a rollback step.", "Priya", days["today"]),
        _ev("Marketing budget is capped at forty thousand this quarter.", "Priya", days["last_week"]),
        _ev("The budget for hardware is still open, ask finance.", "Sam", days["last_week"] + timedelta(hours=1)),
        _ev("Coffee machine on floor three is broken again.", "Lee", days["yesterday"]),
    ]
    rows = store.add_evidence_batch(specs)
    other = store.add_evidence_batch([
        _ev("Sam said yesterday the deploy of the family photo site failed.", "Sam", days["yesterday"],
            scope="personal"),
    ])
    return {r["text"]: r["id"] for r in rows}, other[0]["id"]


def test_relative_date_question_finds_what_was_said_that_day(store, team):
    ids, _ = team
    hits = search_evidence(store, "what did Sam say yesterday about the deploy?", scopes=["work"], now=NOW, limit=3)
    assert hits[0].id == ids["The deploy is blocked on the database migration, we roll back tonight."]


def test_last_week_question_prefers_that_week(store, team):
    ids, _ = team
    hits = search_evidence(store, "how did the deploy go last week?", scopes=["work"], now=NOW, limit=3)
    assert hits[0].id == ids["The deploy went fine, all green on the dashboards."]


def test_absolute_month_question(store, team):
    ids, _ = team
    month = (NOW - timedelta(days=60)).strftime("%B %Y")
    hits = search_evidence(store, f"what was decided about the deploy in {month}?", scopes=["work"], now=NOW, limit=3)
    assert hits[0].id == ids["Deploy freeze starts Friday, nothing ships after noon."]


def test_speaker_question_prefers_that_speakers_words(store, team):
    ids, _ = team
    priya = search_evidence(store, "What did Priya say about the budget?", scopes=["work"], now=NOW, limit=2)
    sam = search_evidence(store, "What did Sam say about the budget?", scopes=["work"], now=NOW, limit=2)
    assert priya[0].id == ids["Marketing budget is capped at forty thousand this quarter."]
    assert sam[0].id == ids["The budget for hardware is still open, ask finance."]


def test_other_scope_never_appears(store, team):
    _, other_id = team
    for q in ("what did Sam say yesterday about the deploy?", "family photo site", "Sam deploy failed"):
        hits = search_evidence(store, q, scopes=["work"], now=NOW, limit=50)
        assert hits, q
        assert all(h.scope.startswith("work") for h in hits)
        assert other_id not in {h.id for h in hits}
    assert search_evidence(store, "family photo site", scopes=["personal"], now=NOW, limit=1)[0].id == other_id


def test_date_window_does_not_leak_other_scope(store, team):
    _, other_id = team
    hits = search_evidence(store, "what happened yesterday?", scopes=["work/acme"], now=NOW, limit=50)
    assert other_id not in {h.id for h in hits}


def test_neighbour_turn_makes_a_terse_reply_findable(store):
    t = datetime(2023, 5, 8, 13, 56)
    rows = store.add_evidence_batch([
        _ev("Did you end up going to the pottery class you signed up for?", "Mel", t, scope="chat"),
        _ev("Yes! Made a wonky little bowl, loved it.", "Caro", t + timedelta(seconds=20), scope="chat"),
        _ev("We should plan the camping trip for June.", "Mel", t + timedelta(seconds=40), scope="chat"),
    ])
    hits = search_evidence(store, "What did Caro make at the pottery class?", scopes=["chat"], now=t, limit=2)
    assert rows[1]["id"] in {h.id for h in hits}


def test_stored_text_is_exactly_what_was_captured(store):
    t = datetime(2023, 5, 8, 13, 56)
    text = "I went to the support group yesterday."
    row = store.add_evidence(text, source="import", speaker="Caroline", scope="chat", captured_at=t)
    got = store.get(row["id"])
    assert got["text"] == text
    assert "search_text" not in got and "search_text" not in row
    hits = search_evidence(store, "support group on 7 May 2023", scopes=["chat"], now=t, limit=1)
    assert hits[0].id == row["id"] and hits[0].text == text


def test_migration_adds_search_text_indexed_by_its_keyed_terms_never_its_words(store):
    assert "search_text" in store.columns("evidence")
    indexed = {c for ix in store.evidence.list_indices() for c in ix.columns}
    assert "fts_terms" in indexed and not indexed & {"text", "search_text"}


def test_index_texts_resolve_dates_speakers_and_neighbours():
    t = datetime(2023, 5, 8, 13, 56)
    rows = [
        {"text": "How was the weekend?", "speaker": "Mel", "captured_at": t, "scope": "s", "source": "import"},
        {"text": "I went hiking yesterday.", "speaker": "Caro", "captured_at": t, "scope": "s", "source": "import"},
        {"text": "Unrelated, much later.", "speaker": "Mel", "captured_at": t + timedelta(hours=5), "scope": "s",
         "source": "import"},
        {"text": "Other stream.", "speaker": "Ann", "captured_at": t, "scope": "other", "source": "import"},
    ]
    fts, emb = index_texts(rows, ContextConfig(neighbours_embed=1, neighbours_fts=0))
    assert fts[1] == "Caro: I went hiking yesterday. (yesterday = 7 May 2023)"
    assert "How was the weekend?" in emb[1] and "Unrelated" not in emb[1]  # 5 h apart: not a neighbour
    assert emb[2] == fts[2] == "Mel: Unrelated, much later."
    assert "Other stream" not in emb[0] and "Other stream" not in emb[1]  # scopes never mix


def test_query_analysis_names_and_windows():
    plan = analyze("What did Melanie's kids do last weekend?", NOW)
    assert "melanie" in plan.names and "what" not in plan.names
    assert len(plan.windows) == 1 and plan.windows[0].start == datetime(2024, 3, 9)
    assert "What" not in plan.fts.split() and "Melanie" in plan.fts


@pytest.mark.parametrize("text,label", [
    ("yesterday", "13 March 2024"),
    ("on 8 May, 2023", "8 May 2023"),
    ("on October 13, 2023", "13 October 2023"),
    ("in July 2023", "July 2023"),
    ("in June", "June 2023"),
    ("two days ago", "12 March 2024"),
    ("last year", "2023"),
    ("last Saturday", "9 March 2024"),
])
def test_timeparse_labels(text, label):
    windows = find_windows(text, NOW)
    assert [w.label() for w in windows] == [label]


def test_timeparse_ignores_non_dates():
    assert find_windows("I may go, Fridays are busy, version 2023.1 of the app", NOW) == []


def test_forgetting_a_row_removes_it_from_its_neighbours_index(store, mirador_home):
    from memory.store.context import ContextConfig
    from memory.store.erasure import forget
    from tests.conftest import files_containing

    t = datetime(2023, 5, 8, 13, 56)
    # Rows written by versions that embedded each turn with its neighbours (still a config choice).
    rows = store.add_evidence_batch([
        _ev("Are you going to the party?", "Mel", t, scope="chat"),
        _ev("Yes, with my friend Quetzalcoatlus from the gym.", "Caro", t + timedelta(seconds=20), scope="chat"),
        _ev("Great, see you there!", "Mel", t + timedelta(seconds=40), scope="chat"),
    ], context=ContextConfig(neighbours_embed=1, neighbours_fts=1))
    before = store.rows("evidence", F.id_is(rows[0]['id']), ["search_text", "vector"], limit=1)[0]
    assert "Quetzalcoatlus" in before["search_text"]
    forget(store, [rows[1]["id"]])
    after = store.rows("evidence", F.id_is(rows[0]['id']), ["search_text", "vector"], limit=1)[0]
    assert after["vector"] != before["vector"]  # re-embedded without the forgotten turn
    assert "Quetzalcoatlus" not in after["search_text"]
    assert files_containing(mirador_home, "Quetzalcoatlus") == []
    # Positions never name a row: the forgotten id is left in no evidence file (audit and tombstone keep it).
    assert [p for p in files_containing(mirador_home, rows[1]["id"]) if "evidence.lance" in str(p)] == []
    hits = search_evidence(store, "Quetzalcoatlus friend from the gym", scopes=["chat"], now=t, limit=5)
    assert rows[1]["id"] not in {h.id for h in hits}


def test_runs_follow_streams_across_batches():
    from memory.store.context import place_in_runs

    t = datetime(2023, 5, 8, 13, 56)
    row = lambda id_, dt, scope="s", app="": {"id": id_, "captured_at": t + dt, "scope": scope,  # noqa: E731
                                              "source": "screen", "app": app, "window": ""}
    tails: dict = {}
    first = place_in_runs([row("a", timedelta(0)), row("x", timedelta(0), scope="other"),
                           row("b", timedelta(seconds=5)), row("e", timedelta(seconds=6), app="editor")], tails)
    later = place_in_runs([row("c", timedelta(seconds=9)), row("d", timedelta(hours=2)),
                           row("y", -timedelta(days=1), scope="other")], tails)
    (a, x, b, e), (c, d, y) = first, later
    assert a[0] == b[0] == c[0] and (a[1], b[1], c[1]) == (0, 1, 2)  # c goes on from the earlier batch
    assert len({a[0], x[0], e[0], d[0], y[0]}) == 5  # other scope, other app, 2 h gap, earlier time: new runs
    assert all(run.startswith("run_") and not run.startswith(("evd_", "mem_")) for run, _ in first + later)


def test_the_answer_turn_is_found_through_the_question_before_it(store):
    """The question's words are in the turn that asked; the answer only says "the Harry Potter stuff",
    and John is excited about plenty of other things. Only the neighbour credit puts the answer first."""
    from dataclasses import replace

    from memory.retrieval.rank import DEFAULT

    t = datetime(2023, 7, 1, 10, 0)
    convo = [
        ("Tim", "Have you ever been to Universal Studios? What are you most excited to see there?"),
        ("John", "Nope, first time going. I'm super stoked for the Harry Potter stuff, can't wait!"),
        ("Tim", "Nice. My sister loved the rides when she went."),
    ]
    excited = ["I'm so excited for the game on Saturday, can't wait!", "Super stoked about the concert next week!",
               "Can't wait to see the new stadium, so excited!", "I'm really looking forward to the beach trip, so pumped!",
               "So excited to see my cousins at the reunion!", "Stoked for the new season to start, can't wait!"]
    filler = [x for i, e in enumerate(excited) for x in (("Tim", f"Practice ran long today, drill {i} was on defence."),
                                                         ("John", e))]
    specs = [_ev(text, who, t + timedelta(seconds=10 * i), scope="chat") for i, (who, text) in enumerate(convo + filler)]
    rows = store.add_evidence_batch(specs)
    answer = next(r["id"] for r in rows if "Harry Potter" in r["text"])
    q = "What is John excited to see at Universal Studios?"
    first = replace(DEFAULT, rerank=False)  # the first stage alone: the reranker also reads neighbours
    assert search_evidence(store, q, scopes=["chat"], now=t, limit=5)[0].id == answer
    assert search_evidence(store, q, scopes=["chat"], now=t, limit=5, rank=first)[0].id == answer
    alone = search_evidence(store, q, scopes=["chat"], now=t, limit=5, rank=replace(first, neighbour=0.0))
    assert alone[0].id != answer  # the control: without the credit another excited turn wins


def test_migration_places_rows_written_before_runs(mirador_home):
    from memory.store import tables as T
    from memory.store.core import Store

    t = datetime(2023, 5, 8, 13, 56)
    store = Store(mirador_home)
    rows = store.add_evidence_batch([_ev(f"turn {i}", "Sam", t + timedelta(seconds=i), scope="chat") for i in range(3)]
                                    + [_ev("elsewhere", "Ann", t, scope="other")])
    # Take the store back to before m007: no columns, no record of the migration.
    store.evidence.drop_columns(["run_id", "run_pos"])
    store.db.open_table(T.MIGRATIONS).delete(F.equals("name", "m007_evidence_runs"))
    again = Store(mirador_home)
    assert again.migrations_applied == ["m007_evidence_runs"]
    got = {r["id"]: (r["run_id"], r["run_pos"]) for r in again.rows("evidence", None, ["id", "run_id", "run_pos"])}
    chat = [got[r["id"]] for r in rows[:3]]
    assert len({run for run, _ in chat}) == 1 and [pos for _, pos in chat] == [0, 1, 2]
    assert got[rows[3]["id"]][0] != chat[0][0]


def test_named_speakers_are_left_out_of_the_embedded_question():
    plan = analyze("What is Tim's friend excited to see at Universal Studios?", NOW, speakers={"tim", "john"})
    assert plan.vec == "What is they friend excited to see at Universal Studios?"  # topic words stay
    assert "Tim" in plan.fts and "tim" in plan.names  # full-text and the speaker boost still see the name
    assert analyze("Tim?", NOW, speakers={"tim"}).vec == "Tim?"  # nothing else to embed
    assert analyze("What did Tim say?", NOW, rewrite=False, speakers={"tim"}).vec == "What did Tim say?"


def test_speaker_names_follow_this_process_writes(store):
    assert "zebedee" not in store.speaker_names()
    store.add_evidence("The release slips a week.", source="audio", speaker="Zebedee Quill", scope="chat")
    assert {"zebedee", "zebedee quill"} <= store.speaker_names()
