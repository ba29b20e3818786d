"""Which importer a path needs when --format is not given.

The rule, first match wins:
1. a folder holding conversations.json (or ChatGPT's split conversations-NNN.json) → that chat export;
   any other folder → notes;
2. a .zip → the chat export inside it;
3. a .md, .markdown or .txt file → notes;
4. a file starting with `[` (or a {"conversations": [...]} object) whose first conversation has
   `mapping` → chatgpt, `chat_messages` → claude;
5. anything else → Mirador's own JSONL export, as `mirador import FILE` always did. A JSONL file of your
   own needs --format jsonl (or --text-field): guessing would turn a typo'd export into evidence.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from memory.errors import InputError

NOTE_SUFFIXES = (".md", ".markdown", ".txt")


def _sniff_chat(name: str) -> str | None:
    """chatgpt / claude from the first conversation of an export file; None if it is not one."""
    from memory.integrations.importers.jsonstream import _ijson, _prefix, open_member

    ijson = _ijson()
    try:
        prefix = _prefix(name)
        if prefix is None:
            return None
        with open_member(name) as fh:
            first = next(iter(ijson.items(fh, prefix, use_float=True)), None)
    except (ijson.JSONError, OSError, UnicodeDecodeError):
        return None
    if isinstance(first, dict):
        if "mapping" in first:
            return "chatgpt"
        if "chat_messages" in first:
            return "claude"
    return None


def detect_format(path: Path) -> str:
    """chatgpt, claude, notes or mirador for this path (see the module docstring for the rule)."""
    from memory.integrations.importers.jsonstream import export_members

    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} does not exist — check the path")
    is_chat_dir = path.is_dir() and (any(path.glob("conversations-*.json")) or (path / "conversations.json").is_file())
    if path.is_dir() and not is_chat_dir:
        return "notes"
    if is_chat_dir or (path.is_file() and zipfile.is_zipfile(path)):
        name = export_members(path)[0][0]
        fmt = _sniff_chat(name)
        if fmt is None:
            raise InputError(f"{name} is neither a ChatGPT nor a Claude export (its first conversation has "
                             "no 'mapping' or 'chat_messages') — pass --format to say what it is")
        return fmt
    if path.suffix.lower() in NOTE_SUFFIXES:
        return "notes"
    return _sniff_chat(str(path)) or "mirador"
