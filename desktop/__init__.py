"""The app process: CLI, headless service, and (later) the Qt tray app. Qt is imported only here."""
