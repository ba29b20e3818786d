"""What the store asks of its embedder: the `Embedder` protocol that `Store(embedder=...)` takes and `Store.embedder`
returns. models/embedder.py's Embedder is the one the store makes for itself (embedder_record.py); tests hand in
smaller fakes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np
    import numpy.typing as npt


class Embedder(Protocol):
    """Turns text into L2-normalised float32 vectors of one size.

    The store embeds what it writes (embed) and checks the size of its vector columns (dim); searches embed
    questions (embed_query, embed_queries); embedder.json records which model made the vectors (name, model_dir,
    tuning: the tuning delta merged into the weights, or None).
    """

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def model_dir(self) -> Path: ...

    @property
    def tuning(self) -> Path | None: ...

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """Many passages (what is stored and searched) at once: an (n, dim) array."""
        ...

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """One question's vector."""
        ...

    def embed_queries(self, texts: list[str]) -> list[npt.NDArray[np.float32]]:
        """Several questions' vectors, in order."""
        ...
