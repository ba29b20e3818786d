"""The embedder's graph is built from its weights without torch, and gives the torch path's vectors.

Stores made before (whose vectors came from sentence-transformers on torch) keep working only if the
new path lands where the old one did: compared here on a fixed, varied set of texts, as shipped and with
Mirador's tuning merged in. The comparison needs the dev extra (torch); the torch-free run does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from models import bert_onnx, onnx_encoder, tuning
from models.embedder import Embedder
from models.locate import embedder_dir

ROOT = Path(__file__).resolve().parents[2]
MIN_COSINE = 0.999  # the bar; the graph does far better (see the assertion's message on failure)


def varied_texts() -> list[str]:
    """About 200 fixed texts: short and long (past the 256-token cut), cased, accented, other scripts,
    emoji, code, numbers, whitespace, chat turns and screen text."""
    subjects = ["We", "Sam", "The billing team", "Melanie", "Our CI", "Dr. O'Neil", "the café owner", "ACME GmbH"]
    verbs = ["picked PostgreSQL for", "postponed the release of", "took the kids swimming after", "debugged",
             "can't reproduce", "signed the contract for", "will présenter", "asked about"]
    objects = ["the billing service", "version 2.4.1", "the Q3 roadmap", "a flaky test in test_store.py",
               "Tuesday's meeting", "naïve Bayes", "the 東京 office", "🚀 launch day"]
    texts = [f"{s} {v} {o}" for i, s in enumerate(subjects) for j, v in enumerate(verbs) for o in objects[(i + j) % 8:]
             if len(o) % 3 != (i + j) % 3][:150]
    texts += [
        "", " ", "x", "?", "OK", "  leading and trailing spaces  ", "UPPER CASE ONLY", "MiXeD CaSe WoRdS",
        "why did we pick PostgreSQL?\nline two\tand a tab", "Ünïcödé façade — naïve café 東京 🚀",
        "Привет, как дела?", "مرحبا بالعالم", "こんにちは世界", "한국어 문장입니다", "Ελληνικά γράμματα",
        "def f(x):\n    return x ** 2  # square", "SELECT * FROM users WHERE id = 42;", "https://example.com/a?b=c&d=e",
        "user@example.com wrote at 09:41 on 2026-03-14", "3.14159 2.71828 1.41421 1.73205", "$1,299.00 (-15%)",
        "🙂🙃😉😊😇🥰😍", "[INFO] 2026-12-02T15:38:05Z worker-3 retrying job 8841 (attempt 2/5)",
        "Melanie: I took the kids swimming yesterday!", "Caroline: what activities does Melanie do?",
        "Terminal — zsh — 120×40  ~/src/mirador  git status", "File Edit View Go Run Terminal Help",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z", "😀" * 40, "#" * 300,
        " ".join(f"word{i}" for i in range(400)), " ".join(["lorem ipsum dolor sit amet"] * 80),
        "The quick brown fox jumps over the lazy dog. " * 12, "\n\n\n", "tab\there\tand\tthere",
    ]
    texts += [f"note {i}: remember to call {n} about {t}" for i, (n, t) in enumerate(
        [(n, t) for n in ["Sam", "Ana", "李雷", "José"] for t in ["rent", "the PR #1234", "Kubernetes", "lunch"]])]
    return texts


def test_the_fixed_set_is_varied_and_fixed():
    texts = varied_texts()
    assert 190 <= len(texts) <= 230 and len(set(texts)) == len(texts)
    assert texts == varied_texts()


def test_graph_is_built_without_torch_and_matches_the_torch_path(tmp_path):
    """As shipped and as tuned (the default): cosine >= 0.999 on every text against sentence-transformers."""
    pytest.importorskip("sentence_transformers", reason="the torch path is in the dev extra only")
    texts = varied_texts()
    for delta in (None, tuning.BUNDLED):
        new = Embedder(onnx_dir=tmp_path, threads=1, tuning=delta)
        got = new.embed(texts)
        assert new.backend == "onnxruntime" and not new.torch_loaded
        old = Embedder(onnx_dir=tmp_path, threads=1, tuning=delta, use_onnx=False)
        want = old.embed(texts)
        assert old.backend == "torch" and old.model_dir == new.model_dir and old.name == new.name
        cos = np.sum(got * want, axis=1)
        assert cos.min() >= MIN_COSINE, (delta, cos.min(), texts[int(cos.argmin())])
        assert np.abs(got - want).max() < 1e-4, (delta, np.abs(got - want).max())
        # one query at a time lands where the batch does
        assert float(new.embed_query(texts[7]) @ want[7]) >= MIN_COSINE
    assert len(list(tmp_path.glob("*.onnx"))) == 2  # one graph per weights, the tuned copy's and the base's


def test_graph_reproduces_transformers_tokenization_and_masking(tmp_path):
    """Padded rows in one batch give the vectors each text gets alone (the mask reaches attention and mean)."""
    texts = ["short", "a much longer sentence with many more word pieces in it than the first one", ""]
    enc = onnx_encoder.load_or_build(embedder_dir(), tmp_path, 1)
    batch = enc.encoder.encode(enc.tokenize(texts))
    alone = np.vstack([enc.encoder.encode(enc.tokenize([t])) for t in texts])
    assert np.allclose(batch, alone, atol=1e-5)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_the_graph_passes_the_onnx_checker(tmp_path):
    import onnx

    model = bert_onnx.build(embedder_dir())
    onnx.checker.check_model(model, full_check=True)
    assert [i.name for i in model.graph.input] == list(bert_onnx.INPUTS)
    assert [o.name for o in model.graph.output] == [bert_onnx.OUTPUT]
    # The word-embedding table is not among the graph's weights: the encoder reads its rows (below).
    assert "embeddings.word_embeddings.weight" not in {t.name for t in model.graph.initializer}


def test_the_word_table_is_read_not_mapped(tmp_path):
    """The graph's data file holds the word-embedding table after its tensors; a session maps the tensors
    and never the table (a mapped table puts whole page-cache folios of it in the process for each token),
    and the rows read give the vectors the table inside the graph gave (tests/models/test_embedder.py)."""
    enc = onnx_encoder.load_or_build(embedder_dir(), tmp_path, 1)
    data = bert_onnx.data_path(enc.path)
    meta = enc.encoder.session.get_modelmeta().custom_metadata_map
    offset, rows, dim = bert_onnx.words_at(meta, data.stat().st_size)
    assert (rows, dim) == (30522, 384) and offset % 4096 == 0 and data.stat().st_size == offset + rows * dim * 4
    from safetensors.numpy import load_file

    table = load_file(str(embedder_dir() / "model.safetensors"))["embeddings.word_embeddings.weight"]
    ids = np.array([[101, 2339, 2106, 2057, 102], [101, 0, 30521, 101, 102]])
    assert np.array_equal(enc.encoder.word_rows(ids), table[ids])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        enc.encoder.word_rows(np.array([[101, 30522]]))
    enc.encode(["why did we pick PostgreSQL?", " ".join(["word"] * 300)])
    if Path("/proc/self/maps").exists():  # Linux: what this process has mapped of the data file
        mapped = []
        for line in Path("/proc/self/maps").read_text().splitlines():
            parts = line.split()
            if len(parts) > 5 and parts[5] == str(data):
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                mapped.append((int(parts[2], 16), int(parts[2], 16) + hi - lo))
        assert mapped, "the session maps its tensors from the data file"
        assert all(end <= offset for _, end in mapped), (mapped, offset)


def test_a_graph_without_its_word_table_does_not_load(tmp_path):
    enc = onnx_encoder.load_or_build(embedder_dir(), tmp_path, 1)
    size = bert_onnx.data_path(enc.path).stat().st_size
    meta = dict(enc.encoder.session.get_modelmeta().custom_metadata_map)
    with pytest.raises(ValueError, match="does not hold"):
        bert_onnx.words_at(meta, size - 1)  # cut off
    with pytest.raises(ValueError, match="does not say"):
        bert_onnx.words_at({}, size)  # a graph of an earlier builder


def test_a_model_that_is_not_bert_is_refused_with_a_reason(tmp_path):
    import shutil

    model = tmp_path / "other"
    shutil.copytree(embedder_dir(), model)
    cfg = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**cfg, "model_type": "mpnet"}))
    with pytest.raises(bert_onnx.NotBert, match="mpnet"):
        bert_onnx.build(model)
    with pytest.raises(onnx_encoder.OnnxUnavailable, match="could not build"):
        onnx_encoder.load_or_build(model, tmp_path / "cache", 1)
    assert not list((tmp_path / "cache").glob("*"))  # nothing half-written left


# As if not installed: an import raises ModuleNotFoundError and importlib.util.find_spec finds nothing
# (lancedb asks whether torch is there without importing it). Every `import` statement naming them is
# recorded too, so a fallback that swallows the ImportError is seen.
BLOCK_TORCH = """
import builtins, sys
BLOCKED = ('torch', 'transformers', 'sentence_transformers')
for name in BLOCKED:
    sys.modules[name] = None
tried = []
_import = builtins.__import__
def _recording_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0 and name.split('.')[0] in BLOCKED:  # lancedb has modules of these names of its own
        tried.append(name)
    return _import(name, globals, locals, fromlist, level)

builtins.__import__ = _recording_import
"""


def _run_without_torch(code: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + code + "\nprint('TRIED', sorted(set(tried)))\n"],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def test_embedder_builds_and_runs_with_torch_unimportable(tmp_path):
    """Graph built from scratch (no cache) as shipped and tuned, then embeddings; torch never even tried."""
    code = (
        "import numpy as np\n"
        "from models.embedder import Embedder\n"
        "from models import tuning\n"
        f"for delta in (None, tuning.BUNDLED):\n"
        f"    e = Embedder(onnx_dir={str(tmp_path / 'onnx')!r}, threads=1, tuning=delta)\n"
        "    v = e.embed(['why did we pick PostgreSQL?', 'row two', 'row three'])\n"
        "    q = e.embed_query('why did we pick PostgreSQL?')\n"
        "    assert v.shape == (3, e.dim) and np.allclose(v[0], q, atol=1e-5), v.shape\n"
        "    print(e.backend, e.wait_ready(), e.torch_loaded)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")}  # the tuned copy is merged anew too
    out = _run_without_torch(code, env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines == ["onnxruntime onnxruntime False"] * 2 + ["TRIED []"], out.stdout
    assert len(list((tmp_path / "onnx").glob("*.onnx"))) == 2


def test_the_run_time_path_never_imports_torch(tmp_path):
    """CLI (evidence add, search, recall, doctor, selftest), capture, MCP server and the UI's modules, with
    torch, transformers and sentence-transformers unimportable: every call works and none of them is tried."""
    home = tmp_path / "home"
    code = (
        "import importlib, io, contextlib\n"
        "from desktop.cli.main import main\n"
        "calls = [['evidence', 'add', 'We chose PostgreSQL for the billing service', '--json'],\n"
        "         ['search', 'which database for billing?', '--evidence', '--json'],\n"
        "         ['search', 'which database for billing?', '--json'],\n"
        "         ['recall', 'why PostgreSQL?', '--budget', '200'],\n"
        "         ['doctor'], ['selftest']]\n"
        "for argv in calls:\n"
        "    buf = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf):\n"
        "        rc = main(argv)\n"
        "    print(argv[0], rc, 'PostgreSQL' in buf.getvalue())\n"
        "for mod in ('capture.runner', 'capture.writer', 'memory.mcp.server', 'desktop.runtime.services',\n"
        "            'desktop.runtime.service', 'desktop.ui.app', 'memory.consolidation.extraction'):\n"
        "    importlib.import_module(mod)\n"
    )
    env = {**os.environ, "MIRADOR_HOME": str(home), "QT_QPA_PLATFORM": "offscreen"}
    out = _run_without_torch(code, env)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    results = {ln.split()[0]: ln.split()[1:] for ln in lines if not ln.startswith("TRIED")}
    assert results["evidence"] == ["0", "True"]
    assert results["search"][0] == "0" and results["recall"][0] == "0"
    assert results["doctor"][0] in ("0", "1")  # a warning elsewhere (no LLM cached here) is not ours
    assert results["selftest"][0] == "0"
    assert "sentence_transformers" not in out.stderr
    assert lines[-1] == "TRIED []", out.stdout
