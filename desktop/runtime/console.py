"""Plain-text records for a terminal: the headless service's status screen and the CLI's single-row output."""

from __future__ import annotations

import json


def print_record(row: dict) -> None:
    """Every field of one row, one per line, keys right-aligned."""
    width = max(len(k) for k in row)
    for k, v in row.items():
        if isinstance(v, dict | list):
            v = json.dumps(v, ensure_ascii=False)
        print(f"{k.rjust(width)}  {v}")
