"""A connection the network drops mid-request does not hold a shared write back: the send is tried again on a
fresh connection and lands at once, exactly once. A store that keeps dropping every connection leaves the write
queued and says the store is offline. Between Mirador and a real SeaweedFS runs a real TCP relay that closes
the connections it is told to drop."""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator

import pytest

from memory.store.remote import fresh
from tests.memory import seaweed as sw_fixtures
from tests.memory.seaweed import SeaweedFS
from tests.memory.test_remote import SHARED, open_home

seaweed, memory_keyring = sw_fixtures.seaweed, sw_fixtures.memory_keyring  # fixtures


class Relay:
    """127.0.0.1:port → the S3 gateway. `drop(n)` closes every open connection and the next n new ones after
    their first bytes arrive (the peer sees "connection closed before message completed"); `drop(-1)` drops
    all until told otherwise."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.to_drop = 0
        self.dropped = 0
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def drop(self, n: int) -> None:
        with self.lock:
            self.to_drop = n
            for s in self.open:
                s.close()
            self.open.clear()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                dropping = self.to_drop != 0
                if self.to_drop > 0:
                    self.to_drop -= 1
            if dropping:
                threading.Thread(target=self._drop, args=(client,), daemon=True).start()
                continue
            upstream = socket.create_connection(("127.0.0.1", self.target))
            with self.lock:
                self.open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _drop(self, client: socket.socket) -> None:
        client.settimeout(5)
        try:
            client.recv(1024)  # the request has started: closing now fails it mid-request
        except OSError:
            pass
        self.dropped += 1
        client.close()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.listener.close()
        self.drop(0)


class Relayed:
    """The SeaweedFS as the home sees it: its endpoint is the relay's."""

    def __init__(self, sw: SeaweedFS, relay: Relay) -> None:
        self.endpoint = f"http://127.0.0.1:{relay.port}"


@pytest.fixture
def relay(seaweed) -> Iterator[Relay]:
    r = Relay(seaweed.s3)
    yield r
    r.close()


def test_a_dropped_connection_is_sent_again_and_lands_once(tmp_path, seaweed, relay, memory_keyring):
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    a = open_home(tmp_path, "a", Relayed(seaweed, relay), prefix)  # type: ignore[arg-type]
    a.add_memory("The acme standup is at nine thirty", scope=SHARED)
    assert a.remotes.pending() == {"team": 0}

    relay.drop(20)  # more than LanceDB and the object store retry by themselves (about 11 per request)
    made = a.add_memory("The acme release train leaves every second Tuesday", scope=SHARED)
    assert relay.dropped == 20  # the send did meet dropped connections
    assert a.remotes.pending() == {"team": 0}  # and was sent again at once
    assert a.remotes.health()[0]["online"]
    rows = fresh(a.remotes.shared["team"].memories()).to_arrow().column("id").to_pylist()
    assert sorted(rows) == sorted(set(rows)) and made["id"] in rows and len(rows) == 2
    assert seaweed.holding("release train leaves", prefix)


def test_a_store_that_drops_every_connection_leaves_the_write_queued(tmp_path, seaweed, relay, memory_keyring):
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    a = open_home(tmp_path, "a", Relayed(seaweed, relay), prefix)  # type: ignore[arg-type]
    a.add_memory("The acme standup is at nine thirty", scope=SHARED)

    relay.drop(-1)
    a.add_memory("The acme vendor list lives in the procurement wiki", scope=SHARED)
    assert a.remotes.pending() == {"team": 1}
    health = a.remotes.health()[0]
    assert not health["online"] and health["problem"] in ("offline", "refused")  # dropped, then not let in
    assert not seaweed.holding("procurement wiki", prefix)

    relay.drop(0)
    assert a.remotes.flush()["errors"] == {}
    assert a.remotes.pending() == {"team": 0}
    assert seaweed.holding("procurement wiki", prefix)
