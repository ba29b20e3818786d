"""A BERT sentence encoder written as an ONNX graph straight from its safetensors weights, without torch.

Why: the embedder is all-MiniLM-L6-v2 (a 6-layer BERT, mean pooling, L2 normalisation), and
onnxruntime runs it. Exporting it through torch.onnx would make torch (and transformers,
sentence-transformers) a dependency of the installed app for a graph that is small and fixed; here
the same computation is spelled out with onnx.helper, the weights read with safetensors' NumPy
loader. Mirador's tuning (models/tuning.py) is merged into a copy of the weights with NumPy first,
so the tuned graph is built the same way.

The graph takes word_embeds (float32, [batch, tokens, hidden]: each token's row of the word-embedding
table), attention_mask and token_type_ids (int64, [batch, tokens]) and gives "sentence_embedding"
[batch, hidden]: sentence-transformers' Transformer -> Pooling(mean) -> Normalize, op for op as
transformers' BertModel computes it (eager attention, exact-erf GELU).
tests/models/test_bert_onnx.py compares it with the torch path where torch is installed.

Why the word-embedding table is not in the graph: it is half the weights (30522 x 384 float32, 47 MB),
and a text uses a few dozen of its rows. Inside the graph onnxruntime's Gather reads the rows where the
data file is mapped, and the kernel maps a whole page-cache folio (up to megabytes, depending on how
the file was read ahead) for each row touched: a cold one-shot search held ~12 MB of the table for
~20 tokens, more in other page-cache states. The table is kept in the same data file, after the
graph's tensors, where the graph's metadata says (WORDS_KEY), and models/onnx_encoder.py reads the rows
a batch needs with pread: page-cache reads, nothing mapped into the process.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

OPSET = 17  # LayerNormalization is a standard op from 17 on; onnxruntime fuses the rest
OUTPUT = "sentence_embedding"
WORDS = "word_embeds"  # the graph's first input: the rows of the word-embedding table for input_ids
INPUTS = (WORDS, "attention_mask", "token_type_ids")
WORDS_KEY = "mirador.word_embeddings"  # metadata: where the table is in the data file (words_at)
_ALIGN = 4096  # the table starts on a page of the data file


class NotBert(ValueError):
    """The weights or config are not a BERT encoder this builder reproduces."""


def _config(model_dir: Path) -> dict:
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    if cfg.get("model_type") != "bert":
        raise NotBert(f"{model_dir}: model_type {cfg.get('model_type')!r}, not 'bert'")
    if cfg.get("hidden_act", "gelu") != "gelu":
        raise NotBert(f"{model_dir}: activation {cfg.get('hidden_act')!r}, only exact 'gelu' is built")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
        raise NotBert(f"{model_dir}: {cfg.get('position_embedding_type')!r} position embeddings")
    if cfg["hidden_size"] % cfg["num_attention_heads"]:
        raise NotBert(f"{model_dir}: hidden_size is not a multiple of num_attention_heads")
    return cfg


def _weights(model_dir: Path) -> dict[str, np.ndarray]:
    """The encoder's tensors by BertModel's names (a checkpoint saved from BertFor* prefixes "bert.")."""
    from safetensors.numpy import load_file

    path = Path(model_dir) / "model.safetensors"
    if not path.exists():
        raise NotBert(f"no model.safetensors in {model_dir}")
    raw = load_file(str(path))
    return {k.removeprefix("bert."): v for k, v in raw.items()}


def build(model_dir: Path):
    """The ONNX ModelProto of the sentence encoder in model_dir (a sentence-transformers directory),
    without its word-embedding table (see word_table)."""
    return _build(model_dir)[0]


def word_table(w: dict[str, np.ndarray], model_dir: Path) -> np.ndarray:
    """The word-embedding table, [vocabulary, hidden], rows by token id: float32, or float16 where the weights
    keep it so (a multilingual vocabulary's table, models/e5_pack.py: 250k rows, half the disk in float16)."""
    try:
        arr = w["embeddings.word_embeddings.weight"]
    except KeyError as e:
        raise NotBert(f"{model_dir}: weight embeddings.word_embeddings.weight missing") from e
    return np.ascontiguousarray(arr, dtype="<f2" if arr.dtype == np.float16 else "<f4")


def _build(model_dir: Path):
    """build()'s ModelProto and the word-embedding table it leaves out."""
    from onnx import TensorProto, helper, numpy_helper

    cfg = _config(model_dir)
    w = _weights(model_dir)
    words = word_table(w, model_dir)
    if words.shape[1] != int(cfg["hidden_size"]):
        raise NotBert(f"{model_dir}: word embeddings of width {words.shape[1]}, not hidden_size")
    hidden, heads, layers = int(cfg["hidden_size"]), int(cfg["num_attention_heads"]), int(cfg["num_hidden_layers"])
    head_dim, eps = hidden // heads, float(cfg.get("layer_norm_eps", 1e-12))
    nodes: list = []
    inits: list = []

    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(key: str, transpose: bool = False) -> str:
        try:
            arr = w[key]
        except KeyError as e:
            raise NotBert(f"{model_dir}: weight {key} missing") from e
        arr = np.ascontiguousarray(arr.T if transpose else arr, dtype=np.float32)
        return const(key, arr)

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, prefix: str, out: str) -> str:
        # torch's Linear stores [out, in]; MatMul wants [in, out]
        y = node("MatMul", [x, weight(f"{prefix}.weight", transpose=True)], f"{out}/matmul")
        return node("Add", [y, weight(f"{prefix}.bias")], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization", [x, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")], out,
                    axis=-1, epsilon=eps)

    # Embeddings: word (the input: rows of the table, looked up outside) + position (0..tokens-1) + token
    # type, then LayerNorm.
    const("zero", np.array(0, dtype=np.int64))
    const("one", np.array(1, dtype=np.int64))
    shape = node("Shape", [WORDS], "words_shape")
    tokens = node("Gather", [shape, "one"], "tokens", axis=0)
    positions = node("Range", ["zero", tokens, "one"], "positions")
    emb = node("Add", [WORDS, node("Gather", [weight("embeddings.position_embeddings.weight"), positions],
                                   "emb/pos")], "emb/word+pos")
    emb = node("Add", [emb, node("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"],
                                 "emb/type")], "emb/sum")
    x = layer_norm(emb, "embeddings.LayerNorm", "emb/out")

    # The attention mask as BertModel extends it: 0 where attended, the float32 minimum where padded.
    mask_f = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    const("f_one", np.array(1.0, dtype=np.float32))
    const("f_min", np.array(np.finfo(np.float32).min, dtype=np.float32))
    const("axes_12", np.array([1, 2], dtype=np.int64))
    bias = node("Mul", [node("Sub", ["f_one", mask_f], "mask_inv"), "f_min"], "mask_bias_2d")
    bias = node("Unsqueeze", [bias, "axes_12"], "mask_bias")  # [batch, 1, 1, tokens]

    const("split_heads", np.array([0, 0, heads, head_dim], dtype=np.int64))
    const("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    const("scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    const("sqrt_half", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))

    for i in range(layers):
        p, n = f"encoder.layer.{i}", f"l{i}"

        def heads_of(t: str, which: str, perm: list[int], n=n) -> str:
            r = node("Reshape", [t, "split_heads"], f"{n}/{which}/split")
            return node("Transpose", [r], f"{n}/{which}/heads", perm=perm)

        q = heads_of(linear(x, f"{p}.attention.self.query", f"{n}/q"), "q", [0, 2, 1, 3])
        k = heads_of(linear(x, f"{p}.attention.self.key", f"{n}/k"), "k", [0, 2, 3, 1])
        v = heads_of(linear(x, f"{p}.attention.self.value", f"{n}/v"), "v", [0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [q, k], f"{n}/qk"), "scale"], f"{n}/scores")
        probs = node("Softmax", [node("Add", [scores, bias], f"{n}/masked")], f"{n}/probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{n}/ctx_heads")], f"{n}/ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "merge_heads"], f"{n}/ctx")
        att = linear(ctx, f"{p}.attention.output.dense", f"{n}/att_dense")
        x = layer_norm(node("Add", [att, x], f"{n}/att_res"), f"{p}.attention.output.LayerNorm", f"{n}/att_out")
        inter = linear(x, f"{p}.intermediate.dense", f"{n}/inter")
        # GELU, exact: 0.5 * x * (1 + erf(x / sqrt 2))
        erf = node("Erf", [node("Mul", [inter, "sqrt_half"], f"{n}/gelu/scaled")], f"{n}/gelu/erf")
        gelu = node("Mul", [node("Mul", [inter, "half"], f"{n}/gelu/half_x"),
                            node("Add", [erf, "f_one"], f"{n}/gelu/one_plus")], f"{n}/gelu")
        out = linear(gelu, f"{p}.output.dense", f"{n}/out_dense")
        x = layer_norm(node("Add", [out, x], f"{n}/out_res"), f"{p}.output.LayerNorm", f"{n}/out")

    # Mean over the attended tokens (sentence-transformers clamps the count at 1e-9), then L2-normalise
    # (torch.nn.functional.normalize clamps the norm at 1e-12).
    const("axis_1", np.array([1], dtype=np.int64))
    const("axis_2", np.array([2], dtype=np.int64))
    const("min_count", np.array(1e-9, dtype=np.float32))
    const("min_norm", np.array(1e-12, dtype=np.float32))
    m = node("Unsqueeze", [mask_f, "axis_2"], "pool/mask")
    summed = node("ReduceSum", [node("Mul", [x, m], "pool/masked"), "axis_1"], "pool/sum", keepdims=0)
    count = node("Max", [node("ReduceSum", [m, "axis_1"], "pool/count_raw", keepdims=0), "min_count"], "pool/count")
    mean = node("Div", [summed, count], "pool/mean")
    norm = node("Max", [node("ReduceL2", [mean], "norm/raw", axes=[1], keepdims=1), "min_norm"], "norm/l2")
    node("Div", [mean, norm], OUTPUT)

    dyn = ["batch", "tokens"]
    graph = helper.make_graph(
        nodes, "sentence_encoder",
        [helper.make_tensor_value_info(WORDS, TensorProto.FLOAT, [*dyn, hidden])] +
        [helper.make_tensor_value_info(k, TensorProto.INT64, dyn) for k in INPUTS[1:]],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="mirador.models.bert_onnx")
    model.ir_version = min(model.ir_version, 8)  # readable by every onnxruntime that knows opset 17
    # Not onnx.checker here: it serialises the whole model once more (time and memory at the first start);
    # onnxruntime validates the graph when it loads it, and tests/models/test_bert_onnx.py runs the checker.
    return model, words


def data_path(graph: Path) -> Path:
    """Where the weights of the graph file `graph` are kept: beside it, as ONNX external data."""
    return graph.with_name(graph.name + ".data")


def write(model_dir: Path, target: Path) -> None:
    """build(model_dir) saved as target and data_path(target), in that directory as named (the caller
    writes into a directory of its own and moves both files).

    Why the weights go in a file of their own: onnxruntime maps external data from disk instead of
    parsing it out of the graph file and copying it, so a session loads in a fraction of the time and
    memory (bench/cold_start.py). The word-embedding table follows the graph's tensors in that file, on
    a page boundary; the graph's metadata (WORDS_KEY) records where, and words_at reads it back.
    """
    import onnx

    model, words = _build(model_dir)
    data = data_path(target)
    onnx.save_model(model, str(target), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=data.name, size_threshold=1024)
    with data.open("r+b") as f:
        f.seek(0, 2)
        offset = -(-f.tell() // _ALIGN) * _ALIGN
        f.write(b"\0" * (offset - f.tell()))
        f.write(words.tobytes())
    # The graph again with the table's place (onnx.save_model has made its tensors external references).
    graph = onnx.load(str(target), load_external_data=False)
    entry = graph.metadata_props.add()
    entry.key, entry.value = WORDS_KEY, json.dumps({"offset": offset, "rows": int(words.shape[0]),
                                                    "dim": int(words.shape[1]), "dtype": words.dtype.str})
    target.write_bytes(graph.SerializeToString())


def words_at(metadata: dict[str, str], data_size: int) -> tuple[int, int, int]:
    """(offset, rows, dim) of the word-embedding table in a data file of data_size bytes, from the graph's
    metadata (an onnxruntime session's custom_metadata_map). ValueError if the graph has no table or the
    file is too short for it (a graph of an earlier builder, a cut-off file)."""
    try:
        info = json.loads(metadata[WORDS_KEY])
        offset, rows, dim = int(info["offset"]), int(info["rows"]), int(info["dim"])
    except (KeyError, ValueError, TypeError) as e:
        raise ValueError(f"the graph does not say where its word embeddings are ({e})") from e
    size = _ROW_DTYPES.get(info.get("dtype"), 0)
    if not size or rows <= 0 or dim <= 0 or offset < 0 or offset + rows * dim * size > data_size:
        raise ValueError(f"the graph's data file ({data_size} bytes) does not hold its word embeddings {info}")
    return offset, rows, dim


_ROW_DTYPES = {"<f4": 4, "<f2": 2}  # the word tables written: float32, float16 (bytes per value)


def words_dtype(metadata: dict[str, str]) -> str:
    """The word table's dtype ("<f4" or "<f2") as the graph's metadata records it (after words_at checked it)."""
    return str(json.loads(metadata[WORDS_KEY])["dtype"])
