"""Exclusion rules checked before a frame is grabbed (principle 4: excluded windows are never grabbed)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from capture.window import WindowInfo


class PrivacyFilter:
    """Decides from the active window alone whether the screen may be grabbed now."""

    def __init__(self, excluded_apps: Iterable[str] = (), title_patterns: Iterable[str] = ()) -> None:
        self.apps = {a.strip().lower() for a in excluded_apps if a.strip()}
        self.patterns = [re.compile(p) for p in title_patterns]

    @classmethod
    def from_config(cls, privacy) -> PrivacyFilter:
        """Build from a memory.config.PrivacyConfig."""
        return cls(privacy.excluded_apps, privacy.excluded_title_patterns)

    def excluded(self, win: WindowInfo | None) -> str | None:
        """The reason this window must not be captured, or None if it may be."""
        if win is None:
            return None
        hit = app_names(win) & self.apps
        if hit:
            return f"app {sorted(hit)[0]}"
        for p in self.patterns:
            if win.title and p.search(win.title):
                return f"title matches {p.pattern}"
        return None


def app_names(win: WindowInfo) -> set[str]:
    """The lower-case names an exclusion may match: app, class, executable, and the parts of a dotted id.

    Wayland app ids are often reverse-DNS (`org.keepassxc.KeePassXC`, Flatpak's `com.bitwarden.desktop`):
    excluding "KeePassXC" must catch those too. A part matching by accident only excludes more.
    """
    names = set()
    for n in (win.app, win.wm_class, win.process):
        if n:
            n = n.lower()
            names.add(n)
            if "." in n:
                names.update(p for p in n.split(".") if p)
    return names
