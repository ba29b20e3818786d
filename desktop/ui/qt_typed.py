"""Typed spellings of a few Qt calls whose PySide6 stubs say less than the code knows.

The stubs return `X | None` where Qt returns None only in a case the caller has ruled out (an editable
combo box always has its line edit), and they leave out the signal keywords that PySide6 constructors
accept (`QShortcut(..., activated=slot)`). These helpers say it once, with a clear error if the case
ever does come up, instead of an assert or an ignore at every call.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QComboBox, QLineEdit, QTableView, QWidget


def shortcut(keys: QKeySequence | QKeySequence.StandardKey, parent: QWidget, slot: Callable[[], object],
             context: Qt.ShortcutContext | None = None) -> QShortcut:
    """A shortcut on `parent` that calls `slot`; `context` as Qt's (default: the window's)."""
    sc = QShortcut(keys, parent)
    if context is not None:
        sc.setContext(context)
    sc.activated.connect(slot)
    return sc


def line_edit(box: QComboBox) -> QLineEdit:
    """The line edit of an editable combo box."""
    edit = box.lineEdit()
    if edit is None:
        raise ValueError(f"combo box {box.objectName()!r} is not editable")
    return edit


def proxy_of(table: QTableView) -> QSortFilterProxyModel:
    """The sort/filter proxy a list view shows its model through (qt_models' tables all have one)."""
    model = table.model()
    if not isinstance(model, QSortFilterProxyModel):
        raise TypeError(f"{table.objectName()!r} shows {type(model).__name__}, not a sort/filter proxy")
    return model
