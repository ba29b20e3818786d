"""Config: defaults, MIRADOR_HOME, and errors that name the key and the fix."""

from __future__ import annotations

import pytest

from memory.config import Config, config_path, data_dir, load_config, save_config
from memory.errors import ConfigError


def test_home_override(mirador_home):
    assert data_dir() == mirador_home


def test_missing_file_means_defaults(mirador_home):
    assert load_config() == Config()


def test_round_trip(mirador_home):
    cfg = Config()
    cfg.store.default_scope = "work"
    save_config(cfg)
    assert load_config().store.default_scope == "work"


@pytest.mark.parametrize("text,needle", [
    ("[store]\ndefault_scoop = 'work'\n", "unknown key 'store.default_scoop'"),
    ("[store]\ndefault_scope = 'Not A Scope'\n", "store.default_scope"),
    ("[models]\nembedder_batch_size = 0\n", "models.embedder_batch_size"),
    ("[telemetry]\non = true\n", "unknown key 'telemetry'"),
    ("this is = = not toml", "not valid TOML"),
])
def test_bad_config_names_the_key(mirador_home, text, needle):
    mirador_home.mkdir(parents=True, exist_ok=True)
    config_path().write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config()
    assert needle in str(e.value)
