"""A scope bound after a device already made memories in it (real SeaweedFS): editing one of them moves it to
the bucket instead of leaving a stale local copy that reads would keep answering with; `mirador remote push`
shares the rest with their relations, after saying what it will send; other scopes never move."""

from __future__ import annotations

import json
import sys

import pytest

from memory.errors import NotFoundError
from memory.graph import relations as R
from memory.store import filters as F
from tests.memory import seaweed as sw_fixtures
from tests.memory import test_remote
from tests.memory.test_remote import SHARED, bind, open_home

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures
prefix = test_remote.prefix  # fixture: a fresh bucket prefix


def cli(monkeypatch, capsys, home, *args) -> tuple[int, str, str]:
    from desktop.cli.main import main

    monkeypatch.setenv("MIRADOR_HOME", str(home))
    monkeypatch.setenv("MIRADOR_NO_SERVICE", "1")
    monkeypatch.setattr(sys, "argv", ["mirador", *args])
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_memories_made_before_the_binding_move_on_edit_and_on_push(tmp_path, seaweed, memory_keyring, prefix,
                                                                  monkeypatch, capsys):
    from memory.store.core import Store

    home = tmp_path / "a"
    early = Store(home)
    edited = early.add_memory("The acme sprint review is on Thursdays", scope=SHARED)
    left = early.add_memory("The acme design docs live in the wiki", scope=SHARED)
    mine = early.add_memory("My gym locker is number 12", scope="personal")
    R.add_relation(early, edited["id"], "MENTIONS", left["id"])

    bind(home, seaweed, prefix)
    a = Store(home)
    # An edit of a memory made before the binding goes to the bucket and leaves no local copy behind.
    a.update_memory(edited["id"], text="The acme sprint review moved to Wednesdays")
    assert a.get(edited["id"])["text"] == "The acme sprint review moved to Wednesdays"
    assert a.count("memory", F.id_is(edited['id']), local=True) == 0
    assert seaweed.holding("moved to Wednesdays", prefix)

    # push without --yes says what it would send and sends nothing.
    code, out, err = cli(monkeypatch, capsys, home, "remote", "push", "team")
    assert code == 2 and "1 memory(ies) of work/acme" in err and "--yes" in err, err
    assert not seaweed.holding("design docs live in the wiki", prefix)
    code, out, err = cli(monkeypatch, capsys, home, "remote", "push", "team", "--yes", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["memories"] == 1 and doc["relations"] == 1 and doc["pending"] == 0
    code, out, err = cli(monkeypatch, capsys, home, "remote", "push", "team")
    assert code == 0 and "nothing to share" in out, out + err

    b = open_home(tmp_path, "b", seaweed, prefix)
    assert b.get(left["id"])["text"] == left["text"]
    assert [e["dst"] for e in R.related(b, edited["id"])] == [left["id"]]
    with pytest.raises(NotFoundError):  # personal never left device a
        b.get(mine["id"])
    assert not seaweed.holding("gym locker", prefix)
    a2 = Store(home)
    assert a2.get(mine["id"])["text"] == mine["text"]
    assert a2.count("memory", F.equals("scope", "work/acme"), local=True) == 0
