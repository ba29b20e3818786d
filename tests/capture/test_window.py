"""Windows and macOS active-window probes against fakes of the OS calls (not verified on real Windows/macOS).

The production parsing runs for real: ctypes buffers and structures filled the way user32/kernel32
fill them, AppleScript output parsed as osascript prints it, and failures turned into "unknown"
(None), logged, counted — never an exception out of `active()`.
"""

from __future__ import annotations

import logging
import subprocess

import numpy as np
import pytest

from capture.health import Health
from capture.privacy import PrivacyFilter
from capture.redact import Redactor
from capture.screen import ScreenSource
from capture.window import MacProbe, Win32Probe, WindowInfo, WindowProbe, exe_name, parse_osascript
from memory.config import DEFAULT_EXCLUDED_APPS, DEFAULT_EXCLUDED_TITLES, CaptureConfig

KEEPASS = r"C:\Program Files\KeePassXC\KeePassXC.exe"


class FakeUser32:
    """user32 as ctypes.windll exposes it: functions that fill the buffers/structures passed by reference."""

    def __init__(self, hwnd=0x20A4C, title="Passwords.kdbx - KeePassXC", rect=(100, 50, 900, 650), iconic=False,
                 pid=4242, error: Exception | None = None) -> None:
        self.hwnd, self.title, self.rect, self.iconic, self.pid, self.error = hwnd, title, rect, iconic, pid, error

    def GetForegroundWindow(self):  # noqa: N802 - the Win32 name
        if self.error:
            raise self.error
        return self.hwnd

    def GetWindowTextLengthW(self, hwnd):  # noqa: N802
        return len(self.title)

    def GetWindowTextW(self, hwnd, buf, n):  # noqa: N802
        buf.value = self.title[: n - 1]
        return len(buf.value)

    def GetWindowRect(self, hwnd, ref):  # noqa: N802
        r = ref._obj
        r.left, r.top, r.right, r.bottom = self.rect
        return 1

    def IsIconic(self, hwnd):  # noqa: N802
        return int(self.iconic)

    def GetWindowThreadProcessId(self, hwnd, ref):  # noqa: N802
        ref._obj.value = self.pid
        return 7  # thread id


class FakeKernel32:
    def __init__(self, paths: dict[int, str] | None = None) -> None:
        self.paths = {4242: KEEPASS} if paths is None else paths
        self.opened: list[int] = []
        self.closed: list[int] = []

    def OpenProcess(self, access, inherit, pid):  # noqa: N802
        assert access == 0x1000  # PROCESS_QUERY_LIMITED_INFORMATION: works for most non-elevated processes
        if pid not in self.paths:
            return 0  # elevated or gone
        self.opened.append(900 + pid)
        return 900 + pid

    def QueryFullProcessImageNameW(self, h, flags, buf, size_ref):  # noqa: N802
        path = self.paths[h - 900]
        buf.value = path
        size_ref._obj.value = len(path)
        return 1

    def CloseHandle(self, h):  # noqa: N802
        self.closed.append(h)
        return 1


def privacy() -> PrivacyFilter:
    return PrivacyFilter(DEFAULT_EXCLUDED_APPS, DEFAULT_EXCLUDED_TITLES)


# ---- Windows ----------------------------------------------------------------------------------------


def test_win32_app_title_and_rectangle():
    k = FakeKernel32()
    w = Win32Probe(FakeUser32(title="Notes — Résumé.txt"), k).active()
    assert w == WindowInfo(app="KeePassXC", title="Notes — Résumé.txt", left=100, top=50, width=800, height=600,
                           process="KeePassXC", id=0x20A4C)
    assert w.region == {"left": 100, "top": 50, "width": 800, "height": 600}
    assert k.closed == k.opened == [900 + 4242]  # the process handle is closed again
    assert privacy().excluded(w) == "app keepassxc"  # excluded by the executable name alone


def test_win32_minimised_window_has_no_rectangle_and_elevated_process_has_no_name():
    w = Win32Probe(FakeUser32(title="Admin console", rect=(-32000, -32000, -31840, -31972), iconic=True, pid=4),
                   FakeKernel32()).active()
    assert w.app == "" and w.title == "Admin console" and w.region is None


def test_win32_no_foreground_window_is_unknown_not_a_failure():
    p = Win32Probe(FakeUser32(hwnd=0), FakeKernel32())
    assert p.active() is None and p.failures == 0


def test_win32_failing_call_reads_as_unknown_and_is_logged(caplog):
    p = Win32Probe(FakeUser32(error=OSError("[WinError 5] Access is denied")), FakeKernel32())
    with caplog.at_level(logging.WARNING, logger="capture.window"):
        assert p.active() is None
        assert p.active() is None
    assert p.failures == 2 and "Access is denied" in p.last_error
    assert len([r for r in caplog.records if "window probe failed" in r.message]) == 1  # not once per frame


@pytest.mark.parametrize("path,name", [
    (KEEPASS, "KeePassXC"),
    (r'"C:\Users\ana\AppData\Local\Programs\Bitwarden\Bitwarden.EXE"', "Bitwarden"),
    (r"C:\Windows\System32\ApplicationFrameHost.exe", "ApplicationFrameHost"),
    (r"\\?\C:\tools\thing.com", "thing.com"),
    ("", ""),
])
def test_exe_name(path, name):
    assert exe_name(path) == name


def test_win32_needs_windows_when_no_fakes_are_given():
    import sys

    if sys.platform.startswith("win"):
        pytest.skip("on Windows the real DLLs load")
    with pytest.raises(AttributeError):
        Win32Probe()


# ---- macOS ------------------------------------------------------------------------------------------


def osa(code=0, out="", err=""):
    calls = []

    def run(script):
        calls.append(script)
        if isinstance(code, Exception):
            raise code
        return code, out, err

    run.calls = calls
    return run


def test_mac_app_title_and_rectangle():
    fake = osa(out="Google Chrome\nNew Tab - Google Chrome (Incognito)\n-1440,25,1280.0,775.5\n")
    w = MacProbe(fake).active()
    assert w == WindowInfo(app="Google Chrome", title="New Tab - Google Chrome (Incognito)", left=-1440, top=25,
                           width=1280, height=776, process="Google Chrome")
    assert "System Events" in fake.calls[0]
    assert privacy().excluded(w).startswith("title matches")


@pytest.mark.parametrize("out,expected", [
    ("Finder\n\n\n", WindowInfo(app="Finder", title="", process="Finder")),  # app without a window
    ("Terminal\nbash — 80×24\n10,20,0,0\n", WindowInfo(app="Terminal", title="bash — 80×24", process="Terminal")),
    ("1Password\nVault\nmissing value\n", WindowInfo(app="1Password", title="Vault", process="1Password")),
    ("", None),
])
def test_parse_osascript_edge_cases(out, expected):
    assert parse_osascript(out) == expected


def test_mac_without_accessibility_permission_is_unknown_with_one_hint(caplog):
    err = "execution error: System Events got an error: osascript is not allowed assistive access. (-1719)"
    p = MacProbe(osa(code=1, err=err))
    with caplog.at_level(logging.WARNING, logger="capture.window"):
        assert p.active() is None and p.active() is None
    assert len([r for r in caplog.records if "Accessibility" in r.message]) == 1
    assert p.failures == 0  # a missing permission is a state to fix, not a failing call


@pytest.mark.parametrize("code", [1, subprocess.TimeoutExpired(["osascript"], 3), FileNotFoundError("osascript")])
def test_mac_failing_call_reads_as_unknown_and_is_counted(code):
    p = MacProbe(osa(code=code, err="boom"))
    assert p.active() is None
    assert p.failures == 1 and p.last_error


# ---- what the screen source does with a failing probe -------------------------------------------------


class FakeGrabber:
    """mss stand-in: one 64x48 monitor; counts grabs."""

    monitors = [{"left": 0, "top": 0, "width": 64, "height": 48}] * 2

    def __init__(self) -> None:
        self.grabs = 0

    def grab(self, region):
        self.grabs += 1

        class Shot:
            width, height = region["width"], region["height"]
            size = (width, height)
            raw = np.full((height, width, 4), 255, np.uint8).tobytes()

        return Shot()

    def close(self) -> None:
        pass


class FlakyProbe(WindowProbe):
    name = "flaky"

    def __init__(self) -> None:
        self.fail = True

    def _active(self):
        if self.fail:
            raise OSError("display connection lost")
        return WindowInfo(app="Editor", title="notes")


def test_screen_source_skips_the_frame_and_reports_when_the_probe_fails(store):
    health, probe, grabber = Health(), FlakyProbe(), FakeGrabber()
    src = ScreenSource(store.home, CaptureConfig(prefer_active_window=False), privacy(), Redactor(), None, health,
                       ocr=None, probe=probe)
    src._grab = grabber
    # Fail closed: the window is unknown because a call failed, so it might be an excluded one.
    assert [src.step() for _ in range(3)] == ["excluded"] * 3
    h = health.snapshot()
    assert grabber.grabs == 0 and h["window_probe_failures"] == 3
    assert h["errors"] == 1 and "display connection lost" in h["recent_errors"][0]  # reported once, not per frame
    probe.fail = False
    assert src.step() == "queued" and grabber.grabs == 1
