"""Importers: a person's existing history (ChatGPT, Claude, notes, JSONL) → evidence rows (source "import").

    importer = make_importer("chatgpt", path, ImportOptions(me="Ana"))
    report = run_import(store, importer, redactor=Redactor(...), scope="personal")

Every importer streams, is idempotent (a stable per-item key is the evidence id), and reports what it
skipped and why. Imported rows have extracted_at unset, so the next extraction pass picks them up like
captured ones. Mirador's own JSONL export is not here: memory/integrations/transfer.py imports it, all-or-nothing.
"""

from __future__ import annotations

from pathlib import Path

from memory.errors import InputError
from memory.integrations.importers.base import ImportBroken, Importer, ImportOptions, ImportReport, Item, Skip
from memory.integrations.importers.chatgpt import ChatGPTImporter
from memory.integrations.importers.claude import ClaudeImporter
from memory.integrations.importers.detect import detect_format
from memory.integrations.importers.jsonl import JsonlImporter
from memory.integrations.importers.notes import NotesImporter
from memory.integrations.importers.writer import run_import

IMPORTERS: dict[str, type[Importer]] = {
    "chatgpt": ChatGPTImporter,
    "claude": ClaudeImporter,
    "notes": NotesImporter,
    "jsonl": JsonlImporter,
}
FORMATS = (*IMPORTERS, "mirador")

__all__ = ["FORMATS", "IMPORTERS", "ImportBroken", "ImportOptions", "ImportReport", "Importer", "Item", "Skip",
           "detect_format", "make_importer", "run_import"]


def make_importer(fmt: str, path: Path, options: ImportOptions | None = None) -> Importer:
    """The importer for a format name (chatgpt, claude, notes, jsonl)."""
    if fmt not in IMPORTERS:
        raise InputError(f"unknown import format {fmt!r}: use one of {', '.join(FORMATS)}")
    if not Path(path).exists():
        raise InputError(f"{path} does not exist — check the path")
    return IMPORTERS[fmt](Path(path), options)
