#!/usr/bin/env bash
# Builds the installer for the OS it runs on, from an environment `scripts/bootstrap.sh` set up.
#
#   bash scripts/build_installer.sh            # `make installer` runs this after bootstrap
#
# Steps: PyInstaller one-folder app (installer/mirador.spec) -> prune what does not need to ship
# (installer/prune.py) -> package:
#   Linux   dist/mirador-VERSION-linux-ARCH.tar.gz  (folder + mirador.desktop + icon + install.sh)
#           dist/mirador_VERSION_ARCH.deb            (installer/linux/make_deb.sh, with dpkg-deb)
#           dist/mirador-llm-gemma-VERSION.tar.gz and dist/mirador-llm-gemma_VERSION_all.deb: the optional
#           Gemma 3 270M add-on (installer/linux/make_llm_addon.sh); the bundle leaves the GGUF out
#           dist/bundle-size.json                    (installer/bundle_size.py: every large item's size)
#   macOS   dist/Mirador-VERSION-macos-ARCH.dmg     (installer/macos/make_dmg.sh: codesign and
#           notarise when MIRADOR_CODESIGN_IDENTITY / MIRADOR_NOTARY_* are set)
#   Windows dist/Mirador-VERSION-windows-x64-setup.exe (Inno Setup: installer/windows/mirador.iss)
#
# llama.cpp must already be built portably in the venv (bootstrap does CMAKE_ARGS=-DGGML_NATIVE=OFF).
# On macOS build it with Metal before running this:
#   CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_METAL=ON" FORCE_CMAKE=1 pip install "llama-cpp-python>=0.3.16,<0.4"
# Environment: VENV (default .venv), SKIP_PYINSTALLER=1 re-packages an existing dist/mirador.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
if [ -x "$VENV/bin/python" ]; then VPY="$VENV/bin/python"; else VPY="$VENV/Scripts/python.exe"; fi
VERSION=$("$VPY" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
ARCH=$(uname -m)
start=$(date +%s)

# PyInstaller is the `installer` optional group in pyproject.toml; install just it (never torch/llama).
if ! "$VPY" -c "import PyInstaller" 2>/dev/null; then
  echo "build_installer: installing PyInstaller into $VENV" >&2
  "$VPY" -m pip install -q "pyinstaller>=6.10,<7"
fi
"$VPY" scripts/make_icons.py --check || "$VPY" scripts/make_icons.py

if [ "${SKIP_PYINSTALLER:-0}" != 1 ]; then
  echo "build_installer: PyInstaller (takes 10+ minutes on 2 cores)" >&2
  "$VPY" -m PyInstaller --noconfirm --log-level WARN --distpath dist --workpath build/pyinstaller \
    installer/mirador.spec
fi

case "$(uname -s)" in
  Darwin) APPDIR=dist/Mirador.app; INTERNAL=dist/Mirador.app/Contents ;;
  *) APPDIR=dist/mirador; INTERNAL=dist/mirador/_internal ;;
esac
mkdir -p build
"$VPY" installer/prune.py "$INTERNAL" --report build/prune-report.json >/dev/null

case "$(uname -s)" in
  Linux)
    name="mirador-$VERSION-linux-$ARCH"
    stage="build/$name"
    rm -rf "$stage" && mkdir -p "$stage"
    cp -a dist/mirador "$stage/mirador"
    cp installer/linux/mirador.desktop installer/linux/install.sh "$stage/"
    cp assets/icons/mirador-256.png "$stage/mirador.png"
    chmod +x "$stage/install.sh"
    tar -C build -czf "dist/$name.tar.gz" "$name"
    echo "build_installer: dist/$name.tar.gz ($(du -h "dist/$name.tar.gz" | cut -f1))" >&2
    deb="dist/mirador_${VERSION}_$(dpkg --print-architecture 2>/dev/null || echo amd64).deb"
    if command -v dpkg-deb >/dev/null; then
      bash installer/linux/make_deb.sh dist/mirador "$VERSION" "$deb"
    else
      echo "build_installer: no dpkg-deb here, so no .deb (apt-get install dpkg-dev)" >&2
    fi
    bash installer/linux/make_llm_addon.sh "$VERSION" dist "$VPY"
    "$VPY" installer/bundle_size.py dist/mirador --prune-report build/prune-report.json \
      --package "dist/$name.tar.gz" --package "$deb" \
      --addon "dist/mirador-llm-gemma-$VERSION.tar.gz" --addon "dist/mirador-llm-gemma_${VERSION}_all.deb" \
      --out dist/bundle-size.json >/dev/null ;;
  Darwin)
    VERSION="$VERSION" bash installer/macos/make_dmg.sh "$APPDIR" "dist/Mirador-$VERSION-macos-$ARCH.dmg" ;;
  MINGW*|MSYS*|CYGWIN*)
    ISCC=${ISCC:-iscc}
    # ISCC takes -X as well as /X; the dash form survives Git Bash's path conversion.
    "$ISCC" -Qp "-DAppVersion=$VERSION" "-DSourceDir=$(cygpath -w "$PWD/dist/mirador")" \
      "-O$(cygpath -w "$PWD/dist")" installer/windows/mirador.iss
    echo "build_installer: dist/Mirador-$VERSION-windows-x64-setup.exe" >&2 ;;
esac
echo "build_installer: done in $(( $(date +%s) - start ))s; sizes in dist/bundle-size.json" >&2
