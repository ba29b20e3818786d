"""llama-cpp-python runs one completion on the bundled Gemma model.

The default native build segfaults in decode on some CPUs, so this runs in a child process:
a crash fails the test instead of killing the test run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_one_completion_in_a_child_process(tmp_path):
    code = textwrap.dedent(f"""
        from llama_cpp import Llama
        from models.locate import llm_gguf
        path = llm_gguf(None, {str(tmp_path)!r})
        llm = Llama(model_path=str(path), n_ctx=256, n_threads=2, verbose=False)
        out = llm("The capital of France is", max_tokens=4, temperature=0)
        print("OK", repr(out["choices"][0]["text"]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"llama.cpp crashed (rc={proc.returncode}): {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("OK")
