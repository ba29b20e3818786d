#!/usr/bin/env bash
# Sets up everything `make run` and `make test` need on a fresh machine, idempotently.
# A second run only checks stamps and returns in about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PY=${PYTHON:-python3}
STAMP="$VENV/.mirador-deps"

# System packages: tesseract for OCR, portaudio for the microphone, espeak-ng to make speech in
# tests, and the virtual display + window manager + tray host that the desktop tests run under.
# Wayland capture (capture/wayland/): grim reads wlroots screens; the tests run a headless sway with
# foot windows, and the Screenshot portal on it (xdg-desktop-portal + its wlr backend, PipeWire, and
# the gtk backend for the Access dialog portal 1.16 requires) on a private dbus-daemon. KDE: a headless
# KWin (kwin-wayland, ~38 MB to download) and the portal's KDE backend with the Qt Wayland plugin and the
# QML modules its screenshot dialog loads (~3 MB) (tests/capture/test_kwin_headless.py).
APT_PKGS=(tesseract-ocr tesseract-ocr-eng libportaudio2 espeak-ng sox xvfb openbox trayer xdotool
          x11-utils libgl1 libegl1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1
          libxcb-shape0 libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0
          libdbus-1-3 libfontconfig1 fonts-dejavu-core cmake build-essential
          grim sway foot dbus-daemon pipewire xdg-desktop-portal xdg-desktop-portal-wlr xdg-desktop-portal-gtk
          kwin-wayland xdg-desktop-portal-kde qtwayland5 qml-module-org-kde-kirigami2 qml-module-qtquick-controls2
          qml-module-qtquick-layouts)

install_system() {
  case "$(uname -s)" in
    Linux)
      if command -v dpkg-query >/dev/null && command -v apt-get >/dev/null; then
        local missing=()
        for p in "${APT_PKGS[@]}"; do
          dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
        done
        if ((${#missing[@]})); then
          local SUDO=""
          [ "$(id -u)" -eq 0 ] || SUDO="sudo"
          echo "bootstrap: installing system packages: ${missing[*]}" >&2
          $SUDO apt-get update -qq
          DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        fi
      else
        echo "bootstrap: not a Debian/Ubuntu system; install these yourself with your package manager:" >&2
        echo "  tesseract (with English data), portaudio, espeak-ng, cmake, a C++ compiler" >&2
      fi ;;
    Darwin)
      command -v tesseract >/dev/null || {
        echo "bootstrap: missing system tools. Run:  brew install tesseract portaudio espeak-ng cmake" >&2; } ;;
    MINGW*|MSYS*|CYGWIN*)
      command -v tesseract >/dev/null || {
        echo "bootstrap: missing tesseract. Run:  winget install UB-Mannheim.TesseractOCR" >&2
        echo "           and install Visual Studio Build Tools (C++) and CMake for llama-cpp-python." >&2; } ;;
  esac
}

install_system

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"

want=$(cat pyproject.toml scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi

export PIP_DISABLE_PIP_VERSION_CHECK=1
# pip: quiet, and without the machine-specific "Location ... is ignored" noise.
pip_q() { "$VPY" -m pip "$@" 2> >(grep -v "^WARNING: Location" >&2); }
pip_q install -q --upgrade pip setuptools wheel
# CPU torch first (the dev extra's: training, benches, tests against the torch path; the app runs without
# it): left to the resolver, sentence-transformers would pull a multi-GB CUDA build.
# Elsewhere set TORCH_INDEX=https://download.pytorch.org/whl/cpu to get the CPU wheel.
pip_q install -q "torch==2.13.0" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}
# llama.cpp must be built portably: the native build segfaults in decode on some CPUs and
# installers need binaries that run anywhere. pip caches the wheel regardless of CMAKE_ARGS.
if ! "$VPY" -c "import llama_cpp" 2>/dev/null; then
  echo "bootstrap: building llama-cpp-python (portable, takes ~5 minutes on 2 cores)" >&2
  CMAKE_ARGS="-DGGML_NATIVE=OFF" FORCE_CMAKE=1 pip_q install -q "llama-cpp-python>=0.3.16,<0.4"
fi
pip_q install -q -e ".[dev]"
echo "$want" > "$STAMP"
echo "bootstrap: ready" >&2
