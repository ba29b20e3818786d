"""Stream the conversations of a chat export one at a time (ijson), so a 1 GB export never sits in memory.

Memory bound: one conversation (ijson builds each array element whole) plus one write batch. Where the
JSON breaks, the error names the conversation index and the byte position reached; conversations
before it were yielded whole and are kept.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from memory.errors import InputError
from memory.integrations.importers.base import ImportBroken, Importer, Item, Skip

BUF = 64 * 1024


def _ijson() -> Any:  # the ijson module (it ships no types)
    try:
        import ijson
    except ImportError:  # declared in pyproject; only a hand-made environment lacks it
        raise InputError("streaming chat exports needs the `ijson` package — run `pip install ijson`") from None
    return ijson


class CountingReader:
    """A binary file wrapper that counts the bytes handed out (what the parser has consumed so far)."""

    def __init__(self, fh: IO[bytes], on_read: Callable[[int], object] | None = None) -> None:
        self.fh, self.pos, self.on_read = fh, 0, on_read

    def read(self, n: int = -1) -> bytes:
        """Read like the wrapped file, counting bytes."""
        data = self.fh.read(n)
        self.pos += len(data)
        if self.on_read is not None:
            self.on_read(len(data))
        return data


def export_members(path: Path) -> list[tuple[str, int]]:
    """(name, size) of the conversation files in a chat export: a file, a folder or a .zip."""
    if path.is_dir():
        files = sorted(path.glob("conversations-*.json")) or sorted(path.glob("conversations.json"))
        if not files:
            raise InputError(f"{path} holds no conversations.json — point at the export's conversations.json")
        return [(str(p), p.stat().st_size) for p in files]
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            infos = [i for i in zf.infolist() if _is_conversations(i.filename)]
            if not infos:
                raise InputError(f"{path} holds no conversations.json — is this a ChatGPT or Claude data export?")
            return [(f"{path}!{i.filename}", i.file_size) for i in sorted(infos, key=lambda i: i.filename)]
    return [(str(path), path.stat().st_size)]


def _is_conversations(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base == "conversations.json" or (base.startswith("conversations-") and base.endswith(".json"))


@contextmanager
def open_member(name: str) -> Iterator[IO[bytes]]:
    """Open `file` or `archive.zip!member` for binary reading."""
    if "!" in name and zipfile.is_zipfile(name.split("!", 1)[0]):
        archive, member = name.split("!", 1)
        with zipfile.ZipFile(archive) as zf, zf.open(member) as fh:
            yield fh
        return
    with open(name, "rb") as fh:
        yield fh


def _first_char(fh: IO[bytes]) -> bytes:
    while True:
        ch = fh.read(1)
        if not ch or not ch.isspace():
            return ch


def _prefix(name: str) -> str | None:
    """ijson prefix of the conversation array: a bare array, or {"conversations": [...]} (Claude variant)."""
    with open_member(name) as fh:
        ch = _first_char(fh)
    if ch == b"[":
        return "item"
    if ch == b"{":
        return "conversations.item"
    return None


def iter_conversations(name: str, on_read: Callable[[int], object] | None = None) -> Iterator[tuple[int, Any]]:
    """(index, conversation) for each element of the export's conversation array, streamed."""
    ijson = _ijson()
    prefix = _prefix(name)
    if prefix is None:
        raise InputError(f"{name} is not a JSON chat export (it does not start with [ or {{) — pick --format")
    complete = 0
    with open_member(name) as fh:
        reader = CountingReader(fh, on_read)
        try:
            for conv in ijson.items(reader, prefix, use_float=True, buf_size=BUF):
                yield complete, conv
                complete += 1
        except ijson.JSONError as e:
            raise _broken(name, reader.pos, complete, e) from None


def _broken(name: str, pos: int, index: int, err: Exception) -> ImportBroken:
    what = str(err).splitlines()[0] if str(err) else type(err).__name__
    truncated = "premature eof" in what.lower() or "incomplete" in what.lower()
    # ijson reads in 64 KiB blocks, so the position is where the parser was, within one block.
    msg = (f"{name}: the JSON {'ends early' if truncated else 'is corrupt'} in conversation #{index + 1} "
           f"(near byte {pos:,}; {what}) — the {index} conversation(s) before it were imported; "
           "re-download or repair the export and run the same command again (imported items are skipped)")
    return ImportBroken(msg, {"file": name, "conversation": index + 1, "complete_conversations": index,
                              "byte": pos, "truncated": truncated, "parser": what})


class ConversationExport(Importer):
    """A chat export (ChatGPT, Claude): conversations streamed one at a time; subclasses read one."""

    def _advance(self, n: int) -> None:
        self.done += n

    def items(self) -> Iterator[Item | Skip]:
        """Every message of every conversation, streamed one conversation at a time."""
        members = export_members(self.path)
        self.total = sum(size for _, size in members)
        for name, _ in members:
            for index, conv in iter_conversations(name, self._advance):
                yield from self._conversation(index, conv)

    def _conversation(self, index: int, conv: Any) -> Iterator[Item | Skip]:
        raise NotImplementedError
