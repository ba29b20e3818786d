"""Evidence of a shared scope on a real SeaweedFS (tests/memory/seaweed.py), when the binding says so
(`evidence = true`): a copy of the row (text, vector, metadata; never a frame, audio or a file path) goes to
the bucket through the outbox; the other device finds it (search, get, the CLI, MCP under a scoped token);
a forget on any device erases it from every object in the bucket and, once pulled, from the device that
captured it; evidence of other scopes, of bindings without the option, and the vault never reach the bucket."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from memory.errors import NotFoundError
from memory.store import filters as F
from memory.store.erasure import forget, forget_where
from memory.store.remote import fresh
from tests.memory import seaweed as sw_fixtures
from tests.memory import test_remote
from tests.memory.seaweed import BUCKET, KEY_ID, SECRET, SeaweedFS
from tests.memory.test_remote import SHARED

seaweed, memory_keyring, own_seaweed = sw_fixtures.seaweed, sw_fixtures.memory_keyring, sw_fixtures.own_seaweed  # fixtures
prefix, homes = test_remote.prefix, test_remote.homes  # fixtures: a fresh bucket prefix, two homes (no evidence)


def open_sharing_home(tmp_path: Path, who: str, sw: SeaweedFS, prefix: str, embedder=None):
    """A home whose binding of SHARED shares its evidence too."""
    from memory.config import Config, save_config
    from memory.store.core import Store
    from memory.store.remote import save_credentials

    home = tmp_path / who
    home.mkdir()
    cfg = Config.model_validate({"remote": {"bindings": [{
        "name": "team", "scope": SHARED, "url": f"s3://{BUCKET}/{prefix}", "endpoint": sw.endpoint,
        "evidence": True}], "timeout_seconds": 5, "flush_interval_seconds": 1}})
    save_config(cfg, home)
    save_credentials("team", KEY_ID, SECRET)
    return Store(home, embedder=embedder)


@pytest.fixture
def sharing(tmp_path, seaweed, memory_keyring, prefix):
    a = open_sharing_home(tmp_path, "a", seaweed, prefix)
    b = open_sharing_home(tmp_path, "b", seaweed, prefix, embedder=a.embedder)
    return a, b


def bucket_evidence(store) -> list[dict]:
    """The rows of the binding's evidence table, read straight from the bucket."""
    from memory.store.remote_evidence import bucket_table

    try:
        t = bucket_table(store.remotes.shared["team"], store.evidence.schema, create=False)
    except (ValueError, FileNotFoundError):
        return []
    return fresh(t).to_arrow().to_pylist()


def cli(monkeypatch, capsys, home, *args) -> str:
    from desktop.cli.main import main

    monkeypatch.setenv("MIRADOR_HOME", str(home))
    monkeypatch.setattr(sys, "argv", ["mirador", *args])
    code = main(list(args))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_shared_evidence_is_found_elsewhere_and_forgotten_everywhere(sharing, seaweed, prefix, monkeypatch, capsys):
    from memory.mcp.auth import make_principal
    from memory.retrieval.recall import recall
    from memory.retrieval.search import search_evidence
    from tests.memory.mcp_support import call

    a, b = sharing
    frame = a.home / "frames" / "2024" / "evd-frame.webp"
    frame.parent.mkdir(parents=True)
    frame.write_bytes(b"not really a webp")
    ev = a.add_evidence("Standup notes: the acme kestrelwing migration slips to the second week", source="screen",
                        app="slack", scope=SHARED, frame_path=str(frame.relative_to(a.home)),
                        meta={"ocr_confidence": 91.5, "audio_path": "audio/secret-take.opus"})
    below = a.add_evidence("The acme billing owlparrot export runs nightly", source="manual",
                           scope="work/acme/billing")
    personal = a.add_evidence("Pharmacy pickup: quokkabanana prescription on Friday", source="manual",
                              scope="personal")
    work = a.add_evidence("The internal zebrafinch wiki moved hosts", source="manual", scope="work")
    a.add_memory("zebrafinch", type="vault", value="hunter2-vault-value", scope=SHARED)
    assert a.remotes.pending() == {"team": 0}

    # The bucket holds the copies of the shared scope's evidence (below it too), and nothing else.
    assert sorted(r["id"] for r in bucket_evidence(a)) == sorted([ev["id"], below["id"]])
    assert seaweed.holding("kestrelwing migration slips", prefix)  # the scan can see evidence text at all
    for text in ("quokkabanana", "zebrafinch", "hunter2", "evd-frame", "secret-take", "frames/2024"):
        assert not seaweed.holding(text, prefix), text
    [copy] = [r for r in bucket_evidence(a) if r["id"] == ev["id"]]
    assert copy["frame_path"] is None and json.loads(copy["meta"]) == {"ocr_confidence": 91.5}
    # The capturing device keeps its original as before: the frame path and the audio stay here.
    assert a.get(ev["id"])["frame_path"] == str(frame.relative_to(a.home))

    # B finds it: search (under the scope filter), get, get_many, the CLI, recall, MCP with a scoped token.
    hits = search_evidence(b, "when does the acme kestrelwing migration happen", scopes=[SHARED])
    assert hits[0].id == ev["id"] and hits[0].scope == SHARED and hits[0].row["app"] == "slack"
    assert hits[0].row["frame_path"] is None
    assert not [h for h in search_evidence(b, "kestrelwing migration", scopes=["personal"])]
    assert b.get(ev["id"])["text"] == ev["text"]
    for hidden in (ev["id"],):
        with pytest.raises(NotFoundError):
            b.get(hidden, scopes=["personal"])
    for local_only in (personal["id"], work["id"]):
        with pytest.raises(NotFoundError):
            b.get(local_only)
    assert set(b.get_many("evidence", [ev["id"], below["id"], personal["id"]], ["id"])) == {ev["id"], below["id"]}
    assert ev["id"] in cli(monkeypatch, capsys, b.home, "search", "kestrelwing migration", "--evidence", "--json")
    assert ev["id"] in cli(monkeypatch, capsys, b.home, "show", ev["id"], "--json")
    got = recall(b, "what happened to the acme kestrelwing migration", 400, scopes=[SHARED])
    assert ev["id"] in {i.id for i in got.items}
    # On A its own copy is not a second hit.
    mine = [h.id for h in search_evidence(a, "kestrelwing migration slips", scopes=None, limit=20)]
    assert mine.count(ev["id"]) == 1

    async def steps(client):
        found = await client.call_tool("evidence_search", {"query": "acme kestrelwing migration"})
        row = await client.call_tool("evidence_get", {"id": ev["id"]})
        return found, row

    found, row = call(b, make_principal("acme-bot", [SHARED], None), steps)
    assert ev["id"] in [h["id"] for h in json.loads(found.content[0].text)["results"]]
    assert "kestrelwing" in row.content[0].text

    async def outsider(client):
        return await client.call_tool("evidence_get", {"id": ev["id"]})

    refused = call(b, make_principal("other", ["personal"], None), outsider)
    assert "kestrelwing" not in refused.content[0].text

    # B forgets it: gone from the bucket (no object holds its text, any version), tombstone shared.
    forget(b, [ev["id"]])
    assert ev["id"] not in {r["id"] for r in bucket_evidence(b)}
    assert not seaweed.holding("kestrelwing migration slips", prefix)
    stones = b.remotes.shared["team"].stones(F.id_is(ev['id']))
    assert [(s["id"], s["kind"]) for s in stones] == [(ev["id"], "evidence")]
    assert ev["id"] not in [h.id for h in search_evidence(b, "kestrelwing migration", scopes=None)]
    # A pulls the tombstone: its original goes too, frame included, audited as from another device.
    a.remotes.flush()
    assert a.count("evidence", F.id_is(ev['id']), local=True) == 0
    assert not frame.exists()
    with pytest.raises(NotFoundError):
        a.get(ev["id"])
    assert not [h for h in search_evidence(a, "kestrelwing migration", scopes=None) if h.id == ev["id"]]
    who = {(r["actor"], r["entity_id"]) for r in a.rows("audit", F.equals("action", "delete"), ["actor", "entity_id"])}
    assert ("shared:team", ev["id"]) in who
    # It does not come back: A flushes again, and nothing of it is in the bucket or in A's tables.
    assert a.remotes.flush()["errors"] == {}
    assert not seaweed.holding("kestrelwing migration slips", prefix)
    assert ev["id"] not in {r["id"] for r in bucket_evidence(a)}
    assert seaweed.holding("owlparrot export", prefix)  # what was not forgotten is still there
    from tests.conftest import files_containing

    assert not files_containing(a.home / "lancedb", "kestrelwing migration slips")


def test_a_range_forget_on_another_device_is_a_forget_everywhere(sharing, seaweed, prefix):
    """B erases a time range of the shared scope (evidence_forget / `forget --since --until --scope`): the rows A
    captured there go from the bucket and, once A pulls, from A; rows outside the range stay."""
    from memory.types import utcnow

    a, b = sharing
    now = utcnow()
    old = a.add_evidence("The acme heronmoth budget line was cut", source="manual", scope=SHARED,
                         captured_at=now - timedelta(days=3))
    new = a.add_evidence("The acme lanternfish launch is on track", source="manual", scope=SHARED,
                         captured_at=now - timedelta(hours=1))
    done = forget_where(b, scope=SHARED, since=now - timedelta(days=4), until=now - timedelta(days=2))
    assert done["by_kind"]["evidence"] == 1
    assert not seaweed.holding("heronmoth budget", prefix)
    a.remotes.flush()
    assert a.count("evidence", F.id_is(old['id']), local=True) == 0
    assert a.get(new["id"])["text"] == new["text"] and b.get(new["id"])["text"] == new["text"]
    # A forgets its own row: gone from the bucket at once.
    forget(a, [new["id"]])
    assert not seaweed.holding("lanternfish launch", prefix)
    with pytest.raises(NotFoundError):
        b.get(new["id"])


def test_without_the_option_no_evidence_reaches_the_bucket(homes, seaweed, prefix):
    """The default binding shares memories only: the shared scope's evidence, and every vault entry, stay here."""
    a, b = homes
    assert not a.remotes.shared["team"].binding.evidence
    ev = a.add_evidence("Retro notes: the acme pelicanfox rollout went well", source="manual", scope=SHARED)
    a.add_memory("pelicanfox", type="vault", value="vault-secret-pelicanfox", scope=SHARED)
    a.add_memory("The acme pelicanfox rollout went well", scope=SHARED)
    assert seaweed.holding("pelicanfox rollout went well", prefix)  # the memory is shared...
    assert not seaweed.holding("Retro notes", prefix)  # ...its evidence is not
    assert not seaweed.holding("vault-secret", prefix)
    assert not [o for o in seaweed.objects(prefix) if "evidence" in o]
    with pytest.raises(NotFoundError):
        b.get(ev["id"])
    from memory.store.remote_evidence import EV_OUTBOX

    assert EV_OUTBOX not in a.db.table_names()


def test_offline_evidence_waits_in_the_outbox_and_drains(tmp_path, memory_keyring, own_seaweed, prefix):
    sw = own_seaweed  # stopped and started again below
    from memory.retrieval.search import search_evidence

    a = open_sharing_home(tmp_path, "a", sw, prefix)
    first = a.add_evidence("The acme standup moved to the blue room", source="manual", scope=SHARED)
    sw.stop()
    queued = [a.add_evidence(f"The acme gannet{n} report is due on day {n}", source="manual", scope=SHARED)
              for n in (1, 2)]
    local = a.add_evidence("Dentist on Tuesday morning", source="manual", scope="personal")
    # Capture and local search go on; the copies wait.
    assert a.remotes.pending() == {"team": 2}
    assert search_evidence(a, "dentist Tuesday", scopes=["personal"])[0].id == local["id"]
    assert search_evidence(a, "gannet2 report due", scopes=None)[0].id == queued[1]["id"]
    assert a.remotes.flush()["errors"]
    assert a.remotes.pending() == {"team": 2}

    sw.start()
    report = a.remotes.flush()
    assert report["sent"] == 2 and report["pending"] == 0 and not report["errors"]
    assert a.remotes.flush()["sent"] == 0
    ids = [r["id"] for r in bucket_evidence(a)]
    assert sorted(ids) == sorted([first["id"], *(q["id"] for q in queued)])
    b = open_sharing_home(tmp_path, "b", sw, prefix, embedder=a.embedder)
    assert search_evidence(b, "when is the gannet2 report due", scopes=[SHARED])[0].id == queued[1]["id"]
    assert not sw.holding("Dentist on Tuesday", prefix)


def test_remote_add_share_evidence_flag(capsys, monkeypatch, mirador_home, seaweed, memory_keyring):
    import io

    from desktop.cli.main import main
    from memory.config import RemoteBinding, load_config

    assert RemoteBinding(name="x", scope="work", url="s3://b/p").evidence is False  # off unless asked for
    monkeypatch.setattr(sys, "stdin", io.StringIO(SECRET + "\n"))
    code = main(["remote", "add", "team", "--scope", SHARED, "--url", f"s3://{BUCKET}/flag", "--endpoint",
                 seaweed.endpoint, "--key-id", KEY_ID, "--secret-stdin", "--share-evidence", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["added"]["evidence"] is True
    assert load_config(mirador_home).remote.bindings[0].evidence is True
    assert main(["remote", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr()[0])["bindings"][0]["evidence"] is True


def test_rescoped_evidence_follows_its_scope(sharing, seaweed, prefix):
    """Moving evidence out of the shared scope deletes its bucket copy (the person made it private); moving it in
    sends it."""
    from memory.store.rescope import plan_rescope, rescope

    a, b = sharing
    out = a.add_evidence("The acme ospreyfig salary review numbers", source="manual", scope=SHARED)
    into = a.add_evidence("The acme puffinkale offsite is in May", source="manual", scope="personal")
    assert seaweed.holding("ospreyfig salary", prefix) and not seaweed.holding("puffinkale offsite", prefix)
    rescope(a, plan_rescope(a, "personal", [{"id": out["id"], "scope": SHARED}]))
    rescope(a, plan_rescope(a, SHARED, [{"id": into["id"], "scope": "personal"}]))
    assert a.remotes.pending() == {"team": 0}
    assert not seaweed.holding("ospreyfig salary", prefix)
    with pytest.raises(NotFoundError):
        b.get(out["id"])
    assert b.get(into["id"])["scope"] == SHARED
    assert a.get(out["id"])["scope"] == "personal"  # the original stays here, in its new scope
