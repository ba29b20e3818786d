#!/usr/bin/env bash
# Smoke test of a built bundle (Linux/macOS), run with no Python on PATH and an empty environment:
#   bash installer/smoke_test.sh dist/mirador/mirador [dist/mirador-llm-gemma-VERSION.tar.gz]   # Linux
#   bash installer/smoke_test.sh dist/Mirador.app/Contents/MacOS/mirador
# Checks: `--version` prints the pyproject version; `doctor` has no FAIL; `selftest --models` adds,
# searches and recalls a memory in a temp home and loads the whisper model, and skips the LLM (the
# bundle leaves the Gemma GGUF out); `evidence add` + `extract` make a memory with the default engine.
# With the Gemma add-on (the tarball given, or the one built beside the bundle in dist/): unpacked as
# docs/install.md says into a linked copy of the app, `selftest --models` loads the LLM from it.
# installer/smoke_test.py does the same on Windows (and anywhere a Python runs the test).
set -euo pipefail
BIN=$(cd "$(dirname "${1:?usage: smoke_test.sh path/to/mirador [addon.tar.gz]}")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WANT=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
ADDON=${2:-$(dirname "$(dirname "$BIN")")/mirador-llm-gemma-$WANT.tar.gz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin"
# PATH holds only tesseract (so doctor can find OCR), never a Python.
if t=$(command -v tesseract); then ln -s "$t" "$tmp/bin/tesseract"; fi
run() { env -i HOME="$tmp" PATH="$tmp/bin" "$BIN" "$@"; }
# the JSON value of "key" on its own line of an indented document (no Python here to parse it)
field() { sed -n "s/^ *\"$1\": \(.*\),\{0,1\}\$/\1/p" | head -1 | sed 's/,$//'; }
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
# The Gemma GGUF is the add-on's: without it the LLM step is skipped and says how to install it.
if [ "$(field llm <<<"$out")" != null ] || ! grep -q '"skipped": ".*mirador-llm-gemma' <<<"$out"; then
  echo "smoke: FAIL the bundle without the add-on should skip the LLM and name the add-on" >&2; fail=1
fi

step "evidence add + extract (default engine)"
run evidence add --source manual "We decided to hold the Mirador smoke-test offsite in Lisbon on 14 March." >/dev/null \
  || { echo "smoke: FAIL evidence add" >&2; fail=1; }
ext=$(run extract --json) || { echo "smoke: FAIL extract exited non-zero" >&2; fail=1; }
echo "$ext" | grep -E '"(created|candidates|statements|model)"' >&2 || true
[ "$(field created <<<"$ext")" = 1 ] && grep -q '"statements": 1' <<<"$ext" \
  || { echo "smoke: FAIL extraction with the default engine made no memory: $ext" >&2; fail=1; }

if [ -f "$ADDON" ]; then
  step "with the Gemma add-on ($(basename "$ADDON")): selftest --models"
  app=$(dirname "$BIN")
  # A copy of the app of links (a plain copy if dist/ is on another file system), so the build stays as built.
  cp -al "$app" "$tmp/app" 2>/dev/null || { rm -rf "$tmp/app"; cp -a "$app" "$tmp/app"; }
  tar -xzf "$ADDON" -C "$tmp/app"
  t0=$(date +%s)
  out=$(env -i HOME="$tmp" PATH="$tmp/bin" "$tmp/app/$(basename "$BIN")" selftest --models 2>"$tmp/selftest.err") || true
  echo "$out"
  [ "$(field llm <<<"$out")" = "\"$tmp/app/models/gemma-3-270m-q4_k_m.gguf\"" ] && grep -q '"ok": true' <<<"$out" || {
    echo "smoke: FAIL the LLM was not loaded from the add-on (stderr below)" >&2; cat "$tmp/selftest.err" >&2; fail=1; }
  echo "selftest with the LLM took $(( $(date +%s) - t0 ))s" >&2
else
  echo "smoke: no add-on at $ADDON, so the LLM add-on is not tested" >&2
fi

# Nothing may have been written outside the temp home (e.g. into the bundle or the real home).
leaks=$(find "$(dirname "$BIN")" -newer "$tmp/bin" -type f \( -name "*.gguf" -o -name "*.lance" \) | head -3)
[ -z "$leaks" ] || { echo "smoke: FAIL wrote into the bundle: $leaks" >&2; fail=1; }

[ "$fail" = 0 ] && echo "smoke: PASS" >&2 || echo "smoke: FAILED" >&2
exit "$fail"
