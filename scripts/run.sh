#!/usr/bin/env bash
# Start Mirador. The tray app needs a display; without one, the headless service runs.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/mirador service
