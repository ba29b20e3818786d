"""lancedb is imported through memory/store/lancedb_import.py as a plain import: pydantic's defaults are left
as they are (no private switch is flipped meanwhile), and lancedb's models and ours validate as usual."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_lancedb_models_and_ours_validate_as_usual():
    code = (
        "import memory.store.core\n"
        "from lance_namespace import CreateNamespaceRequest\n"
        "req = CreateNamespaceRequest(id=['a', 'b'])\n"
        "assert req.id == ['a', 'b'] and CreateNamespaceRequest.__pydantic_complete__\n"
        "from memory.config import Config\n"
        "assert Config.__pydantic_complete__\n"
        "import pydantic\n"
        "class Later(pydantic.BaseModel):\n"
        "    x: int\n"
        "assert Later.__pydantic_complete__  # any model defined after lancedb's import is built at once\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
