"""Which scope a captured row goes to, from where it came from: ordered rules, the first match wins.

A rule (memory.config.ScopeRule) names an app, a window-title pattern and/or a path-or-URL pattern.
The patterns are written by people, not by regex writers: plain text, case-insensitive, found
anywhere in the name or title, with `*` standing for any run of characters and nothing else special
(a title such as "[draft] notes" must match itself). A rule matches when every pattern it gives
matches; a row no rule matches keeps the default (capture.scope, else store.default_scope).

Capture (capture/screen.py, capture/voice.py) asks `ScopeRules.scope_for` for each row; the settings
window and `mirador evidence rescope --by-rules` use the same matcher, so a rule means one thing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory.store.core import Store

# Paths and web addresses a window shows: "~/src/ledger", "/home/me/x.py", "https://bank.example/...",
# "online.mybank.com/accounts". Only these tokens are matched by a path_or_url pattern, so a chat
# message that merely mentions a bank's name does not route a Slack window to personal/finance.
_ADDRESS_RE = re.compile(
    r"(?:[a-z][a-z0-9+.-]*://\S+"  # scheme://...
    r"|(?:~|\.{1,2})?/[^\s:;,'\"()<>|]+"  # ~/a/b, /a/b, ./a
    r"|[a-z]:\\[^\s:;,'\"()<>|]+"  # C:\Users\...
    r"|(?:[a-z0-9-]+\.)+[a-z]{2,}(?:/\S*)?)",  # host.tld/...
    re.IGNORECASE,
)
# The address bar, a terminal's prompt line and a file tab sit at the top of a window: only the first
# lines of the screen text are searched, not the page body.
TOP_LINES = 5


@lru_cache(maxsize=512)
def pattern_re(pattern: str) -> re.Pattern[str] | None:
    """The compiled form of a person's pattern (contains-match, `*` = anything); None for an empty one."""
    p = (pattern or "").strip()
    if not p.strip("*"):
        return None
    return re.compile(".*".join(re.escape(part) for part in p.split("*")), re.IGNORECASE | re.DOTALL)


def matches(pattern: str, text: str) -> bool:
    """Whether a person's pattern is found in text (an empty pattern or `*` matches everything)."""
    rx = pattern_re(pattern)
    return rx is None or bool(rx.search(text or ""))


def addresses(title: str = "", text: str = "") -> list[str]:
    """File paths and web addresses shown in a window title and the first lines of its text."""
    top = "\n".join((text or "").splitlines()[:TOP_LINES])
    return [m.group(0).rstrip(".") for m in _ADDRESS_RE.finditer(f"{title or ''}\n{top}")]


def _app_matches(pattern: str, names: Iterable[str]) -> bool:
    rx = pattern_re(pattern)
    if rx is None:
        return True
    # An app is named, not described: the whole name must match ("Code" is not "Xcode").
    return any(rx.fullmatch(n.strip()) for n in names if n and n.strip())


@dataclass(frozen=True)
class Rule:
    """One rule as the matcher holds it (built from memory.config.ScopeRule)."""

    scope: str
    app: str = ""
    title: str = ""
    path_or_url: str = ""

    def matches(self, app_names: Sequence[str], title: str, text: str = "") -> bool:
        """Every pattern this rule gives matches the window."""
        if not _app_matches(self.app, app_names):
            return False
        if pattern_re(self.title) is not None and not matches(self.title, title):
            return False
        if pattern_re(self.path_or_url) is not None:
            return any(matches(self.path_or_url, a) for a in addresses(title, text))
        return True


class ScopeRules:
    """Ordered rules and the default scope; `scope_for` picks a captured row's scope."""

    def __init__(self, rules: Iterable = (), default: str | None = None) -> None:
        self.rules = [r if isinstance(r, Rule) else Rule(r.scope, r.app, r.title, r.path_or_url) for r in rules]
        self.default = default

    @classmethod
    def from_config(cls, capture) -> ScopeRules:
        """From a memory.config.CaptureConfig: its scope_rules, with capture.scope as the default."""
        return cls(getattr(capture, "scope_rules", ()) or (), capture.scope)

    def match(self, app: str | Sequence[str], title: str = "", text: str = "") -> int | None:
        """Index of the first rule matching this window, or None."""
        names = [app] if isinstance(app, str) else list(app)
        for i, r in enumerate(self.rules):
            if r.matches(names, title or "", text or ""):
                return i
        return None

    def scope_for(self, app: str | Sequence[str], title: str = "", text: str = "") -> str | None:
        """The first matching rule's scope, else the default (None: the store's default scope).

        app: the app's name, or several names for one window (its title-bar name, X11 class, executable);
        text: the captured text, whose first lines may show the path or web address."""
        i = self.match(app, title, text)
        return self.rules[i].scope if i is not None else self.default


def window_names(win) -> list[str]:
    """Every name a window goes by (capture.window.WindowInfo): app, X11 instance, executable."""
    return [n for n in (win.app, win.wm_class, win.process) if n] if win is not None else []


def running_apps(limit: int = 80) -> list[str]:
    """Names of the apps that have a window open now, for picking one in the settings (sorted, unique).

    X11 only, through `xprop` (the window manager's client list, then each window's class); elsewhere,
    or when that fails, an empty list: the settings then take a typed name."""
    import os
    import shutil
    import subprocess

    if not os.environ.get("DISPLAY") or not shutil.which("xprop"):
        return []
    try:
        out = subprocess.run(["xprop", "-root", "_NET_CLIENT_LIST"], capture_output=True, text=True, timeout=2).stdout
        names: set[str] = set()
        for wid in re.findall(r"0x[0-9a-f]+", out)[:limit]:
            cls = subprocess.run(["xprop", "-id", wid, "WM_CLASS"], capture_output=True, text=True, timeout=2).stdout
            parts = re.findall(r'"([^"]*)"', cls)
            if parts:
                names.add(parts[-1] or parts[0])
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted((n for n in names if n), key=str.lower)


def plan_by_rules(store: Store, rules: ScopeRules, rows: list[dict]) -> list:
    """Rescope plans (memory/store/rescope.py) that put past rows where the rules send them now, one per scope.

    Rows no rule matches stay where they are: the default is for new captures, and a row may have been
    moved on purpose. Evidence keeps one app name and its (redacted) title, which is what is matched."""
    from memory.store.rescope import plan_rescope

    groups: dict[str, list[dict]] = {}
    for r in rows:
        i = rules.match(r["app"] or "", r["window"] or "", r["text"] or "")
        if i is not None:
            groups.setdefault(rules.rules[i].scope, []).append(r)
    plans = [plan_rescope(store, to, group) for to, group in sorted(groups.items())]
    return [p for p in plans if not p.empty()]
