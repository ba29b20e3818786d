"""Which saved settings the running app can take at once, and which wait for a restart (no Qt here).

Everything not listed in RESTART_FIELDS is applied live: capture through
capture.runner.Capture.apply_config, schedules through memory.consolidation.scheduler.MiradorScheduler.apply_config,
and the rest (extraction, dream, recall, store) because those parts read store.config on every use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

# Genuinely restart-only: the embedder is loaded once per process and decides the vector size;
# the MCP server's port, origin check and on/off are fixed when uvicorn binds; the vault key
# store is opened with the store.
RESTART_FIELDS: dict[str, str] = {
    "models.embedder_dir": "the embedder is loaded once and fixes the store's vector size",
    "models.embedder_threads": "the embedder's thread pool is sized when it loads",
    "models.embedder_onnx": "the embedding engine (onnxruntime or torch) is chosen when the embedder loads",
    "models.onnx_dir": "the embedder's graph is built or loaded when the embedder loads",
    "mcp.enabled": "the MCP server starts with the app",
    "mcp.port": "the MCP server binds its port at start",
    "mcp.allowed_origins": "the MCP server's origin check is built at start",
    "vault.key_store": "the data key is opened with the store",
}


@dataclass
class Applied:
    """What a save did to the running app: settings that wait for a restart, and problems."""

    restart: list[str] = field(default_factory=list)  # dotted keys, e.g. "mcp.port"
    problems: list[str] = field(default_factory=list)  # e.g. an OCR language that is not installed
    rescheduled: list[str] = field(default_factory=list)  # scheduler job ids

    def message(self) -> str:
        """One line for the tray notification."""
        parts = []
        if self.restart:
            parts.append("Takes effect after a restart: " + ", ".join(self.restart) + ".")
        if self.problems:
            parts.append("Not applied: " + "; ".join(self.problems))
        return " ".join(parts) or "Settings saved and applied."


def get_path(cfg: BaseModel, key: str) -> Any:
    """The value at a dotted key such as 'capture.interval_seconds'."""
    node: Any = cfg
    for p in key.split("."):
        node = getattr(node, p)
    return node


def restart_needed(old: BaseModel, new: BaseModel) -> list[str]:
    """The restart-only keys whose value changed between two configs, sorted."""
    return sorted(k for k in RESTART_FIELDS if get_path(old, k) != get_path(new, k))
