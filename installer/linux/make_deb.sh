#!/usr/bin/env bash
# Packages a built Linux bundle as a .deb with dpkg-deb (no debhelper needed):
#   bash installer/linux/make_deb.sh dist/mirador VERSION dist/mirador_VERSION_amd64.deb
#
# Layout: the one-folder app in /opt/mirador, /usr/bin/mirador -> /opt/mirador/mirador, the menu entry in
# /usr/share/applications, icons in /usr/share/icons/hicolor, and /etc/xdg/autostart/mirador.desktop with
# Hidden=true: start at login is off by default. A person turns it on from the tray ("Start at login",
# which writes ~/.config/autostart/mirador.desktop and so overrides the system entry); an administrator
# can turn it on for every user by setting Hidden=false there (a conffile: kept across upgrades).
# No maintainer scripts: desktop-file-utils and hicolor-icon-theme refresh their caches by dpkg triggers.
# Install: sudo apt install ./mirador_VERSION_ARCH.deb   Remove: sudo apt remove mirador (purge: also /etc)
set -euo pipefail
APPDIR=${1:?usage: make_deb.sh APPDIR VERSION OUT.deb}
VERSION=${2:?version}
OUT=${3:?output .deb}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ARCH=$(dpkg --print-architecture)
[ -x "$APPDIR/mirador" ] || { echo "make_deb: no $APPDIR/mirador — build the bundle first" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
pkg="$stage/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/opt" "$pkg/usr/bin" "$pkg/usr/share/applications" "$pkg/etc/xdg/autostart" \
  "$pkg/usr/share/doc/mirador"
cp -a "$APPDIR" "$pkg/opt/mirador"
ln -s /opt/mirador/mirador "$pkg/usr/bin/mirador"
sed 's|^Exec=.*|Exec=/opt/mirador/mirador app|' "$ROOT/installer/linux/mirador.desktop" \
  > "$pkg/usr/share/applications/mirador.desktop"
{ sed 's|^Exec=.*|Exec=/opt/mirador/mirador app|' "$ROOT/installer/linux/mirador.desktop"
  echo "Hidden=true"; echo "X-GNOME-Autostart-enabled=false"; } > "$pkg/etc/xdg/autostart/mirador.desktop"
for size in 16 24 32 48 64 128 256 512; do
  d="$pkg/usr/share/icons/hicolor/${size}x${size}/apps"
  mkdir -p "$d" && cp "$ROOT/assets/icons/mirador-$size.png" "$d/mirador.png"
done
mkdir -p "$pkg/usr/share/icons/hicolor/scalable/apps"
cp "$ROOT/assets/icons/mirador.svg" "$pkg/usr/share/icons/hicolor/scalable/apps/mirador.svg"
printf 'Mirador: Apache-2.0. Bundled models and their licences: docs/models.md in the source.\n' \
  > "$pkg/usr/share/doc/mirador/copyright"
for f in NOTICE LICENSE; do [ -f "$ROOT/$f" ] && cp "$ROOT/$f" "$pkg/usr/share/doc/mirador/$f"; done
# dpkg-deb keeps modes as they are: files readable by everyone, directories searchable.
chmod -R u+rwX,go+rX,go-w "$pkg"

# Depends: what the bundled Qt (xcb platform plugin, OpenGL, fonts, D-Bus for the tray) loads from the
# system; Recommends: OCR (tesseract with English) and the microphone (PortAudio), which doctor checks;
# Suggests: grim, how screen capture reads wlroots Wayland compositors (sway, Hyprland).
cat > "$pkg/DEBIAN/control" <<EOF
Package: mirador
Version: $VERSION
Architecture: $ARCH
Maintainer: Mirador developers <mirador@localhost>
Installed-Size: $(du -sk --exclude=DEBIAN "$pkg" | cut -f1)
Depends: libc6, libgl1, libegl1, libfontconfig1, libdbus-1-3, libxkbcommon-x11-0, libxcb-cursor0, libxcb-icccm4, libxcb-keysyms1, libxcb-shape0, libxcb-randr0, libxcb-render-util0, libxcb-image0, libxcb-xinerama0
Recommends: tesseract-ocr, tesseract-ocr-eng, libportaudio2
Suggests: grim
Section: utils
Priority: optional
Description: local-first memory for you and your AI assistants
 Mirador keeps what you see, hear and decide as searchable memory on your own
 machine, and gives it to AI assistants through MCP. Models and data stay local.
EOF
echo "/etc/xdg/autostart/mirador.desktop" > "$pkg/DEBIAN/conffiles"
mkdir -p "$(dirname "$OUT")"
# xz at level 6 keeps the download small; --root-owner-group: files owned by root whoever builds.
dpkg-deb --root-owner-group -Zxz -z6 --build "$pkg" "$OUT" >/dev/null
echo "make_deb: $OUT ($(du -h "$OUT" | cut -f1))" >&2
