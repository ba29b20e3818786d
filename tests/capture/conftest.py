"""Capture tests run against their own Xvfb + openbox display, started here."""

from __future__ import annotations

import shutil

import pytest

from tests.capture.xdisplay import XDisplay


@pytest.fixture(scope="session")
def xdisplay():
    for tool in ("Xvfb", "openbox", "xprop", "tesseract"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed (sudo apt-get install xvfb openbox x11-utils tesseract-ocr)")
    try:
        import tkinter  # noqa: F401
    except ImportError:
        pytest.skip("tkinter is not available for test windows")
    d = XDisplay()
    yield d
    d.stop()


@pytest.fixture
def display(xdisplay, monkeypatch):
    """The shared display with DISPLAY set for this test; windows are closed afterwards."""
    monkeypatch.setenv("DISPLAY", xdisplay.display)
    yield xdisplay
    xdisplay.close_windows()


@pytest.fixture(scope="session")
def ocr():
    from models.ocr import Ocr

    return Ocr()
