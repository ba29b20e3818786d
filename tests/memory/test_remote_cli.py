"""`mirador remote add|list|test|remove` against a real SeaweedFS, and the binding config: credentials
live in the (test) keyring and never in a file under the data dir."""

from __future__ import annotations

import io
import json
import sys
import uuid

import pytest

from desktop.cli.main import main
from memory.config import Config, load_config
from memory.errors import ConfigError
from tests.conftest import files_containing
from tests.memory import seaweed as sw_fixtures
from tests.memory.seaweed import BUCKET, KEY_ID, SECRET

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures


def run(capsys, monkeypatch, *args, stdin=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_remote_commands_round_trip(capsys, monkeypatch, mirador_home, seaweed, memory_keyring):
    url = f"s3://{BUCKET}/cli-{uuid.uuid4().hex[:8]}"
    code, out, err = run(capsys, monkeypatch, "remote", "add", "team", "--scope", "work/acme", "--url", url,
                         "--endpoint", seaweed.endpoint, "--key-id", KEY_ID, "--secret-stdin", "--json",
                         stdin=SECRET + "\n")
    assert code == 0, err
    assert json.loads(out)["added"]["scope"] == "work/acme"
    cfg = load_config(mirador_home)
    assert [b.name for b in cfg.remote.bindings] == ["team"]
    # The secret is in the keyring, and in no file under the data dir (config included).
    assert any(SECRET in v for v in memory_keyring.items.values())
    assert not files_containing(mirador_home, SECRET)

    code, out, err = run(capsys, monkeypatch, "remote", "test", "team", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["write_ms"] >= 0 and doc["read_ms"] >= 0 and doc["pending"] == 0

    code, out, err = run(capsys, monkeypatch, "add", "The acme retro is on Fridays", "--scope", "work/acme")
    assert code == 0, err
    code, out, err = run(capsys, monkeypatch, "remote", "list", "--json")
    assert code == 0, err
    (row,) = json.loads(out)["bindings"]
    assert row["online"] and row["memories"] == 1 and row["pending"] == 0
    assert seaweed.holding("acme retro is on Fridays", url.split("/", 3)[3])
    code, out, err = run(capsys, monkeypatch, "search", "acme retro", "--json")
    assert code == 0, err
    assert "acme retro" in out
    code, out, err = run(capsys, monkeypatch, "remote", "maintain", "--json")
    assert code == 0, err
    assert json.loads(out)["maintained"]["team"]["rows"] == 1
    code, out, err = run(capsys, monkeypatch, "remote", "maintain")
    assert code == 0 and "team: 1 shared memories" in out and "volume.vacuum" in out, out  # what S3 cannot do
    code, out, err = run(capsys, monkeypatch, "remote", "maintain", "nope")
    assert code != 0 and "mirador remote list" in err

    # Remove: refused without --yes (nothing changes), then the binding and the keyring entry go.
    code, out, err = run(capsys, monkeypatch, "remote", "remove", "team")
    assert code != 0 and "--yes" in err
    assert [b.name for b in load_config(mirador_home).remote.bindings] == ["team"]
    code, out, err = run(capsys, monkeypatch, "remote", "remove", "team", "--yes")
    assert code == 0, err
    assert not load_config(mirador_home).remote.bindings
    # The binding's credentials are gone from the keyring; what is left there is the data folder's own key.
    assert {service for service, _ in memory_keyring.items} <= {"mirador-data-key"}
    assert seaweed.holding("acme retro is on Fridays", url.split("/", 3)[3])  # the remote data stays


def test_remote_errors_say_what_to_do(capsys, monkeypatch, mirador_home, memory_keyring):
    code, out, err = run(capsys, monkeypatch, "remote", "test", "nope")
    assert code != 0 and "mirador remote list" in err
    code, out, err = run(capsys, monkeypatch, "remote", "add", "x", "--scope", "work", "--url", "http://not-s3",
                         "--key-id", "k", "--secret-stdin", stdin="s\n")
    assert code != 0 and "s3://bucket/prefix" in err
    assert not memory_keyring.items


def test_no_keyring_no_binding(capsys, monkeypatch, mirador_home):
    import keyring
    from keyring.backends import fail

    before = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        code, out, err = run(capsys, monkeypatch, "remote", "add", "t", "--scope", "work", "--url", "s3://b/p",
                             "--key-id", "k", "--secret-stdin", stdin="hushhush\n")
    finally:
        keyring.set_keyring(before)
    assert code != 0 and "keyring" in err
    assert not load_config(mirador_home).remote.bindings
    assert not files_containing(mirador_home, "hushhush")


@pytest.mark.parametrize("bindings, needle", [
    ([{"name": "a", "scope": "work", "url": "s3://b/p"}, {"name": "a", "scope": "team", "url": "s3://b/q"}], "name"),
    ([{"name": "a", "scope": "work", "url": "s3://b/p"}, {"name": "b", "scope": "work/acme", "url": "s3://b/q"}],
     "overlap"),
    ([{"name": "a b", "scope": "work", "url": "s3://b/p"}], "binding name"),
    ([{"name": "a", "scope": "work", "url": "s3://b/p", "endpoint": "127.0.0.1:9000"}], "endpoint"),
    ([{"name": "a", "scope": "work", "url": "s3://b/p", "secret": "x"}], "secret"),
])
def test_bindings_are_validated(mirador_home, bindings, needle):
    import tomli_w

    (mirador_home / "config.toml").parent.mkdir(parents=True, exist_ok=True)
    (mirador_home / "config.toml").write_text(tomli_w.dumps({"remote": {"bindings": bindings}}))
    with pytest.raises(ConfigError) as e:
        load_config(mirador_home)
    assert needle in str(e.value)
    assert Config().remote.bindings == []
