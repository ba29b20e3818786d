"""The focused window on GNOME (Wayland), through the Window Calls Shell extension.

GNOME Shell tells no outside program which window is active (its Eval method is off since GNOME 41,
and no portal gives it). The Window Calls extension (uuid window-calls@domandoman.xyz,
extensions.gnome.org/extension/4724) exports org.gnome.Shell.Extensions.Windows on the session bus;
its List() is a JSON array of windows with a `focus` flag. Older releases leave the title and frame
out of List(), so they are asked for with GetTitle / GetFrameRect.

Tested against a stand-in for the extension on a real D-Bus bus (tests/capture/test_wayland_probes.py),
not in a real GNOME Shell here.
"""

from __future__ import annotations

import json

from capture.wayland.dbus import call, session_bus
from capture.window_info import WindowInfo, WindowProbe, proc_name

SHELL = "org.gnome.Shell"
OBJECT = "/org/gnome/Shell/Extensions/Windows"
IFACE = "org.gnome.Shell.Extensions.Windows"
INSTALL = ("install and enable the GNOME Shell extension Window Calls (extensions.gnome.org/extension/4724, then "
           "`gnome-extensions enable window-calls@domandoman.xyz`), then restart capture")


class GnomeProbe(WindowProbe):
    """The focused window from Window Calls' List()."""

    name = "gnome (Window Calls extension)"

    def __init__(self, conn=None) -> None:
        from jeepney import DBusAddress

        self._conn = conn or session_bus()
        self._where = DBusAddress(OBJECT, SHELL, IFACE)
        try:
            self._list()
        except OSError as e:
            self._conn.close()
            raise OSError(f"GNOME Shell does not say which window has focus ({e}): {INSTALL}") from e

    def _list(self) -> list[dict]:
        return json.loads(call(self._conn, self._where, "List", timeout=2.0)[0])

    def _active(self) -> WindowInfo | None:
        w = next((w for w in self._list() if w.get("focus")), None)
        if w is None:
            return None
        wid = int(w.get("id") or 0)
        title = w["title"] if "title" in w else call(self._conn, self._where, "GetTitle", "u", (wid,), 2.0)[0]
        geo = w if "x" in w else json.loads(call(self._conn, self._where, "GetFrameRect", "u", (wid,), 2.0)[0])
        pid = int(w.get("pid") or 0)
        return WindowInfo(app=w.get("wm_class") or "", title=title or "",
                          wm_class=w.get("wm_class_instance") or w.get("wm_class") or "",
                          process=proc_name(pid) if pid > 0 else "", id=wid,
                          left=geo.get("x"), top=geo.get("y"), width=geo.get("width"), height=geo.get("height"))

    def close(self) -> None:
        """Close the bus connection."""
        self._conn.close()
