"""The data key: what seals this data folder's secrets, and what unlocks it. Never a key file beside the data.

One random 256-bit data key per data folder. On disk it exists only wrapped (AES-256-GCM) in
`data-key.json`; the key that unwraps it (the KEK) comes from

- the OS keyring (Secret Service, Keychain, Windows Credential Manager, through `keyring`): a random KEK
  kept there, so the folder alone opens nothing; or
- a passphrase, where no keyring exists: the KEK is Argon2id(passphrase, salt) (`argon2-cffi`), asked once
  per process — `MIRADOR_PASSPHRASE` for a headless service or CI, the terminal prompt in the CLI, a dialog
  in the tray.

Lock: `mirador lock` (and the tray's "Lock Mirador") writes a `locked` marker in the data folder and every
process of that folder drops its key the next time it asks for it (a stat per ask, so a lock reaches the
MCP servers that assistants started as well as the tray); until `mirador unlock`, key users get LockedError.

`cryptography` and `argon2` are imported when a key is first needed, not with the store: most CLI calls and
hooks never touch a secret.

What is sealed with the data key: vault values, frame thumbnails, kept recordings, and every text column of what
was captured or written (memory/store/sealer.py; docs/capture-and-privacy.md, "At rest").
"""

from __future__ import annotations

import base64
import getpass
import hashlib
import json
import logging
import os
import secrets
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory.errors import ConfigError, MiradorError
from memory.store.atomic import create_exclusive, write_atomic

log = logging.getLogger(__name__)

KEY_FILE = "data-key.json"
LOCK_FILE = "locked"
LEGACY_KEY_FILE = "vault.key"  # the Fernet key older versions kept beside the vault: migrated, then erased
KEYRING_SERVICE = "mirador-data-key"
LEGACY_KEYRING_SERVICE = "mirador-vault"
PASSPHRASE_ENV = "MIRADOR_PASSPHRASE"
SEALED_PREFIX = "m1:"
SEALED_MAGIC = b"MIRADOR-SEALED-1\n"  # what a sealed file (a frame) starts with  # a value sealed by DataKeys.seal; anything else in a sealed column is a legacy Fernet token
MIN_PASSPHRASE = 8
# Argon2id cost: RFC 9106's second recommendation (64 MiB, 3 passes), about 0.2-0.4 s once per process here.
ARGON2 = {"time_cost": 3, "memory_cost": 64 * 1024, "parallelism": 2}


class LockedError(MiradorError):
    """The data folder is locked: keys were dropped until the person unlocks it."""

    code = "locked"
    exit_code = 5


class KeyUnavailableError(MiradorError):
    """The key that opens the data folder cannot be had: lost, wrong passphrase, or nothing to ask."""

    code = "key_unavailable"
    exit_code = 5


def keyring_user(home: Path) -> str:
    # One entry per data folder, so a test home never touches the person's real key.
    return "key-" + hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]


def os_keyring() -> Any | None:
    """The OS keyring backend, or None where there is none (keyring's fail/null backends, or no module)."""
    try:
        import keyring
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
    except Exception as e:  # a broken keyring configuration is "no keyring", said in doctor
        log.info("OS keyring unavailable: %s", e)
        return None
    mod = type(backend).__module__
    if "fail" in mod or "null" in mod or "chainer" in mod and not getattr(backend, "backends", None):
        return None
    return backend


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def _unb64(s: str) -> bytes:
    return base64.b64decode(s.encode("ascii"))


class DataKeys:
    """Unwraps the data key on first use, seals and opens values with it, and honours the lock."""

    # Set by the CLI for commands a person typed: only then is a passphrase asked in the terminal.
    terminal_prompt = False
    # Where a process that cannot unwrap the key itself (no keyring, no passphrase in its environment) may
    # borrow it: the running, unlocked Mirador of the same data folder (desktop/cli/via_service.py registers
    # it). Each is called with the data folder and returns the key or None.
    lenders: list[Callable[[Path], bytes | None]] = []

    def __init__(self, home: Path, key_store: str = "auto") -> None:
        self.home = home
        # "file" was the key file beside the data; it now means what it always meant to protect against:
        # no keyring, so a passphrase.
        self.key_store = "passphrase" if key_store == "file" else key_store
        self._key: bytes | None = None
        self._lock = threading.Lock()
        # Set by the tray (a dialog) or the CLI (a terminal prompt): asked for the passphrase when needed.
        self.prompt: Callable[[bool], str | None] | None = None
        # Set by the store: whether the folder holds data sealed with a key. Then a missing data-key.json is a
        # lost key, never a reason to make a new one (rows sealed under two keys, half of them unreadable).
        self.sealed_data: Callable[[], bool] | None = None

    # ---- state ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self.home / KEY_FILE

    @property
    def locked(self) -> bool:
        """True while `mirador lock` holds: keys are dropped and key users are refused."""
        return (self.home / LOCK_FILE).exists()

    @property
    def held(self) -> bool:
        """True if this process holds the unwrapped key now."""
        return self._key is not None and not self.locked

    def record(self) -> dict[str, Any] | None:
        """What data-key.json says (how the key is wrapped), or None before the first key was made."""
        try:
            rec: dict[str, Any] = json.loads(self.path.read_text())
            return rec
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise KeyUnavailableError(
                f"{self.path} is unreadable ({e}): restore it from your backup; without it sealed data "
                "cannot be opened") from e

    def method(self) -> str:
        """How this folder's key is (or would be) unlocked: 'keyring' or 'passphrase'."""
        rec = self.record()
        if rec:
            return str(rec["kek"])
        if self.key_store == "keyring" or self.key_store == "auto" and os_keyring() is not None:
            return "keyring"
        return "passphrase"

    def lock(self) -> None:
        """Drop the key here and tell every process of this folder to drop it (the `locked` marker)."""
        write_atomic(self.home / LOCK_FILE, b"locked by mirador lock\n", mode=0o600, fsync=True)
        with self._lock:
            self._key = None

    def unlock(self, passphrase: str | None = None) -> str:
        """Check the key can be had (keyring or passphrase), then lift the lock; returns the method used."""
        with self._lock:
            self._key = None
            self._key = self._obtain(passphrase, allow_locked=True)
        try:
            (self.home / LOCK_FILE).unlink()
        except FileNotFoundError:
            pass
        return self.method()

    # ---- the key -------------------------------------------------------------------------

    def key(self, passphrase: str | None = None) -> bytes:
        """The unwrapped data key; made (and wrapped) the first time. Raises LockedError while locked."""
        if self.locked:
            self._key = None
            raise LockedError(
                "Mirador is locked: unlock it with `mirador unlock` (or Unlock Mirador… in the tray) "
                "to read or write sealed data")
        with self._lock:
            if self._key is None:
                self._key = self._obtain(passphrase, allow_locked=False)
            return self._key

    def _obtain(self, passphrase: str | None, allow_locked: bool) -> bytes:
        rec = self.record()
        if rec is None:
            if self.sealed_data is not None and self.sealed_data():
                raise KeyUnavailableError(
                    f"{self.path} is missing, and this data folder holds text sealed with the key it wrapped: "
                    "restore that file from your backup (with the OS keyring entry or passphrase that opened "
                    "it) — a new key would not open what is there, so Mirador makes none")
            return self._create(passphrase)
        if passphrase is None and not os.environ.get(PASSPHRASE_ENV) and (
                rec["kek"] == "passphrase" or os_keyring() is None):
            for lend in DataKeys.lenders:
                try:
                    lent = lend(self.home)
                except Exception as e:  # a lender that fails is one that has nothing to lend
                    log.info("could not borrow the data key: %s", e)
                    lent = None
                if lent:
                    return lent
        kek = self._kek(rec, passphrase, creating=False)
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        blob = _unb64(rec["wrapped"])
        try:
            return AESGCM(kek).decrypt(blob[:12], blob[12:], b"mirador data key v1")
        except InvalidTag:
            if rec["kek"] == "passphrase":
                raise KeyUnavailableError(
                    "that passphrase does not open this data folder: try again (it is the one set when "
                    f"{self.path.name} was made), or restore the folder from a backup") from None
            raise KeyUnavailableError(
                f"the key in the OS keyring does not open {self.path}: the keyring entry "
                f"{KEYRING_SERVICE}/{keyring_user(self.home)} was replaced; restore it from a keyring backup") from None

    def _create(self, passphrase: str | None) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        dk = AESGCM.generate_key(bit_length=256)
        rec: dict[str, Any] = {"version": 1, "kek": self.method(), "cipher": "AES-256-GCM"}
        if rec["kek"] == "passphrase":
            rec["kdf"] = {"name": "argon2id", "salt": _b64(secrets.token_bytes(16)), **ARGON2}
        # A keyring KEK is stored only once this process's key file is the folder's (below): two processes making
        # the key at once must not leave the keyring holding the loser's KEK.
        kek, new_entry = self._keyring_kek_for_new() if rec["kek"] == "keyring" else (
            self._kek(rec, passphrase, creating=True), None)
        nonce = secrets.token_bytes(12)
        rec["wrapped"] = _b64(nonce + AESGCM(kek).encrypt(nonce, dk, b"mirador data key v1"))
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)  # owner-only even before a store opened it
        try:
            made = create_exclusive(self.path, json.dumps(rec, indent=1) + "\n", mode=0o600)
        except OSError as e:  # a full or read-only disk says so in one line, as every other write does
            from memory.store.io_faults import storage_error

            raise (storage_error(e, self.home) or e) from e
        if not made:
            # Another process of this folder (the app and an assistant's server starting together) made its key
            # first: that one is the folder's key, and rows sealed under two keys would be half unreadable.
            log.info("another process made this data folder's key first: using it")
            return self._obtain_made_elsewhere(passphrase)
        if new_entry is not None:
            try:
                new_entry()
            except Exception:
                self.path.unlink(missing_ok=True)  # a key file no keyring entry opens would open nothing
                raise
        log.info("made this data folder's key, wrapped by the %s", rec["kek"])
        return dk

    def _obtain_made_elsewhere(self, passphrase: str | None) -> bytes:
        """The key another process has just made: its keyring entry may follow its key file by a moment."""
        from memory.store.retrying import retry

        def not_yet(e: Exception) -> bool:
            rec = self.record()
            return isinstance(e, KeyUnavailableError) and rec is not None and rec.get("kek") == "keyring"

        key: bytes = retry(lambda: self._obtain(passphrase, allow_locked=False), 51, retry_on=not_yet,
                           max_delay=0.05)  # up to 2.5 s
        return key

    def _keyring_entry(self, unavailable: str) -> tuple[Any, str, str | None]:
        """The OS keyring, this folder's user name in it and the KEK stored there (None: none yet); `unavailable`
        is the error when there is no keyring."""
        backend = os_keyring()
        if backend is None:
            raise KeyUnavailableError(unavailable)
        user = keyring_user(self.home)
        return backend, user, backend.get_password(KEYRING_SERVICE, user)

    def _keyring_kek_for_new(self) -> tuple[bytes, Callable[[], None] | None]:
        """A KEK for a new key file: the folder's keyring entry if one is left (a folder made again at the same
        path), else a fresh one and what stores it."""
        backend, user, value = self._keyring_entry(
            "the OS keyring is not available now: start your desktop's keyring (GNOME Keyring, KWallet, "
            "Keychain) and try again, or set vault.key_store = \"passphrase\"")
        if value is not None:
            return _unb64(value), None
        fresh = _b64(secrets.token_bytes(32))
        return _unb64(fresh), lambda: backend.set_password(KEYRING_SERVICE, user, fresh)

    def _kek(self, rec: dict[str, Any], passphrase: str | None, creating: bool) -> bytes:
        if rec["kek"] == "keyring":  # only an existing key file's: a new one takes _keyring_kek_for_new
            return self._keyring_kek()
        if rec["kek"] != "passphrase":
            raise KeyUnavailableError(f"{self.path} names an unknown key method {rec['kek']!r}: "
                                      "it was written by a newer Mirador; upgrade")
        phrase = passphrase or os.environ.get(PASSPHRASE_ENV) or self._ask(creating)
        if creating and len(phrase) < MIN_PASSPHRASE:
            raise ConfigError(f"a passphrase needs at least {MIN_PASSPHRASE} characters: choose a longer one")
        from argon2.low_level import Type, hash_secret_raw

        kdf = rec["kdf"]
        return hash_secret_raw(phrase.encode("utf-8"), _unb64(kdf["salt"]), time_cost=kdf["time_cost"],
                               memory_cost=kdf["memory_cost"], parallelism=kdf["parallelism"],
                               hash_len=32, type=Type.ID)

    def _ask(self, creating: bool) -> str:
        if self.prompt is not None:
            phrase = self.prompt(creating)
            if phrase:
                return phrase
        elif DataKeys.terminal_prompt and sys.stdin is not None and sys.stdin.isatty():
            what = "Choose a passphrase for Mirador's data (no OS keyring here)" if creating else \
                "Mirador passphrase"
            phrase = getpass.getpass(what + ": ")
            if creating and phrase and getpass.getpass("Again: ") != phrase:
                raise ConfigError("the two passphrases differ: run the command again")
            if phrase:
                return phrase
        raise KeyUnavailableError(
            "no OS keyring here and no passphrase given: start Mirador (the tray app, or `mirador service`) and "
            "unlock it — its other processes borrow its key — or run the command in a terminal to be asked, or "
            f"set {PASSPHRASE_ENV} for a headless service")

    def _keyring_kek(self) -> bytes:
        """The KEK of an existing key file kept in the OS keyring (a new one's: _keyring_kek_for_new)."""
        _, user, value = self._keyring_entry(
            "this data folder's key is kept in the OS keyring, which is not available now: start your "
            "desktop's keyring (GNOME Keyring, KWallet, Keychain) and try again")
        if value is None:
            raise KeyUnavailableError(
                f"the key that opens {self.home} is not in the OS keyring (entry {KEYRING_SERVICE}/{user}): "
                "it was deleted, or this is another user account; restore it from a keyring backup — "
                "without it the sealed data cannot be read")
        return _unb64(value)

    # ---- sealing values ------------------------------------------------------------------

    def seal(self, value: str, context: str) -> str:
        """AES-256-GCM under the data key; `context` (what the value is) is bound in as associated data."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        ct = AESGCM(self.key()).encrypt(nonce, value.encode("utf-8"), context.encode())
        return SEALED_PREFIX + _b64(nonce + ct)

    def open(self, token: str, context: str) -> str:
        """The value seal() sealed; a clear error if the key is not the one it was sealed with."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not token.startswith(SEALED_PREFIX):
            return self.open_legacy(token)
        if self._key is None and self.record() is None:
            raise KeyUnavailableError(
                f"{self.path} is missing, and this data folder holds values sealed with the key it wrapped: "
                "restore that file from your backup (a new key would not open them)")
        blob = _unb64(token[len(SEALED_PREFIX):])
        try:
            return AESGCM(self.key()).decrypt(blob[:12], blob[12:], context.encode()).decode("utf-8")
        except InvalidTag:
            raise KeyUnavailableError(
                f"a sealed value does not open with this data folder's key ({context}): it was sealed under "
                f"another key — {self.path} was replaced; restore the one it was written with") from None

    def seal_bytes(self, data: bytes, context: str) -> bytes:
        """Bytes (a frame's WebP) sealed like seal(): SEALED_MAGIC, the nonce, then the AES-256-GCM output."""
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = secrets.token_bytes(12)
        return SEALED_MAGIC + nonce + AESGCM(self.key()).encrypt(nonce, data, context.encode())

    def open_bytes(self, blob: bytes, context: str) -> bytes:
        """What seal_bytes sealed; bytes without the magic (a frame of an older version) come back as they are."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not blob.startswith(SEALED_MAGIC):
            return blob
        body = blob[len(SEALED_MAGIC):]
        try:
            return AESGCM(self.key()).decrypt(body[:12], body[12:], context.encode())
        except InvalidTag:
            raise KeyUnavailableError(
                f"a sealed file does not open with this data folder's key ({context}): it was sealed under "
                "another key, or renamed; restore the data-key.json it was written with") from None

    # ---- values sealed by older versions (Fernet, key in vault.key or the old keyring entry) -----

    def legacy_key(self) -> bytes | None:
        path = self.home / LEGACY_KEY_FILE
        if path.exists():
            return path.read_bytes().strip()
        backend = os_keyring()
        if backend is not None:
            value = backend.get_password(LEGACY_KEYRING_SERVICE, keyring_user(self.home))
            return value.encode() if value else None
        return None

    def open_legacy(self, token: str) -> str:
        from cryptography.fernet import Fernet, InvalidToken

        key = self.legacy_key()
        if key is None:
            raise KeyUnavailableError(
                f"this vault value was sealed by an older Mirador whose key ({self.home / LEGACY_KEY_FILE} or "
                f"the keyring entry {LEGACY_KEYRING_SERVICE}) is gone: restore it and run `mirador unlock`")
        try:
            return Fernet(key).decrypt(token.encode("ascii")).decode("utf-8")
        except InvalidToken:
            raise KeyUnavailableError(
                f"cannot open this vault value with the older key in {self.home / LEGACY_KEY_FILE}: it is not "
                "the key it was written with; restore that key") from None

    def forget_legacy(self) -> None:
        """After every legacy value is resealed: erase vault.key and the old keyring entry."""
        path = self.home / LEGACY_KEY_FILE
        if path.exists():
            size = path.stat().st_size
            with open(path, "r+b") as f:  # overwrite before unlinking, so the bytes do not linger in the file
                f.write(secrets.token_bytes(max(size, 64)))
                f.flush()
                os.fsync(f.fileno())
            path.unlink()
        backend = os_keyring()
        if backend is not None:
            try:
                if backend.get_password(LEGACY_KEYRING_SERVICE, keyring_user(self.home)) is not None:
                    backend.delete_password(LEGACY_KEYRING_SERVICE, keyring_user(self.home))
            except Exception as e:  # the old entry is harmless once nothing is sealed under it
                log.info("could not delete the old vault keyring entry: %s", e)
