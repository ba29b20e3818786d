"""The Qt binding must not lose references to Python's singletons.

PySide6-Essentials 6.12.0 on Python 3.11 drops one reference to None on every QLabel.setText,
QTextBrowser.setHtml or overridden resizeEvent, and to True/False on event-filter returns; after a
few thousand calls the interpreter aborts ("Fatal Python error: none_dealloc") and takes the tray
app, and capture with it, down. pyproject.toml pins below it; this test keeps the pin honest.
"""

from __future__ import annotations

import subprocess
import sys

PROBE = r'''
import sys
from PySide6.QtCore import QObject, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QLabel, QTextBrowser, QWidget

app = QApplication(["probe", "-platform", "offscreen"])

def drift(fn, n=300):
    none0, bools0 = sys.getrefcount(None), sys.getrefcount(True) + sys.getrefcount(False)
    for _ in range(n):
        fn()
    return sys.getrefcount(None) - none0, sys.getrefcount(True) + sys.getrefcount(False) - bools0

label, browser = QLabel(), QTextBrowser()

class Filter(QObject):
    def eventFilter(self, obj, event):
        return False

class Resized(QWidget):
    def resizeEvent(self, event):
        super().resizeEvent(event)

w = QWidget(); f = Filter(); w.installEventFilter(f); w.show()
r = Resized(); r.show()
print("setText", *drift(lambda: label.setText("x")))
print("setHtml", *drift(lambda: browser.setHtml("<b>x</b>")))
print("eventFilter", *drift(lambda: QTest.keyClick(w, Qt.Key.Key_A)))
print("resizeEvent", *drift(lambda: r.resize(100 + r.width() % 50, 100)))
'''


def test_qt_calls_do_not_lose_references_to_none_true_or_false():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    drifts = {name: (int(a), int(b)) for name, a, b in (line.split() for line in out.stdout.splitlines())}
    assert set(drifts) == {"setText", "setHtml", "eventFilter", "resizeEvent"}, out.stdout
    # A binding that holds a few extra references is harmless; one that drops them aborts the process.
    assert all(a >= 0 and b >= 0 for a, b in drifts.values()), drifts
