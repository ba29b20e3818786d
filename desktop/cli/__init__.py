"""The `mirador` command line: one module per command group, each command's options next to its handler.

Owns the CLI contract (commands, flags, help, exit codes, --json shapes; tests/desktop/test_cli_contract.py).
`main.py` builds the parser from the command modules and dispatches: `memories` (add, search, show, edit,
delete, list), `evidence`, `store_admin` (purge, optimize, reembed, stats), `export`, `imports`, `recall`,
`extract` (extract, dream), `relations`, `reinforce`, `capture` (capture, status, pause, resume), `mcp`
(serve, mcp, token, config), `hooks`, `app` (app, service), `doctor`, `selftest`; `output` prints.
Commands call into memory/, capture/ and desktop.runtime; only `app` reaches desktop.ui, inside its handler.
Handlers import their dependencies when they run, so `mirador --version` and the hooks start fast.

`main` is imported lazily so that `import desktop.cli.output` stays cheap. See docs/architecture.md.
"""

from __future__ import annotations

import os

# Every Mirador process starts here (CLI, hooks, tray app, service), before anything imports NumPy.
# OpenBLAS starts a pool of spin-waiting threads when NumPy loads: on a shared 2-core machine that
# burns the core capture needs, and it is a noticeable part of a cold CLI call (bench/cold_start.py).
# Mirador's NumPy work is small matrices and vectors; a value the person set stays.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv: list[str] | None = None) -> int:
    from desktop.cli.main import main as run

    return run(argv)
