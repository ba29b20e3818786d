#!/usr/bin/env bash
# The static checks `make test` runs before the suite; each names what failed and how to see it.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "lint: import contracts (.importlinter)" >&2
.venv/bin/lint-imports --no-cache || { echo "lint: a layer contract is broken (above); docs/architecture.md says which way imports point" >&2; exit 1; }
echo "lint: ruff" >&2
.venv/bin/ruff check . || { echo "lint: ruff found problems (above); many fix with: .venv/bin/ruff check --fix ." >&2; exit 1; }
echo "lint: mypy (every package; memory/mcp and memory/store strict, the rest of memory, desktop/runtime and desktop/cli fully annotated: [tool.mypy] in pyproject.toml)" >&2
.venv/bin/python -m mypy memory capture desktop models || { echo "lint: mypy found type errors (above)" >&2; exit 1; }
