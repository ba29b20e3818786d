"""The Qt UI: tray, windows, table models and workers. The only package that imports PySide6.

See docs/architecture.md for the package map.
"""
