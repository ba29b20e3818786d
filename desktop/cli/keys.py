"""`mirador lock`, `unlock`: drop the data folder's key from every process, and take it back."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.store.keys import DataKeys


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add the lock commands to the `mirador` parser."""
    cmd("lock", cmd_lock, "drop the data key from every Mirador process of this data dir until `mirador unlock`")
    sp = cmd("unlock", cmd_unlock, "take the data key back (OS keyring, or the passphrase) and lift the lock")
    sp.add_argument("--passphrase-stdin", action="store_true",
                    help="read the passphrase from stdin instead of asking in the terminal")


def _keys() -> DataKeys:
    from memory.config import data_dir, load_config
    from memory.store.keys import DataKeys

    home = data_dir()
    return DataKeys(home, load_config(home).vault.key_store)


def cmd_lock(a: argparse.Namespace) -> int:
    """Write the lock marker; processes drop their key the next time they ask for it."""
    keys = _keys()
    keys.lock()
    print(f"locked: Mirador of {keys.home} reads and writes no sealed data, and assistants get a 'locked' "
          "error, until `mirador unlock`")
    return 0


def cmd_unlock(a: argparse.Namespace) -> int:
    """Check that the key opens, then remove the marker; seal what an older version left in the clear."""
    from memory.store.core import Store
    from memory.store.seal_migration import complete, seal_existing
    from memory.store.vault_crypto import legacy_pending, reseal_legacy

    phrase = sys.stdin.read().rstrip("\n") if a.passphrase_stdin else None
    store = Store(_keys().home)
    keys = store.keys
    method = keys.unlock(phrase)
    resealed = 0
    if legacy_pending(keys.home):  # an older version's vault.key: reseal its values, then erase it
        resealed = reseal_legacy(store, interactive=True)
    print(f"unlocked with the {'OS keyring' if method == 'keyring' else 'passphrase'}"
          + (f"; {resealed} vault value(s) resealed under the data key, vault.key erased" if resealed else ""))
    if not complete(store):  # text an older version stored in the clear, or only its evidence apps
        def rows_done(table: str, done: int, total: int) -> None:
            print(f"\rsealing what an older version stored in the clear: {table} {done:,}/{total:,} rows ".ljust(72),
                  end="", file=sys.stderr, flush=True)

        n = seal_existing(store, progress=rows_done)
        print(file=sys.stderr)
        print(f"sealed {n:,} row(s) stored in the clear, and purged the old versions that held them")
    from memory.store.sealing import seal_frames

    def progress(done: int, total: int) -> None:
        if done == total or done % 200 == 0:
            print(f"\rsealing frames an older version left in the clear: {done}/{total}", end="",
                  file=sys.stderr, flush=True)

    frames = seal_frames(keys.home, keys, progress)
    if frames:
        print(file=sys.stderr)
        print(f"sealed {frames} frame(s) in place")
    return 0
