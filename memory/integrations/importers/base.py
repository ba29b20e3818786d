"""What every importer shares: the item it yields, its options, its report, and the error for a broken file.

An importer reads one export and yields `Item`s (a message, a note chunk, a line) and `Skip`s (what
it left out, and why). memory/integrations/importers/writer.py turns items into evidence, in batches, so a file
that breaks halfway keeps everything read before the break.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memory.errors import InputError

MAX_EXAMPLES = 3  # examples kept per skip reason: enough to find the item, not a second copy of the file


class ImportOptions(BaseModel):
    """Knobs of the importers; unknown names are errors (a typo must not become a silent default)."""

    model_config = ConfigDict(extra="forbid")
    me: str = Field("me", description="speaker recorded for the person's own messages and notes")
    text_field: str = Field("text", description="jsonl: field holding the text (dots reach into objects)")
    time_field: str | None = Field(None, description="jsonl: field holding an ISO time or epoch seconds")
    speaker_field: str | None = Field(None, description="jsonl: field holding who said it")
    id_field: str | None = Field(None, description="jsonl: field with a stable id (else the text is the key)")
    all_branches: bool = Field(False, description="chatgpt: every edited/regenerated branch, not only the current one")
    chunk_chars: int = Field(2000, ge=200, le=50_000, description="notes: target size of one evidence row")
    max_file_bytes: int = Field(5_000_000, ge=1, description="notes: larger files are skipped")
    batch_size: int = Field(256, ge=1, le=4096, description="rows per write (and per embedding call)")


@dataclass
class Item:
    """One unit to become an evidence row. `key` must be stable across runs: it is the idempotency key."""

    key: str
    text: str
    speaker: str = ""
    captured_at: datetime | None = None
    window: str = ""
    where: str = ""  # how a person finds it in the source, for messages and examples
    meta: dict[str, Any] = field(default_factory=dict)
    # True when the item has no id of its own: the writer then adds the *redacted* text to the key,
    # so no hash of a secret ever reaches the disk.
    keyed_by_text: bool = False


@dataclass
class Skip:
    """Something the importer read and left out, with the reason and where it was."""

    reason: str
    where: str


@dataclass
class ImportReport:
    """What one import did; `to_dict` is the --json summary."""

    format: str
    path: str
    scope: str
    read: int = 0  # items the importer yielded (before de-duplication)
    imported: int = 0
    skipped: int = 0
    skipped_by_reason: dict[str, int] = field(default_factory=dict)
    skip_examples: dict[str, list[str]] = field(default_factory=dict)
    redactions: int = 0
    redactions_by_kind: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    bytes_read: int = 0
    bytes_total: int = 0
    seconds: float = 0.0
    rows_per_second: float = 0.0
    first_ids: list[str] = field(default_factory=list)
    error: str | None = None
    broken_at: dict[str, Any] | None = None
    extraction: dict[str, Any] | None = None

    def skip(self, reason: str, where: str, n: int = 1) -> None:
        """Count a skipped item under its reason and keep the first few examples."""
        self.skipped += n
        self.skipped_by_reason[reason] = self.skipped_by_reason.get(reason, 0) + n
        examples = self.skip_examples.setdefault(reason, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(where)

    def to_dict(self) -> dict:
        """JSON-ready."""
        return asdict(self)


class ImportBroken(InputError):
    """The file breaks partway (truncated or corrupt); everything before the break was imported."""

    code = "import_broken"

    def __init__(self, message: str, location: dict[str, Any]) -> None:
        super().__init__(message)
        self.location = location
        self.report: ImportReport | None = None  # filled by the writer before it re-raises


class Importer(ABC):
    """One export format. Subclasses set `name` and `app` and implement `items`; they advance `done`."""

    name = ""
    app = ""  # the evidence `app` column: lets extraction and search keep one source's rows together
    assistant = ""  # speaker recorded for the assistant's messages

    def __init__(self, path: Path, options: ImportOptions | None = None) -> None:
        self.path = Path(path)
        self.options = options or ImportOptions()
        self.total = 0  # bytes to read, for the progress bar
        self.done = 0  # bytes read so far

    @abstractmethod
    def items(self) -> Iterator[Item | Skip]:
        """Yield every item and every skip, in file order; raise ImportBroken where the file breaks."""


def stable_key(*parts: object) -> str:
    """A deterministic key from ids (never from secret-bearing raw text): sha256 of the parts."""
    h = hashlib.sha256()
    for p in parts:
        h.update(str(p).encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def from_epoch(value: Any) -> datetime | None:
    """Epoch seconds (int, float or numeric string) → naive UTC; None when absent or unreadable."""
    if value is None or value == "":
        return None
    try:
        return datetime.fromtimestamp(float(value), tz=timezone.utc).replace(tzinfo=None)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def from_iso(value: Any) -> datetime | None:
    """ISO 8601 text → naive UTC (a time without a zone is taken as UTC, as exports write it)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


def split_long(text: str, limit: int) -> list[str]:
    """Cut text longer than `limit` into pieces at paragraph, then line, then character boundaries."""
    if len(text) <= limit:
        return [text]
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n\n", 0, limit)
        if cut < limit // 2:
            cut = rest.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(rest[:cut].strip())
        rest = rest[cut:]
    pieces.append(rest.strip())
    return [p for p in pieces if p]
