"""Every test gets its own data directory; nothing touches the person's real store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The data key (memory/store/keys.py) on the path a machine without an OS keyring takes, this one's and CI's:
# wrapped by a passphrase. Never the developer's real keyring; tests of the keyring path set their own backend.
os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"
os.environ.setdefault("MIRADOR_PASSPHRASE", "the suite's passphrase")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test that ran against a SeaweedFS (tests/memory/seaweed.py) shows the tail of its log: a store
    that stopped answering says why there, and the temp dir holding it is gone by the time anyone looks."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        from tests.memory.seaweed import SeaweedFS

        for sw in SeaweedFS.running:
            report.sections.append((f"SeaweedFS log ({sw.endpoint})", sw.log_tail()))


@pytest.fixture(autouse=True)
def mirador_home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("MIRADOR_HOME", str(home))
    return home


@pytest.fixture
def store(mirador_home):
    from memory.store.core import Store

    return Store(mirador_home)


class StopAfter:
    """A stop event that is set once `n` checks have looked at it: Quit pressed while a job runs."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def is_set(self) -> bool:
        self.seen += 1
        return self.seen > self.n


def memory_texts(store, where: str | None = None) -> list[str]:
    """The text of every memory row (sealed at rest: read through the store, which opens it)."""
    return [r["text"] for r in store.rows("memory", where, ["text"])]


def files_containing(root: Path, needle: str) -> list[Path]:
    """Every file under root whose bytes contain needle (UTF-8), or the keyed search terms a sealed store
    indexes for its words (memory/store/sealer.py): the text itself never reaches the disk, but the row that
    holds it carries those terms wherever its data is, old versions included, so a forgotten text's terms
    must be gone as its words would be."""
    forms = [needle.encode("utf-8")] + sealed_terms(root, needle)
    return [p for p in root.rglob("*") if p.is_file() and any(f in p.read_bytes() for f in forms)]


def sealed_terms(root: Path, text: str) -> list[bytes]:
    """The keyed terms of text's words as the data folder at root indexes them ([] before it has a key)."""
    from memory.store.keys import KEY_FILE, DataKeys, MiradorError
    from memory.store.sealer import Sealer

    home = root if (root / KEY_FILE).exists() else next((p.parent for p in root.rglob(KEY_FILE)), None)
    if home is None:
        return []
    try:
        terms = Sealer(DataKeys(home)).query_terms(text)
    except MiradorError:  # locked, or no way to the key here: the plain bytes are all a scan can look for
        return []
    return [terms.encode("ascii")] if terms else []
