"""The bundled embedder loads offline and behaves: normalised, batched, cached."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from models.embedder import Embedder, shared_embedder
from models.locate import ModelNotFound, embedder_dir


def test_bundled_model_is_found_and_offline():
    path = embedder_dir()
    assert (path / "model.safetensors").exists()


def test_vectors_are_normalised_and_semantic():
    emb = shared_embedder()
    v = emb.embed(["The cat sat on the mat", "A kitten rested on the rug", "Quarterly tax filing deadline"])
    assert v.shape == (3, emb.dim) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_query_cache_returns_same_vector_without_recompute():
    emb = shared_embedder()
    a = emb.embed_query("where is the runbook")
    b = emb.embed_query("where is the runbook")
    assert a is b


def test_batch_equals_single():
    emb = shared_embedder()
    texts = [f"sentence number {i}" for i in range(40)]
    batch = emb.embed(texts)
    single = emb.embed([texts[17]])[0]
    assert np.allclose(batch[17], single, atol=1e-5)


def test_query_path_gives_the_same_vector_as_embed():
    # embed_query skips encode()'s batching for speed; a query must still land where embed() puts it,
    # or searches would compare vectors from two slightly different models. Long text: truncation too.
    emb = Embedder()
    texts = ["why did we pick PostgreSQL?", "Sam: the release slips to March", "naïve café — 東京 ✓",
             " ".join(["word"] * 400)]
    batch = emb.embed(texts)
    for i, t in enumerate(texts):
        assert np.allclose(emb.embed_query(t), batch[i], atol=1e-5)


def test_configured_dir_must_hold_a_model(tmp_path):
    with pytest.raises(ModelNotFound, match="embedder_dir"):
        Embedder(tmp_path)


def test_onnx_graph_is_built_once_and_serves_queries_and_batches_alike(tmp_path):
    # A query must land where a batch (and so every stored vector) puts it; the graph is built once per
    # machine and model (models/bert_onnx.py), then only loaded. Equality with the torch path that made
    # older stores' vectors: tests/models/test_bert_onnx.py.
    emb = Embedder(onnx_dir=tmp_path, threads=1)
    assert emb.wait_ready(120) == "onnxruntime", emb.onnx_error
    # Two threads for the session, whose pool does not spin, even where one is asked for (torch's setting).
    assert emb._onnx.session.get_session_options().intra_op_num_threads == min(2, os.cpu_count())
    assert (Embedder(threads=0).query_threads, Embedder(threads=3).query_threads) == (0, 3)
    built = list(tmp_path.glob("*.onnx"))
    assert len(built) == 1 and not list(tmp_path.glob("*.tmp"))
    texts = ["why did we pick PostgreSQL?", "naïve café — 東京 ✓", " ".join(["word"] * 400)]
    batch = emb.embed(texts)
    for i, t in enumerate(texts):
        assert np.allclose(emb.embed_query(t), batch[i], atol=1e-5)
        assert np.allclose(emb.embed([t])[0], batch[i], atol=1e-5)
    # Recall's two query texts go through onnxruntime as one padded batch: same vectors, then cached.
    fresh = ["what did they say about the release?", "what did Sam say about the release date in May?", texts[0]]
    for got, want in zip(emb.embed_queries(fresh), emb.embed(fresh), strict=True):
        assert np.allclose(got, want, atol=1e-5)
    assert all(t in emb._cache for t in fresh)
    assert not emb.torch_loaded
    written = built[0].stat().st_ino  # a graph is written to a temporary file and renamed
    again = Embedder(onnx_dir=tmp_path, threads=1)
    assert again.wait_ready(120) == "onnxruntime"
    assert list(tmp_path.glob("*.onnx")) == built and built[0].stat().st_ino == written


def test_exports_unused_for_a_month_are_deleted(tmp_path):
    import time

    from models.onnx_encoder import UNUSED_DAYS

    def made(name, days_ago):
        p = tmp_path / name
        p.write_bytes(b"old export")
        t = time.time() - days_ago * 86400
        os.utime(p, (t, t))
        return p

    stale, recent = made("model-0000000000000000.onnx", UNUSED_DAYS + 1), made("model-1111111111111111.onnx", 2)
    stale_weights = made("model-0000000000000000.onnx.data", UNUSED_DAYS + 1)  # goes with its graph
    crashed = made("model-2222222222222222.onnx.4242.tmp", 2)
    emb = Embedder(onnx_dir=tmp_path, threads=1)
    assert emb.wait_ready(120) == "onnxruntime", emb.onnx_error
    assert not stale.exists() and not stale_weights.exists() and not crashed.exists()
    assert recent.exists()  # another install's, loaded two days ago: kept
    assert emb._onnx.path.with_name(emb._onnx.path.name + ".data").stat().st_size > 80e6  # the weights, beside
    assert time.time() - emb._onnx.path.stat().st_mtime < 60  # ours is marked used at every load


def test_damaged_onnx_graph_is_removed_and_built_again(tmp_path, caplog):
    from models.onnx_encoder import export_path

    path = export_path(embedder_dir(), tmp_path)
    path.write_bytes(b"not an onnx graph")
    emb = Embedder(onnx_dir=tmp_path, threads=1)
    with caplog.at_level("WARNING"):
        assert emb.wait_ready(120) == "onnxruntime", emb.onnx_error
    assert "could not be loaded" in caplog.text and "building it again" in caplog.text
    weights = path.with_name(path.name + ".data")
    assert weights.stat().st_size > 80e6 and emb._onnx.path == path and not emb.torch_loaded
    v = emb.embed_query("still answers")
    assert v.shape == (emb.dim,) and abs(float(np.linalg.norm(v)) - 1.0) < 1e-4
    # Weights cut short (a full disk, a crash while copying a cache): the same.
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size // 2)
    caplog.clear()
    with caplog.at_level("WARNING"):
        again = Embedder(onnx_dir=tmp_path, threads=1)
        assert np.allclose(again.embed_query("still answers"), v, atol=1e-6)
    assert "building it again" in caplog.text and weights.stat().st_size > 80e6


def test_without_torch_a_model_onnxruntime_cannot_serve_says_what_to_do(tmp_path, monkeypatch):
    """A configured model the graph builder does not reproduce needs the torch path, which the app does
    not ship: the error names the model, why, and the two ways out."""
    import json
    import shutil
    import sys

    model = tmp_path / "cls-pooled"
    shutil.copytree(embedder_dir(), model)
    cfg = json.loads((model / "1_Pooling" / "config.json").read_text())
    (model / "1_Pooling" / "config.json").write_text(json.dumps(
        {**cfg, "pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}))
    monkeypatch.setitem(sys.modules, "torch", None)  # as if not installed
    emb = Embedder(model, onnx_dir=tmp_path / "onnx", threads=1)
    with pytest.raises(RuntimeError, match="needs torch and sentence-transformers") as e:
        emb.embed_query("hello")
    assert "mean pooling" in str(e.value) and "mirador[dev]" in str(e.value) and str(model) in str(e.value)
    assert emb.onnx_error and not list((tmp_path / "onnx").glob("*.onnx"))


def test_process_exits_cleanly_when_a_daemon_thread_first_loaded_the_embedder(tmp_path):
    # `mirador hook` embeds in a daemon thread; the onnxruntime loader it starts must not inherit
    # daemon and be cut off at exit, which aborted the process ("terminate called ...", rc -6).
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import threading\n"
        "from models.embedder import Embedder\n"
        f"def work(): Embedder(threads=1, onnx_dir={str(tmp_path)!r}).embed_query('hello')\n"
        "t = threading.Thread(target=work, daemon=True); t.start(); t.join()\n"
    )
    root = Path(__file__).resolve().parents[2]
    for _ in range(2):  # first run exports, second only loads: both must exit cleanly
        proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "terminate called" not in proc.stderr
    assert len(list(tmp_path.glob("*.onnx"))) == 1


def test_one_export_serves_every_install_of_the_same_weights(tmp_path):
    """The export's name comes from the weights' content: a second checkout (another path, another
    mtime) finds the first one's export; other weights get their own."""
    import shutil

    from models.onnx_encoder import export_path

    src = embedder_dir()
    a, b = tmp_path / "a" / src.name, tmp_path / "b" / src.name
    shutil.copytree(src, a)
    shutil.copytree(src, b)
    os.utime(b / "model.safetensors", (1, 1))
    cache = tmp_path / "cache"
    assert export_path(a, cache) == export_path(b, cache) == export_path(src, cache)
    with (b / "model.safetensors").open("r+b") as f:  # one tensor byte at the end changed
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 0xFF]))
    assert export_path(b, cache) != export_path(a, cache)


def test_bulk_threads_nest_and_survive_an_embedder_loading_inside(tmp_path):
    """Two overlapping bulk jobs keep the larger pool until the last ends; an embedder that loads during
    one (sizing torch to its own threads) gets its size back only after the job."""
    torch = pytest.importorskip("torch", reason="the torch path is in the dev extra only")

    from models.embedder import bulk_threads

    torch.set_num_threads(1)
    with bulk_threads(2):
        assert torch.get_num_threads() == 2
        with bulk_threads(2):
            pass
        assert torch.get_num_threads() == 2
        emb = Embedder(onnx_dir=tmp_path, threads=1, use_onnx=False)
        emb.embed(["loads the model inside the job", "and sizes torch for after it"])
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == 1
    with pytest.raises(RuntimeError), bulk_threads(0):
        assert torch.get_num_threads() == (os.cpu_count() or 1)
        raise RuntimeError("an import that fails")
    assert torch.get_num_threads() == 1


def test_openmp_pools_wait_passively_unless_the_person_chose(tmp_path):
    """Spin-waiting OpenMP threads burn the core another process needs (see models/__init__.py)."""
    import subprocess
    import sys

    code = "import models, os; print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "PASSIVE"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ACTIVE"


TRICKY = ["  leading and trailing spaces  ", "Ünïcödé façade — naïve café 東京 🚀", "x",
          " ".join(f"word{i}" for i in range(400)),  # past max_seq_length (256 word pieces)
          "why did we pick PostgreSQL?\nline two\tand a tab"]


def test_tokenize_gives_sentence_transformers_ids_and_chunks_keep_rows(tmp_path):
    """The torch-free path (tokenizers + the built graph) gives sentence-transformers' token ids,
    truncation and padding included; many texts in chunks keep each vector on its own row."""
    from models import onnx_encoder as O

    st = pytest.importorskip("sentence_transformers", reason="the torch path is in the dev extra only")
    ours = O.Tokenize(embedder_dir())(TRICKY)
    theirs = O.as_numpy(O.features(st.SentenceTransformer(str(embedder_dir()), device="cpu"), TRICKY))
    for k in O.INPUTS:
        assert np.array_equal(ours[k], theirs[k]), k
    light = O.load_or_build(embedder_dir(), tmp_path, 1)
    got = light.encode(TRICKY)
    want = Embedder(onnx_dir=tmp_path, threads=1, use_onnx=False).embed(TRICKY)
    assert np.min(np.sum(got * want, axis=1)) > 0.99999
    # Many texts go shortest first in chunks; each vector still lands on its own text's row.
    many = [f"{t} #{i}" for i in range(3) for t in TRICKY] + [f"row {i}: " + "word " * (i % 13) for i in range(20)]
    assert len(many) > O.CHUNK * 3
    one_by_one = np.vstack([light.encode([t]) for t in many])
    assert np.min(np.sum(light.encode(many) * one_by_one, axis=1)) > 0.99999


def test_with_a_cached_export_nothing_loads_torch(tmp_path):
    """A CLI recall, a hook, the capture process or an import embeds queries and batches without
    importing sentence-transformers or torch."""
    import subprocess
    import sys
    import time

    from models.onnx_encoder import UNUSED_DAYS

    first = Embedder(onnx_dir=tmp_path, threads=1)
    assert first.wait_ready(120) == "onnxruntime", first.onnx_error  # builds the graph
    stale = tmp_path / "model-0000000000000000.onnx"  # an earlier release's, unused for a month
    stale.write_bytes(b"old export")
    t = time.time() - (UNUSED_DAYS + 1) * 86400
    os.utime(stale, (t, t))
    code = (
        "import sys, numpy as np\n"
        "from models.embedder import Embedder\n"
        f"e = Embedder(onnx_dir={str(tmp_path)!r}, threads=1)\n"
        "q = e.embed_query('why did we pick PostgreSQL?')\n"
        "qs = e.embed_queries(['a question', 'another one'])\n"
        "b = e.embed(['row %d' % i for i in range(20)])\n"
        "assert q.shape == (e.dim,) and b.shape == (20, e.dim) and len(qs) == 2\n"
        "print(e.backend, 'torch' in sys.modules, 'sentence_transformers' in sys.modules)\n"
        f"import os; print(os.path.exists({str(stale)!r}))\n"
        "from models.embedder import bulk_threads\n"
        "with bulk_threads(2):\n"
        "    e.embed(['row %d' % i for i in range(100)])\n"
        "print(e.torch_loaded, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    # The stale graph is gone: every process that loads one cleans up.
    assert out.stdout.split("\n")[:3] == ["onnxruntime False False", "False", "False False"], out.stdout


def test_tokenize_lower_cases_where_the_model_config_says_so(tmp_path):
    """A model whose sentence-transformers config lower-cases before its tokenizer gets the same ids
    from Tokenize (the export would otherwise see other tokens than torch)."""
    import json
    import shutil

    from models import onnx_encoder as O

    SentenceTransformer = pytest.importorskip("sentence_transformers").SentenceTransformer
    model = tmp_path / "cased"
    shutil.copytree(embedder_dir(), model)
    cfg = json.loads((model / "sentence_bert_config.json").read_text())
    (model / "sentence_bert_config.json").write_text(json.dumps({**cfg, "do_lower_case": True}))
    tok = json.loads((model / "tokenizer.json").read_text())  # a cased tokenizer: only the config lower-cases
    tok["normalizer"]["lowercase"] = False
    (model / "tokenizer.json").write_text(json.dumps(tok))
    texts = ["Why did WE pick PostgreSQL?", "ARGER im BURO, Sam"]  # ASCII: accents are handled elsewhere
    ours = O.Tokenize(model)(texts)
    theirs = O.as_numpy(O.features(SentenceTransformer(str(model), device="cpu"), texts))
    assert np.array_equal(ours["input_ids"], theirs["input_ids"])
    cased = O.Tokenize(model)
    cased.lower = False
    assert not np.array_equal(cased(texts)["input_ids"], theirs["input_ids"])  # the case the flag is for


def test_a_graph_that_could_not_be_built_is_tried_again_later(tmp_path, monkeypatch):
    """A full disk at the first start must not leave a long-running app without embeddings: without torch
    the embed fails and says why, and the graph is built on a later try."""
    import sys

    from models import embedder as E
    from models import onnx_encoder as O

    real = O.build

    def full_disk(model_dir, target):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(O, "build", full_disk)
    monkeypatch.setitem(sys.modules, "torch", None)  # the app: no torch to fall back on
    emb = Embedder(onnx_dir=tmp_path, threads=1)
    with pytest.raises(RuntimeError, match="No space left on device"):
        emb.embed_query("first try")
    assert emb.backend == "torch" and "No space left" in emb.onnx_error
    monkeypatch.setattr(O, "build", real)  # space freed
    with pytest.raises(RuntimeError):  # not before ONNX_RETRY_S
        emb.embed_query("too soon")
    emb._onnx_failed_at -= E.ONNX_RETRY_S + 1
    v = emb.embed_query("later")
    assert v.shape == (emb.dim,) and emb.backend == "onnxruntime" and emb.onnx_error is None


def test_a_short_lived_process_loads_the_graph_without_packing_and_gets_the_same_vectors(tmp_path, monkeypatch):
    """A CLI call or hook (desktop/cli/main.py) skips onnxruntime's weight pre-packing; the vectors must be
    the ones every stored row was embedded with."""
    from models import onnx_encoder as O

    texts = TRICKY + ["why did we pick PostgreSQL?", "", "Sam: the billing migration to PostgreSQL 16 is done."]
    packed = O.load_or_build(embedder_dir(), tmp_path, 2)
    monkeypatch.setattr(O, "_short_lived", O._short_lived)  # put back after the test
    O.set_short_lived(True)
    light = O.load_or_build(embedder_dir(), tmp_path, 2)

    def packing_off(enc) -> bool:
        try:
            return enc.session.get_session_options().get_session_config_entry("session.disable_prepacking") == "1"
        except RuntimeError:  # not set: onnxruntime's default, packing on
            return False

    assert (packing_off(packed), packing_off(light)) == (False, True)
    want, got = packed.encode(texts), light.encode(texts)
    assert np.allclose(got, want, atol=1e-5) and np.min(np.sum(got * want, axis=1)) > 0.99999
    for t in texts[:3]:
        assert np.allclose(light.encode([t])[0], packed.encode([t])[0], atol=1e-5)
    if sys.platform.startswith("linux"):
        # After each run the short-lived session's weights leave the process (models/pages.py); the next
        # run maps them again and gives the same vector. (Both sessions here map the same file: the
        # packed one's run last touched it.)
        from models import bert_onnx, pages
        from tests.models.test_pages import resident

        spans = pages.mappings(bert_onnx.data_path(light.path))
        assert spans and sum(resident(a, b) for a, b in spans) > 0
        first = light.encode(texts[:2])
        assert sum(resident(a, b) for a, b in spans) == 0
        assert np.array_equal(light.encode(texts[:2]), first)
        assert sum(resident(a, b) for a, b in spans) == 0


def test_prompts_of_the_model_config_prefix_queries_and_passages(tmp_path):
    # e5 (and bge, Arctic Embed) learned "query: " / "passage: " prefixes; a model whose config names them
    # gets them on each side, one without (the bundled MiniLM) embeds its texts unchanged.
    base = embedder_dir()
    model = tmp_path / "prompted"
    model.mkdir()
    for p in base.iterdir():
        (model / p.name).symlink_to(p)
    (model / "config_sentence_transformers.json").unlink(missing_ok=True)
    (model / "config_sentence_transformers.json").write_text(
        '{"prompts": {"query": "query: ", "passage": "passage: "}}')
    plain, prompted = Embedder(base, onnx_dir=tmp_path / "onnx"), Embedder(model, onnx_dir=tmp_path / "onnx")
    assert (plain.query_prompt, plain.passage_prompt) == ("", "")
    want = plain.embed(["passage: the release slips to March", "query: when does the release ship?"])
    assert np.allclose(prompted.embed(["the release slips to March"])[0], want[0], atol=1e-5)
    assert np.allclose(prompted.embed_query("when does the release ship?"), want[1], atol=1e-5)
    both = prompted.embed_queries(["when does the release ship?", "who owns the runbook?"])
    assert np.allclose(both[1], plain.embed(["query: who owns the runbook?"])[0], atol=1e-5)
