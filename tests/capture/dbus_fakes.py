"""Stand-ins for desktop services (KWin, GNOME Shell's Window Calls, the Screenshot portal) on a real,
private D-Bus session bus: the production D-Bus code talks to them exactly as it would to the real ones.
"""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable

from jeepney import HeaderFields, MessageType, new_error, new_method_return
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

# No service directories: nothing installed on the machine (a real xdg-desktop-portal, say) may be
# started by D-Bus activation and take a name a stand-in is meant to own.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir=/tmp</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class PrivateBus:
    """A dbus-daemon of its own, starting no installed services; `address` goes into DBUS_SESSION_BUS_ADDRESS."""

    def __init__(self) -> None:
        fd, self.config = tempfile.mkstemp(prefix="mirador-bus-", suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write(BUS_CONFIG)
        self.proc = subprocess.Popen(["dbus-daemon", f"--config-file={self.config}", "--nofork", "--print-address=1"],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.proc.stdout.readline().strip()
        if not self.address:
            raise AssertionError(f"dbus-daemon printed no address (exit {self.proc.poll()})")

    def stop(self) -> None:
        """Stop the bus (every connection on it is dropped)."""
        self.proc.terminate()
        self.proc.wait(10)
        os.unlink(self.config)


def missing_dbus() -> str | None:
    """Why a private bus cannot be started here, or None."""
    return None if shutil.which("dbus-daemon") else "dbus-daemon is not installed (sudo apt-get install dbus-daemon)"


Handler = Callable[..., tuple[str, tuple] | None]


class FakeService:
    """Owns `name` on the bus and answers method calls from `handlers[(path, member)]`.

    A handler gets the call's arguments and returns (signature, values) for the reply, None for an
    empty reply, or raises LookupError for an error reply. `do(fn)` runs fn(conn) on the service's
    own thread (a jeepney connection is not shared between threads), e.g. to emit a signal or call
    back the client the way KWin's callDBus does.
    """

    def __init__(self, address: str, name: str, handlers: dict[tuple[str, str], Handler]) -> None:
        self.conn = open_dbus_connection(address)
        reply = self.conn.send_and_get_reply(message_bus.RequestName(name), timeout=5)
        assert reply.body[0] == 1, f"could not own {name}: {reply.body}"
        self.handlers = handlers
        self.calls: list[tuple[str, str, tuple]] = []
        self._todo: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name=f"fake {name}")
        self._thread.start()

    def do(self, fn: Callable, wait: bool = True) -> None:
        """Run fn(conn) on the service thread."""
        done = threading.Event()
        self._todo.put((fn, done))
        if wait:
            assert done.wait(10), "the fake service did not run the request"

    def _serve(self) -> None:
        while not self._stop.is_set():
            while not self._todo.empty():
                fn, done = self._todo.get()
                fn(self.conn)
                done.set()
            try:
                msg = self.conn.receive(timeout=0.05)
            except TimeoutError:
                continue
            except OSError:
                return
            if msg.header.message_type != MessageType.method_call:
                continue
            path, member = msg.header.fields.get(HeaderFields.path), msg.header.fields.get(HeaderFields.member)
            self.calls.append((path, member, msg.body))
            handler = self.handlers.get((path, member))
            if handler is None:
                self.conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod", "s",
                                         (f"no method {member} at {path}",)))
                continue
            try:
                out = handler(*msg.body)
            except LookupError as e:
                self.conn.send(new_error(msg, "org.freedesktop.DBus.Error.Failed", "s", (str(e),)))
                continue
            self.conn.send(new_method_return(msg, *(out or ())))

    def stop(self) -> None:
        """Stop answering and leave the bus."""
        self._stop.set()
        self._thread.join(5)
        self.conn.close()
