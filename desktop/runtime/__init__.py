"""The Qt-free runtime: what runs with or without a GUI.

Owns the composition root shared by the tray app and the headless service (`services`: store, capture,
scheduler, MCP server, built and stopped as one), the headless service itself (`service`), the platform
checks (`platform`: can windows show, can the screen be grabbed, is there a microphone), applying saved
settings to running parts (`live_config`), start at login (`autostart`) and the capture control seen by
the UI (`ports`). Never imports PySide6, desktop.ui or desktop.cli, so it runs on servers without libGL.

See docs/architecture.md for the package map.
"""
