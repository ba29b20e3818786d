"""onnxruntime (>= 1.29) collects telemetry on Linux: on load it writes a device id under
~/.cache/Microsoft/DeveloperTools and uploads a process event. Mirador promises that nothing leaves the
machine, so models/__init__.py opts out before onnxruntime loads. Checked in a child process with a
clean environment, because onnxruntime also stays quiet when it sees a CI variable (as in this suite)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path, code: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "MIRADOR_HOME": str(tmp_path / "data")}
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=300)
    return home


def test_embedding_leaves_no_onnxruntime_telemetry_in_the_home(tmp_path):
    code = ("import models\nimport onnxruntime\nfrom memory.store.core import Store\n"
            "s = Store()\nassert s.embedder.embed_query('is anyone listening').shape[-1] == s.embedder.dim\n")
    home = _run(tmp_path, code)
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*") if "Microsoft" in p.parts)
    assert not left, f"onnxruntime wrote telemetry files: {left}"


def test_the_check_would_see_them(tmp_path):
    """Without the opt-out, importing onnxruntime writes them: the test above can fail."""
    home = _run(tmp_path, "import onnxruntime\n")
    assert (home / ".cache" / "Microsoft" / "DeveloperTools").exists()
