"""Generic JSONL: one JSON object per line, the text in a named field (dots reach into nested objects).

`time_field` (ISO text or epoch seconds), `speaker_field` and `id_field` are optional; every other field
is kept in meta. The file is read line by line, so its size does not matter. A line that is not JSON stops
the import there (a truncated or corrupt file): the lines before it were imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from memory.errors import InputError
from memory.integrations.importers.base import ImportBroken, Importer, Item, Skip, from_epoch, from_iso, stable_key


def get_path(obj: dict, dotted: str) -> Any:
    """obj["a"]["b"] for "a.b"; None when any step is missing."""
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def without(obj: dict, dotted: str) -> dict:
    """A copy of obj minus the field at `dotted` (parents left empty by it go too); obj is not changed."""
    head, _, rest = dotted.partition(".")
    if head not in obj:
        return obj
    out = dict(obj)
    if rest and isinstance(out[head], dict):
        out[head] = without(out[head], rest)
        if out[head]:
            return out
    elif rest:
        return obj
    del out[head]
    return out


def parse_when(value: Any) -> tuple[Any, bool]:
    """(naive-UTC datetime or None, readable?) from ISO text or epoch seconds (milliseconds too)."""
    if value is None or value == "":
        return None, True
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int | float) or (isinstance(value, str) and value.strip().replace(".", "", 1).isdigit()):
        num = float(value)
        return from_epoch(num / 1000 if num > 1e11 else num), True  # > year 5138 in seconds: it is milliseconds
    dt = from_iso(value)
    return dt, dt is not None


class JsonlImporter(Importer):
    """Lines → items; lines without text are skipped, the first non-JSON line stops the import."""

    name = "jsonl"
    app = "jsonl"

    def items(self) -> Iterator[Item | Skip]:
        """One item per line with text."""
        try:
            self.total = self.path.stat().st_size
            fh = self.path.open("rb")
        except OSError as e:
            raise InputError(f"cannot read {self.path}: {e.strerror} — check the path") from None
        with fh:
            for no, raw in enumerate(fh, start=1):
                offset = self.done
                self.done += len(raw)
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as e:
                    raise self._broken(no, offset, raw, e) from None
                where = f"line {no}"
                if not isinstance(obj, dict):
                    yield Skip("not a JSON object", where)
                    continue
                yield self._item(obj, where, no)

    def _item(self, obj: dict, where: str, no: int) -> Item | Skip:
        o = self.options
        text = get_path(obj, o.text_field)
        if not isinstance(text, str) or not text.strip():
            return Skip(f"no text in field '{o.text_field}'", where)
        when, ok = parse_when(get_path(obj, o.time_field)) if o.time_field else (None, True)
        if not ok:
            return Skip(f"unreadable time in field '{o.time_field}'", where)
        speaker = get_path(obj, o.speaker_field) if o.speaker_field else None
        speaker = str(speaker) if speaker not in (None, "") else ""
        ident = get_path(obj, o.id_field) if o.id_field else None
        meta = obj
        for f in (o.text_field, o.time_field, o.speaker_field):
            if f:
                meta = without(meta, f)
        # Without an id field the (redacted) content is the identity: the same line twice is one item.
        by_id = ident not in (None, "")
        key = stable_key("jsonl", "id", ident) if by_id else stable_key("jsonl", "text", when, speaker)
        return Item(key=key, text=text.strip(), speaker=speaker, captured_at=when, window=self.path.name,
                    where=where, keyed_by_text=not by_id, meta={"format": "jsonl", "line": no, "fields": meta})

    def _broken(self, no: int, offset: int, raw: bytes, err: Exception) -> ImportBroken:
        truncated = not raw.endswith(b"\n")  # the last line, cut mid-object
        what = getattr(err, "msg", None) or type(err).__name__
        msg = (f"{self.path}:{no}: {'the file ends mid-line' if truncated else 'not valid JSON'} ({what}; byte "
               f"{offset:,}) — the lines before it were imported; repair or remove line {no} and run the same "
               "command again (imported lines are skipped)")
        return ImportBroken(msg, {"file": str(self.path), "line": no, "byte": offset, "truncated": truncated,
                                  "parser": what})
