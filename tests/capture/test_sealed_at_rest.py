"""Private at rest (issue 40): nothing captured or written is in the clear in any file of the data folder, in any
version of any table; a plaintext store of an older version is sealed in place with every row kept; a lost key
is a clear error; a locked Mirador captures nothing and writes nothing.

The scans read every file's raw bytes (tables, old versions, indexes, frames, side files) for the plain text.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from capture.runner import Capture
from memory.errors import MiradorError
from memory.retrieval.search import search_evidence, search_memories
from memory.store import filters as F
from memory.store.core import Store
from memory.store.keys import KEY_FILE, KeyUnavailableError
from memory.store.seal_migration import APPS_DONE, DONE, apps_sealed, plain_rows, sealed_already
from memory.store.specs import EvidenceSpec
from tests.memory.legacy import apps_in_the_clear, older_version

# Words no screen shows by accident; each marks one thing that must never be on disk in the clear.
SCREEN = "quokkaplan marzipanfjord tamarindvex"  # the text of a captured window
TITLE = "Ledger zebulonquill.txt"  # its title
MEM_OLD = "the vendor code is brontidemagnet"  # a memory's text before an edit
MEM_NEW = "the vendor code is cobaltwhisker"  # ... after it
GONE = "the locker code is fennelgrotto"  # a memory that is forgotten
MCP_TEXT = "the staging host is ravelinmoss"  # a memory written by an assistant over MCP
MCP_EVIDENCE = "pasted log line sorrelpinion"  # evidence written over MCP
LABEL = "pantry alarm pipistrelle"  # a vault entry's label
SECRET = "vault-value-hollyhock-4411"  # its value
SPEAKER = "Octavia Quillfeather"  # a speaker of an utterance
APP = "zebulonpad"  # the captured window's app (its window class)


def plain_hits(home: Path, *needles: str) -> dict[str, list[str]]:
    """{needle: files whose raw bytes hold it as plain text (UTF-8)} for every needle found anywhere."""
    files = [p for p in home.rglob("*") if p.is_file()]
    out = {}
    for n in needles:
        data = n.encode("utf-8")
        found = [str(p.relative_to(home)) for p in files if data in p.read_bytes()]
        if found:
            out[n] = found
    return out


def cli(monkeypatch, capsys, home: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    from desktop.cli.main import main

    monkeypatch.setenv("MIRADOR_HOME", str(home))
    monkeypatch.setenv("MIRADOR_NO_SERVICE", "1")
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_nothing_captured_edited_or_forgotten_is_in_the_clear_in_any_file_or_version(
        store, display, ocr, mirador_home, monkeypatch, capsys):
    from memory.mcp.auth import make_principal
    from tests.memory.mcp_support import call

    # Capture: a real window, real grabs, real OCR, the real writer; a thumbnail is kept.
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        display.window(TITLE, SCREEN, klass=APP)
        cap.run_cycles(3)
    finally:
        cap.stop()
    captured = [r for r in store.list("evidence", limit=100) if "quokkaplan" in r["text"].lower()]
    assert captured and captured[0]["window"] == TITLE and captured[0]["frame_path"]
    assert APP in captured[0]["app"].lower()
    store.add_evidence(f"{SPEAKER}: we ship on Friday", source="audio", speaker=SPEAKER, scope="work")

    # The CLI, an edit, a forget, the vault.
    code, out, err = cli(monkeypatch, capsys, mirador_home, "add", MEM_OLD, "--scope", "work", "--json")
    assert code == 0, err
    edited = json.loads(out)["id"]
    gone = store.add_memory(GONE, scope="work")
    store.update_memory(edited, text=MEM_NEW)
    code, out, err = cli(monkeypatch, capsys, mirador_home, "add", LABEL, "--type", "vault", "--value-stdin",
                         "--scope", "work", stdin=SECRET)
    assert code == 0, err

    # An assistant over MCP: a memory and evidence.
    who = make_principal("tester", ["work"], "work")

    async def steps(c):
        a = await c.call_tool("memory_add", {"text": MCP_TEXT})
        b = await c.call_tool("evidence_add", {"text": MCP_EVIDENCE})
        return a, b

    added = call(store, who, steps)
    assert not any(r.is_error for r in added), [r.content[0].text for r in added]

    from memory.store.erasure import forget
    forget(store, [gone["id"]], purge_now=False)
    code, out, err = cli(monkeypatch, capsys, mirador_home, "purge")
    assert code == 0, err

    needles = [*SCREEN.split(), TITLE, "zebulonquill", *MEM_OLD.split()[-1:], *MEM_NEW.split()[-1:],
               "fennelgrotto", "ravelinmoss", "sorrelpinion", "pipistrelle", SECRET, "Quillfeather", APP]
    assert plain_hits(mirador_home, *needles) == {}
    # The thumbnail is sealed: no image format's header is left to read.
    frames = [p for p in (mirador_home / "frames").rglob("*") if p.is_file()]
    assert frames and not any(b"WEBP" in p.read_bytes()[:64] for p in frames)

    # ...and all of it still works for the person: search, show, the current text, the frame.
    again = Store(mirador_home)
    assert [h.id for h in search_memories(again, "cobaltwhisker", scopes=["work"])][:1] == [edited]
    assert again.get(edited)["text"] == MEM_NEW
    assert any("quokkaplan" in h.text.lower() for h in search_evidence(again, "quokkaplan marzipanfjord",
                                                                           scopes=[captured[0]["scope"]]))
    assert again.frame_bytes(captured[0]["frame_path"])[:4] == b"RIFF"
    # The app is sealed, yet read back, filtered on and listed as it was captured.
    app = captured[0]["app"]
    assert again.get(captured[0]["id"])["app"] == app
    assert captured[0]["id"] in {r["id"] for r in again.rows("evidence", again.where("evidence", apps=[app]), ["id"])}
    assert any(h.id == captured[0]["id"] for h in search_evidence(again, "quokkaplan", apps=[app],
                                                                   scopes=[captured[0]["scope"]]))
    assert "ravelinmoss" in " ".join(h.text for h in search_memories(again, "staging host", scopes=["work"]))


def _older_store(home: Path) -> dict:
    """A store as an older version wrote it, with rows of every kind; returns what it holds."""
    from memory.graph import relations as R

    with older_version():
        s = Store(home)
        mems = [s.add_memory(f"Fact {i}: the {w} meeting moved to room {100 + i}", scope="work")
                for i, w in enumerate(["quarterly", "design", "budget", "hiring", "security", "launch"])]
        proc = s.add_memory("Deploy the service", type="procedural", scope="work",
                            details={"steps": ["build the image", "push it", "roll out"]})
        s.update_memory(mems[0]["id"], text="Fact 0: the quarterly meeting moved to room 999")
        evs = s.add_evidence_batch([EvidenceSpec(
            text=f"turn {i}: {t}", source="audio", speaker="Mara Lindqvist", window="call with vendor", app="vendorphone",
            meta={"file": f"/tmp/rec{i}.wav"}, scope="work")
            for i, t in enumerate(["the invoice is overdue", "send the contract on monday", "budget is frozen"])],
            actor="capture")
        vault = s.add_memory("printer admin", type="vault", value="printer-pw-3391", scope="work")
        R.add_relation(s, mems[1]["id"], "MENTIONS", mems[2]["id"])
        queries = ["quarterly meeting room", "deploy service steps", "invoice overdue contract"]
        return {
            "memories": {m["id"]: s.get(m["id"]) for m in [*mems, proc]},
            "evidence": {e["id"]: s.get(e["id"]) for e in evs},
            "vault": vault["id"],
            "vectors": {r["id"]: np.asarray(r["vector"]) for r in s.rows("memory", None, ["id", "vector"])},
            "search": {q: [h.id for h in search_memories(s, q, scopes=["work"])] for q in queries},
            "evidence_search": [h.id for h in search_evidence(s, "invoice overdue", scopes=["work"])],
            "audit": s.audit.count_rows(),
        }


def same_results(s: Store, before: dict) -> bool:
    for q, ids in before["search"].items():
        got = [h.id for h in search_memories(s, q, scopes=["work"])]
        if got[:1] != ids[:1] or set(got) != set(ids):
            return False
    got = [h.id for h in search_evidence(s, "invoice overdue", scopes=["work"])]
    return got[:1] == before["evidence_search"][:1] and set(got) == set(before["evidence_search"])


def test_a_plaintext_store_is_sealed_in_place_with_every_row_kept(mirador_home, caplog):
    before = _older_store(mirador_home)
    assert plain_hits(mirador_home, "quarterly", "Lindqvist", "printer admin", "call with vendor", "vendorphone"), \
        "precondition: the older version left text in the clear"

    with caplog.at_level("WARNING"):
        s = Store(mirador_home)  # MIRADOR_PASSPHRASE is set: sealed at open, with progress in the log
    assert any("sealing this data folder" in r.getMessage() for r in caplog.records)
    assert sealed_already(s) and plain_rows(s) == {}
    # Every row is there, as it was.
    for id_, row in before["memories"].items():
        got = s.get(id_)
        assert {k: got[k] for k in ("text", "title", "details", "type", "scope", "status")} == \
            {k: row[k] for k in ("text", "title", "details", "type", "scope", "status")}
    for id_, row in before["evidence"].items():
        got = s.get(id_)
        assert {k: got[k] for k in ("text", "speaker", "window", "app", "meta")} == \
            {k: row[k] for k in ("text", "speaker", "window", "app", "meta")}
    assert {r["id"] for r in s.rows("evidence", s.where("evidence", apps=["vendorphone"]), ["id"])} == \
        set(before["evidence"])
    assert s.reveal(before["vault"]) == "printer-pw-3391"
    assert s.audit.count_rows() >= before["audit"]
    vectors = {r["id"]: np.asarray(r["vector"]) for r in s.rows("memory", None, ["id", "vector"])}
    assert all(np.allclose(vectors[i], v, atol=1e-5) for i, v in before["vectors"].items())
    # Searches find what they found, the best first (rows of equal score may change places: sealing rewrote
    # them, and ties go by where a row lies).
    assert same_results(s, before)
    # And the clear text is gone from every file, old versions and indexes included.
    assert plain_hits(mirador_home, "quarterly", "Lindqvist", "printer admin", "call with vendor", "overdue",
                      "roll out", "room 999", "vendorphone") == {}


def test_sealing_that_stopped_half_way_goes_on_and_turns_no_vector_twice(mirador_home, monkeypatch):
    from memory.store import seal_migration

    before = _older_store(mirador_home)
    monkeypatch.setattr(seal_migration, "CHUNK", 2)
    calls = {"n": 0}
    merge = Store.merge_rows

    def crash_after_two(self, table, data, insert=False, on="id"):
        calls["n"] += 1
        if calls["n"] > 2:
            raise OSError("power cut")
        return merge(self, table, data, insert=insert, on=on)

    monkeypatch.setattr(Store, "merge_rows", crash_after_two)
    with pytest.raises(OSError, match="power cut"):
        Store(mirador_home)
    monkeypatch.setattr(Store, "merge_rows", merge)
    s = Store(mirador_home)
    assert sealed_already(s) and plain_rows(s) == {}
    vectors = {r["id"]: np.asarray(r["vector"]) for r in s.rows("memory", None, ["id", "vector"])}
    assert all(np.allclose(vectors[i], v, atol=1e-5) for i, v in before["vectors"].items())
    assert same_results(s, before)


def test_without_the_key_at_open_the_store_waits_for_unlock_which_seals_it_with_progress(
        mirador_home, monkeypatch, capsys):
    import os

    _older_store(mirador_home)
    phrase = os.environ["MIRADOR_PASSPHRASE"]
    monkeypatch.delenv("MIRADOR_PASSPHRASE")
    s = Store(mirador_home)  # no keyring, no passphrase: still read and searched as it was, not sealed yet
    assert not sealed_already(s) and plain_rows(s)
    found = [h.text for h in search_memories(s, "quarterly meeting room", scopes=["work"])]
    assert found and "room 999" in found[0]
    code, out, err = cli(monkeypatch, capsys, mirador_home, "unlock", "--passphrase-stdin", stdin=phrase + "\n")
    assert code == 0, err
    assert "sealing what an older version stored in the clear" in err and "sealed" in out
    monkeypatch.setenv("MIRADOR_PASSPHRASE", phrase)
    s = Store(mirador_home)
    assert sealed_already(s) and plain_rows(s) == {}
    assert plain_hits(mirador_home, "quarterly", "Lindqvist") == {}
    assert search_memories(s, "quarterly meeting room", scopes=["work"])


def test_a_lost_key_is_a_clear_error_and_no_new_key_is_made(store, mirador_home, monkeypatch, capsys):
    row = store.add_memory("The safe combination is stored elsewhere", scope="work")
    (mirador_home / KEY_FILE).unlink()
    fresh = Store(mirador_home)
    with pytest.raises(KeyUnavailableError, match="missing") as e:
        fresh.get(row["id"])
    assert "restore" in str(e.value)
    with pytest.raises(KeyUnavailableError, match="missing"):
        fresh.add_memory("a new memory would be sealed under a key nobody could open later", scope="work")
    assert not (mirador_home / KEY_FILE).exists()
    code, out, err = cli(monkeypatch, capsys, mirador_home, "show", row["id"])
    assert code == 5 and "data-key.json is missing" in err and "Traceback" not in err


def test_a_locked_mirador_captures_nothing_and_the_writer_holds_its_rows(store, display, ocr, monkeypatch, capsys):
    cap = Capture(store, audio=False, ocr=ocr)
    try:
        store.keys.lock()
        display.window("Locked notes", "walnutsprocket gladiolus", klass="scribbler")
        assert cap.run_cycles(2) == ["paused", "paused"]
        assert cap.health.snapshot()["state"] == "locked"
        assert store.evidence.count_rows() == 0
        code, out, err = cli(monkeypatch, capsys, store.home, "search", "walnutsprocket")
        assert code == 5 and "Mirador is locked" in err
        store.keys.unlock()
        outcomes = cap.run_cycles(3)
        assert "queued" in outcomes and cap.health.snapshot()["state"] == "capturing"
    finally:
        cap.stop()
    assert any("walnutsprocket" in r["text"].lower() for r in store.list("evidence", limit=10))


def test_nothing_is_recorded_as_sealed_for_a_new_store_until_it_is(mirador_home):
    s = Store(mirador_home)
    assert sealed_already(s)  # made sealed: nothing to migrate
    assert s.db.open_table("_migrations").count_rows(F.equals("name", DONE)) == 1
    assert apps_sealed(s) and s.db.open_table("_migrations").count_rows(F.equals("name", APPS_DONE)) == 1
    with pytest.raises(MiradorError):
        s.keys.lock()
        s.add_memory("refused while locked", scope="work")
    s.keys.unlock()


def test_a_store_the_version_before_wrote_with_apps_in_the_clear_has_them_sealed_at_open(mirador_home):
    """The version before sealed text, window and speaker but kept an evidence row's app in the clear: opening its
    store seals the apps in place (no vector turned twice), purges the old versions, and every row still reads,
    filters and searches by app."""
    from memory.store.rescope import select_evidence

    apps = {"zephyrchat": ["ship the kestrel build on friday", "kestrel build is green"],
            "quillbrowser": ["kestrel release notes draft"]}
    with apps_in_the_clear():
        s = Store(mirador_home)
        made = {a: [s.add_evidence(t, source="screen", app=a, window=f"{a} window", scope="work")["id"] for t in ts]
                for a, ts in apps.items()}
        assert not apps_sealed(s)
        vectors = {r["id"]: np.asarray(r["vector"]) for r in s.rows("evidence", None, ["id", "vector"])}
    assert set(plain_hits(mirador_home, *apps)) == set(apps), "precondition: the apps are in the clear"

    # Before its migration has run, an app filter finds the rows in the clear and those written sealed since.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("memory.store.core.seal_at_open", lambda store: setattr(store.sealer, "active", True))
        mixed = Store(mirador_home)
        assert not apps_sealed(mixed)
        late = mixed.add_evidence("kestrel late note", source="screen", app="zephyrchat", scope="work")["id"]
        got = {r["id"] for r in mixed.rows("evidence", mixed.where("evidence", apps=["zephyrchat"]), ["id"])}
        assert got == {*made["zephyrchat"], late}
    made["zephyrchat"].append(late)

    s = Store(mirador_home)  # MIRADOR_PASSPHRASE is set: the apps are sealed at open
    assert apps_sealed(s) and plain_rows(s) == {}
    assert plain_hits(mirador_home, *apps) == {}
    for app, ids in made.items():
        assert all(s.get(i)["app"] == app for i in ids)
        assert {r["id"] for r in s.rows("evidence", s.where("evidence", apps=[app]), ["id"])} == set(ids)
        assert {r["id"] for r in select_evidence(s, app=app.upper())} == set(ids)  # case-insensitive, opened
        assert {h.id for h in search_evidence(s, "kestrel", apps=[app], scopes=["work"])} == set(ids)
    # The vectors turned when the text was sealed are not turned again.
    after = {r["id"]: np.asarray(r["vector"]) for r in s.rows("evidence", None, ["id", "vector"])}
    assert all(np.allclose(after[i], v, atol=1e-5) for i, v in vectors.items())
    raw = s.evidence.search().select(["app"]).limit(None).to_arrow()["app"].to_pylist()
    assert raw and all(v.startswith("\x1ee1:") for v in raw)
