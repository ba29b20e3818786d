"""The architecture's rules that import-linter does not state: no module-level import cycles anywhere,
and no reach into a store's private members from outside the store package (docs/architecture.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("desktop", "capture", "memory", "models")


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph.modules:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _without_package_inits(graph: grimp.ImportGraph) -> grimp.ImportGraph:
    # A package's __init__ importing its own submodules (lazy re-exports) is not a design cycle.
    for module in list(graph.modules):
        for imported in list(graph.find_modules_directly_imported_by(module)):
            if imported.startswith(module + "."):
                graph.remove_import(importer=module, imported=imported)
    return graph


def test_no_import_cycles_between_modules():
    graph = _without_package_inits(grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True))
    # (imports inside functions count too; names used only in annotations do not: nothing runs them)
    cycles = _cycles(graph)
    assert not cycles, "import cycles (break them by moving the shared part down a layer): " + "; ".join(
        " <-> ".join(c) for c in cycles)


def _store_private_names() -> set[str]:
    """Every `_name` that memory/store/core.py's Store defines (methods and attributes set on self)."""
    tree = ast.parse((ROOT / "memory" / "store" / "core.py").read_text())
    store = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Store")
    names = {n.name for n in store.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    names |= {n.attr for n in ast.walk(store) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_nothing_outside_the_store_package_uses_a_stores_private_members():
    # Any object's `._x` where `_x` is a private name of Store (whatever the variable is called), the
    # private column lists, and handles cached in a store's __dict__.
    names = "|".join(sorted(_store_private_names()))
    private = re.compile(rf"(?<!\bself)(?<!\bcls)\.({names})\b|\bstore\._[a-z]|\b_(EVIDENCE|MEMORY|VAULT)_COLS\b|store\.__dict__")
    offenders = []
    for pkg in (*PACKAGES, "tests", "bench"):
        for path in (ROOT / pkg).rglob("*.py"):
            if path.is_relative_to(ROOT / "memory" / "store") or path == Path(__file__).resolve():
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if private.search(line):
                    offenders.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not offenders, "use the store's public API instead:\n" + "\n".join(offenders)


def test_every_package_says_what_it_owns():
    missing = []
    for pkg in PACKAGES:
        for init in (ROOT / pkg).rglob("__init__.py"):
            if not ast.get_docstring(ast.parse(init.read_text())):
                missing.append(str(init.relative_to(ROOT)))
    assert not missing, f"packages without a docstring saying what they own: {missing}"


def test_no_sql_predicate_on_a_sealed_column():
    """Sealed columns hold ciphertext (memory/store/sealer.py): a filter on their values in SQL matches nothing
    (`text = '…'`, `after LIKE '%…%'`) and would silently find nothing. Filter on ids, scopes, times, kinds, or
    read the rows and look at the opened values; an equality on window or speaker goes through
    Store.equal_value, which seals the value the way the column holds it."""
    import re

    from memory.store.sealer import EQUAL_COLUMNS, SEALED

    cols = sorted({c for cs in SEALED.values() for c in cs} | {c for cs in EQUAL_COLUMNS.values() for c in cs})
    pattern = re.compile(r"""["'][^"'\n]*\b(?:%s)\s+(?:LIKE|=|<>|!=|IN)\s*['"{(]""" % "|".join(cols))
    found = []
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line) and "equal_value" not in line:
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "SQL on a sealed column (read the rows instead):\n" + "\n".join(found)
