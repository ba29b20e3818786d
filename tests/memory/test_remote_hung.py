"""Issue 41 audit: a read of a local scope never waits on a shared store that does not answer. The store here
accepts connections and never answers a byte (a frozen weed), and the binding's scope is not in the read."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.memory import seaweed as sw_fixtures
from tests.memory.test_remote import SHARED, bind

memory_keyring = sw_fixtures.memory_keyring  # fixture


class Silent:
    """A TCP endpoint that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.held: list[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            self.held.append(c)

    def close(self) -> None:
        self.listener.close()
        for c in self.held:
            c.close()


@pytest.fixture
def silent():
    s = Silent()
    yield s
    s.close()


def test_a_local_scope_list_never_asks_a_hung_store(tmp_path, memory_keyring, silent):
    from memory.store.core import Store

    home = tmp_path / "h"
    home.mkdir()
    bind(home, silent, "hung")  # timeout_seconds 5: asking it would cost at least that
    store = Store(home)
    mine = store.add_memory("My zebrafinch passport is in the blue drawer", scope="personal")["id"]
    started = time.monotonic()
    assert [m["id"] for m in store.list(scopes=["personal"], statuses=[])] == [mine]
    assert [m["id"] for m in store.list(kind="memory", scopes=["personal"], limit=1)] == [mine]
    assert store.count("memory", None, scopes=["personal"]) == 1
    assert set(store.get_many("memory", [mine], ["id"], scopes=["personal"])) == {mine}
    took = time.monotonic() - started
    assert took < 3, f"a list of a local scope took {took:.1f} s: it asked the shared store of {SHARED}"
    assert silent.accepted == 0  # never even connected


def test_a_shared_add_waits_about_the_timeout_on_a_hung_store(tmp_path, memory_keyring, silent):
    """LanceDB's connect tries its listing six times, each waiting the whole timeout (32 s at 5 s); the audit's
    shared add waited 64 s at a 10 s timeout. The connect is bounded to the timeout, and a store that just timed
    out is not asked again by the same command: the add waits about one timeout and the write stays queued."""
    from memory.store.core import Store

    home = tmp_path / "h"
    home.mkdir()
    bind(home, silent, "hung")  # timeout_seconds 5
    store = Store(home)
    started = time.monotonic()
    m = store.add_memory("The acme deploy freeze starts Thursday at noon", scope=SHARED)
    took = time.monotonic() - started
    assert took < 15, f"a shared add took {took:.1f} s against a 5 s timeout"
    assert store.remotes.pending() == {"team": 1}  # queued, not lost
    assert store.remotes.shared["team"].problem == "timeout"
    started = time.monotonic()
    assert [r["id"] for r in store.list(scopes=[SHARED])] == [m["id"]]  # from the outbox, the store not waited on
    assert time.monotonic() - started < 3
