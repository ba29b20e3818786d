"""Knowledge-vault encryption: Fernet, key in the OS keyring, a 0600 key file as the fallback.

`cryptography` is imported when a value is encrypted or decrypted, not with the store: every CLI call and
hook opens the store, and few of them touch the vault.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from memory.errors import MiradorError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet

log = logging.getLogger(__name__)

KEYRING_SERVICE = "mirador-vault"
KEY_FILE = "vault.key"


def _keyring_user(home: Path) -> str:
    # One key per data directory, so a test home never touches the person's real key.
    return "key-" + hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:16]


def _from_keyring(home: Path, create: bool) -> bytes | None:
    try:
        import keyring
        from keyring.errors import KeyringError, NoKeyringError
    except ImportError:
        return None
    from cryptography.fernet import Fernet

    try:
        backend = keyring.get_keyring()
        if "fail" in type(backend).__module__ or "null" in type(backend).__module__:
            return None
        key = keyring.get_password(KEYRING_SERVICE, _keyring_user(home))
        if key is None and create:
            key = Fernet.generate_key().decode()
            keyring.set_password(KEYRING_SERVICE, _keyring_user(home), key)
        return key.encode() if key else None
    except (NoKeyringError, KeyringError, RuntimeError) as e:
        log.info("OS keyring unavailable (%s); using the key file", e)
        return None


def _from_file(home: Path) -> bytes:
    path = home / KEY_FILE
    if path.exists():
        return path.read_bytes().strip()
    from cryptography.fernet import Fernet

    home.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


class VaultCipher:
    """Encrypts and decrypts vault values; the key is fetched once, on first use."""

    def __init__(self, home: Path, key_store: str = "auto") -> None:
        self.home = home
        self.key_store = key_store
        self._fernet: Fernet | None = None

    def _get(self) -> Fernet:
        if self._fernet is None:
            from cryptography.fernet import Fernet

            key = None
            if (self.home / KEY_FILE).exists() and self.key_store != "keyring":
                key = _from_file(self.home)
            elif self.key_store in ("auto", "keyring"):
                key = _from_keyring(self.home, create=True)
                if key is None and self.key_store == "keyring":
                    raise MiradorError(
                        "vault.key_store is 'keyring' but no OS keyring is available — "
                        "start your desktop's secret service or set vault.key_store = 'file'"
                    )
            if key is None:
                key = _from_file(self.home)
            self._fernet = Fernet(key)
        return self._fernet

    def encrypt(self, value: str) -> str:
        """Encrypt a secret value; returns a Fernet token (ASCII)."""
        return self._get().encrypt(value.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        """Decrypt a token written by encrypt()."""
        from cryptography.fernet import InvalidToken

        try:
            return self._get().decrypt(token.encode("ascii")).decode("utf-8")
        except InvalidToken as e:
            raise MiradorError(
                "cannot decrypt this vault value with the current key — the key in the keyring or "
                f"{self.home / KEY_FILE} is not the one it was written with; restore that key"
            ) from e
