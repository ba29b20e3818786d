"""Which graphical session this process runs in, and which desktop: decides how capture reads the screen.

Decided from the environment the desktop sets for its clients, not from what happens to be installed:
a Wayland session whose DISPLAY points at XWayland must not be captured through X11, because XWayland
shows only the X11 clients (native Wayland windows come out black) and knows nothing of their focus.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# XDG_CURRENT_DESKTOP names (lower case) of compositors built on wlroots, which offer screencopy (grim).
WLROOTS = ("sway", "hyprland", "river", "wayfire", "labwc", "niri", "dwl", "qtile", "wlroots", "phosh", "cage")


@dataclass(frozen=True)
class Session:
    """kind: x11 | wayland | windows | macos | none; desktop: sway, hyprland, kde, gnome, wlroots or other."""

    kind: str
    desktop: str = ""

    @property
    def label(self) -> str:
        """How `mirador status` and `doctor` name it: 'wayland (sway)', 'x11', 'none'."""
        return f"{self.kind} ({self.desktop})" if self.desktop else self.kind


def detect(env: Mapping[str, str] | None = None, platform: str | None = None) -> Session:
    """The session of `env` (default: this process's environment)."""
    import sys

    env = os.environ if env is None else env
    platform = platform or sys.platform
    if platform.startswith("win"):
        return Session("windows")
    if platform == "darwin":
        return Session("macos")
    wayland = bool(env.get("WAYLAND_DISPLAY")) or env.get("XDG_SESSION_TYPE", "").lower() == "wayland"
    if not wayland:
        return Session("x11") if env.get("DISPLAY") else Session("none")
    return Session("wayland", _desktop(env))


def _desktop(env: Mapping[str, str]) -> str:
    # The compositor's own sockets first: they are what the probes talk to, and XDG_CURRENT_DESKTOP
    # is often left at a parent session's value (a nested sway under GNOME, say).
    if env.get("SWAYSOCK"):
        return "sway"
    if env.get("HYPRLAND_INSTANCE_SIGNATURE"):
        return "hyprland"
    names = [n.strip().lower() for n in env.get("XDG_CURRENT_DESKTOP", "").split(":") if n.strip()]
    for n in names:
        if n == "kde":
            return "kde"
        if n in ("gnome", "gnome-classic", "gnome-flashback"):
            return "gnome"
        if n in WLROOTS:
            return n if n in ("sway", "hyprland") else "wlroots"
    return "other"
