"""The `mirador` command line: one module per command group, each command's options next to its handler.

`main` is imported lazily so that `import desktop.cli.output` stays cheap.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from desktop.cli.main import main as run

    return run(argv)
