"""No copy survives a forget or an edit (issue 40, item 4): after `mirador purge`, no file of the data folder —
any version of any table, any index, any leftover manifest, transaction or deletion file — holds an edited
memory's old text or a forgotten memory's or evidence row's text or id. The audit rows stay (who, when, what
action), with the old text replaced by fingerprints. Shared scopes: the bucket (real SeaweedFS) and the local
outbox hold no copy of a forgotten shared memory either.

The scan reads every file's raw bytes for the plaintext marker: Lance stores strings uncompressed, and a
store that seals its text columns (issue 40, item 2) must pass it all the more.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from memory.graph import reinforcement
from memory.graph import relations as R
from memory.retrieval.search import search_memories
from memory.store import filters as F
from memory.store.core import Store
from memory.store.erasure import forget, purge
from memory.store.fingerprint import fingerprint
from memory.store.indexes import maintain
from tests.conftest import files_containing
from tests.memory import seaweed as sw_fixtures
from tests.memory import test_remote
from tests.memory.test_remote import SHARED, open_home

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures
prefix = test_remote.prefix  # fixture: a fresh bucket prefix


def cli(monkeypatch, capsys, home: Path, *args: str) -> tuple[int, str, str]:
    """Run `mirador ARGS` on this data folder, in this process."""
    from desktop.cli.main import main

    monkeypatch.setenv("MIRADOR_HOME", str(home))
    monkeypatch.setenv("MIRADOR_NO_SERVICE", "1")
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err

# Lowercase letters and digits, ending in a consonant: one token that the full-text analyser (lowercase,
# Snowball stem) keeps as it is, so an index file that still lists it is found by the same byte scan.
OLD = "oldqx7731zk"  # only in the edited memory's first text
GONE = "gonevq4482zt"  # only in the forgotten memory
EVD = "evdwp9153zr"  # only in the forgotten evidence
NEW = "newjd6620zm"  # the edited memory's current text: must stay findable
KEEP = "keepbn3307zl"  # an untouched memory: must stay


def holders(root: Path, needle: str) -> list[str]:
    """Every file under root (all of it: tables, versions, indexes, side files) whose raw bytes hold needle, or
    its keyed search term (the text is sealed at rest; the row's index terms go wherever its data goes)."""
    return sorted(str(p.relative_to(root)) for p in files_containing(root, needle))


def table_of(path: str) -> str:
    """The table a file of the data folder belongs to ("lancedb/audit.lance/data/…" → "audit"), or the path."""
    parts = path.split("/")
    return parts[1].removesuffix(".lance") if parts[0] == "lancedb" and len(parts) > 2 else path


def index_dirs(table) -> set[str]:
    """The index folders on disk of a local table (each index version is one folder, named by its uuid)."""
    root = Path(table.to_lance().uri) / "_indices"
    return {p.name for p in root.iterdir()} if root.exists() else set()


def fts_tokens(table) -> int:
    """How many distinct words the table's current full-text indexes hold (read from their token files)."""
    from lance.file import LanceFileReader

    root = Path(table.to_lance().uri) / "_indices"
    total = 0
    for ix in table.list_indices():
        if ix.index_type == "FTS":
            for f in (root / ix.index_uuid).glob("part_*_tokens.lance"):
                total += sum(LanceFileReader(str(f)).read_all().to_table()["_token_next_id"].to_pylist())
    return total


def fts_tokens_of_live_rows(table, scratch: Path) -> int:
    """The same count for indexes built afresh over the table's live rows only, in a scratch database."""
    import lancedb

    from memory.store.indexes import ensure_fts

    cols = [ix.columns[0] for ix in table.list_indices() if ix.index_type == "FTS"]
    copy = lancedb.connect(scratch / f"fresh-{table.name}-{len(list(scratch.iterdir()))}").create_table(
        table.name, table.to_arrow().select(cols))
    for col in cols:
        ensure_fts(copy, col)
    return fts_tokens(copy)


def test_purge_leaves_no_old_or_forgotten_text_or_id_in_any_file(store, mirador_home, tmp_path, monkeypatch,
                                                                  capsys):
    edited = store.add_memory(f"The release train leaves at {OLD} on Mondays", scope="work", title=f"train {OLD}")
    gone = store.add_memory(f"The vendor contract code is {GONE}", scope="work")
    kept = store.add_memory(f"The team lunch is at {KEEP} on Fridays", scope="work")
    ev = store.add_evidence(f"terminal shows build {EVD} failed", source="screen", app="xterm", scope="work")
    store.update_memory(edited["id"], text=f"The release train leaves at {NEW} on Tuesdays")
    # What hangs off the forgotten memory: use counts, an edge to a memory that stays.
    reinforcement.reinforce(store, [gone["id"], kept["id"]])
    reinforcement.reinforce(store, [gone["id"]])
    R.add_relation(store, gone["id"], "MENTIONS", kept["id"])
    maintain(store, force_vector=True)  # every index (full-text, vector, scalar) built over all of it
    for marker in (OLD, GONE, EVD, gone["id"], ev["id"]):
        assert holders(mirador_home, marker), f"precondition: {marker} is on disk before the forget"
    # ...index files included: the BTREE index on id lists the ids as they are.
    assert any("/_indices/" in p for p in holders(mirador_home, gone["id"]))
    assert {table_of(p) for p in holders(mirador_home, gone["id"])} >= {"memory_usage", "relations", "memories"}

    forget(store, [gone["id"]], purge_now=False)
    forget(store, [ev["id"]], purge_now=False)
    assert holders(mirador_home, GONE), "precondition: without a purge the old versions still hold it"
    assert fts_tokens(store.memories) > fts_tokens_of_live_rows(store.memories, tmp_path), \
        "precondition: the full-text index still holds the forgotten memory's words"
    code, out, err = cli(monkeypatch, capsys, mirador_home, "purge")
    assert code == 0 and "purged: old versions removed" in out, out + err

    for marker in (OLD, GONE, EVD):
        assert holders(mirador_home, marker) == [], marker
    # A full-text index keeps its words in a compressed automaton (an FST), out of reach of a byte scan:
    # each one must hold exactly the words of the live rows, and no index of an older version may be left.
    for table in (store.memories, store.evidence):
        assert fts_tokens(table) == fts_tokens_of_live_rows(table, tmp_path), table.name
        assert index_dirs(table) == {ix.index_uuid for ix in table.list_indices()}, table.name
    # The ids live on only where forget keeps them by design: the tombstone (it stops re-extraction) and the
    # audit log (who deleted what, when); no other table, version or index names them.
    for id_ in (gone["id"], ev["id"]):
        assert {table_of(p) for p in holders(mirador_home, id_)} <= {"tombstones", "audit"}, id_

    # What was not forgotten is all still there and found.
    assert store.get(edited["id"])["text"] == f"The release train leaves at {NEW} on Tuesdays"
    assert [h.id for h in search_memories(store, NEW, scopes=["work"])][:1] == [edited["id"]]
    assert [h.id for h in search_memories(store, KEEP, scopes=["work"])][:1] == [kept["id"]]
    assert holders(mirador_home, NEW) and holders(mirador_home, KEEP)
    assert reinforcement.usage_of(store, [kept["id"]])[0]["uses"] == 1

    # Everything stays audited: each row keeps who, when and which fields changed; the old text is a fingerprint.
    again = Store(mirador_home)
    audit = again.rows("audit")
    mine = [a for a in audit if a["entity_id"] == edited["id"]]
    assert [a["action"] for a in mine] == ["create", "update"]
    update = mine[1]
    before, after = json.loads(update["before"]), json.loads(update["after"])
    old_text = f"The release train leaves at {OLD} on Mondays"
    assert before["text"] == {"fingerprint": fingerprint(old_text)}
    assert after["text"] == f"The release train leaves at {NEW} on Tuesdays"  # the current text, as it stands
    assert [a["action"] for a in audit if a["entity_id"] == gone["id"]][-1] == "delete"
    assert [a["action"] for a in audit if a["entity_id"] == ev["id"]][-1] == "delete"
    assert not any(holders(mirador_home, m) for m in (OLD, GONE, EVD)), "reopening brought nothing back"


def test_a_second_purge_keeps_the_current_text_and_changes_nothing(store, mirador_home):
    row = store.add_memory(f"The office wifi is {OLD}", scope="work")
    store.update_memory(row["id"], text=f"The office wifi is {NEW}")
    purge(store)
    first = json.loads(store.rows("audit", F.and_(F.id_is(row['id'], "entity_id"), F.equals("action", "update")), ["before"], limit=1)[0]["before"])
    purge(store)
    again = json.loads(store.rows("audit", F.and_(F.id_is(row['id'], "entity_id"), F.equals("action", "update")), ["before"], limit=1)[0]["before"])
    assert first == again == {"text": {"fingerprint": fingerprint(f"The office wifi is {OLD}")}} | {
        k: v for k, v in first.items() if k != "text"}
    assert holders(mirador_home, OLD) == []
    assert store.get(row["id"])["text"] == f"The office wifi is {NEW}"


def test_forgetting_a_shared_memory_leaves_no_copy_in_the_bucket_or_the_outbox(tmp_path, seaweed, memory_keyring,
                                                                              prefix, monkeypatch, capsys):
    a = open_home(tmp_path, "a", seaweed, prefix)
    shared = a.add_memory(f"The acme vendor contract code is {GONE}", scope=SHARED)
    edited = a.add_memory(f"The acme standup is at {OLD}", scope=SHARED)
    stays = a.add_memory(f"The acme wiki lives at {KEEP}", scope=SHARED)
    a.update_memory(edited["id"], text=f"The acme standup is at {NEW}")
    assert a.remotes.flush()["pending"] == 0
    # Another device sharing the scope edits the memory before it is forgotten: its outbox sent that text.
    b = open_home(tmp_path, "b", seaweed, prefix, embedder=a.embedder)
    b.update_memory(shared["id"], text=f"The acme vendor contract code is still {GONE}")
    assert b.remotes.flush()["pending"] == 0
    # (The outbox holds the text sealed, with no search terms: its old versions are found by the memory's id.)
    assert {table_of(p) for p in holders(b.home, shared["id"])} >= {"remote_outbox"}, "precondition"
    assert seaweed.holding(GONE, prefix) and seaweed.holding(OLD, prefix), "precondition: the bucket holds both"
    assert a.remotes.outbox().count_rows() == 0, "precondition: every queued write was sent"
    assert {table_of(p) for p in holders(a.home, shared["id"])} >= {"remote_outbox"}, \
        "precondition: the outbox's old versions still hold the row it sent"

    forget(a, [shared["id"]])

    # The forget alone: the bucket's tables compacted and their old versions dropped, the outbox's too.
    assert seaweed.holding(GONE, prefix) == []
    assert seaweed.holding(OLD, prefix) == [], "the forget's compaction also dropped old versions of the edit"
    assert holders(a.home, GONE) == []
    assert "remote_outbox" not in {table_of(p) for p in holders(a.home, OLD)}
    # The id stays in the bucket only in the shared tombstones (other devices must not re-create it).
    assert {k.split(f"/{prefix}/", 1)[1].split("/")[0] for k in seaweed.holding(shared["id"], prefix)} <= {
        "tombstones.lance"}, seaweed.holding(shared["id"], prefix)
    assert {table_of(p) for p in holders(a.home, shared["id"])} <= {"tombstones", "audit"}
    # Below the bucket, SeaweedFS keeps a deleted object's bytes in its volume files until they are vacuumed;
    # the command docs/sharing.md gives (and `remote maintain` reminds of) removes them.
    assert seaweed.raw_holding(GONE), "precondition: the volume files still hold the deleted bytes"
    # (The filer hands deleted chunks to the volume servers in the background: a vacuum may come too early.)
    deadline = time.monotonic() + 60
    while True:
        seaweed.shell("lock", "volume.vacuum -garbageThreshold 0.0001", "unlock")
        if not seaweed.raw_holding(GONE) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert seaweed.raw_holding(GONE) == []
    # The other device pulls the tombstone at its next flush: its own copies go, outbox versions included.
    b.remotes.flush()
    assert holders(b.home, GONE) == []
    assert {table_of(p) for p in holders(b.home, shared["id"])} <= {"tombstones", "audit"}

    # An edit with no forget after it: `mirador purge` removes its old text from the bucket and from this device
    # (the audit log's create row, the outbox's old versions).
    a.update_memory(stays["id"], text=f"The acme wiki moved to {EVD}")
    assert a.remotes.flush()["pending"] == 0
    # (This device holds the old text only sealed — its audit's create row, the outbox's old versions.)
    assert seaweed.holding(KEEP, prefix), "precondition: the bucket's old versions hold the old text"
    code, out, err = cli(monkeypatch, capsys, a.home, "purge")
    assert code == 0 and "purged the shared scope work/acme's bucket" in out, out + err
    assert seaweed.holding(KEEP, prefix) == [] and holders(a.home, KEEP) == []
    assert holders(a.home, OLD) == [] and seaweed.holding(OLD, prefix) == []
    # What is current is still shared and found.
    assert seaweed.holding(NEW, prefix) and seaweed.holding(EVD, prefix)
    assert b.get(stays["id"])["text"] == f"The acme wiki moved to {EVD}"
    assert [h.id for h in search_memories(b, NEW, scopes=[SHARED])][:1] == [edited["id"]]


def test_purge_says_which_shared_store_did_not_answer_and_what_to_do(tmp_path, memory_keyring, prefix, monkeypatch,
                                                                     capsys):
    from tests.memory.test_remote import bind

    home = tmp_path / "offline"
    home.mkdir()

    class Down:  # a binding to an endpoint nothing listens on
        endpoint = "http://127.0.0.1:9"

    bind(home, Down(), prefix)  # type: ignore[arg-type]
    Store(home).add_memory(f"The office wifi is {OLD}", scope="personal")
    code, out, err = cli(monkeypatch, capsys, home, "purge")
    assert code == 1
    assert "purged: old versions removed" in out  # the local purge is done all the same
    assert "work/acme" in err and "did not answer" in err and "run `mirador purge` again" in err, err
    assert "Traceback" not in err
