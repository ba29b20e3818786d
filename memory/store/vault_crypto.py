"""Knowledge-vault values sealed with the data folder's key (memory/store/keys.py), never a key file beside them.

Older versions sealed vault values with Fernet under a key kept in the OS keyring or in `vault.key` next to
the vault. Those values still open (keys.DataKeys.open_legacy) and `reseal_legacy` moves them under the data
key, then erases vault.key and the old keyring entry: the store does it at open when the data key can be had
without asking, `mirador unlock` otherwise.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from memory.store.keys import LEGACY_KEY_FILE, SEALED_PREFIX, DataKeys, KeyUnavailableError, LockedError

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)

CONTEXT = "vault value"


class VaultCipher:
    """Seals and opens vault values with the data key."""

    def __init__(self, home: Path, key_store: str = "auto", keys: DataKeys | None = None) -> None:
        self.home = home
        self.keys = keys or DataKeys(home, key_store)

    def encrypt(self, value: str) -> str:
        """Seal a secret value (AES-256-GCM under the data key); returns ASCII."""
        return self.keys.seal(value, CONTEXT)

    def decrypt(self, token: str) -> str:
        """Open a value written by encrypt() (or by an older version's Fernet)."""
        return self.keys.open(token, CONTEXT)


def legacy_pending(home: Path) -> bool:
    """True while an older version's vault.key lies in the data folder."""
    return (home / LEGACY_KEY_FILE).exists()


def reseal_legacy(store: Store, interactive: bool = False) -> int:
    """Move vault values sealed by an older version under the data key, then erase the old key.

    interactive=False: only if the data key can be had without asking (keyring, MIRADOR_PASSPHRASE, a key
    already held); otherwise the old values keep opening with the old key until `mirador unlock`.
    Returns how many values were resealed."""
    keys: DataKeys = store.cipher.keys
    if not interactive and keys.method() == "passphrase" and not keys.held:
        import os

        from memory.store.keys import PASSPHRASE_ENV

        if not os.environ.get(PASSPHRASE_ENV):
            log.warning("vault values sealed by an older Mirador wait for `mirador unlock` to be resealed")
            return 0
    try:
        rows = store.table_rows(store.vault, None, ["id", "value_enc"])
        old = [r for r in rows if r["value_enc"] and not r["value_enc"].startswith(SEALED_PREFIX)]
        for r in old:
            store.reseal_vault_value(r["id"], store.cipher.encrypt(keys.open_legacy(r["value_enc"])))
    except (KeyUnavailableError, LockedError) as e:
        log.warning("vault values sealed by an older Mirador are not resealed yet: %s", e)
        return 0
    keys.forget_legacy()
    if old:
        log.info("resealed %d vault value(s) under the data key; %s erased", len(old), LEGACY_KEY_FILE)
    return len(old)
