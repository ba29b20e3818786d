#!/usr/bin/env bash
# Smoke test of the .deb on this machine (needs root, or sudo; Debian/Ubuntu with apt):
#   bash installer/linux/deb_smoke_test.sh dist/mirador_VERSION_ARCH.deb [dist/mirador-llm-gemma_VERSION_all.deb]
# 1. `apt install ./mirador_*.deb`; the menu entry, icon, /usr/bin/mirador and the (disabled) autostart
#    entry are where the package says.
# 2. As a throwaway normal user (useradd): `mirador --version`, `mirador doctor`, `mirador selftest --models`
#    (the LLM step skipped: the Gemma GGUF is an add-on).
# 3. The Gemma add-on (the .deb given, or the one built beside the first): `apt install` it, and
#    `selftest --models` loads the LLM from /opt/mirador/models.
# 4. `apt purge` both, then nothing of them is left under /opt, /usr or /etc (files listed before the
#    install and after the purge), and the user's home holds only what the runs wrote (their data).
# The user is deleted at the end. A Mirador already installed from a .deb makes the test stop (it would
# be removed).
set -euo pipefail
DEB=$(cd "$(dirname "${1:?usage: deb_smoke_test.sh path/to/mirador_VERSION_ARCH.deb}")" && pwd)/$(basename "$1")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WANT=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/pyproject.toml" | head -1)
ADDON=${2:-$(dirname "$DEB")/mirador-llm-gemma_${WANT}_all.deb}
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
for p in mirador mirador-llm-gemma; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    echo "deb smoke: the $p package is already installed; remove it first (apt remove $p)" >&2; exit 2
  fi
done

tmp=$(mktemp -d)
chmod 755 "$tmp"
user="mirsmoke$$"
fail=0
step() { echo "== $*" >&2; }
bad() { echo "deb smoke: FAIL $*" >&2; fail=1; }
# apt refuses to purge a package it has never seen: name the add-on only once dpkg knows it.
ours() { echo mirador; dpkg-query -W mirador-llm-gemma >/dev/null 2>&1 && echo mirador-llm-gemma || true; }
cleanup() {
  $SUDO apt-get purge -y -qq $(ours) >/dev/null 2>&1 || true
  id "$user" >/dev/null 2>&1 && $SUDO userdel -r "$user" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
# Every file and link under the system trees a package may write to (not /var: dpkg's own records).
snapshot() { $SUDO find /opt /usr /etc \( -type f -o -type l \) 2>/dev/null | sort > "$1"; }
pkgs() { dpkg-query -W -f='${Package}\n' | sort; }

snapshot "$tmp/sys-before"; pkgs > "$tmp/pkgs-before"

step "apt install $(basename "$DEB")"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$DEB" >/dev/null
for f in /usr/bin/mirador /opt/mirador/mirador /usr/share/applications/mirador.desktop \
         /usr/share/icons/hicolor/256x256/apps/mirador.png /etc/xdg/autostart/mirador.desktop; do
  [ -e "$f" ] || bad "$f missing after install"
done
grep -q '^Hidden=true' /etc/xdg/autostart/mirador.desktop || bad "autostart entry is not disabled by default"
command -v desktop-file-validate >/dev/null && { desktop-file-validate /usr/share/applications/mirador.desktop \
  || bad "menu entry does not validate"; }
echo "installed: $(du -sh /opt/mirador | cut -f1) in /opt/mirador" >&2

step "throwaway user $user"
$SUDO useradd -m -s /bin/sh "$user"
home=$(getent passwd "$user" | cut -d: -f6)
find "$home" | sort > "$tmp/home-before"
# A login-like environment: the user's HOME, the system PATH (tesseract for doctor), no Python of ours.
as_user() { $SUDO runuser -u "$user" -- env -i HOME="$home" USER="$user" LANG=C.UTF-8 PATH=/usr/bin:/bin "$@"; }

step "mirador --version"
got=$(as_user mirador --version) || true
echo "$got"
[ "$got" = "mirador $WANT" ] || bad "--version printed '$got', want 'mirador $WANT'"

step "mirador doctor"
as_user mirador doctor || bad "doctor reported a FAIL"

step "mirador selftest --models"
t0=$(date +%s)
if out=$(as_user mirador selftest --models 2>"$tmp/selftest.err"); then :; else bad "selftest exited non-zero"; fi
echo "$out"
grep -q '"ok": true' <<<"$out" && grep -q '"frozen": true' <<<"$out" || {
  bad "selftest (stderr below)"; cat "$tmp/selftest.err" >&2; }
echo "selftest took $(( $(date +%s) - t0 ))s" >&2
grep -q '"llm": null' <<<"$out" && grep -q '"skipped": ".*sudo apt install ./mirador-llm-gemma_' <<<"$out" \
  || bad "without the add-on the LLM step should be skipped, naming the add-on's .deb"

if [ -f "$ADDON" ]; then
  step "apt install $(basename "$ADDON") (the Gemma add-on)"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$(cd "$(dirname "$ADDON")" && pwd)/$(basename "$ADDON")" \
    >/dev/null || bad "the add-on did not install"
  as_user mirador doctor | grep '\] llm:' >&2 || true
  t0=$(date +%s)
  out=$(as_user mirador selftest --models 2>"$tmp/selftest.err") || bad "selftest with the add-on exited non-zero"
  echo "$out"
  grep -q '"llm": "/opt/mirador/models/gemma-3-270m-q4_k_m.gguf"' <<<"$out" && grep -q '"ok": true' <<<"$out" || {
    bad "the LLM was not loaded from the add-on (stderr below)"; cat "$tmp/selftest.err" >&2; }
  echo "selftest with the LLM took $(( $(date +%s) - t0 ))s" >&2
else
  echo "deb smoke: no add-on at $ADDON, so the LLM add-on is not tested" >&2
fi
find "$home" | sort > "$tmp/home-used"

step "apt purge $(ours | tr '\n' ' ')"
DEBIAN_FRONTEND=noninteractive $SUDO apt-get purge -y -qq $(ours) >/dev/null
snapshot "$tmp/sys-after"; pkgs > "$tmp/pkgs-after"
# Dependencies apt pulled in stay installed, as apt leaves them (autoremove is the person's choice).
new_pkgs=$(comm -13 "$tmp/pkgs-before" "$tmp/pkgs-after")
: > "$tmp/dep-files"
for p in $new_pkgs; do dpkg -L "$p" 2>/dev/null >> "$tmp/dep-files" || true; done
sort -u -o "$tmp/dep-files" "$tmp/dep-files"
left=$(comm -13 "$tmp/sys-before" "$tmp/sys-after" | comm -23 - "$tmp/dep-files" \
  | grep -v -e '^/etc/ld.so.cache$' -e '^/usr/share/applications/mimeinfo.cache$' \
            -e '/icon-theme.cache$' -e '^/etc/\(passwd\|group\|shadow\|gshadow\|subuid\|subgid\)-\?$' || true)
[ -n "$new_pkgs" ] && echo "dependencies apt installed (left installed): $new_pkgs" >&2
[ -z "$left" ] || bad "left behind after purge: $(head -20 <<<"$left")"
[ ! -e /opt/mirador ] || bad "/opt/mirador still exists"
# The home: the purge touches nothing in it; what the runs wrote is all Mirador's own data and caches.
find "$home" | sort > "$tmp/home-after"
cmp -s "$tmp/home-used" "$tmp/home-after" || bad "the purge changed the user's home"
stray=$(comm -13 "$tmp/home-before" "$tmp/home-after" \
  | grep -v -e "^$home/.local\$" -e "^$home/.local/share\$" -e "^$home/.local/share/mirador" \
            -e "^$home/.cache\$" -e "^$home/.cache/mirador" -e "^$home/.config\$" -e "^$home/.config/mirador" || true)
[ -z "$stray" ] || bad "the runs wrote outside Mirador's data and cache folders: $(head -10 <<<"$stray")"
echo "user's data left (theirs to keep or delete): $(comm -13 "$tmp/home-before" "$tmp/home-after" \
  | grep -c . || true) paths under $home" >&2

[ "$fail" = 0 ] && echo "deb smoke: PASS" >&2 || echo "deb smoke: FAILED" >&2
exit "$fail"
