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


# ---- filters and table handles (issue 42): one module builds every filter; nothing outside the store holds a table

FILTER_HOME = {ROOT / "memory" / "store" / "filters.py"}
# The quoting and predicate helpers only memory/store/filters.py may call.
QUOTING = {"sql_literal", "sql_list", "sql_id_list", "ts_literal", "scope_filter"}
# A SQL predicate in a string (constant parts of an f-string, `{}` where a value goes; a concatenation read as one
# string): a column compared with a quoted, timestamp or spliced-in value (`=`, `<>`, `!=`, `<`, `>`…), `col [NOT]
# IN (`, `col [NOT] LIKE '`, a whole-string boolean comparison (`pinned = false`), `IS [NOT] NULL`, the provenance
# array functions, predicates joined by AND/OR, and the bare " AND " / " OR " a `.join(...)` glues predicates with.
# Uppercase keywords and spaced operators, as every filter here is written, so prose and config keys
# (`models.reranker = false`) do not match; values spliced in through the quoting helpers are caught above.
_COLUMN = r"(?<![\w.])[a-z_][a-z0-9_]*"
_PREDICATE = re.compile(rf"""
    {_COLUMN}\s+(?:=|<>|!=|<=|>=|<|>)\s+(?:'|timestamp\s|\{{\}}|%(?:\(\w+\))?[sdr])
  | {_COLUMN}\s+(?:NOT\s+)?(?:IN|LIKE|ILIKE)\s+(?:[({{'%]|timestamp\s)
  | ^\s*\(?[a-z_][a-z0-9_]*\s+(?:=|<>|!=)\s+(?:true|false)\)?\s*$
  | \b(?:true|false)\s+(?:AND|OR)\s
  | \bIS\s+(?:NOT\s+)?NULL\b
  | \b(?:array_has_any|array_has|make_array)\s*\(
  | \s(?:AND|OR)\s+(?:NOT\s+)?\(?[a-z_]+\s+(?:=|<>|!=|<=|>=|<|>|IN|NOT\s+IN|LIKE|NOT\s+LIKE|IS)\s
  | ^\s*\)?\s*(?:AND|OR)\s*\(?\s*$ | \)\s+(?:AND|OR)\s+\(
""", re.X)

# Strings the filter check may not read as filters, each by its file and exact line (stripped), with the reason.
# The check's own cases (this file) are its test data, so this file is not scanned.
FILTER_ALLOWED = {
    ("tests/memory/test_filters.py", '''assert F.and_(None, F.equals("status", "active"), None) == "status = 'active'"'''):
        "the helpers' output, spelled out",
    ("tests/memory/test_filters.py", '''assert F.and_(F.equals("status", "active"), F.id_in(["a'b"])) == "(status = 'active') AND (id IN ('a''b'))"'''):
        "the helpers' output, spelled out",
    ("tests/memory/test_filters.py", '''assert F.or_(F.id_is("a"), None) == "id = 'a'"'''): "the helpers' output, spelled out",
    ("tests/memory/test_filters.py", '''assert F.where("evidence", apps=forms) == "app IN ('\\x1ee1:c2VhbGVk', 'slack')"'''):
        "the helpers' output, spelled out",
    ("tests/memory/test_filters.py", '''assert store.where("evidence", apps=["slack"]) == f"app IN ('{forms[0]}', 'slack')"'''):
        "the helpers' output, spelled out",
    ("tests/memory/test_filters.py", '''assert F.starts_with("actor", "mcp:") == "actor LIKE 'mcp:%'"'''):
        "the helpers' output, spelled out",
    ("tests/memory/test_scopes.py", "from memory.store.filters import scope_filter"):
        "tests filters.scope_filter, the scope predicate, itself",
    ("tests/memory/test_scopes.py", """assert "scope >= 'work/' AND scope < 'work0'" in f and "scope = 'work'" in f"""):
        "tests filters.scope_filter, the scope predicate, itself",
    ("tests/memory/test_redaction_formats.py", '"sort_key = \'created_at_2024_01\'",'): "text to redact, not a filter",
    ("tests/memory/test_redaction_formats.py", '"    userid = passwd = acct = \'\'",'): "text to redact, not a filter",
    ("tests/memory/test_redaction_formats.py", '"assert password != \'\'",'): "text to redact, not a filter",
    ("bench/locomo.py", """models = (["embedder_tuning = false"] if args.untuned else []) + \\"""):
        "a line of config.toml, not a filter",
    ("bench/locomo.py", '''([f"reranker_path = {json.dumps(str(args.reranker.resolve()))}"] if args.reranker else [])'''):
        "a line of config.toml, not a filter",
}


def _not_a_filter(text: str) -> bool:
    """Text that cannot be a LanceDB filter: several lines (TOML, a script), HTML, or a whole SQL statement
    (sqlite's, in bench/embedder_compare.py)."""
    return "\n" in text or re.search(r"<[a-zA-Z/]", text) is not None or "SELECT " in text


def _text(node: ast.AST, parts: list[ast.AST]) -> str | None:
    """A string expression's text, `{}` where a value goes: a literal, an f-string, or a `+` concatenation that
    holds one (its other operands read as values); the nodes read are added to parts."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        parts.append(node)
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts.append(node)
        parts.extend(node.values)
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        mine: list[ast.AST] = [node]
        left, right = _text(node.left, mine), _text(node.right, mine)
        if left is None and right is None:
            return None
        parts.extend(mine)
        return ("{}" if left is None else left) + ("{}" if right is None else right)
    return None


def _strings(tree: ast.AST):
    """(line, text) of every string literal, f-string and string concatenation that is not a docstring; an
    f-string's or a concatenation's values as `{}` (a `%`-formatted string is read with its `%s` in place)."""
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    read: set[int] = set()
    for node in ast.walk(tree):  # outermost first: a concatenation before its operands
        if id(node) in read or id(node) in docstrings:
            continue
        parts: list[ast.AST] = []
        text = _text(node, parts)
        if text is not None:
            read.update(id(p) for p in parts)
            yield node.lineno, text


def _python_files(*packages: str):
    for pkg in packages:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _hand_written(tree: ast.AST, lines: list[str], rel: str) -> list[str]:
    """Where a module builds a filter itself: imports or calls a quoting helper, or writes a predicate."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name in QUOTING for a in node.names):
            found.append((node.lineno, f"imports {', '.join(a.name for a in node.names if a.name in QUOTING)}"))
        elif isinstance(node, ast.Attribute) and node.attr in QUOTING:
            found.append((node.lineno, f"uses {node.attr}"))
    found += [(line, repr(text[:100])) for line, text in _strings(tree)
              if not _not_a_filter(text) and _PREDICATE.search(text)]
    return [f"{rel}:{n}: {what}" for n, what in found
            if (rel, lines[n - 1].strip() if n <= len(lines) else "") not in FILTER_ALLOWED]


def test_every_filter_is_built_in_the_filters_module():
    """A filter written by hand drifts (five copies of "derived from this evidence" in two spellings), can quote a
    value wrongly, or can compare a sealed column and silently match nothing: memory/store/filters.py builds them.
    Tests too: a test's hand-written filter is a second spelling of what it checks."""
    found = []
    for path in _python_files(*PACKAGES, "bench", "tests"):
        if path in FILTER_HOME or path == Path(__file__).resolve():
            continue
        source = path.read_text(encoding="utf-8")
        found += _hand_written(ast.parse(source), source.splitlines(), str(path.relative_to(ROOT)))
    assert not found, "filters built outside memory/store/filters.py (use its helpers):\n" + "\n".join(found)


def test_every_allowed_filter_line_is_still_there():
    # An allow-list entry whose line changed or went away is stale: drop it or match the line again.
    stale = [f"{rel}: {line}" for rel, line in FILTER_ALLOWED
             if line not in {s.strip() for s in (ROOT / rel).read_text(encoding="utf-8").splitlines()}]
    assert not stale, "stale FILTER_ALLOWED entries:\n" + "\n".join(stale)


def _catches(source: str) -> bool:
    return bool(_hand_written(ast.parse(source), source.splitlines(), "x.py"))


def test_the_filter_check_catches_hand_written_predicates():
    # What the test above must see, so a blind regex cannot pass it.
    for text in ("id = '{}'", "outbox_op = 'put'", "id IN {}", "outbox_seq IN ({})", "extracted_at IS NULL",
                 "status = 'candidate' AND pinned = false", "updated_at <= timestamp '{}'", "tbl = '{}' AND {}",
                 "array_has_any(provenance, [{}])", "{} AND captured_at >= {}", "entity_id IN {}",
                 # LIKE, booleans, inequality, NOT IN, a value spliced in unquoted, %-formatting, join glue
                 "actor LIKE 'mcp:%'", "actor NOT LIKE '{}'", "pinned = false", "(pinned = true)",
                 "pinned = true AND {}", "status != 'deleted'", "status <> '{}'", "kind != {}", "id NOT IN {}",
                 "id NOT IN ({})", "scope = {}", "id = %s", "id = '%s'", "scope = %(scope)s", " AND ", " OR ",
                 ") OR (", "{} OR status != {}"):
        assert _PREDICATE.search(text) and not _not_a_filter(text), text
    for text in ("in (the store)", "Waiting for your review", "x must be between 1 and {}", "a = b",
                 "models.reranker = false", "<span style='{}'>{}</span>", "[models]\nembedder_onnx = false\n",
                 "torch threads (only where torch embeds: embedder_onnx = false); 0 = one per core", "and", " and ",
                 "Search AND filter", "sort_by = date", "x != y", "(yesterday = 7 May 2023)", "{} or {}"):
        assert _not_a_filter(text) or not _PREDICATE.search(text), text
    # Predicates put together in code: concatenation, `.join`, `%` and `.format`, inside calls too.
    for source in ('w = "id = " + repr(x)', '''w = "id = '" + x + "'"''', 'w = " AND ".join(parts)',
                   'w = "(" + " OR ".join(f"({p})" for p in parts) + ")"', 'w = "pinned = %s" % flag',
                   'w = "scope = {}".format(s)', 'w = f"status != {s!r}"', 't.count_rows("kind = " + quote(k))',
                   'w = prefix + "id NOT IN " + listed', 'w = "(" + a + ") AND (" + b + ")"'):
        assert _catches(source), source
    for source in ('print("saved " + name)', 'msg = "x must be between 1 and %d" % n', 'w = ", ".join(names)',
                   'label = "and " + "or"', 's = "a = " + "b"', 'help = "set embedder_onnx = false to " + "use torch"'):
        assert not _catches(source), source


def test_every_filter_parameter_of_the_store_is_typed():
    """A `where` of the store package is a `Where` (memory/store/filters.py), so mypy refuses a raw string there:
    `store.rows("audit", "action = 'x'")` fails `bash scripts/lint.sh`. At run time a Where is the same str."""
    untyped = []
    for path in _python_files("memory/store"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                    typed = a.annotation is not None and "Where" in ast.unparse(a.annotation)
                    if a.arg in ("where", "filter_") and not typed:
                        untyped.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}({a.arg})")
    assert not untyped, "filter parameters not typed Where:\n" + "\n".join(untyped)


# What a store holds that only the store package's modules may touch: its table handles, the connection, and the
# handle-level reads and writes (which take a handle). Everything else goes through Store's typed methods.
HANDLES = {"memories", "evidence", "vault", "tombstones", "audit", "relations", "usage", "db", "table", "kind_table",
           "scan_table", "table_rows", "nearest_table", "commit", "merge_rows", "append", "reopen_tables"}


# A table handle is known by what is called on it, whatever the name of the store it came from.
TABLES = {"memories", "evidence", "vault", "tombstones", "audit", "relations", "usage", "proposals"}
TABLE_CALLS = {"count_rows", "search", "to_arrow", "to_lance", "to_pandas", "merge_insert", "add", "delete", "update",
               "optimize", "list_versions", "create_index", "create_fts_index", "checkout_latest", "schema"}


def _is_store(node: ast.expr) -> bool:
    """An expression naming a store: `store`, `a_store`, `self.store`, `ctx.store`."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "store" or name.endswith("_store")


# A shared scope's bucket tables (memory/store/remote_shared.py Shared), opened by a call: `shared.memories()`.
SHARED_TABLES = {"memories", "tombstones", "relations", "edits", "evidence"}

# Benches that measure LanceDB itself on their own tables, never through (or into) a Mirador store: each by path,
# with the reason. Every other bench goes through Store's typed methods like the packages.
RAW_LANCEDB_BENCHES = {
    "bench/sealed_search.py": "a design check of sealed full-text terms on its own temp tables (LoCoMo turns); it "
                              "never opens a Mirador store",
    "bench/maintenance.py": "compares LanceDB's own table.optimize() with memory.store.indexes.optimize_table on a "
                            "temp copy of one evidence table, and times raw queries on it; it never opens the "
                            "store it copied from",
}


# Tests that look at the raw tables on purpose, by path, with the reason: what is physically on disk, LanceDB's own
# index state, a table of an older layout made on purpose, a shared scope's bucket, or LanceDB itself on a table of
# their own. Every other test reads and counts through Store's typed methods; an entry whose file no longer holds a
# handle is stale and fails the check.
RAW_TABLE_TESTS = {
    "tests/capture/test_sealed_at_rest.py": "checks the bytes on disk: evidence and audit values sealed at rest",
    "tests/memory/test_purge_no_copy.py": "checks the bytes on disk: FTS tokens a purge leaves in the table's files",
    "tests/memory/test_store.py": "checks LanceDB's own index state (trained rows, segments, unindexed rows)",
    "tests/memory/test_recall.py": "checks LanceDB's own index state (rows the vector index covers)",
    "tests/memory/test_vault.py": "checks which columns LanceDB indexes",
    "tests/memory/test_retrieval.py": "checks which columns LanceDB indexes, and makes a pre-m007 table on purpose",
    "tests/memory/test_reads.py": "moves rows with LanceDB's own compaction, delete and update under the row cache",
    "tests/memory/test_reembed.py": "reads the reembed staging table and races the pass by patching its table reads",
    "tests/memory/test_mcp_tools.py": "fakes a 60,000-row evidence table by patching its count_rows",
    "tests/memory/test_scopes.py": "the scope filter on a LanceDB table of its own",
    "tests/memory/seaweed.py": "checks the SeaweedFS bucket contents",
    "tests/memory/race_worker.py": "checks the SeaweedFS bucket contents",
    "tests/memory/test_remote.py": "checks the SeaweedFS bucket contents",
    "tests/memory/test_remote_dropped.py": "checks the SeaweedFS bucket contents",
    "tests/memory/test_remote_duplicates.py": "checks the SeaweedFS bucket contents",
    "tests/memory/test_remote_evidence.py": "checks the SeaweedFS bucket contents",
    "tests/memory/test_remote_relations.py": "checks the SeaweedFS bucket contents",
}


def _table_handles(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in HANDLES and _is_store(node.value):
            found.append((node.lineno, f".{node.attr}"))
        elif isinstance(node, ast.Attribute) and node.attr in TABLE_CALLS and isinstance(node.value, ast.Attribute) \
                and node.value.attr in TABLES:  # `s.memories.count_rows()`, whatever the store is called
            found.append((node.lineno, f".{node.value.attr}.{node.attr}"))
        elif isinstance(node, ast.Attribute) and node.attr in ("open_table", "connect", "connect_async") \
                and isinstance(node.value, ast.Name) and node.value.id in ("lancedb", "db"):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SHARED_TABLES:
            found.append((node.lineno, f".{node.func.attr}()"))  # a shared scope's table: `shared.memories()`
    return found


def test_nothing_outside_the_store_package_holds_a_table_handle():
    found, allowed = [], set()
    for path in _python_files(*PACKAGES, "bench", "tests"):
        rel = path.relative_to(ROOT).as_posix()
        if path.is_relative_to(ROOT / "memory" / "store") or rel in RAW_LANCEDB_BENCHES:
            continue
        handles = _table_handles(ast.parse(path.read_text(encoding="utf-8")))
        if rel in RAW_TABLE_TESTS:
            allowed |= {rel} if handles else set()
            continue
        found += [f"{rel}:{n}: {what}" for n, what in handles]
    assert not found, "table handles outside memory/store (use Store's typed methods):\n" + "\n".join(found)
    stale = sorted(set(RAW_TABLE_TESTS) - allowed)
    assert not stale, "stale RAW_TABLE_TESTS entries (no table handle left there):\n" + "\n".join(stale)


def test_the_table_handle_check_sees_handles():
    for source in ("store.memories.count_rows()", "s.evidence.to_lance()", "lancedb.connect(path)",
                   "db.open_table('evidence')", "store.table(T.AUDIT)", "table = shared.memories()",
                   "a_store.remotes.shared['team'].tombstones(create=False)"):
        assert _table_handles(ast.parse(source)), source
    for source in ("store.rows('memory', None, ['id'])", "store.count('memory', scopes=['work'])",
                   "store.tables_state()", "shared.put(data, new=True)", "a.memories", "args.memories + 1"):
        assert not _table_handles(ast.parse(source)), source
    assert all((ROOT / rel).is_file() for rel in RAW_LANCEDB_BENCHES), "a RAW_LANCEDB_BENCHES entry is stale"


# ---- the shared scopes' modules (issue 42): one job each, none of them long

REMOTE_MAX_LINES = 400


def test_each_remote_module_stays_short():
    """memory/store/remote.py once held credentials, the outbox, conflict settling, tombstone pulls, a lease, edge
    routing and a search pool in 1,400 lines; it is split by job (its docstring lists the parts)."""
    long = {p.name: n for p in sorted((ROOT / "memory" / "store").glob("remote*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > REMOTE_MAX_LINES}
    assert not long, f"over {REMOTE_MAX_LINES} lines (split by job): {long}"


def test_one_retry_loop():
    """Store.commit's retry on a raced commit is the store's one retry loop (memory/store/retrying.py): the shared
    scopes' bucket commits, a batch sent again over a dropped connection and the wait for a key another process is
    making go through it too, rather than copies of it (a loop that catches an error and sleeps)."""
    found = []
    for path in _python_files(*PACKAGES):
        if path.name == "retrying.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.For | ast.While) and any(isinstance(n, ast.Try) for n in ast.walk(node)) and any(
                    isinstance(n, ast.Call) and ast.unparse(n.func).endswith("sleep") for n in ast.walk(node)):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"a copied retry loop (use memory/store/retrying.py): {found}"


# ---- what a parameter that receives the store is (issue 42): a typed Store, never Any or nothing

# Parameters by these names hold a Store (or, for embedder and binding, what the store is built from): outside the
# store package they are annotated with its real type (`Store`, imported under `if TYPE_CHECKING:`), so mypy checks
# every call made through them. A lambda's parameters cannot be annotated and are left alone.
STORE_PARAM = re.compile(r"store|\w+_store|embedder|binding")


def _untyped_store_params(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, function, parameter) for each store parameter with no annotation or one that names Any."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
                if STORE_PARAM.fullmatch(arg.arg) and (
                        arg.annotation is None or re.search(r"\bAny\b", ast.unparse(arg.annotation))):
                    found.append((arg.lineno, node.name, arg.arg))
    return found


def test_every_store_parameter_is_typed():
    """`def f(store, ...)` or `store: Any` outside memory/store hides every call on the store from mypy."""
    bad = []
    for path in _python_files(*PACKAGES):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("memory/store/"):
            continue
        bad += [f"{rel}:{line}: {fn}({name})" for line, fn, name in
                _untyped_store_params(ast.parse(path.read_text(encoding="utf-8")))]
    assert not bad, ("store parameters with no type or Any (annotate them `Store`, imported under "
                     "`if TYPE_CHECKING:` from memory.store.core):\n" + "\n".join(bad))


def test_the_store_parameter_check_sees_untyped_ones():
    for source in ("def f(store): ...", "def f(x, store: Any = None): ...", "async def f(*, a_store): ...",
                   "class C:\n    def __init__(self, store: Any | None): ...", "def f(embedder: Any): ...",
                   "def f(binding, /): ..."):
        assert _untyped_store_params(ast.parse(source)), source
    for source in ("def f(store: Store): ...", "def f(store: Store | None = None): ...", "lambda store: store",
                   "def f(stores: list): ...", "def f(restore): ...", "def f(embedder: Embedder): ..."):
        assert not _untyped_store_params(ast.parse(source)), source
