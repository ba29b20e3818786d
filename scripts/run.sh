#!/usr/bin/env bash
# Start Mirador. With a display (X11 or Wayland session, or macOS/Windows) the tray app runs:
# capture, scheduler, MCP server and the windows in one process. Without one, the headless service.
set -euo pipefail
cd "$(dirname "$0")/.."
case "$(uname -s)" in
  Darwin|MINGW*|MSYS*|CYGWIN*) exec .venv/bin/mirador app ;;
esac
if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  exec .venv/bin/mirador app
fi
echo "run: no display (DISPLAY/WAYLAND_DISPLAY unset) — starting the headless service" >&2
exec .venv/bin/mirador service
