#!/usr/bin/env bash
# Signs, packs and (optionally) notarises Mirador.app into a .dmg. Runs on macOS only; it has not
# been run on the machine this project is developed on (Linux), only in the release workflow.
#
#   bash installer/macos/make_dmg.sh dist/Mirador.app dist/Mirador-0.1.0-macos-arm64.dmg
#
# Signing and notarisation are driven by the environment; with none of these set the app is
# signed ad hoc (runs on the machine that built it; elsewhere Gatekeeper asks the person to
# right-click > Open) and the .dmg is not notarised.
#   MIRADOR_CODESIGN_IDENTITY   "Developer ID Application: Name (TEAMID)", in the login keychain
#                               (in CI: import a .p12 first, see .github/workflows/release.yml)
#   MIRADOR_NOTARY_PROFILE      a notarytool keychain profile (xcrun notarytool store-credentials), or
#   MIRADOR_NOTARY_APPLE_ID + MIRADOR_NOTARY_TEAM_ID + MIRADOR_NOTARY_PASSWORD (app-specific password)
set -euo pipefail
APP=${1:?usage: make_dmg.sh path/to/Mirador.app out.dmg}
DMG=${2:?usage: make_dmg.sh path/to/Mirador.app out.dmg}
HERE=$(cd "$(dirname "$0")" && pwd)
IDENTITY=${MIRADOR_CODESIGN_IDENTITY:--}

# 1. Sign. Pruning (installer/prune.py) changed the bundle after PyInstaller signed it, so every
#    Mach-O is re-signed inside-out with the hardened runtime, then the app itself.
sign_opts=(--force --timestamp --options runtime --entitlements "$HERE/entitlements.plist" --sign "$IDENTITY")
[ "$IDENTITY" = "-" ] && sign_opts=(--force --sign -)  # ad hoc: no timestamp server, no hardened runtime
find "$APP/Contents" -type f \( -name "*.so" -o -name "*.dylib" -o -perm -u+x \) -print0 |
  while IFS= read -r -d '' f; do
    if file -b "$f" | grep -q "Mach-O"; then codesign "${sign_opts[@]}" "$f"; fi
  done
codesign "${sign_opts[@]}" "$APP"
codesign --verify --deep --strict --verbose=2 "$APP"

# 2. Pack: the app plus an /Applications link to drag it onto.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -R "$APP" "$stage/"
ln -s /Applications "$stage/Applications"
rm -f "$DMG"
hdiutil create -volname "Mirador" -srcfolder "$stage" -fs HFS+ -format UDZO -ov "$DMG"
[ "$IDENTITY" = "-" ] || codesign --force --timestamp --sign "$IDENTITY" "$DMG"

# 3. Notarise and staple (needs a Developer ID identity above).
if [ "$IDENTITY" != "-" ]; then
  if [ -n "${MIRADOR_NOTARY_PROFILE:-}" ]; then
    xcrun notarytool submit "$DMG" --keychain-profile "$MIRADOR_NOTARY_PROFILE" --wait
  elif [ -n "${MIRADOR_NOTARY_APPLE_ID:-}" ]; then
    xcrun notarytool submit "$DMG" --apple-id "$MIRADOR_NOTARY_APPLE_ID" \
      --team-id "${MIRADOR_NOTARY_TEAM_ID:?set MIRADOR_NOTARY_TEAM_ID}" \
      --password "${MIRADOR_NOTARY_PASSWORD:?set MIRADOR_NOTARY_PASSWORD}" --wait
  else
    echo "make_dmg: signed but not notarised (set MIRADOR_NOTARY_PROFILE or MIRADOR_NOTARY_APPLE_ID)" >&2
    exit 0
  fi
  xcrun stapler staple "$DMG"
  spctl --assess --type open --context context:primary-signature --verbose "$DMG"
fi
echo "make_dmg: $DMG ($(du -h "$DMG" | cut -f1))" >&2
