"""Secrets out of every row the store writes (principle 4), whoever the writer is.

Capture and the importers redact before they hand text over, but a memory typed into `memory_add` (MCP,
CLI, the window's editor), a hook's payload or an extractor's output came in raw, and an audit row copies
what was written. Redacting here, in the row builders' caller, is the one place every write passes: a
memory's text, title and details, an evidence row's text, window, speaker and meta, a vault entry's label.
The vault value is the one field left as typed: it is the secret, and it is sealed (vault_crypto.py).

Redacting twice changes nothing: a `[REDACTED:kind]` marker matches no pattern, so text capture has
already redacted passes through unchanged and its count is not doubled.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from memory.config import PrivacyConfig
from memory.redaction import Redactor
from memory.store.specs import EvidenceSpec, MemorySpec


class RowScrubber:
    """Redacts the free text of specs with the kinds the privacy config enables (privacy.redact_kinds)."""

    def __init__(self, privacy: PrivacyConfig) -> None:
        self.configure(privacy)

    def configure(self, privacy: PrivacyConfig) -> None:
        """Follow a changed privacy config (the store's config reloads live)."""
        key = (privacy.redact, tuple(privacy.redact_kinds))
        if getattr(self, "_key", None) != key:
            self._key = key
            self.redactor = Redactor(privacy.redact_kinds, enabled=privacy.redact)

    def text(self, value: str | None) -> tuple[str | None, int]:
        """value redacted, and how many secrets it held."""
        if not value:
            return value, 0
        red = self.redactor.redact(value)
        return red.text, red.total

    def value(self, value: Any) -> tuple[Any, int]:
        """Every string inside a JSON-like value (dicts, lists) redacted; dict keys too, as they are shown."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out, n = {}, 0
            for k, v in value.items():
                k2, nk = self.text(k) if isinstance(k, str) else (k, 0)
                v2, nv = self.value(v)
                out[k2], n = v2, n + nk + nv
            return out, n
        if isinstance(value, (list, tuple)):
            items = [self.value(v) for v in value]
            return type(value)(v for v, _ in items), sum(n for _, n in items)
        return value, 0

    def memory(self, spec: MemorySpec) -> tuple[MemorySpec, int]:
        """spec with its text, title and details redacted (a vault spec keeps its value: that is the secret)."""
        text, a = self.text(spec.text)
        title, b = self.text(spec.title)
        details, c = self.value(spec.details) if spec.details else (spec.details, 0)
        if not a + b + c:
            return spec, 0
        return dataclasses.replace(spec, text=text, title=title, details=details), a + b + c

    def evidence(self, spec: EvidenceSpec) -> EvidenceSpec:
        """spec with its text, window, speaker and meta redacted; what was found is added to its redactions."""
        text, a = self.text(spec.text)
        window, b = self.text(spec.window)
        speaker, c = self.text(spec.speaker)
        app, d = self.text(spec.app)
        meta, e = self.value(spec.meta) if spec.meta else (spec.meta, 0)
        n = a + b + c + d + e
        if not n:
            return spec
        return dataclasses.replace(spec, text=text or "", window=window or "", speaker=speaker or "", app=app or "",
                                   meta=meta, redactions=int(spec.redactions) + n)
