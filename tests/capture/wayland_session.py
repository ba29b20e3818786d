"""A private headless sway for capture tests, and real Wayland windows (foot) showing known text.

sway refuses to run as root, so under root (CI) it runs as the user nobody, in a runtime folder of
its own; the test process (root) still reaches its sockets. Headless backend, pixman renderer and no
input devices: no GPU, no seat, no X server (XWayland off).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.capture.xdisplay import wait_for

SWAY_CONFIG = """output HEADLESS-1 resolution 1280x800 position 0 0
output HEADLESS-2 resolution 1280x800 position 1280 0
default_border none
default_floating_border none
xwayland disable
"""
FONT = "DejaVu Sans Mono:size=20"


def missing_tools() -> str | None:
    """Why the sway tests cannot run here, or None."""
    for tool in ("sway", "grim", "foot", "tesseract"):
        if not shutil.which(tool):
            return f"{tool} is not installed (sudo apt-get install sway grim foot tesseract-ocr; scripts/bootstrap.sh)"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("nobody")
        except KeyError:
            return "sway refuses to run as root and this system has no user nobody to run it as"
    return None


class SwaySession:
    """Headless sway on its own WAYLAND_DISPLAY; `env` is what a client of this session gets.

    outputs=2 adds HEADLESS-2 to the right of HEADLESS-1 (both 1280x800), as a second monitor.
    """

    def __init__(self, outputs: int = 1) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="mirador-sway-"))
        self.runtime = self.dir / "runtime"
        self.runtime.mkdir(mode=0o700)
        (self.dir / "config").write_text(SWAY_CONFIG)
        as_user: dict = {}
        if os.geteuid() == 0:
            # Owned by nobody, whatever umask the test process set (the store sets 0o077).
            for p in (self.dir, self.runtime, self.dir / "config"):
                os.chown(p, 65534, 65534)
            as_user = {"user": 65534, "group": 65534, "extra_groups": []}
        base = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SWAYSOCK", "I3SOCK")}
        self.log = open(self.dir / "sway.log", "wb")  # noqa: SIM115 - kept open for the compositor's life
        self.proc = subprocess.Popen(
            ["sway", "-c", str(self.dir / "config")], stdout=self.log, stderr=subprocess.STDOUT,
            env=dict(base, HOME=str(self.dir), XDG_RUNTIME_DIR=str(self.runtime), WLR_BACKENDS="headless",
                     WLR_LIBINPUT_NO_DEVICES="1", WLR_RENDERER="pixman"), **as_user)
        sock = wait_for(self._ipc_socket, 60, what="sway to open its IPC socket")
        self.env = dict(base, XDG_RUNTIME_DIR=str(self.runtime), WAYLAND_DISPLAY=self._wayland_socket(),
                        SWAYSOCK=str(sock), XDG_CURRENT_DESKTOP="sway", XDG_SESSION_TYPE="wayland")
        from capture.wayland.sway import SwayIpc

        self.ipc = SwayIpc(str(sock))
        wait_for(lambda: self.ipc.outputs(), 30, what="sway's headless output")
        for _ in range(outputs - 1):
            self.command("create_output")
        wait_for(lambda: len(self.ipc.outputs()) == outputs, 30, what=f"sway's {outputs} headless outputs")
        self.command("focus output HEADLESS-1")
        self.windows: list[subprocess.Popen] = []

    def command(self, cmd: str) -> None:
        """Run a sway command (as `swaymsg cmd`) and check that it succeeded."""
        from capture.wayland.sway import RUN_COMMAND

        replies = self.ipc.request(RUN_COMMAND, cmd.encode())
        assert all(r.get("success") for r in replies), f"sway refused {cmd!r}: {replies}"

    def visible(self) -> list:
        """The windows sway shows now, as Mirador's sway probe lists them."""
        from capture.wayland.sway import GET_TREE, visible_windows, window_info

        return [window_info(n) for n in visible_windows(self.ipc.request(GET_TREE))]

    def _ipc_socket(self) -> Path | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"sway exited ({self.proc.returncode}): {self.tail()}")
        return next(self.runtime.glob("sway-ipc.*.sock"), None)

    def _wayland_socket(self) -> str:
        return next(p.name for p in self.runtime.iterdir() if p.name.startswith("wayland-") and p.suffix != ".lock")

    def tail(self) -> str:
        """The end of sway's log, for failure messages."""
        self.log.flush()
        return (self.dir / "sway.log").read_text(errors="replace")[-1500:]

    def focused(self):
        """The focused window as Mirador's sway probe sees it (None: none)."""
        from capture.wayland.sway import GET_TREE, focused_window, window_info

        node = focused_window(self.ipc.request(GET_TREE))
        return window_info(node) if node else None

    def window(self, title: str, text: str, app_id: str = "scribbler") -> subprocess.Popen:
        """A foot terminal showing `text`, titled `title`; returns once it has focus and is painted."""
        cmd = ["foot", "--app-id", app_id, "--title", title, "--font", FONT, "-o", "locked-title=yes",
               "sh", "-c", 'printf "%s\\n" "$1"; exec sleep 3600', "sh", text]
        proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.windows.append(proc)
        wait_for(lambda: (w := self.focused()) is not None and w.title == title and w.app == app_id, 30,
                 what=f"foot window {title!r} to take focus")
        self.wait_painted()
        return proc

    def wait_painted(self, timeout: float = 20.0) -> None:
        """Wait until two grabs in a row are identical (the client finished drawing)."""
        last = [b""]

        def stable() -> bool:
            raw = subprocess.run(["grim", "-t", "ppm", "-"], env=self.env, capture_output=True, timeout=10).stdout
            same, last[0] = raw == last[0], raw
            return same

        wait_for(stable, timeout, interval=0.2, what="the screen to stop changing")

    def close_windows(self) -> None:
        """Close every window opened by window(), and wait until sway has unmapped them."""
        for p in self.windows:
            p.terminate()
        for p in self.windows:
            p.wait(10)
        self.windows.clear()
        wait_for(lambda: self.focused() is None, 10, what="sway to close the windows")

    def stop(self) -> None:
        """Close windows and the compositor, remove its folder."""
        self.close_windows()
        self.ipc.close()
        self.proc.terminate()
        self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


PORTAL = "/usr/libexec/xdg-desktop-portal"


def missing_portal() -> str | None:
    """Why the portal test cannot run here, or None."""
    for path, pkg in ((PORTAL, "xdg-desktop-portal"), ("/usr/libexec/xdg-desktop-portal-wlr", "xdg-desktop-portal-wlr"),
                      ("/usr/libexec/xdg-desktop-portal-gtk", "xdg-desktop-portal-gtk")):
        if not Path(path).exists():
            return f"{path} is missing (sudo apt-get install {pkg}; scripts/bootstrap.sh)"
    for tool, pkg in (("dbus-daemon", "dbus-daemon"), ("pipewire", "pipewire")):
        if not shutil.which(tool):
            return f"{tool} is not installed (sudo apt-get install {pkg})"
    return None


class PortalBus:
    """A session bus of its own for a SwaySession, with PipeWire and xdg-desktop-portal on it.

    The portal starts its wlroots backend (xdg-desktop-portal-wlr) by D-Bus activation; portal 1.16
    also wants an Access backend before it offers Screenshot, which xdg-desktop-portal-gtk provides.
    """

    def __init__(self, sway: SwaySession) -> None:
        self.bus = subprocess.Popen(["dbus-daemon", "--session", "--nofork", "--print-address=1"], env=sway.env,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        address = self.bus.stdout.readline().strip()
        if not address:
            raise AssertionError(f"dbus-daemon printed no address (exit {self.bus.poll()})")
        self.env = dict(sway.env, DBUS_SESSION_BUS_ADDRESS=address)
        logs = sway.dir
        self.procs = [subprocess.Popen(["pipewire"], env=self.env, stdout=subprocess.DEVNULL,
                                       stderr=open(logs / "pipewire.log", "wb")),  # noqa: SIM115
                      subprocess.Popen([PORTAL, "--replace"], env=self.env, stdout=subprocess.DEVNULL,
                                       stderr=open(logs / "portal.log", "wb"))]  # noqa: SIM115
        self.log_dir = logs

    def ready(self) -> bool:
        """True once the Screenshot portal answers on this bus."""
        from jeepney.io.blocking import open_dbus_connection

        from capture.grab import GrabUnavailable
        from capture.wayland.portal import PortalGrabber

        for p in self.procs:
            if p.poll() is not None:
                raise AssertionError(f"{p.args[0]} exited ({p.returncode}); see {self.log_dir}")
        try:
            PortalGrabber(conn=open_dbus_connection(self.env["DBUS_SESSION_BUS_ADDRESS"])).close()
            return True
        except GrabUnavailable:
            return False

    def stop(self) -> None:
        """Stop the portal, PipeWire and the bus."""
        for p in [*self.procs, self.bus]:
            p.terminate()
        for p in [*self.procs, self.bus]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
