"""Capture on Wayland: which desktop this is, how to read its pixels and its focused window.

X11 lets any client read the screen and `_NET_ACTIVE_WINDOW`; Wayland gives neither to ordinary
clients, so each desktop needs its own door (docs/capture-and-privacy.md, "Which desktops work"):

- `session.py`  which session and desktop this is (WAYLAND_DISPLAY, XDG_CURRENT_DESKTOP, sockets)
- `grim.py`     pixels through the wlroots screencopy protocol (sway, Hyprland, river, Wayfire)
- `portal.py`   pixels through the xdg-desktop-portal Screenshot portal (GNOME, KDE)
- `sway.py`, `hyprland.py`, `kwin.py`, `gnome.py`  the focused window's app and title, one per desktop
- `dbus.py`     the few D-Bus calls the portal, KWin and GNOME probes share (jeepney, pure Python)
"""
