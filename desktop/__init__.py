"""The app process: the `mirador` CLI (`desktop.cli`), the Qt-free runtime shared by the tray app and the
headless service (`desktop.runtime`), and the Qt UI (`desktop.ui`, the only package that imports PySide6).

See docs/architecture.md for the package map.
"""
