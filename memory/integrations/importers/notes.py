"""Markdown and text notes: a folder (recursively) or one file, cut into chunks by heading and paragraph.

Each chunk is an item with the file path and its heading trail ("Project > Decisions") in meta and the
file's modification time as captured_at. Hidden folders (.git, .obsidian, ...) are not entered.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from memory.integrations.importers.base import Importer, Item, Skip, split_long, stable_key

SUFFIXES = (".md", ".markdown", ".txt")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


class NotesImporter(Importer):
    """Files under a folder → chunks; binary, empty, unreadable and oversized files are skipped."""

    name = "notes"
    app = "notes"

    def _files(self) -> Iterator[Path | Skip]:
        if self.path.is_file():
            yield self.path
            return
        for dirpath, dirnames, filenames in os.walk(self.path):
            hidden = sorted(d for d in dirnames if d.startswith("."))
            for d in hidden:
                yield Skip("hidden folder (not entered)", os.path.join(dirpath, d))
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))  # sorted: stable order
            for f in sorted(filenames):
                yield Path(dirpath) / f

    def items(self) -> Iterator[Item | Skip]:
        """Chunks of every notes file, in path order."""
        entries = list(self._files())  # paths only: cheap even for a large vault, and gives the total
        self.total = sum(_size(e) for e in entries if isinstance(e, Path))
        base = self.path if self.path.is_dir() else self.path.parent
        for e in entries:
            if isinstance(e, Skip):
                yield e
                continue
            yield from self._file(e, base)
            self.done += _size(e)

    def _file(self, path: Path, base: Path) -> Iterator[Item | Skip]:
        rel = str(path.relative_to(base))
        if path.name.startswith("."):
            yield Skip("hidden file", rel)
            return
        if path.suffix.lower() not in SUFFIXES:
            yield Skip(f"not a notes file ({', '.join(SUFFIXES)})", rel)
            return
        text, why = self._read(path)
        if why:
            yield Skip(why, rel)
            return
        when = datetime.fromtimestamp(path.stat().st_mtime, tz=timezone.utc).replace(tzinfo=None)
        markdown = path.suffix.lower() != ".txt"
        seen: dict[tuple[str, str], int] = {}
        resolved = str(path.resolve())
        for n, (heading, chunk) in enumerate(chunk_text(text, self.options.chunk_chars, markdown)):
            # The same paragraph twice under one heading is two items: count occurrences into the key.
            occ = seen[(heading, chunk)] = seen.get((heading, chunk), 0) + 1
            yield Item(
                key=stable_key("notes", resolved, heading, occ), keyed_by_text=True, text=chunk,
                speaker=self.options.me, captured_at=when, window=rel,
                where=f"{rel}" + (f" § {heading}" if heading else "") + f" chunk {n + 1}",
                meta={"format": "notes", "path": resolved, "file": rel, "heading": heading, "chunk": n + 1},
            )

    def _read(self, path: Path) -> tuple[str, str | None]:
        """(text, None) or ("", reason to skip)."""
        try:
            size = path.stat().st_size
            if size > self.options.max_file_bytes:
                return "", f"too large (over {self.options.max_file_bytes:,} bytes)"
            data = path.read_bytes()
        except OSError as e:
            return "", f"unreadable ({e.strerror or type(e).__name__})"
        if b"\0" in data[:8192]:
            return "", "binary file"
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return "", "not UTF-8 text"
        if not text.strip():
            return "", "empty file"
        return text, None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _strip_front_matter(lines: list[str]) -> list[str]:
    """Drop a leading YAML front-matter block (--- ... ---): metadata, not the note's prose."""
    if lines and lines[0].strip() == "---":
        for i in range(1, min(len(lines), 200)):
            if lines[i].strip() in ("---", "..."):
                return lines[i + 1:]
    return lines


def _sections(text: str, markdown: bool) -> Iterator[tuple[str, list[str]]]:
    """(heading trail, paragraphs) per section; headings inside code fences are text."""
    trail: list[tuple[int, str]] = []
    paras: list[str] = []
    cur: list[str] = []
    fenced = False
    for line in _strip_front_matter(text.splitlines()) if markdown else text.splitlines():
        if markdown and _FENCE.match(line):
            fenced = not fenced
        m = _HEADING.match(line) if markdown and not fenced else None
        if m:
            if cur:
                paras.append("\n".join(cur))
            yield " > ".join(t for _, t in trail), paras
            level = len(m.group(1))
            trail = [(lv, t) for lv, t in trail if lv < level] + [(level, m.group(2))]
            paras, cur = [], [line]
            continue
        if not line.strip() and not fenced:
            if cur:
                paras.append("\n".join(cur))
                cur = []
            continue
        cur.append(line)
    if cur:
        paras.append("\n".join(cur))
    yield " > ".join(t for _, t in trail), paras


def chunk_text(text: str, size: int, markdown: bool = True) -> list[tuple[str, str]]:
    """(heading trail, chunk) pairs: paragraphs of one section packed up to `size` characters."""
    out: list[tuple[str, str]] = []
    for heading, paras in _sections(text, markdown):
        buf: list[str] = []
        for p in (piece for para in paras for piece in split_long(para, size)):
            if buf and sum(len(b) + 2 for b in buf) + len(p) > size:
                out.append((heading, "\n\n".join(buf)))
                buf = []
            buf.append(p)
        if buf:
            out.append((heading, "\n\n".join(buf)))
    # A heading with nothing under it (before its first sub-heading) says nothing the trail does not.
    return [(h, c.strip()) for h, c in out if c.strip() and not (_HEADING.match(c.strip()) and "\n" not in c.strip())]
