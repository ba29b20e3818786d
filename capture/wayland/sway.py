"""The focused window on sway, from its IPC socket (the i3 protocol `swaymsg -t get_tree` speaks).

Spoken directly over SWAYSOCK rather than by running `swaymsg`: one request every 2 s on a kept
connection costs well under a millisecond, a process spawn several. The same socket lists the
outputs, which is how grim learns the monitors.
"""

from __future__ import annotations

import json
import os
import socket
import struct

from capture.window_info import WindowInfo, WindowProbe, proc_name

MAGIC = b"i3-ipc"
RUN_COMMAND, GET_OUTPUTS, GET_TREE = 0, 3, 4
_HEADER = struct.Struct("<II")  # payload length, message type (native byte order; sway runs here)


class SwayIpc:
    """One connection to sway's IPC socket, reopened once when sway dropped it."""

    def __init__(self, path: str | None = None, timeout: float = 2.0) -> None:
        self.path = path or os.environ.get("SWAYSOCK", "")
        if not self.path:
            raise OSError("SWAYSOCK is not set: start Mirador from inside the sway session")
        self.timeout = timeout
        self._sock: socket.socket | None = None

    def request(self, kind: int, payload: bytes = b""):
        """Send one message, return its decoded JSON reply."""
        for attempt in (1, 2):
            try:
                s = self._connect()
                s.sendall(MAGIC + _HEADER.pack(len(payload), kind) + payload)
                head = self._read(s, len(MAGIC) + _HEADER.size)
                if head[: len(MAGIC)] != MAGIC:
                    raise OSError(f"{self.path} did not answer in the sway IPC protocol")
                size, _ = _HEADER.unpack(head[len(MAGIC):])
                return json.loads(self._read(s, size))
            except OSError:
                self.close()
                if attempt == 2:
                    raise
        return None  # unreachable; keeps type checkers content

    def _connect(self) -> socket.socket:
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout)
            try:
                s.connect(self.path)
            except OSError as e:
                s.close()
                raise OSError(f"cannot reach sway at {self.path}: {e}") from e
            self._sock = s
        return self._sock

    @staticmethod
    def _read(s: socket.socket, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise OSError("sway closed the IPC connection")
            buf += chunk
        return bytes(buf)

    def outputs(self) -> list[dict]:
        """Active outputs as {left, top, width, height} in layout coordinates (what grim -g takes)."""
        return [_rect(o["rect"]) for o in self.request(GET_OUTPUTS) if o.get("active")]

    def close(self) -> None:
        """Drop the connection."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _rect(r: dict) -> dict:
    return {"left": r["x"], "top": r["y"], "width": r["width"], "height": r["height"]}


def focused_window(tree: dict) -> dict | None:
    """The focused node of a get_tree reply, narrowed to a window.

    A focused container (after `focus parent`) stands for the window focused inside it: grabbing the
    whole container would take in its other windows, which were never checked against the exclusions.
    A focused workspace or output (nothing open there) is no window: None.
    """
    stack = [tree]
    node = None
    while stack:
        n = stack.pop()
        if n.get("focused"):
            node = n
            break
        stack.extend(n.get("nodes", []) + n.get("floating_nodes", []))
    while node is not None and node.get("type") in ("con", "floating_con") and not _is_window(node):
        children = {c["id"]: c for c in node.get("nodes", []) + node.get("floating_nodes", [])}
        node = next((children[i] for i in node.get("focus", []) if i in children), None)
    return node if node is not None and _is_window(node) else None


def visible_windows(tree: dict) -> list[dict]:
    """The window nodes of a get_tree reply that sway draws now (`visible`), on every output, floating too.

    A window sway does not say is hidden counts as showing: only an explicit `"visible": false` (another
    workspace, a hidden tab, the scratchpad) leaves it out.
    """
    out, stack = [], [tree]
    while stack:
        n = stack.pop()
        if _is_window(n) and n.get("visible") is not False:
            out.append(n)
        stack.extend(n.get("nodes", []) + n.get("floating_nodes", []))
    return out


def _is_window(n: dict) -> bool:
    return n.get("type") in ("con", "floating_con") and (n.get("app_id") is not None or "window_properties" in n
                                                          or bool(n.get("pid")))


def window_info(node: dict) -> WindowInfo:
    """WindowInfo of a window node: app_id (native) or the X11 class (XWayland), title, pid, rectangle."""
    props = node.get("window_properties") or {}
    app = node.get("app_id") or props.get("class") or ""
    return WindowInfo(app=app, title=node.get("name") or "", wm_class=props.get("instance") or app,
                      process=proc_name(node["pid"]) if node.get("pid") else "", id=int(node.get("id") or 0),
                      **_rect(node["rect"]))


class SwayProbe(WindowProbe):
    """The focused window through sway's IPC; fails (counted, fail closed) when sway does not answer."""

    name = "sway (IPC)"

    def __init__(self, ipc: SwayIpc | None = None) -> None:
        self.ipc = ipc or SwayIpc()
        self._tree: dict | None = None  # the tree active() last read, which visible() lists from

    def _active(self) -> WindowInfo | None:
        self._tree = None
        self._tree = tree = self.ipc.request(GET_TREE)
        node = focused_window(tree)
        return window_info(node) if node else None

    def _visible(self) -> list[WindowInfo]:
        """The windows showing when active() last asked (the same get_tree: one request a cycle, one moment)."""
        tree = self._tree if self._tree is not None else self.ipc.request(GET_TREE)
        return [window_info(n) for n in visible_windows(tree)]

    def outputs(self) -> list[dict]:
        """The outputs, for grim's monitor list."""
        return self.ipc.outputs()

    def close(self) -> None:
        """Close the IPC connection."""
        self.ipc.close()
