"""lancedb is imported with pydantic's schema building deferred (memory/store/lancedb_import.py): its models
still validate when used, and Mirador's own models are built at import as before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_deferred_models_still_validate_and_the_default_is_restored():
    code = (
        "import memory.store.core\n"
        "from pydantic._internal._config import config_defaults\n"
        "assert config_defaults['defer_build'] is False, config_defaults['defer_build']\n"
        "from lance_namespace import CreateNamespaceRequest\n"
        "assert not CreateNamespaceRequest.__pydantic_complete__  # deferred: built on first use\n"
        "req = CreateNamespaceRequest(id=['a', 'b'])\n"
        "assert req.id == ['a', 'b'] and CreateNamespaceRequest.__pydantic_complete__\n"
        "from memory.config import Config\n"
        "assert Config.__pydantic_complete__  # ours: built at import, as before\n"
        "import pydantic\n"
        "class Later(pydantic.BaseModel):\n"
        "    x: int\n"
        "assert Later.__pydantic_complete__  # and any model defined after lancedb's import\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
