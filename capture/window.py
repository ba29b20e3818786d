"""Which window is active: one small interface, one implementation per OS (import-guarded).

Linux/X11 reads EWMH `_NET_ACTIVE_WINDOW` through libX11 with ctypes (no extra dependency and no
process spawn per frame), falling back to `xprop`. Windows uses user32 via ctypes; macOS asks
System Events through `osascript`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WindowInfo:
    """The active window: app name, title and its rectangle on the virtual screen (if known)."""

    app: str
    title: str
    left: int | None = None
    top: int | None = None
    width: int | None = None
    height: int | None = None
    wm_class: str = ""  # X11 instance name, e.g. "keepassxc"
    process: str = ""  # executable name when known
    id: int = 0

    @property
    def region(self) -> dict | None:
        """mss-style region dict, or None when the geometry is unknown."""
        if None in (self.left, self.top, self.width, self.height) or not self.width or not self.height:
            return None
        return {"left": self.left, "top": self.top, "width": self.width, "height": self.height}


class WindowProbe:
    """Interface: `active()` returns the active window or None when it cannot tell."""

    name = "none"

    def active(self) -> WindowInfo | None:
        """The currently focused window, or None."""
        return None

    def close(self) -> None:
        """Release OS handles."""


# ---- X11 ------------------------------------------------------------------------------------------

_XA_WINDOW, _XA_CARDINAL, _XA_STRING = 33, 6, 31


class X11Probe(WindowProbe):
    """EWMH `_NET_ACTIVE_WINDOW` via libX11 + ctypes; one display connection, used from one thread."""

    name = "x11"

    def __init__(self, display: str | None = None) -> None:
        lib = ctypes.util.find_library("X11")
        if not lib:
            raise OSError("libX11 not found")
        x = self._x = ctypes.cdll.LoadLibrary(lib)
        x.XOpenDisplay.restype = ctypes.c_void_p
        x.XOpenDisplay.argtypes = [ctypes.c_char_p]
        x.XDefaultRootWindow.restype = ctypes.c_ulong
        x.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
        x.XInternAtom.restype = ctypes.c_ulong
        x.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
        x.XGetWindowProperty.argtypes = [
            ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long, ctypes.c_long, ctypes.c_int,
            ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_int),
            ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_void_p)]
        x.XFree.argtypes = [ctypes.c_void_p]
        x.XCloseDisplay.argtypes = [ctypes.c_void_p]
        x.XGetGeometry.argtypes = [ctypes.c_void_p, ctypes.c_ulong] + [ctypes.c_void_p] * 7
        x.XTranslateCoordinates.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int,
                                            ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        # The default X error handler exits the process; a window closing between two calls
        # (BadWindow) is normal here, so errors are ignored and show up as empty replies.
        self._handler = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(lambda d, e: 0)
        x.XSetErrorHandler(self._handler)
        self._dpy = x.XOpenDisplay(display.encode() if display else None)
        if not self._dpy:
            raise OSError(f"cannot open X display {display or os.environ.get('DISPLAY')!r}")
        self._root = x.XDefaultRootWindow(self._dpy)
        self._atoms = {n: x.XInternAtom(self._dpy, n.encode(), 0)
                       for n in ("_NET_ACTIVE_WINDOW", "_NET_WM_NAME", "UTF8_STRING", "WM_CLASS", "WM_NAME", "_NET_WM_PID")}

    def _prop(self, win: int, atom: str, type_: int) -> bytes | None:
        t, fmt, n, after, data = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_ulong(), ctypes.c_ulong(), ctypes.c_void_p()
        st = self._x.XGetWindowProperty(self._dpy, win, self._atoms[atom], 0, 4096, 0, type_, ctypes.byref(t),
                                        ctypes.byref(fmt), ctypes.byref(n), ctypes.byref(after), ctypes.byref(data))
        if st != 0 or not data.value:
            return None
        try:
            size = {8: 1, 16: ctypes.sizeof(ctypes.c_short), 32: ctypes.sizeof(ctypes.c_long)}.get(fmt.value, 1)
            return ctypes.string_at(data.value, n.value * size)
        finally:
            self._x.XFree(data)

    def _geometry(self, win: int) -> tuple[int, int, int, int] | None:
        root, gx, gy = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_int()
        w, h, bw, depth = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
        if not self._x.XGetGeometry(self._dpy, win, ctypes.byref(root), ctypes.byref(gx), ctypes.byref(gy),
                                    ctypes.byref(w), ctypes.byref(h), ctypes.byref(bw), ctypes.byref(depth)):
            return None
        ax, ay, child = ctypes.c_int(), ctypes.c_int(), ctypes.c_ulong()
        if not self._x.XTranslateCoordinates(self._dpy, win, self._root, 0, 0, ctypes.byref(ax), ctypes.byref(ay),
                                             ctypes.byref(child)):
            return None
        return ax.value, ay.value, w.value, h.value

    def active(self) -> WindowInfo | None:
        """The window EWMH says is active (None if the window manager does not say)."""
        raw = self._prop(self._root, "_NET_ACTIVE_WINDOW", _XA_WINDOW)
        if not raw:
            return None
        wid = ctypes.c_ulong.from_buffer_copy(raw[: ctypes.sizeof(ctypes.c_ulong)]).value
        if not wid:
            return None
        name = self._prop(wid, "_NET_WM_NAME", self._atoms["UTF8_STRING"]) or self._prop(wid, "WM_NAME", _XA_STRING)
        cls = (self._prop(wid, "WM_CLASS", _XA_STRING) or b"").split(b"\0")
        instance = cls[0].decode("utf-8", "replace") if cls else ""
        klass = cls[1].decode("utf-8", "replace") if len(cls) > 1 else instance
        pid_raw = self._prop(wid, "_NET_WM_PID", _XA_CARDINAL)
        geo = self._geometry(wid)
        return WindowInfo(app=klass, title=(name or b"").decode("utf-8", "replace"), wm_class=instance,
                          process=_proc_name(ctypes.c_ulong.from_buffer_copy(pid_raw[:8]).value) if pid_raw else "",
                          id=wid, **(dict(zip(("left", "top", "width", "height"), geo, strict=True)) if geo else {}))

    def close(self) -> None:
        """Close the display connection."""
        if self._dpy:
            self._x.XCloseDisplay(self._dpy)
            self._dpy = None


def _proc_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


class XpropProbe(WindowProbe):
    """Fallback for X11 without a loadable libX11 binding: two `xprop` calls per probe."""

    name = "xprop"

    def active(self) -> WindowInfo | None:
        """The active window as xprop reports it (no geometry)."""
        try:
            root = subprocess.run(["xprop", "-root", "_NET_ACTIVE_WINDOW"], capture_output=True, text=True, timeout=2)
            m = re.search(r"window id # (0x[0-9a-f]+)", root.stdout)
            if not m or int(m.group(1), 16) == 0:
                return None
            out = subprocess.run(["xprop", "-id", m.group(1), "WM_CLASS", "_NET_WM_NAME", "WM_NAME"],
                                 capture_output=True, text=True, timeout=2).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        cls = re.findall(r'"([^"]*)"', (re.search(r"WM_CLASS.*", out) or re.match("", "")).group(0))
        title = re.search(r'(?:_NET_WM_NAME|WM_NAME)\([^)]*\) = "(.*)"', out)
        return WindowInfo(app=cls[1] if len(cls) > 1 else (cls[0] if cls else ""), title=title.group(1) if title else "",
                          wm_class=cls[0] if cls else "", id=int(m.group(1), 16))


# ---- Windows --------------------------------------------------------------------------------------


class Win32Probe(WindowProbe):
    """GetForegroundWindow and friends from user32/kernel32 via ctypes."""

    name = "win32"

    def __init__(self) -> None:
        from ctypes import wintypes  # noqa: F401 - fails early off Windows

        self._u = ctypes.windll.user32  # type: ignore[attr-defined]
        self._k = ctypes.windll.kernel32  # type: ignore[attr-defined]

    def active(self) -> WindowInfo | None:
        """The foreground window with its title, rectangle and executable name."""
        from ctypes import wintypes

        hwnd = self._u.GetForegroundWindow()
        if not hwnd:
            return None
        n = self._u.GetWindowTextLengthW(hwnd)
        buf = ctypes.create_unicode_buffer(n + 1)
        self._u.GetWindowTextW(hwnd, buf, n + 1)
        rect = wintypes.RECT()
        self._u.GetWindowRect(hwnd, ctypes.byref(rect))
        pid = wintypes.DWORD()
        self._u.GetWindowThreadProcessId(hwnd, ctypes.byref(pid))
        exe = ""
        h = self._k.OpenProcess(0x1000, False, pid.value)  # PROCESS_QUERY_LIMITED_INFORMATION
        if h:
            size = wintypes.DWORD(1024)
            path = ctypes.create_unicode_buffer(1024)
            if self._k.QueryFullProcessImageNameW(h, 0, path, ctypes.byref(size)):
                exe = os.path.splitext(os.path.basename(path.value))[0]
            self._k.CloseHandle(h)
        return WindowInfo(app=exe, title=buf.value, left=rect.left, top=rect.top, width=rect.right - rect.left,
                          height=rect.bottom - rect.top, process=exe, id=int(hwnd))


# ---- macOS ----------------------------------------------------------------------------------------

_OSA = '''tell application "System Events"
  set p to first application process whose frontmost is true
  set t to ""
  set g to ""
  try
    set w to front window of p
    set t to name of w
    set {x, y} to position of w
    set {ww, hh} to size of w
    set g to (x as text) & "," & (y as text) & "," & (ww as text) & "," & (hh as text)
  end try
  return (name of p) & linefeed & t & linefeed & g
end tell'''


class MacProbe(WindowProbe):
    """Front app and window through System Events (needs the Accessibility permission)."""

    name = "macos"

    def active(self) -> WindowInfo | None:
        """The frontmost app's front window."""
        try:
            out = subprocess.run(["osascript", "-e", _OSA], capture_output=True, text=True, timeout=3).stdout
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = (out.rstrip("\n").split("\n") + ["", "", ""])[:3]
        geo = [int(float(v)) for v in lines[2].split(",")] if lines[2].count(",") == 3 else None
        return WindowInfo(app=lines[0], title=lines[1], process=lines[0],
                          **(dict(zip(("left", "top", "width", "height"), geo, strict=True)) if geo else {}))


def default_probe() -> WindowProbe:
    """The best probe for this OS and session; a null probe (app unknown) if none works."""
    try:
        if sys.platform.startswith("win"):
            return Win32Probe()
        if sys.platform == "darwin":
            return MacProbe() if shutil.which("osascript") else WindowProbe()
        if os.environ.get("DISPLAY"):
            try:
                return X11Probe()
            except OSError as e:
                log.info("libX11 probe unavailable (%s); trying xprop", e)
                if shutil.which("xprop"):
                    return XpropProbe()
    except Exception as e:  # a broken probe must not stop capture; the app/title just stay unknown
        log.warning("no active-window probe: %s", e)
    return WindowProbe()
