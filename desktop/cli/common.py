"""What several command modules share: opening the store and reading `-` as stdin."""

from __future__ import annotations

import sys


def open_store():
    """The store in the data dir (MIRADOR_HOME or the platform's); imported late, it loads LanceDB."""
    from memory.store.core import Store

    return Store()


def read_text(text: str) -> str:
    """The argument itself, or stdin (without its final newline) when the argument is `-`."""
    return sys.stdin.read().rstrip("\n") if text == "-" else text
