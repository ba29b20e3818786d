"""The store reaches the graph only through listeners (memory/store/lifecycle.py): they must be installed
in every process that can open a store, whatever it imported first."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memory.store import lifecycle


@pytest.mark.parametrize("first_import", ["memory.store.erasure", "memory.store.core", "memory.store"])
def test_the_graph_cascades_are_registered_whatever_a_process_imports_first(first_import):
    code = (f"import {first_import}\n"
            "from memory.store import lifecycle\n"
            "print(sorted(f.__module__ for f in lifecycle._forget + lifecycle._rescope))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    listeners = eval(out.strip())  # noqa: S307 - a list literal this test printed itself
    assert listeners.count("memory.graph") == 2, listeners  # the graph's forget and rescope cascades
    # Shared scopes (memory/store/remote.py) may add their own forget listener once imported.
    assert set(listeners) <= {"memory.graph", "memory.store.remote"}, listeners


def test_listeners_are_called_with_what_changed(monkeypatch):
    monkeypatch.setattr(lifecycle, "_forget", [])  # without the graph's: no store here
    monkeypatch.setattr(lifecycle, "_rescope", [])
    seen = []

    def forgot(store, ids, actor):
        seen.append(("forget", store, ids, actor))

    def moved(store, id_, scope):
        seen.append(("rescope", store, id_, scope))

    lifecycle.on_forget(forgot)
    lifecycle.on_forget(forgot)  # twice: still called once
    lifecycle.on_rescope(moved)
    lifecycle.memories_forgotten("S", ["mem_1"], "person")
    lifecycle.memory_rescoped("S", "mem_1", "work")
    assert seen == [("forget", "S", ["mem_1"], "person"), ("rescope", "S", "mem_1", "work")]
