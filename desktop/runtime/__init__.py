"""The Qt-free runtime: the composition root shared by the tray app and the headless service, platform
checks, live config and autostart.

See docs/architecture.md for the package map.
"""
