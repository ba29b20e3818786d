"""Frozen entry point of the installer builds: `mirador` (console) and `mirador-gui` (windowed)."""

import multiprocessing
import os
import sys

if __name__ == "__main__":
    # The LLM runs in a spawned child process; in a frozen app the child re-runs this executable,
    # and freeze_support() turns it into the worker instead of a second CLI.
    multiprocessing.freeze_support()
    # A windowed build (mirador-gui on Windows/macOS) has no console: give print/logging somewhere to go.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
    from desktop.cli.main import main

    sys.exit(main())
