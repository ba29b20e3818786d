"""The people evidence rows were spoken by, as lower-case first names, for query analysis.

Search matches a named person through the speaker column (memory/retrieval/rank.py), so the embedded question
leaves their name out: "What is Tim excited to see?" embedded with "Tim" lands near greetings that
say "Hey Tim!", not near the turn about what he is excited about (it finds more evidence on LoCoMo dev: bench/locomo.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

REFRESH_S = 300.0  # other processes' new speakers are picked up this late; a miss only keeps a name


class SpeakerNames:
    """A process-local set, loaded by one column scan (not one per query) and kept current by this
    process's own writes, rescanned when older than REFRESH_S."""

    def __init__(self, sealer: Any = None) -> None:
        self._sealer = sealer  # speakers are stored sealed (memory/store/sealer.py): opened here
        self._names: set[str] | None = None
        self._loaded = 0.0
        self._lock = threading.Lock()

    def get(self, table: Any) -> set[str]:
        with self._lock:
            if self._names is None or time.monotonic() - self._loaded > REFRESH_S:
                col = table.search().select(["speaker"]).limit(None).to_arrow()["speaker"]
                values = col.unique().to_pylist()  # equal speakers seal equally: few to open
                if self._sealer is not None:
                    values = self._sealer.open_values(table.name, "speaker", values)
                self._names = _first_names(values)
                self._loaded = time.monotonic()
            return self._names

    def note(self, rows: list[dict[str, Any]]) -> None:
        """Add the speakers of rows this process just wrote."""
        with self._lock:
            if self._names is not None:
                self._names |= _first_names(r.get("speaker") for r in rows)


def _first_names(speakers: Iterable[str | None]) -> set[str]:
    out: set[str] = set()
    for s in speakers:
        words = (s or "").lower().split()
        if words:
            out.add(words[0])
            out.add(" ".join(words))
    return out
