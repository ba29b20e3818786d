"""`mirador reembed`: a store made with one embedder is moved to the one the settings choose, vectors
only, without bringing back what was forgotten or undoing an edit made while it ran; searches keep the
old vectors until the switch, every open Store follows it, and a stopped pass is picked up again."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

import memory.store.core as store_mod
from desktop.cli.main import main
from memory.retrieval.search import search_evidence, search_memories
from memory.store import filters as F
from memory.store import reembed as R
from memory.store.core import EvidenceSpec, Store
from memory.store.erasure import forget

TEXTS = ["Sam said the release moves to Friday", "We picked PostgreSQL for the ledger service",
         "Lunch was good today", "The deploy failed because the token expired"]


def _untuned_store(home) -> Store:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text("[models]\nembedder_tuning = false\n")
    store = Store(home)
    store.add_memory("Ledger service uses PostgreSQL 16", scope="work")
    store.add_memory("Prefers dark mode", scope="personal")
    store.add_evidence_batch([EvidenceSpec(text=t, source="import", speaker="Ana", scope="work") for t in TEXTS],
                             actor="import")
    (home / "config.toml").write_text("[models]\nembedder_tuning = true\n")
    return Store(home)  # as after an upgrade: the store keeps its untuned embedder


def _vectors(store: Store, table: str) -> dict[str, np.ndarray]:
    rows = store.scan(table, None, ["id", "vector"]).to_pylist()
    return {r["id"]: np.asarray(r["vector"]) for r in rows}


def _columns(store: Store, table: str) -> dict[str, dict]:
    cols = [c for c in store.columns(table) if c != "vector"]
    return {r["id"]: r for r in store.scan(table, None, cols).to_pylist()}


def test_reembed_moves_every_vector_and_nothing_else(mirador_home):
    from memory.store.indexes import maintain

    store = _untuned_store(mirador_home)
    maintain(store, force_vector=True)  # indexed as a large store is (LanceDB's merge differs then)
    assert store.embedder.tuning is None
    before = {t: (_vectors(store, t), _columns(store, t)) for t in ("memories", "evidence")}
    seen = []
    report = R.reembed(store, progress=lambda *a: seen.append(a), settle=0)

    target = R.target_embedder(store.config.models)
    assert target.tuning is not None and store.embedder is target
    assert report["memories"] == 2 and report["evidence"] == 4 and report["skipped"] == report["reused"] == 0
    assert ("evidence", 4, 4) in seen and seen[-1] == ("switch", 4, 4)
    assert 0 <= report["switch_seconds"] <= report["seconds"]
    made = json.loads((mirador_home / "embedder.json").read_text())
    assert made == {"tuned": True, "weights": target.model_dir.name, "embedder": target.name}
    # the side table goes with the pass, files and all
    assert not store.has_table("reembed_staging")
    assert not list((mirador_home / "lancedb").glob("reembed_staging*"))
    assert R.why_reembed(made, target) is None

    for t in ("memories", "evidence"):
        vecs, cols = _vectors(store, t), _columns(store, t)
        assert cols == before[t][1]  # text, search_text, status, times...: untouched, no row added or lost
        assert all(not np.allclose(vecs[i], before[t][0][i]) for i in vecs)
    # each vector is what ingest would embed now
    ev = _columns(store, "evidence")
    from memory.store.context import own_text

    some = next(iter(ev.values()))
    assert np.allclose(_vectors(store, "evidence")[some["id"]], target.embed([own_text(some)])[0], atol=1e-5)

    assert search_evidence(store, "release date Friday", limit=1)[0].text == TEXTS[0]
    assert search_memories(store, "ledger database", scopes=["work"])[0].text == "Ledger service uses PostgreSQL 16"
    assert all(h.scope == "personal" for h in search_memories(store, "ledger database", scopes=["personal"]))
    audit = store.scan("audit", F.equals("action", "reembed"), ["actor", "after"]).to_pylist()
    assert len(audit) == 1 and json.loads(audit[0]["after"])["evidence"] == 4
    # reopened, the store keeps the new embedder, with no warning to re-embed
    assert Store(mirador_home).embedder is target


def test_a_forgotten_row_stays_gone_and_an_edit_made_meanwhile_is_kept(mirador_home, monkeypatch):
    from memory.store.indexes import maintain

    store = _untuned_store(mirador_home)
    maintain(store, force_vector=True)
    gone = search_evidence(store, "deploy failed token", limit=1)[0].id
    forget(store, [gone])
    mem = store.list("memory", scopes=["work"])[0]
    real_rows = store.table_rows  # the pass reads its table by handle (it is store-internal)

    edits = []

    def rows_then_edit(table, where, cols, limit=None):
        out = real_rows(table, where, cols, limit)
        if table is store.memories and cols == ["id", "search_text"] and not edits:
            edits.append(1)
            # the person edits the memory after the pass read it and before it writes
            store.update_memory(mem["id"], text="Ledger service moved to PostgreSQL 17")
        return out

    monkeypatch.setattr(store, "table_rows", rows_then_edit)
    report = R.reembed(store, settle=0)
    monkeypatch.undo()
    assert report["evidence"] == 3 and report["memories"] == 2 and report["skipped"] == 0
    assert gone not in _columns(store, "evidence")
    edited = store.get(mem["id"])
    assert edited["text"] == "Ledger service moved to PostgreSQL 17"
    row = store.rows("memory", F.id_is(mem['id']), ["search_text", "vector"], limit=1)[0]
    # the edit's vector is its new text's, by the new embedder (the pass embedded it again)
    assert np.allclose(row["vector"], store.embedder.embed([row["search_text"]])[0], atol=1e-5)


def test_a_stopped_pass_leaves_searches_as_they_were_and_the_next_run_picks_it_up(mirador_home, monkeypatch,
                                                                                   caplog):
    from desktop.cli.doctor import check_embedder

    store = _untuned_store(mirador_home)
    other = Store(mirador_home)  # e.g. the MCP server's process, opened before the re-embed
    old = other.embedder
    before = {t: _vectors(store, t) for t in ("memories", "evidence")}
    monkeypatch.setattr(store_mod, "RECORD_CHECK_S", 0.0)
    target = R.target_embedder(store.config.models)

    def stop(step, done, total):
        if step == "evidence" and done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.reembed(store, progress=stop, batch=1, settle=0)
    made = json.loads((mirador_home / "embedder.json").read_text())
    assert made["staging"] == target.name and made["tuned"] is False and "reembedding" not in made
    # nothing switched: both stores search the old vectors with the old model, as well as before
    assert other.embedder is old and store.embedder is old
    for t, vecs in before.items():
        now = _vectors(store, t)
        assert all(np.array_equal(now[i], vecs[i]) for i in vecs)
    assert search_evidence(other, "release date Friday", limit=1)[0].text == TEXTS[0]
    assert "not switched over" in R.why_reembed(made, target)
    status, msg, fix = check_embedder()
    assert status == "WARN" and "unaffected" in msg and "mirador reembed" in fix
    caplog.set_level(logging.INFO)
    Store(mirador_home)
    assert "stopped before it switched over" in caplog.text

    # written meanwhile by the other process, with the old model
    late = other.add_evidence_batch([EvidenceSpec(text="Ana moved the standup to 10am", source="import",
                                                  speaker="Ana", scope="work")], actor="import")[0]["id"]

    # the next run embeds only what the first had not: 2 memories and 2 evidence rows were staged
    report = R.reembed(store, settle=0)
    assert report["reused"] == 4 and report["memories"] == 2 and report["evidence"] == 5
    assert other.embedder is store.embedder is target  # the other process followed the switch
    assert json.loads((mirador_home / "embedder.json").read_text()) == {
        "tuned": True, "weights": target.model_dir.name, "embedder": target.name}
    from memory.store.context import own_text

    vecs = _vectors(store, "evidence")
    for row in _columns(store, "evidence").values():
        assert np.allclose(vecs[row["id"]], target.embed([own_text(row)])[0], atol=1e-5), row["text"]
    assert search_evidence(store, "when is the standup", limit=1)[0].id == late


def test_a_pass_stopped_while_switching_says_so_and_is_finished_by_the_cli(mirador_home, monkeypatch, caplog):
    store = _untuned_store(mirador_home)
    other = Store(mirador_home)
    monkeypatch.setattr(store_mod, "RECORD_CHECK_S", 0.0)

    def stop(step, done, total):
        if step == "switch":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.reembed(store, progress=stop, settle=0)
    made = json.loads((mirador_home / "embedder.json").read_text())
    assert made["reembedding"] is True and "staging" not in made
    assert other.embedder is store.embedder  # switched: writes from now on are new-model
    assert "not finished" in R.why_reembed(made, store.embedder)
    caplog.clear()
    Store(mirador_home)
    assert "re-embed stopped before it finished" in caplog.text

    assert main(["reembed", "--json"]) == 0
    assert "reembedding" not in json.loads((mirador_home / "embedder.json").read_text())
    assert main(["reembed"]) == 0  # now current: nothing to do


def test_forgetting_a_row_drops_its_staged_vector_for_good(mirador_home):
    store = _untuned_store(mirador_home)
    gone = search_evidence(store, "deploy failed token", limit=1)[0].id

    def stop(step, done, total):
        if step == "evidence" and done == total:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.reembed(store, progress=stop, settle=0)
    staging = store.db.open_table("reembed_staging")
    assert gone in store.scan_table(staging, None, ["id"])["id"].to_pylist()
    forget(store, [gone])
    staging = store.db.open_table("reembed_staging")
    assert gone not in store.scan_table(staging, None, ["id"])["id"].to_pylist()
    # not only hidden: no version and no fragment of the side table holds it any more
    assert len(staging.list_versions()) == 1
    assert not any(f.metadata.num_deletions for f in staging.to_lance().get_fragments())
    assert store.scan_table(staging, None, ["id"]).num_rows == 5

    report = R.reembed(store, settle=0)
    assert report["evidence"] == 3 and report["reused"] == 5
    assert gone not in _columns(store, "evidence")


def test_cli_reembed_reports_and_doctor_stops_asking(mirador_home, capsys):
    from desktop.cli.doctor import check_embedder

    _untuned_store(mirador_home)
    status, msg, fix = check_embedder()
    assert status == "WARN" and "before Mirador tuned its embedder" in msg and "mirador reembed" in fix
    assert main(["reembed", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["memories"] == 2 and report["evidence"] == 4
    status, msg, _ = check_embedder()
    assert status == "ok" and "tuned for recall" in msg
    assert main(["reembed"]) == 0
    assert "nothing to do" in capsys.readouterr().out


def test_cli_stopped_with_ctrl_c_says_how_to_finish(mirador_home, capsys, monkeypatch):
    _untuned_store(mirador_home)

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(R, "_stage", interrupted)
    assert main(["reembed"]) == 130
    err = capsys.readouterr().err
    assert "run `mirador reembed` again to finish" in err and "searches use the old vectors" in err
    assert "staging" in json.loads((mirador_home / "embedder.json").read_text())


def test_a_second_pass_on_the_same_store_is_refused_while_one_runs(mirador_home):
    from filelock import FileLock

    from memory.errors import MiradorError

    store = _untuned_store(mirador_home)
    with FileLock(mirador_home / R.LOCK), pytest.raises(MiradorError, match="another `mirador reembed` is running"):
        R.reembed(store, settle=0)
    assert "staging" not in json.loads((mirador_home / "embedder.json").read_text())  # it did not start
    assert R.reembed(store, settle=0)["evidence"] == 4  # free again once the other one is done


def test_a_forget_racing_the_end_of_a_pass_is_not_an_error(mirador_home, monkeypatch):
    store = _untuned_store(mirador_home)
    gone = search_evidence(store, "deploy failed token", limit=1)[0].id

    def stop(step, done, total):
        if step == "evidence":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.reembed(store, progress=stop, settle=0)
    real_open = store.db.open_table

    def finished_meanwhile(name, *a, **k):
        if name == "reembed_staging":  # the pass drops its side table between the check and the use
            store.db.drop_table(name)
        return real_open(name, *a, **k)

    monkeypatch.setattr(store.db, "open_table", finished_meanwhile)
    assert forget(store, [gone])["deleted"] == 1
    monkeypatch.undo()
    assert not store.has_table("reembed_staging")
    assert gone not in _columns(store, "evidence")
