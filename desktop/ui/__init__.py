"""The Qt UI: tray (`tray`), windows (memory `browser*`, `review*`, evidence `timeline`, `settings_*`),
table models (`qt_models`), background workers (`workers`), icons, and `app`, which runs the tray over the
services desktop.runtime builds. The only package that imports PySide6; it uses desktop.runtime and
memory/, never desktop.cli.

See docs/architecture.md for the package map.
"""
