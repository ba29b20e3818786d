"""The memory core: store, scopes, search, erasure, audit, vault."""

from memory.config import Config, data_dir, load_config, save_config
from memory.errors import ConfigError, InputError, MiradorError, NotFoundError
from memory.store import EvidenceSpec, MemorySpec, Store

__all__ = [
    "Config",
    "ConfigError",
    "EvidenceSpec",
    "InputError",
    "MemorySpec",
    "MiradorError",
    "NotFoundError",
    "Store",
    "data_dir",
    "load_config",
    "save_config",
]
