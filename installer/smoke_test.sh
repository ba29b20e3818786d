#!/usr/bin/env bash
# Smoke test of a built bundle (Linux/macOS), run with no Python on PATH and an empty environment:
#   bash installer/smoke_test.sh dist/mirador/mirador            # Linux
#   bash installer/smoke_test.sh dist/Mirador.app/Contents/MacOS/mirador
# Checks: `--version` prints the pyproject version; `doctor` has no FAIL; `selftest --models` adds,
# searches and recalls a memory in a temp home and loads the bundled LLM and whisper models.
# installer/smoke_test.py does the same on Windows (and anywhere a Python runs the test).
set -euo pipefail
BIN=$(cd "$(dirname "${1:?usage: smoke_test.sh path/to/mirador}")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WANT=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
# PATH holds only tesseract (so doctor can find OCR), never a Python.
if t=$(command -v tesseract); then ln -s "$t" "$tmp/bin/tesseract"; fi
run() { env -i HOME="$tmp" PATH="$tmp/bin" "$BIN" "$@"; }
env -i HOME="$tmp" PATH="$tmp/bin" sh -c 'command -v python3 || command -v python' >/dev/null 2>&1 \
  && { echo "smoke: a Python is on the test PATH" >&2; exit 1; }

fail=0
step() { echo "== $*" >&2; }

step "--version"
got=$(run --version)
echo "$got"
[ "$got" = "mirador $WANT" ] || { echo "smoke: FAIL --version printed '$got', want 'mirador $WANT'" >&2; fail=1; }

step "doctor"
if ! run doctor; then echo "smoke: FAIL doctor reported a FAIL" >&2; fail=1; fi

step "selftest --models"
t0=$(date +%s)
if out=$(run selftest --models 2>"$tmp/selftest.err"); then :; else fail=1; fi
echo "$out"
grep -q '"ok": true' <<<"$out" && grep -q '"frozen": true' <<<"$out" || {
  echo "smoke: FAIL selftest (stderr below)" >&2; cat "$tmp/selftest.err" >&2; fail=1; }
echo "selftest took $(( $(date +%s) - t0 ))s" >&2

# Nothing may have been written outside the temp home (e.g. into the bundle or the real home).
leaks=$(find "$(dirname "$BIN")" -newer "$tmp/bin" -type f \( -name "*.gguf" -o -name "*.lance" \) | head -3)
[ -z "$leaks" ] || { echo "smoke: FAIL wrote into the bundle: $leaks" >&2; fail=1; }

[ "$fail" = 0 ] && echo "smoke: PASS" >&2 || echo "smoke: FAILED" >&2
exit "$fail"
