"""The data key: wrapped by the OS keyring or a passphrase, never a key file beside the data; lock, loss, migration."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory.store.keys import KEY_FILE, LEGACY_KEY_FILE, DataKeys, KeyUnavailableError, LockedError
from tests.conftest import files_containing

SECRET = "vault-secret-7f3a9c1e55"
ROOT = Path(__file__).resolve().parents[2]


class MemoryKeyring:
    """An OS keyring held in this process: the Secret Service / Keychain API, which cannot run here."""

    priority = 1

    def __init__(self) -> None:
        self.items: dict[tuple[str, str], str] = {}

    def get_password(self, service, user):
        return self.items.get((service, user))

    def set_password(self, service, user, value):
        self.items[(service, user)] = value

    def delete_password(self, service, user):
        del self.items[(service, user)]


@pytest.fixture
def os_keyring(monkeypatch):
    ring = MemoryKeyring()
    monkeypatch.setattr("memory.store.keys.os_keyring", lambda: ring)
    return ring


def _key_bytes_on_disk(home, key: bytes) -> list:
    return [*files_containing_bytes(home, key), *files_containing(home, base64.b64encode(key).decode())]


def files_containing_bytes(root, data: bytes) -> list:
    return [p for p in root.rglob("*") if p.is_file() and data in p.read_bytes()]


def test_passphrase_wraps_the_key_and_nothing_beside_the_data_opens_it(store, mirador_home):
    row = store.add_memory("Staging database password", type="vault", value=SECRET)
    assert not (mirador_home / LEGACY_KEY_FILE).exists()
    rec = json.loads((mirador_home / KEY_FILE).read_text())
    assert rec["kek"] == "passphrase" and rec["kdf"]["name"] == "argon2id" and rec["cipher"] == "AES-256-GCM"
    assert oct((mirador_home / KEY_FILE).stat().st_mode & 0o777) == "0o600"
    key = store.keys.key()
    assert _key_bytes_on_disk(mirador_home, key) == [] and files_containing(mirador_home, SECRET) == []
    assert store.reveal(row["id"]) == SECRET

    # Another process with the files alone and the wrong passphrase opens nothing.
    other = DataKeys(mirador_home)
    with pytest.raises(KeyUnavailableError, match="passphrase does not open"):
        other.key("not the passphrase")
    assert DataKeys(mirador_home).key(os.environ["MIRADOR_PASSPHRASE"]) == key


def test_no_keyring_and_no_passphrase_is_a_clear_error(mirador_home, monkeypatch):
    from memory.store.core import Store

    monkeypatch.delenv("MIRADOR_PASSPHRASE")
    store = Store(mirador_home)
    with pytest.raises(KeyUnavailableError, match="no OS keyring here and no passphrase given"):
        store.add_memory("label", type="vault", value=SECRET)
    assert not (mirador_home / KEY_FILE).exists()


def test_short_passphrase_is_refused(mirador_home):
    from memory.errors import ConfigError

    with pytest.raises(ConfigError, match="at least 8"):
        DataKeys(mirador_home).key("short")


def test_keyring_path_and_a_lost_keyring_entry(mirador_home, os_keyring):
    from memory.store.core import Store

    store = Store(mirador_home)
    row = store.add_memory("API token", type="vault", value=SECRET)
    assert json.loads((mirador_home / KEY_FILE).read_text())["kek"] == "keyring"
    assert len(os_keyring.items) == 1 and files_containing(mirador_home, SECRET) == []
    assert Store(mirador_home).reveal(row["id"]) == SECRET

    os_keyring.items.clear()  # the person's keyring was reset, or this is another account
    with pytest.raises(KeyUnavailableError, match="not in the OS keyring"):
        Store(mirador_home).reveal(row["id"])


def test_lost_key_file_is_a_clear_error_not_a_new_key(store, mirador_home):
    row = store.add_memory("API token", type="vault", value=SECRET)
    (mirador_home / KEY_FILE).unlink()
    from memory.store.core import Store

    with pytest.raises(KeyUnavailableError, match="is missing"):
        Store(mirador_home).reveal(row["id"])
    assert not (mirador_home / KEY_FILE).exists()


def test_replaced_key_file_is_a_clear_error(store, mirador_home):
    row = store.add_memory("API token", type="vault", value=SECRET)
    (mirador_home / KEY_FILE).unlink()
    DataKeys(mirador_home).key()  # someone made a new key in its place
    from memory.store.core import Store

    with pytest.raises(KeyUnavailableError, match="sealed under another key"):
        Store(mirador_home).reveal(row["id"])


def test_lock_reaches_every_process_and_unlock_lifts_it(store, mirador_home):
    from memory.store.core import Store

    row = store.add_memory("API token", type="vault", value=SECRET)
    other = Store(mirador_home)
    assert other.reveal(row["id"]) == SECRET
    store.keys.lock()
    for s in (store, other):
        with pytest.raises(LockedError, match="mirador unlock"):
            s.reveal(row["id"])
        assert not s.keys.held
    with pytest.raises(LockedError):
        other.add_memory("another", type="vault", value="x" * 9)
    assert other.keys.unlock() == "passphrase"
    assert store.reveal(row["id"]) == SECRET


def _legacy_store(mirador_home):
    """A store as an older version left it: values sealed with Fernet, the key in vault.key beside them."""
    from cryptography.fernet import Fernet

    from memory.store.core import Store
    from memory.store.keys import SEALED_PREFIX
    from tests.memory.legacy import older_version

    with older_version():  # labels in the clear, as that version stored them
        store = Store(mirador_home)
        row = store.add_memory("Old token", type="vault", value="placeholder")
        legacy = Fernet.generate_key()
        (mirador_home / LEGACY_KEY_FILE).write_bytes(legacy)
        store.reseal_vault_value(row["id"], Fernet(legacy).encrypt(SECRET.encode()).decode())
        assert not store.rows("vault", None, ["value_enc"])[0]["value_enc"].startswith(SEALED_PREFIX)
    return row, legacy


def test_a_legacy_vault_key_is_migrated_at_open_and_erased(mirador_home):
    from memory.store.core import Store
    from memory.store.erasure import purge
    from memory.store.keys import SEALED_PREFIX

    row, legacy = _legacy_store(mirador_home)
    store = Store(mirador_home)  # MIRADOR_PASSPHRASE is set: the data key opens without asking
    assert not (mirador_home / LEGACY_KEY_FILE).exists()
    assert store.rows("vault", None, ["value_enc"])[0]["value_enc"].startswith(SEALED_PREFIX)
    assert store.reveal(row["id"]) == SECRET
    purge(store)
    assert files_containing_bytes(mirador_home, legacy) == []
    assert files_containing(mirador_home, SECRET) == []


def test_a_legacy_store_waits_for_unlock_without_a_passphrase(mirador_home, monkeypatch, capsys):
    from desktop.cli.main import main
    from memory.store.core import Store

    row, _ = _legacy_store(mirador_home)
    phrase = os.environ["MIRADOR_PASSPHRASE"]
    monkeypatch.delenv("MIRADOR_PASSPHRASE")
    store = Store(mirador_home)
    assert (mirador_home / LEGACY_KEY_FILE).exists()  # nothing to unwrap the data key with yet
    assert store.reveal(row["id"]) == SECRET  # the old key still opens the old value
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(phrase + "\n"))
    assert main(["unlock", "--passphrase-stdin"]) == 0
    assert "1 vault value(s) resealed" in capsys.readouterr().out
    assert not (mirador_home / LEGACY_KEY_FILE).exists()
    assert DataKeys(mirador_home).key(phrase) and Store(mirador_home).keys.unlock(phrase)


def test_cli_lock_and_unlock_in_real_processes(mirador_home):
    exe = [sys.executable, "-m", "desktop.cli.main"]
    env = {**os.environ, "MIRADOR_NO_SERVICE": "1"}
    add = subprocess.run(exe + ["add", "Deploy key", "--type", "vault", "--value-stdin", "--json"], input=SECRET,
                         capture_output=True, text=True, env=env)
    assert add.returncode == 0, add.stderr
    vid = json.loads(add.stdout)["id"]
    lock = subprocess.run(exe + ["lock"], capture_output=True, text=True, env=env)
    assert lock.returncode == 0 and "locked" in lock.stdout
    shown = subprocess.run(exe + ["show", vid, "--reveal"], capture_output=True, text=True, env=env)
    assert shown.returncode == 5 and "Mirador is locked" in shown.stderr and SECRET not in shown.stdout
    wrong = subprocess.run(exe + ["unlock", "--passphrase-stdin"], input="wrong passphrase", capture_output=True,
                           text=True, env={k: v for k, v in env.items() if k != "MIRADOR_PASSPHRASE"})
    assert wrong.returncode == 5 and "does not open" in wrong.stderr and (mirador_home / "locked").exists()
    ok = subprocess.run(exe + ["unlock"], capture_output=True, text=True, env=env)
    assert ok.returncode == 0 and "unlocked with the passphrase" in ok.stdout
    shown = subprocess.run(exe + ["show", vid, "--reveal"], capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and SECRET in shown.stdout


def test_a_locked_store_refuses_every_mcp_call(store):
    from memory.mcp.auth import make_principal
    from tests.memory.mcp_support import call

    mid = store.add_memory("Deploys happen on Tuesdays", scope="work")["id"]
    who = make_principal("tester", ["work"], "work")

    async def steps(c):
        out = []
        for name, args in [("memory_search", {"query": "deploys"}), ("memory_get", {"id": mid}),
                           ("memory_add", {"text": "a new fact while locked"}), ("status", {})]:
            out.append(await c.call_tool(name, args))
        return out

    store.keys.lock()
    results = call(store, who, steps)
    assert all(r.is_error and "Mirador is locked" in r.content[0].text for r in results)
    assert "Deploys" not in " ".join(r.content[0].text for r in results)
    assert store.count("memory", local=True) == 1  # nothing was written (counting needs no key)
    store.keys.unlock()
    assert [r["text"] for r in store.rows("memory", None, ["text"])] == ["Deploys happen on Tuesdays"]
    after = call(store, who, lambda c: c.call_tool("memory_get", {"id": mid}))
    assert not after.is_error and "Tuesdays" in after.content[0].text


def test_plain_frames_of_an_older_version_are_sealed_in_place_with_progress(store, mirador_home, capsys):
    from io import BytesIO

    from PIL import Image

    from desktop.cli.main import main
    from memory.store.keys import SEALED_MAGIC
    from memory.store.sealing import plain_frames

    rows, images = [], {}
    for i in range(5):
        rel = f"frames/2026-01-0{i + 1}/evd_{i}.webp"
        (mirador_home / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (64 + i, 40), (i * 40, 10, 10)).save(mirador_home / rel, "WEBP", lossless=True)
        images[rel] = (mirador_home / rel).read_bytes()
        rows.append(store.add_evidence(f"screen {i}", source="screen", app="Editor", frame_path=rel))
    old_mtime = (mirador_home / rel).stat().st_mtime
    assert len(list(plain_frames(mirador_home))) == 5

    assert main(["unlock"]) == 0
    out = capsys.readouterr()
    assert "sealed 5 frame(s) in place" in out.out and "5/5" in out.err
    assert list(plain_frames(mirador_home)) == []
    for r in rows:
        rel = r["frame_path"]
        assert (mirador_home / rel).read_bytes().startswith(SEALED_MAGIC)
        assert store.frame_bytes(rel) == images[rel]  # every frame kept, byte for byte
        assert Image.open(BytesIO(store.frame_bytes(rel))).format == "WEBP"
    assert (mirador_home / rel).stat().st_mtime == old_mtime  # retention still sees the frame's age
    assert main(["unlock"]) == 0 and "sealed" not in capsys.readouterr().out  # nothing left to do


def test_processes_that_make_the_key_at_once_agree_on_one(mirador_home):
    """The app and an assistant's server starting on a new folder together: one key, every row readable."""
    probe = ("import sys; from memory.store.core import Store; "
             "s = Store(sys.argv[1]); s.add_memory('made by process ' + sys.argv[2], scope='work')")
    procs = [subprocess.Popen([sys.executable, "-c", probe, str(mirador_home), str(i)], cwd=str(ROOT),
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    from memory.store.core import Store

    store = Store(mirador_home)
    assert sorted(r["text"] for r in store.rows("memory", None, ["text"])) == [
        f"made by process {i}" for i in range(4)]
