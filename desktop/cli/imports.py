"""`mirador import`: Mirador's own JSONL export (all-or-nothing, memory/integrations/transfer.py) and a person's history
— ChatGPT and Claude exports, notes folders, generic JSONL — through memory/importers (streamed, idempotent)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from desktop.cli.common import open_store
from desktop.cli.output import emit_json, short
from memory.errors import InputError

if TYPE_CHECKING:
    import argparse

    from desktop.cli.common import AddCommand, AddJson, AddScope
    from memory.integrations.importers import ImportOptions
    from memory.integrations.importers.base import ImportReport
    from memory.store.core import Store

_IMPORTER_FLAGS = ("me", "text_field", "time_field", "speaker_field", "id_field", "all_branches", "chunk_chars",
                   "max_file_bytes", "scope")


class ProgressBar:
    """A one-line bar on stderr, redrawn at most every 0.2 s: bytes read, rows imported, rows skipped."""

    def __init__(self, stream: TextIO | None = None, every: float = 0.2) -> None:
        self.stream, self.every, self.last, self.start = stream or sys.stderr, every, 0.0, time.monotonic()
        self.drawn = False
        self.state: tuple[Any, int, int] | None = None  # (ImportReport, bytes read, bytes in all), once called

    def __call__(self, report: ImportReport, done: int, total: int) -> None:
        self.state = (report, done, total)
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        if self.state is None:
            return
        report, done, total = self.state
        frac = min(1.0, done / total) if total else 0.0
        rate = report.imported / max(now - self.start, 1e-6)
        self.stream.write(f"\r[{'#' * int(frac * 24):<24}] {frac:4.0%}  {_size(done)}/{_size(total)}  "
                          f"{report.imported:,} imported  {report.skipped:,} skipped  {rate:,.0f} rows/s ")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Draw the final state and end the line, so the next output starts clean."""
        if self.state is not None:
            self._draw(time.monotonic())
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _size(n: int) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.0f} kB"


def _options(a: argparse.Namespace) -> ImportOptions:
    from pydantic import ValidationError

    from memory.integrations.importers import ImportOptions

    kw = {k: getattr(a, k) for k in ("me", "text_field", "time_field", "speaker_field", "id_field",
                                      "chunk_chars", "max_file_bytes") if getattr(a, k) is not None}
    try:
        return ImportOptions(all_branches=a.all_branches, **kw)
    except ValidationError as e:
        err = e.errors()[0]
        raise InputError(f"--{str(err['loc'][0]).replace('_', '-')}: {err['msg']}") from None


def _import_mirador(a: argparse.Namespace, detected: bool) -> int:
    from memory.integrations.transfer import import_jsonl

    given = [f"--{k.replace('_', '-')}" for k in _IMPORTER_FLAGS if getattr(a, k) not in (None, False)]
    if given:
        raise InputError(f"{', '.join(given)} apply to imported histories, not to a Mirador export (it carries its "
                         "own scopes) — drop them, or pass --format chatgpt|claude|notes|jsonl")
    try:
        result = import_jsonl(open_store(), Path(a.file))
    except InputError as e:
        if detected:  # say what was assumed, so a JSONL of one's own is not a dead end
            raise InputError(f"{e} (read as a Mirador export; for a JSONL of your own add --format jsonl)") from None
        raise
    if a.json:
        emit_json(result)
    else:
        print(f"imported {result['imported']} ({result['memories']} memories/vault, {result['evidence']} evidence) "
              f"and {result['relations']} relations; skipped {result['skipped_existing']} already present, "
              f"{result['skipped_forgotten'] + result['relations_skipped_forgotten']} forgotten")
    return 0


def _extract(store: Store, rules: bool) -> dict:
    """Run extraction until no evidence is pending (it picks up imported rows like captured ones)."""
    from memory.consolidation.extraction import make_extractor, run_extraction

    extractor = make_extractor(store, engine="rules" if rules else None)
    total: dict = {"evidence": 0, "created": 0, "candidates": 0, "corroborated": 0, "superseded": 0, "skipped": 0}
    try:
        while True:
            r = run_extraction(store, extractor=extractor)
            if not r.evidence:
                break
            for k in total:
                total[k] += getattr(r, k)
    finally:
        extractor.close()  # one-shot command: stop the model's worker process
    return total


def _print_report(r: ImportReport) -> None:
    took = f"{r.seconds:.1f}s, {r.rows_per_second:,.0f} rows/s"
    print(f"imported {r.imported:,} row(s) from {r.path} ({r.format} → scope {r.scope}; {r.read:,} items read; {took})")
    if r.skipped:
        print(f"skipped {r.skipped:,}:")
        for reason, n in sorted(r.skipped_by_reason.items(), key=lambda x: -x[1]):
            print(f"  {n:>7,}  {reason}  (e.g. {short('; '.join(r.skip_examples.get(reason, [])), 70)})")
    if r.redactions:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(r.redactions_by_kind.items()))
        print(f"redacted {r.redactions} secret(s) before writing ({kinds})")
    if r.extraction:
        x = r.extraction
        print(f"extraction: {x['evidence']} rows → {x['created']} active, {x['candidates']} candidates, "
              f"{x['corroborated']} corroborated")
    elif r.imported:
        print("the next extraction pass turns these into memories (or run `mirador extract` now)")


def cmd_import(a: argparse.Namespace) -> int:
    """Import a file or folder; --format picks the importer, else it is detected (memory/integrations/importers/detect.py)."""
    from capture.redact import Redactor
    from memory.integrations.importers import ImportBroken, detect_format, make_importer, run_import

    fmt = a.format
    if fmt is None and (a.text_field or a.time_field or a.speaker_field or a.id_field):
        fmt = "jsonl"  # those flags only mean something for a JSONL of one's own
    detected = fmt is None
    fmt = fmt or detect_format(Path(a.file))
    if fmt == "mirador":
        return _import_mirador(a, detected)
    importer = make_importer(fmt, Path(a.file), _options(a))
    store = open_store()
    privacy = store.config.privacy
    bar = ProgressBar() if (a.progress or sys.stderr.isatty()) else None
    try:
        report = run_import(store, importer, redactor=Redactor(privacy.redact_kinds, privacy.redact),
                            scope=a.scope, progress=bar)
    except ImportBroken as e:
        if bar:
            bar.close()
        if e.report is not None:
            emit_json(e.report.to_dict()) if a.json else _print_report(e.report)
        raise
    if bar:
        bar.close()
    if a.extract:
        report.extraction = _extract(store, a.rules)
    emit_json(report.to_dict()) if a.json else _print_report(report)
    return 0


# Spelled out rather than imported: every `mirador` call builds the parser, and importing the
# importers pulls in LanceDB (seconds). tests/memory/test_importers.py checks it matches FORMATS.
FORMATS = ("chatgpt", "claude", "notes", "jsonl", "mirador")


def register(cmd: AddCommand, as_json: AddJson, scope: AddScope) -> None:
    """Add `import` to the mirador parser."""
    sp = cmd("import", cmd_import, "import a Mirador JSONL export (all-or-nothing), or your history: a ChatGPT or "
             "Claude export, a notes folder, a JSONL file")
    sp.add_argument("file", help="file, folder or .zip")
    sp.add_argument("--format", choices=FORMATS,
                    help="default: detected — folder → notes (or the chat export in it), .md/.txt → notes, "
                         "conversations.json/.zip → chatgpt or claude, anything else → mirador")
    scope(sp, many=False)
    sp.add_argument("--me", help="speaker name for your own messages and notes (default 'me')")
    sp.add_argument("--text-field", help="jsonl: field with the text (default 'text'; a.b reaches into objects)")
    sp.add_argument("--time-field", help="jsonl: field with an ISO time or epoch seconds")
    sp.add_argument("--speaker-field", help="jsonl: field with who said it")
    sp.add_argument("--id-field", help="jsonl: field with a stable id (default: the text is the identity)")
    sp.add_argument("--all-branches", action="store_true", help="chatgpt: also edited/regenerated branches")
    sp.add_argument("--chunk-chars", type=int, help="notes: target characters per evidence row (default 2000)")
    sp.add_argument("--max-file-bytes", type=int, help="notes: skip larger files (default 5000000)")
    sp.add_argument("--extract", action="store_true", help="run extraction right after the import")
    sp.add_argument("--rules", action="store_true", help="with --extract: rule-based extractor only (fast, no LLM)")
    sp.add_argument("--progress", action="store_true", help="show the progress bar even when stderr is not a terminal")
    as_json(sp)
