"""A captured frame's pixels for the windows: read through the store, which opens sealed frames with the data key."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QSize, Qt
from PySide6.QtGui import QImage, QImageReader

from memory.errors import MiradorError

if TYPE_CHECKING:
    from memory.store.core import Store

log = logging.getLogger(__name__)


def frame_bytes(store: Store, path: str | None) -> bytes | None:
    """The frame's image bytes, or None when it is gone or cannot be opened now (locked: said in the log)."""
    try:
        return store.frame_bytes(path)
    except MiradorError as e:  # a locked store shows no frames rather than failing the window
        log.info("frame %s not shown: %s", path, e)
        return None


def frame_image(store: Store, path: str | None, fit: QSize | None = None) -> QImage | None:
    """The frame as a QImage (worker threads may call it), scaled down to fit `fit` if given; None if unreadable."""
    data = frame_bytes(store, path)
    if not data:
        return None
    buf = QBuffer()
    buf.setData(QByteArray(data))
    buf.open(QIODevice.OpenModeFlag.ReadOnly)
    reader = QImageReader(buf)
    reader.setAutoTransform(True)
    if fit is not None:
        full = reader.size()
        if full.isValid():  # decoders that can decode straight at the small size
            reader.setScaledSize(full.scaled(fit, Qt.AspectRatioMode.KeepAspectRatio))
    img = reader.read()
    if img.isNull():
        return None
    if fit is not None and (img.width() > fit.width() or img.height() > fit.height()):
        img = img.scaled(fit, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)
    return img
