"""Whether this process answers one command and exits (a hook, a script's `mirador search`): set by the CLI's
entry point before anything opens a store. Light on purpose: importing it loads nothing.

A short-lived process does not build the search row caches in the background (memory/store/reads.py): it
exits before they would serve a second search, and a build still scanning when the process ends held LanceDB's
runtime while its exit hook waited for it — the process hung on its way out."""

from __future__ import annotations

short_lived = False


def set_short_lived(on: bool = True) -> None:
    global short_lived
    short_lived = on
