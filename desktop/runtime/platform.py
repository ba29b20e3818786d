"""What this machine offers the app: a desktop to show windows on, a screen to grab, a microphone.

Two display checks on purpose, because the two consumers need different things:
- `can_show_windows()`: the Qt tray and windows run on Windows, macOS, and Linux under X11 or
  Wayland. `mirador app` uses it to choose between the tray app and the headless service.
- `can_grab_screen()`: whether there is a screen session at all. On X11 mss reads the display; on
  Wayland capture picks grim (wlroots) or the Screenshot portal (GNOME, KDE) and a window probe per
  desktop (capture/grab.py, capture/wayland/). Where a Wayland desktop lacks what it needs, the screen
  source still starts and says in `mirador status` what is missing, rather than staying off silently.
Both the tray app and the headless service decide capture sources through these (runtime/services.py).
"""

from __future__ import annotations

import os
import sys


def _desktop_os() -> bool:
    return sys.platform.startswith("win") or sys.platform == "darwin"


def can_show_windows() -> bool:
    """True where a tray app can show: Windows, macOS, or an X11/Wayland session."""
    return _desktop_os() or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def can_grab_screen() -> bool:
    """True where there is a screen to capture: Windows, macOS, an X11 display or a Wayland session."""
    return _desktop_os() or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def has_microphone(device: int | str | None = None) -> bool:
    """True when the input device (None: the default one) records 16 kHz mono, as voice capture needs."""
    try:
        import sounddevice as sd

        sd.check_input_settings(device=device, samplerate=16000, channels=1)
        return True
    except Exception:  # no PortAudio, no device, or unsupported rate: voice capture stays off
        return False
