"""A real X display for the Qt tests: Xvfb + openbox (window manager) + trayer (system-tray host).

Started once per session, only when a Qt test asks for `qapp` (so the plain CLI tests need no
display). Skips with a reason only when Xvfb itself is missing; bootstrap installs all three.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess

import pytest

TRAY_WAIT_S = 20.0


def _start(cmd: list[str], env: dict) -> subprocess.Popen:
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _start_xvfb() -> tuple[subprocess.Popen, str]:
    read_fd, write_fd = os.pipe()
    # -displayfd: Xvfb picks a free display number and writes it once it accepts connections,
    # so there is no race with other sessions' displays and no polling for the socket.
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1400x900x24", "-nolisten", "tcp"],
                            pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_fd)
    with os.fdopen(read_fd) as fh:
        number = fh.readline().strip()
    if not number:
        proc.kill()
        pytest.fail("Xvfb started but reported no display number")
    return proc, f":{number}"


@pytest.fixture(scope="session")
def xdisplay():
    """A virtual display with a window manager and a system tray; sets DISPLAY for Qt."""
    if not shutil.which("Xvfb"):
        pytest.skip("Xvfb is not installed (run scripts/bootstrap.sh, which installs xvfb, openbox and trayer)")
    for tool in ("openbox", "trayer"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is missing; scripts/bootstrap.sh installs it")
    xvfb, display = _start_xvfb()
    env = dict(os.environ, DISPLAY=display)
    helpers = [_start(["openbox", "--sm-disable"], env),
               _start(["trayer", "--edge", "top", "--align", "right", "--widthtype", "pixel", "--width", "240",
                       "--height", "28", "--SetDockType", "true", "--transparent", "false"], env)]
    old = {k: os.environ.get(k) for k in ("DISPLAY", "QT_QPA_PLATFORM", "WAYLAND_DISPLAY")}
    os.environ["DISPLAY"] = display
    os.environ["QT_QPA_PLATFORM"] = "xcb"
    os.environ.pop("WAYLAND_DISPLAY", None)
    yield display
    # The X server goes last, at interpreter exit: Qt's xcb layer calls exit(1) if it sees the
    # connection break while the QApplication (which pytest-qt keeps to the end) still exists.
    atexit.register(_stop, helpers + [xvfb])
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()


@pytest.fixture(scope="session")
def qapp(xdisplay):
    """pytest-qt's QApplication, created on the virtual display once the tray host is up."""
    from PySide6.QtCore import QDeadlineTimer
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QSystemTrayIcon

    app = QApplication.instance() or QApplication(["mirador-tests"])
    app.setQuitOnLastWindowClosed(False)
    deadline = QDeadlineTimer(int(TRAY_WAIT_S * 1000))
    # trayer claims the _NET_SYSTEM_TRAY selection a moment after it starts; wait on that condition
    while not QSystemTrayIcon.isSystemTrayAvailable() and not deadline.hasExpired():
        QTest.qWait(50)  # processes events while waiting on the condition above
    assert QSystemTrayIcon.isSystemTrayAvailable(), "trayer did not provide a system tray within 20 s"
    yield app


class FakeEmbedder:
    """Deterministic 384-d vectors without torch: for tests of paging that do not search."""

    dim = 384
    model_dir = "fake"

    def embed(self, texts):
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, hash(t) % self.dim] = 1.0
        return out

    def embed_query(self, text):
        return self.embed([text])[0]

    def embed_queries(self, texts):
        return [self.embed_query(t) for t in texts]


@pytest.fixture
def jobs(qapp):
    """A worker pool for one test; waits for running jobs at teardown."""
    from desktop.ui.workers import Jobs

    j = Jobs()
    yield j
    j.shutdown()


def wait_idle(qtbot, jobs, timeout=30_000):
    """Wait until every submitted job has delivered its result to the GUI thread."""
    qtbot.waitUntil(lambda: jobs.pending == 0, timeout=timeout)


@pytest.fixture(autouse=True)
def _collect_garbage_on_main_thread():
    """Automatic GC in a worker thread can finalise a Qt object there and deadlock (see
    desktop.ui.workers.MainThreadGC); during these tests collect only here, on the main thread."""
    import gc

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    gc.collect()
    if was_enabled:
        gc.enable()


def open_browser(qtbot, jobs, store):
    """A shown memory browser on the real store."""
    from desktop.ui.browser import MemoryBrowser

    browser = MemoryBrowser(jobs, store)
    qtbot.addWidget(browser)
    browser.show()
    qtbot.waitExposed(browser)
    return browser


def click_row(qtbot, browser, id_):
    """Click the row of id_ the way a person would, then wait for its detail pane."""
    from PySide6.QtCore import Qt

    qtbot.waitUntil(lambda: browser.model.index_of(id_) >= 0, timeout=30_000)
    proxy = browser.table.model()
    idx = proxy.mapFromSource(browser.model.index(browser.model.index_of(id_), 0))
    qtbot.mouseClick(browser.table.viewport(), Qt.MouseButton.LeftButton, pos=browser.table.visualRect(idx).center())
    qtbot.waitUntil(lambda: browser.detail.row is not None and browser.detail.row["id"] == id_, timeout=30_000)
