#!/usr/bin/env bash
# Run the whole suite in the project venv: the layer contracts, ruff and mypy first, then pytest.
# With arguments (a test file, -k …) only pytest runs, with those arguments.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ $# -eq 0 ]; then
  bash scripts/lint.sh
fi
exec .venv/bin/python -m pytest "$@"
