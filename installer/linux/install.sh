#!/usr/bin/env sh
# Installs Mirador from this unpacked tarball for the current user (no root needed):
#   ./install.sh            -> ~/.local/opt/mirador, ~/.local/bin/mirador, menu entry and icon
#   ./install.sh --uninstall
# The optional Gemma add-on (mirador-llm-gemma-VERSION.tar.gz) unpacks into PREFIX's models/ folder;
# reinstalling or upgrading keeps it there.
# PREFIX=/opt/mirador BIN_DIR=/usr/local/bin sudo -E ./install.sh installs system-wide instead.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-$HOME/.local/opt/mirador}
BIN_DIR=${BIN_DIR:-$HOME/.local/bin}
DATA=${XDG_DATA_HOME:-$HOME/.local/share}
APPS="$DATA/applications"
ICON_DIR="$DATA/icons/hicolor/256x256/apps"

if [ "${1:-}" = "--uninstall" ]; then
  rm -rf "$PREFIX" "$BIN_DIR/mirador" "$APPS/mirador.desktop" "$ICON_DIR/mirador.png"
  echo "Mirador removed (your data in ~/.local/share/mirador is kept; delete it yourself if you want)."
  exit 0
fi

mkdir -p "$PREFIX" "$BIN_DIR" "$APPS" "$ICON_DIR"
# An add-on unpacked into the old copy (PREFIX/models) moves over to the new one.
kept="$PREFIX.models-$$"
if [ -d "$PREFIX/models" ]; then mv "$PREFIX/models" "$kept"; fi
rm -rf "$PREFIX" && cp -a "$here/mirador" "$PREFIX"
if [ -d "$kept" ]; then mv "$kept" "$PREFIX/models"; fi
ln -sf "$PREFIX/mirador" "$BIN_DIR/mirador"
cp "$here/mirador.png" "$ICON_DIR/mirador.png"
sed "s|^Exec=.*|Exec=\"$PREFIX/mirador\" app|" "$here/mirador.desktop" > "$APPS/mirador.desktop"
command -v update-desktop-database >/dev/null 2>&1 && update-desktop-database -q "$APPS" || true
echo "Mirador installed in $PREFIX."
echo "Start it from the applications menu, or run: $BIN_DIR/mirador app   (check: mirador doctor)"
[ -f "$PREFIX/models/gemma-3-270m-q4_k_m.gguf" ] || echo "Optional: the model for extraction.engine = \"llm\"" \
  "is an add-on: tar -xzf mirador-llm-gemma-VERSION.tar.gz -C $PREFIX"
case ":$PATH:" in *":$BIN_DIR:"*) ;; *) echo "Add $BIN_DIR to PATH to run 'mirador' by name." ;; esac
