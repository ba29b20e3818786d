"""A private X display for capture tests: Xvfb + openbox, and real Tk windows in subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

WINDOW_SCRIPT = r'''
import sys, tkinter as tk
title, klass, text, changing = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
root = tk.Tk(className=klass)
root.title(title)
root.geometry("1100x420+60+60")
label = tk.Label(root, text=text, font=("DejaVu Sans Mono", 22), wraplength=1050, justify="left", bg="white")
label.pack(fill="both", expand=True)
words = ["amber", "basil", "cobalt", "dune", "ember", "fjord", "garnet", "harbor", "indigo", "juniper"]
n = [0]
def tick():
    n[0] += 1
    label.config(text=f"{text}\nentry {n[0]} {words[n[0] % 10]} {words[(n[0] * 7) % 10]} {words[(n[0] // 10) % 10]}")
    root.after(500, tick)
if changing:
    root.after(500, tick)
root.mainloop()
'''


def wait_for(cond, timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    """Poll cond() until truthy; fail with `what` after timeout. (Polling, not a fixed sleep.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class XDisplay:
    """Xvfb + openbox on a free display number; `window()` opens a Tk window and waits until it is active."""

    def __init__(self) -> None:
        r, w = os.pipe()
        self.xvfb = subprocess.Popen(["Xvfb", "-displayfd", str(w), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                                     pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(w)
        with os.fdopen(r) as f:
            num = f.readline().strip()
        self.display = f":{num}"
        self.env = dict(os.environ, DISPLAY=self.display)
        self.wm = subprocess.Popen(["openbox"], env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Generous: on a loaded 2-core CI machine openbox can take a while to claim the screen.
        wait_for(self._wm_ready, 90, what="openbox to manage the display")
        self.windows: list[subprocess.Popen] = []

    def _wm_ready(self) -> bool:
        if self.wm.poll() is not None:
            raise AssertionError(f"openbox exited ({self.wm.returncode}): {self.wm.stderr.read().decode()[-500:]}")
        out = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env=self.env, capture_output=True, text=True)
        return "window id" in out.stdout

    def active_title(self) -> str:
        from capture.window import X11Probe

        p = X11Probe(self.display)
        try:
            w = p.active()
            return w.title if w else ""
        finally:
            p.close()

    def window(self, title: str, text: str, klass: str = "scribbler", changing: bool = False) -> subprocess.Popen:
        """Open a window showing text and wait until the window manager reports it active."""
        proc = subprocess.Popen([sys.executable, "-c", WINDOW_SCRIPT, title, klass, text, "1" if changing else "0"],
                                env=self.env)
        self.windows.append(proc)
        wait_for(lambda: self.active_title() == title, 20, what=f"window {title!r} to become active")
        if not changing:
            self.wait_painted()
        return proc

    def wait_painted(self, timeout: float = 20.0) -> None:
        """Wait until two grabs of the screen in a row are identical (the window finished drawing)."""
        import mss

        with mss.mss(display=self.display.encode()) as sct:
            last = [b""]

            def stable() -> bool:
                raw = bytes(sct.grab(sct.monitors[0]).raw)
                same, last[0] = raw == last[0], raw
                return same

            wait_for(stable, timeout, interval=0.15, what="the screen to stop changing")

    def close_windows(self) -> None:
        """Close every window opened by window()."""
        for p in self.windows:
            p.terminate()
        for p in self.windows:
            p.wait(10)
        self.windows.clear()

    def stop(self) -> None:
        """Close windows, the window manager and the X server."""
        self.close_windows()
        for p in (self.wm, self.xvfb):
            p.terminate()
            p.wait(10)


def frame_files(home: Path) -> set[Path]:
    """Every thumbnail under the data dir."""
    root = home / "frames"
    return {p for p in root.rglob("*") if p.is_file()} if root.exists() else set()
