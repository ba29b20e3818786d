"""The focused window on Hyprland, from its request socket (what `hyprctl activewindow -j` asks).

Hyprland answers one request per connection and closes it; the socket lives in
$XDG_RUNTIME_DIR/hypr/<instance>/ (Hyprland 0.40 and later) or /tmp/hypr/<instance>/ (before).
Not run against a real Hyprland here (none runs in this CI); tests/capture/test_wayland_probes.py
serves the same JSON from a real socket.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from capture.window_info import WindowInfo, WindowProbe, proc_name


def socket_path(env=None) -> str:
    """Where this Hyprland instance listens; OSError (with what to do) when it cannot be found."""
    env = os.environ if env is None else env
    sig = env.get("HYPRLAND_INSTANCE_SIGNATURE", "")
    if not sig:
        raise OSError("HYPRLAND_INSTANCE_SIGNATURE is not set: start Mirador from inside the Hyprland session")
    candidates = [Path(env.get("XDG_RUNTIME_DIR", "/run/user/%d" % os.getuid())) / "hypr" / sig / ".socket.sock",
                  Path("/tmp/hypr") / sig / ".socket.sock"]
    for p in candidates:
        if p.exists():
            return str(p)
    raise OSError(f"no Hyprland socket at {' or '.join(map(str, candidates))}")


class HyprlandIpc:
    """Requests to Hyprland's socket, JSON replies."""

    def __init__(self, path: str | None = None, timeout: float = 2.0) -> None:
        self.path = path or socket_path()
        self.timeout = timeout

    def request(self, command: str):
        """`j/<command>`'s decoded reply."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout)
            s.connect(self.path)
            s.sendall(f"j/{command}".encode())
            buf = bytearray()
            while chunk := s.recv(65536):
                buf += chunk
        try:
            return json.loads(buf)
        except ValueError as e:
            raise OSError(f"Hyprland answered {command!r} with {bytes(buf[:80])!r}, not JSON") from e

    def outputs(self) -> list[dict]:
        """Enabled monitors in layout coordinates: Hyprland reports pixels, the layout is pixels / scale."""
        out = []
        for m in self.request("monitors"):
            if m.get("disabled"):
                continue
            w, h = m["width"], m["height"]
            if int(m.get("transform", 0)) % 2:  # rotated 90 or 270 degrees
                w, h = h, w
            scale = float(m.get("scale") or 1.0)
            out.append({"left": m["x"], "top": m["y"], "width": round(w / scale), "height": round(h / scale)})
        return out


def window_info(w: dict) -> WindowInfo | None:
    """WindowInfo of an `activewindow` reply; None when no window has focus (Hyprland answers {})."""
    if not w or not w.get("address"):
        return None
    (x, y), (width, height) = w.get("at") or (0, 0), w.get("size") or (0, 0)
    pid = int(w.get("pid") or 0)
    return WindowInfo(app=w.get("class") or w.get("initialClass") or "", title=w.get("title") or "",
                      wm_class=w.get("initialClass") or w.get("class") or "",
                      process=proc_name(pid) if pid > 0 else "", id=int(w["address"], 16),
                      left=x, top=y, width=width, height=height)


def visible_clients(clients: list[dict], monitors: list[dict]) -> list[dict]:
    """The `clients` shown now: mapped, not hidden, on a workspace some monitor shows (its active or special one).

    Where a monitor does not name its workspaces (an older Hyprland), every mapped client counts as shown.
    """
    shown: set[int] = set()
    for m in monitors:
        if m.get("disabled"):
            continue
        for key in ("activeWorkspace", "specialWorkspace"):
            ws = m.get(key)
            if ws is None and key == "activeWorkspace":
                return [c for c in clients if c.get("mapped", True)]
            if ws and int(ws.get("id") or 0):
                shown.add(int(ws["id"]))
    return [c for c in clients if c.get("mapped", True) and not c.get("hidden")
            and int((c.get("workspace") or {}).get("id") or 0) in shown]


class HyprlandProbe(WindowProbe):
    """The focused window through Hyprland's socket."""

    name = "hyprland (IPC)"

    def __init__(self, ipc: HyprlandIpc | None = None) -> None:
        self.ipc = ipc or HyprlandIpc()

    def _active(self) -> WindowInfo | None:
        return window_info(self.ipc.request("activewindow"))

    def _visible(self) -> list[WindowInfo]:
        """The windows on the workspaces the monitors show (`clients`, `monitors`)."""
        shown = visible_clients(self.ipc.request("clients"), self.ipc.request("monitors"))
        return [w for w in (window_info(c) for c in shown) if w is not None]

    def outputs(self) -> list[dict]:
        """The monitors, for grim."""
        return self.ipc.outputs()
