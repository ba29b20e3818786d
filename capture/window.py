"""Which window is active: one small interface, one implementation per OS and desktop (import-guarded).

Linux/X11 reads EWMH `_NET_ACTIVE_WINDOW` through libX11 with ctypes (no extra dependency and no
process spawn per frame), falling back to `xprop`. Wayland has no common way: each desktop has its
own probe in capture/wayland/ (sway and Hyprland IPC, a KWin script, a GNOME Shell extension).
Windows uses user32 via ctypes; macOS asks System Events through `osascript`. Where no probe can
work, `NoWindowProbe` says why, and the screen source grabs nothing (an unknown window might be an
excluded one).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import re
import shutil
import subprocess

from capture.window_info import NoWindowProbe, Rect, WindowInfo, WindowProbe, proc_name

log = logging.getLogger(__name__)

__all__ = ["NoWindowProbe", "WindowInfo", "WindowProbe", "default_probe", "proc_name", "wayland_probe"]


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
        x.XGetGeometry.argtypes = [ctypes.c_void_p, ctypes.c_ulong, *[ctypes.c_void_p] * 7]
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

    def _active(self) -> WindowInfo | None:
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
                          process=proc_name(ctypes.c_ulong.from_buffer_copy(pid_raw[:8]).value) if pid_raw else "",
                          id=wid, **(dict(zip(("left", "top", "width", "height"), geo, strict=True)) if geo else {}))

    def close(self) -> None:
        """Close the display connection."""
        if self._dpy:
            self._x.XCloseDisplay(self._dpy)
            self._dpy = None


class XpropProbe(WindowProbe):
    """Fallback for X11 without a loadable libX11 binding: two `xprop` calls per probe."""

    name = "xprop"

    def _active(self) -> WindowInfo | None:
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
        wm_class = re.search(r"WM_CLASS.*", out)
        cls = re.findall(r'"([^"]*)"', wm_class.group(0)) if wm_class else []
        title = re.search(r'(?:_NET_WM_NAME|WM_NAME)\([^)]*\) = "(.*)"', out)
        return WindowInfo(app=cls[1] if len(cls) > 1 else (cls[0] if cls else ""), title=title.group(1) if title else "",
                          wm_class=cls[0] if cls else "", id=int(m.group(1), 16))


# ---- Windows --------------------------------------------------------------------------------------


class Win32Probe(WindowProbe):
    """GetForegroundWindow and friends from user32/kernel32 via ctypes.

    user32 / kernel32: objects exposing those DLL functions; None = `ctypes.windll.*` (the OS seam,
    replaced by fakes in tests — this probe is tested against fakes, not on a real Windows desktop).
    """

    name = "win32"

    def __init__(self, user32=None, kernel32=None) -> None:
        if user32 is None or kernel32 is None:
            windll = ctypes.windll  # type: ignore[attr-defined]  # AttributeError off Windows
            user32, kernel32 = user32 or windll.user32, kernel32 or windll.kernel32
        self._u, self._k = user32, kernel32

    def _active(self) -> WindowInfo | None:
        """The foreground window with its title, rectangle and executable name."""
        from ctypes import wintypes

        hwnd = self._u.GetForegroundWindow()
        if not hwnd:
            return None  # no foreground window (desktop locked, switching)
        n = self._u.GetWindowTextLengthW(hwnd)
        buf = ctypes.create_unicode_buffer(max(0, n) + 1)
        self._u.GetWindowTextW(hwnd, buf, max(0, n) + 1)
        rect = wintypes.RECT()
        geo: Rect = {}
        if self._u.GetWindowRect(hwnd, ctypes.byref(rect)) and not self._u.IsIconic(hwnd):
            # Minimised windows report (-32000, -32000): no useful rectangle, grab the monitors instead.
            geo = {"left": rect.left, "top": rect.top, "width": rect.right - rect.left, "height": rect.bottom - rect.top}
        pid = wintypes.DWORD()
        self._u.GetWindowThreadProcessId(hwnd, ctypes.byref(pid))
        exe = exe_name(self._process_path(pid.value))
        return WindowInfo(app=exe, title=buf.value, process=exe, id=int(hwnd), **geo)

    def _process_path(self, pid: int) -> str:
        """Full image path of a process, or "" when it cannot be opened (elevated or gone)."""
        from ctypes import wintypes

        h = self._k.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not h:
            return ""
        try:
            size = wintypes.DWORD(1024)
            path = ctypes.create_unicode_buffer(1024)
            return path.value if self._k.QueryFullProcessImageNameW(h, 0, path, ctypes.byref(size)) else ""
        finally:
            self._k.CloseHandle(h)


def exe_name(path: str) -> str:
    """App name from a Windows image path: `C:\\Program Files\\KeePassXC\\KeePassXC.exe` -> `KeePassXC`."""
    import ntpath  # Windows path rules on every OS, so this is testable anywhere

    base = ntpath.basename(path.strip().strip('"'))
    stem, ext = ntpath.splitext(base)
    return stem if ext.lower() == ".exe" else base


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


def run_osascript(script: str, timeout: float = 3.0) -> tuple[int, str, str]:
    """Run AppleScript; (exit code, stdout, stderr). The macOS seam (tests pass a fake instead)."""
    out = subprocess.run(["osascript", "-e", script], capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout, out.stderr


class MacProbe(WindowProbe):
    """Front app and window through System Events (needs the Accessibility permission).

    osascript: the call that runs AppleScript (default `run_osascript`); tested against fakes,
    not on a real Mac.
    """

    name = "macos"

    def __init__(self, osascript=run_osascript) -> None:
        self._osascript = osascript
        self._hinted = False

    def _active(self) -> WindowInfo | None:
        """The frontmost app's front window."""
        code, out, err = self._osascript(_OSA)
        if code != 0:
            if "-1719" in err or "-25211" in err or "assistive access" in err.lower():
                # No Accessibility permission: app and title stay unknown until the person grants it.
                if not self._hinted:
                    log.warning("macOS denied window information; allow Mirador in System Settings > "
                                "Privacy & Security > Accessibility")
                    self._hinted = True
                return None
            raise OSError(f"osascript exited {code}: {err.strip()[-200:]}")
        return parse_osascript(out)


def parse_osascript(out: str) -> WindowInfo | None:
    """Parse `_OSA`'s three lines (app, title, "x,y,w,h"); None if there is no app name."""
    lines = (out.rstrip("\n").split("\n") + ["", "", ""])[:3]
    app = lines[0].strip()
    if not app:
        return None
    geo: Rect = {}
    parts = [p.strip() for p in lines[2].split(",")]
    if len(parts) == 4:
        try:
            left, top, width, height = (int(round(float(p))) for p in parts)
        except ValueError:
            log.debug("unparsable window geometry %r", lines[2])
        else:
            if width > 0 and height > 0:
                geo = {"left": left, "top": top, "width": width, "height": height}
    return WindowInfo(app=app, title=lines[1], process=app, **geo)


def default_probe(session=None) -> WindowProbe:
    """The best probe for this OS and session; a NoWindowProbe (saying why) where none can work.

    session: a capture.wayland.session.Session (default: detected from the environment).
    """
    from capture.wayland.session import detect

    s = session or detect()
    try:
        if s.kind == "windows":
            return Win32Probe()
        if s.kind == "macos":
            return MacProbe() if shutil.which("osascript") else NoWindowProbe("osascript is missing")
        if s.kind == "wayland":
            return wayland_probe(s.desktop)
        if s.kind == "x11":
            try:
                return X11Probe()
            except OSError as e:
                log.info("libX11 probe unavailable (%s); trying xprop", e)
                if shutil.which("xprop"):
                    return XpropProbe()
                return NoWindowProbe(f"libX11 cannot be loaded ({e}) and xprop is missing: "
                                     "sudo apt-get install x11-utils")
        return NoWindowProbe("no display (neither WAYLAND_DISPLAY nor DISPLAY is set)")
    except Exception as e:  # a broken probe must not stop capture; the screen source reports why it grabs nothing
        log.warning("no active-window probe: %s", e)
        return NoWindowProbe(f"{type(e).__name__}: {e}")


def wayland_probe(desktop: str) -> WindowProbe:
    """The focused-window probe of a Wayland desktop (capture/wayland/); NoWindowProbe where there is none."""
    if desktop == "sway":
        from capture.wayland.sway import SwayProbe

        return SwayProbe()
    if desktop == "hyprland":
        from capture.wayland.hyprland import HyprlandProbe

        return HyprlandProbe()
    if desktop == "kde":
        from capture.wayland.kwin import KWinProbe

        return KWinProbe()
    if desktop == "gnome":
        from capture.wayland.gnome import GnomeProbe

        return GnomeProbe()
    return NoWindowProbe(f"this Wayland desktop ({desktop}) tells no program which window has focus; Mirador "
                         "knows sway, Hyprland, KDE Plasma and GNOME (with the Window Calls extension)")
