"""`mirador reembed`: a store made with one embedder is moved to the one the settings choose, vectors
only, without bringing back what was forgotten or undoing an edit made while it ran; every open Store
follows it."""

from __future__ import annotations

import json

import numpy as np
import pytest

import memory.store as store_mod
from desktop.cli import main
from memory import reembed as R
from memory.erasure import forget
from memory.search import search_evidence, search_memories
from memory.store import EvidenceSpec, Store

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


def _vectors(store: Store, table) -> dict[str, np.ndarray]:
    rows = store._scan(table, None, ["id", "vector"]).to_pylist()
    return {r["id"]: np.asarray(r["vector"]) for r in rows}


def _columns(store: Store, table) -> dict[str, dict]:
    cols = [c for c in table.schema.names if c != "vector"]
    return {r["id"]: r for r in store._scan(table, None, cols).to_pylist()}


def test_reembed_moves_every_vector_and_nothing_else(mirador_home):
    from memory.indexes import maintain

    store = _untuned_store(mirador_home)
    maintain(store, force_vector=True)  # indexed as a large store is (LanceDB's merge differs then)
    assert store.embedder.tuning is None
    before = {t: (_vectors(store, getattr(store, t)), _columns(store, getattr(store, t))) for t in ("memories", "evidence")}
    seen = []
    report = R.reembed(store, progress=lambda *a: seen.append(a), settle=0)

    target = R.target_embedder(store.config.models)
    assert target.tuning is not None and store.embedder is target
    assert report["memories"] == 2 and report["evidence"] == 4 and report["skipped"] == 0
    assert seen[-1] == ("evidence", 4, 4)
    made = json.loads((mirador_home / "embedder.json").read_text())
    assert made == {"tuned": True, "weights": target.model_dir.name, "embedder": target.name}
    assert R.why_reembed(made, target) is None

    for t in ("memories", "evidence"):
        vecs, cols = _vectors(store, getattr(store, t)), _columns(store, getattr(store, t))
        assert cols == before[t][1]  # text, search_text, status, times...: untouched, no row added or lost
        assert all(not np.allclose(vecs[i], before[t][0][i]) for i in vecs)
    # each vector is what ingest would embed now
    ev = _columns(store, store.evidence)
    from memory.context import own_text

    some = next(iter(ev.values()))
    assert np.allclose(_vectors(store, store.evidence)[some["id"]], target.embed([own_text(some)])[0], atol=1e-5)

    assert search_evidence(store, "release date Friday", limit=1)[0].text == TEXTS[0]
    assert search_memories(store, "ledger database", scopes=["work"])[0].text == "Ledger service uses PostgreSQL 16"
    assert all(h.scope == "personal" for h in search_memories(store, "ledger database", scopes=["personal"]))
    audit = store._scan(store.audit, "action = 'reembed'", ["actor", "after"]).to_pylist()
    assert len(audit) == 1 and json.loads(audit[0]["after"])["evidence"] == 4
    # reopened, the store keeps the new embedder, with no warning to re-embed
    assert Store(mirador_home).embedder is target


def test_a_forgotten_row_stays_gone_and_an_edit_made_meanwhile_is_kept(mirador_home, monkeypatch):
    from memory.indexes import maintain

    store = _untuned_store(mirador_home)
    maintain(store, force_vector=True)
    gone = search_evidence(store, "deploy failed token", limit=1)[0].id
    forget(store, [gone])
    mem = store.list("memory", scopes=["work"])[0]
    real_rows = store._rows

    edits = []

    def rows_then_edit(table, where, cols, limit=1):
        out = real_rows(table, where, cols, limit)
        if table is store.memories and cols == ["id", "search_text"] and not edits:
            edits.append(1)
            # the person edits the memory after the pass read it and before it writes
            store.update_memory(mem["id"], text="Ledger service moved to PostgreSQL 17")
        return out

    monkeypatch.setattr(store, "_rows", rows_then_edit)
    report = R.reembed(store, settle=0)
    monkeypatch.undo()
    assert report["evidence"] == 3 and report["memories"] == 2 and report["skipped"] == 0
    assert gone not in _columns(store, store.evidence)
    edited = store.get(mem["id"])
    assert edited["text"] == "Ledger service moved to PostgreSQL 17"
    row = store._rows(store.memories, f"id = '{mem['id']}'", ["search_text", "vector"])[0]
    # the edit's vector is its new text's, by the new embedder (the pass embedded it again)
    assert np.allclose(row["vector"], store.embedder.embed([row["search_text"]])[0], atol=1e-5)


def test_other_open_stores_follow_and_a_stopped_pass_says_so(mirador_home, monkeypatch, caplog):
    store = _untuned_store(mirador_home)
    other = Store(mirador_home)  # e.g. the MCP server's process, opened before the re-embed
    old = other.embedder
    monkeypatch.setattr(store_mod, "RECORD_CHECK_S", 0.0)

    def stop(table, done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        R.reembed(store, progress=stop, batch=1, settle=0)
    made = json.loads((mirador_home / "embedder.json").read_text())
    assert made["reembedding"] is True
    assert other.embedder is not old and other.embedder is store.embedder  # writes from now on are new-model
    assert "not finished" in R.why_reembed(made, store.embedder)
    caplog.clear()
    Store(mirador_home)
    assert "re-embed stopped before it finished" in caplog.text

    # the CLI finishes it
    code = main(["reembed", "--json"])
    assert code == 0
    assert "reembedding" not in json.loads((mirador_home / "embedder.json").read_text())
    assert main(["reembed"]) == 0  # now current: nothing to do


def test_cli_reembed_reports_and_doctor_stops_asking(mirador_home, capsys):
    from desktop.doctor import check_embedder

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

    monkeypatch.setattr(R, "_all_rows", interrupted)
    assert main(["reembed"]) == 130
    assert "run `mirador reembed` again to finish" in capsys.readouterr().err
    assert json.loads((mirador_home / "embedder.json").read_text())["reembedding"] is True
