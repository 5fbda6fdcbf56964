"""The BERT graph of scripts/fetch_models.py: a numpy reference forward pass, golden vectors,
the ONNX graph builder (fp32 and per-row int8 dense layers, the random cross-encoder head), the
query graph, and the checks of a built model against the reference (run in the models venv by
fetch_models' inner stage; imported by it, and through it by e5_model.py).
"""

from __future__ import annotations

import json
import math
import struct
import tempfile
from pathlib import Path

# Bump whenever the graph, the head, the golden inputs or the manifest logic
# change, so that stamps written by an older script are treated as stale.
RECIPE_VERSION = 1

UPSTREAM_ID = "sentence-transformers/all-MiniLM-L6-v2"

OPSET = 17
# IR 8 is the version that introduced opset 17; keeping it low lets older
# runtimes (e.g. the npm onnxruntime-node 1.30 library) load the files too.
IR_VERSION = 8
MAX_LENGTH = 256
# Additive attention-mask value, as in the original BERT implementation.
MASK_NEG = -10000.0
# The cross-encoder head is random but must be identical in the ONNX graph and
# in the numpy reference, on every machine: fixed legacy RandomState seed.
HEAD_SEED = 1234

FP32_MAX_ABS_DIFF = 1e-4
INT8_MIN_COSINE = 0.98
# A text's vector must not depend on what it is batched with (an incremental
# reindex and a cold one would disagree): every golden text inside a padded
# batch vs. alone. The int8 graph quantizes each token row on its own, so the
# measured distance is 0 (bit-identical); 1e-6 leaves room for float
# summation order only, nowhere near what a per-batch scale does (~3e-2).
BATCH_MAX_COSINE_DISTANCE = 1e-6
# Random-head logits are O(1); int8 noise on them is well below this bound.
CROSS_INT8_MAX_ABS_DIFF = 0.1
# Int8 weights are limited to +-63 ("7-bit", ORT's reduce_range): x86 AVX2 /
# AVX-512BW without VNNI multiply uint8 activations by int8 weights with
# vpmaddubsw, which adds two products into a saturating int16. 255*63*2 =
# 32130 < 32767, so no sum can saturate and every integer kernel (AVX2, VNNI,
# NEON, dot-product, AMX) computes the same exact int32 results.
WEIGHT_QMAX = 63

GOLDEN_SENTENCES = [
    "The cat sits on the mat.",
    "Retrieval systems combine BM25 with dense vectors.",
    "卡片盒笔记法是一种笔记方法。",
    "QMD is an on-device Markdown search engine combining BM25, vector retrieval, "
    "reciprocal-rank fusion, and local reranking.",
    "Résumé: naïve café — emojis 🚀 and URLs https://example.com/a_b?c=d",
    "",
]
GOLDEN_PAIRS = [
    ["what is bm25", "BM25 is a lexical ranking function."],
    ["capital of france", "Paris is the capital of France."],
    ["卡片盒", "Zettelkasten is a note method."],
]


class Fail(Exception):
    """A problem that should end the run with a clear one-line message."""



def log(msg: str) -> None:
    print(f"[fetch_models] {msg}", flush=True)


# ---------------------------------------------------------------------------
# Inner stage (runs inside the venv: numpy, onnx, onnxruntime, tokenizers)
# ---------------------------------------------------------------------------


def random_head(hidden: int):
    """Seeded BertForSequenceClassification-style head, torch [out, in] layout.

    Scale 1/sqrt(hidden) keeps tanh out of saturation and gives logits of
    order one, so that different pairs yield visibly different scores.
    """
    import numpy as np

    rs = np.random.RandomState(HEAD_SEED)
    std = 1.0 / math.sqrt(hidden)
    head = {
        "pooler.dense.weight": rs.normal(0.0, std, (hidden, hidden)),
        "pooler.dense.bias": rs.normal(0.0, std, (hidden,)),
        "classifier.weight": rs.normal(0.0, std, (1, hidden)),
        "classifier.bias": rs.normal(0.0, std, (1,)),
    }
    # Round once to float32: the graph stores float32 and the reference must
    # see exactly the same numbers.
    return {k: v.astype(np.float32) for k, v in head.items()}


# -- independent fp64 reference ---------------------------------------------


def read_safetensors_raw(path: Path):
    """Minimal safetensors reader, deliberately not the `safetensors` package,
    so that the golden values share no loading code with the converter."""
    import numpy as np

    dtypes = {"F16": "<f2", "F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8"}
    blob = path.read_bytes()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    base = 8 + n
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = np.dtype(dtypes[meta["dtype"]])
        arr = np.frombuffer(blob, dtype=dtype, count=(end - start) // dtype.itemsize, offset=base + start)
        tensors[name] = arr.reshape(meta["shape"])
    return tensors


def reference_forward(w, cfg: dict, ids, type_ids, head=None):
    """Plain fp64 BERT on one unpadded sequence; returns (hidden [S,H], logit|None)."""
    import numpy as np

    erf = np.vectorize(math.erf, otypes=[np.float64])

    def p(name):
        return np.asarray(w[name], dtype=np.float64)

    def layer_norm(x, prefix):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + cfg["layer_norm_eps"]) * p(prefix + ".weight") + p(prefix + ".bias")

    def dense(x, prefix):
        return x @ p(prefix + ".weight").T + p(prefix + ".bias")

    hidden = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    hd = hidden // nh
    s = len(ids)
    x = (
        p("embeddings.word_embeddings.weight")[ids]
        + p("embeddings.position_embeddings.weight")[:s]
        + p("embeddings.token_type_embeddings.weight")[type_ids]
    )
    x = layer_norm(x, "embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{i}."

        def heads(t):
            return t.reshape(s, nh, hd).transpose(1, 0, 2)

        q = heads(dense(x, pre + "attention.self.query"))
        k = heads(dense(x, pre + "attention.self.key"))
        v = heads(dense(x, pre + "attention.self.value"))
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(hd)
        scores -= scores.max(-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(1, 0, 2).reshape(s, hidden)
        x = layer_norm(x + dense(ctx, pre + "attention.output.dense"), pre + "attention.output.LayerNorm")
        h = dense(x, pre + "intermediate.dense")
        h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
        x = layer_norm(x + dense(h, pre + "output.dense"), pre + "output.LayerNorm")
    logit = None
    if head is not None:
        pooled = np.tanh(x[0] @ head["pooler.dense.weight"].astype(np.float64).T
                         + head["pooler.dense.bias"].astype(np.float64))
        logit = float((pooled @ head["classifier.weight"].astype(np.float64).T
                       + head["classifier.bias"].astype(np.float64))[0])
    return x, logit


def mean_pool_l2(hidden, mask):
    import numpy as np

    hidden = np.asarray(hidden, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)[..., None]
    pooled = (hidden * m).sum(-2) / np.maximum(m.sum(-2), 1e-9)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)


def load_tokenizer(src: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    # The shipped tokenizer.json pads/truncates to a fixed 128; the project
    # uses no fixed padding and a 256-token limit.
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LENGTH)
    return tok


def dump_golden(header: dict, cases: list[dict]) -> bytes:
    # One case per line keeps the file reviewable and diffs readable.
    head = json.dumps(header, ensure_ascii=False)[:-1]
    sep = ", " if header else ""
    lines = ",\n  ".join(json.dumps(c, ensure_ascii=False) for c in cases)
    return f'{head}{sep}"cases": [\n  {lines}\n]}}\n'.encode("utf-8")


def build_golden(src: Path, cfg: dict) -> tuple[bytes, bytes]:
    import numpy as np

    w = read_safetensors_raw(src / "model.safetensors")
    tok = load_tokenizer(src)
    emb_cases = []
    for text in GOLDEN_SENTENCES:
        enc = tok.encode(text)
        hidden, _ = reference_forward(w, cfg, np.array(enc.ids), np.array(enc.type_ids))
        emb = mean_pool_l2(hidden, np.ones(len(enc.ids)))
        emb_cases.append({"text": text, "input_ids": list(enc.ids), "embedding": [float(v) for v in emb]})
    head = random_head(cfg["hidden_size"])
    ce_cases = []
    for query, passage in GOLDEN_PAIRS:
        enc = tok.encode(query, passage)
        _, logit = reference_forward(w, cfg, np.array(enc.ids), np.array(enc.type_ids), head)
        ce_cases.append({"query": query, "passage": passage, "input_ids": list(enc.ids),
                         "token_type_ids": list(enc.type_ids), "logit": logit})
    emb = dump_golden({"model": UPSTREAM_ID, "pooling": "mean", "normalize": True}, emb_cases)
    ce = dump_golden({}, ce_cases)
    return emb, ce


# -- torch-free converter -------------------------------------------------------


class GraphBuilder:
    """Thin wrapper over onnx.helper that names every tensor after its node."""

    def __init__(self):
        self.nodes = []
        self.inits = []
        self._names: set[str] = set()

    def _unique(self, name: str) -> str:
        base, i = name, 1
        while name in self._names:
            i += 1
            name = f"{base}_{i}"
        self._names.add(name)
        return name

    def const(self, name: str, array) -> str:
        from onnx import numpy_helper

        name = self._unique(name)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list[str], name: str, **attrs) -> str:
        from onnx import helper

        name = self._unique(name)
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name


def quantize_weight_columns(wt):
    """Symmetric per-output-column int8 weights limited to +-WEIGHT_QMAX.

    Returns (int8 [in, out], float32 scales [out]); the dequantized weight is
    q * scale[col]."""
    import numpy as np

    wt = np.asarray(wt, dtype=np.float64)
    amax = np.abs(wt).max(axis=0)
    scale = np.where(amax > 0, amax / WEIGHT_QMAX, 1.0).astype(np.float32)
    q = np.clip(np.rint(wt / scale.astype(np.float64)), -WEIGHT_QMAX, WEIGHT_QMAX).astype(np.int8)
    return q, scale


def bert_embeddings(g: GraphBuilder, w: dict, quantized: bool, weight, one_i: str, zero_i: str) -> str:
    """BERT's embedding sum (word + position 0..S-1 + token type), before its LayerNorm."""
    import numpy as np
    from onnx import TensorProto

    f32 = np.float32
    shape = g.op("Shape", ["input_ids"], "embeddings/input_shape")
    seq_len = g.op("Gather", [shape, one_i], "embeddings/seq_len", axis=0)
    pos_ids = g.op("Range", [zero_i, seq_len, one_i], "embeddings/position_ids")
    if quantized:
        # The 30k-row token table is most of the file: int8 rows with one
        # float scale each (a lookup, no integer arithmetic involved).
        table = np.asarray(w["embeddings.word_embeddings.weight"], dtype=np.float64)
        row_scale = np.maximum(np.abs(table).max(axis=1), 1e-12) / 127.0
        table_q = np.clip(np.rint(table / row_scale[:, None]), -127, 127).astype(np.int8)
        words_q = g.op("Gather", [g.const("embeddings.word_embeddings.weight_q", table_q), "input_ids"],
                       "embeddings/words_q", axis=0)
        scales = g.op("Gather", [g.const("embeddings.word_embeddings.row_scale", row_scale.astype(f32)), "input_ids"],
                      "embeddings/words_scale", axis=0)
        scales = g.op("Unsqueeze", [scales, g.const("const/last_axis", np.array([-1], dtype=np.int64))],
                      "embeddings/words_scale_b")
        words = g.op("Mul", [g.op("Cast", [words_q], "embeddings/words_f", to=TensorProto.FLOAT), scales],
                     "embeddings/words")
    else:
        words = g.op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "embeddings/words",
                     axis=0)
    pos = g.op("Gather", [weight("embeddings.position_embeddings.weight"), pos_ids], "embeddings/positions", axis=0)
    types = g.op("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"],
                 "embeddings/token_types", axis=0)
    x = g.op("Add", [g.op("Add", [words, pos], "embeddings/sum1"), types], "embeddings/sum")
    return x


def build_bert_onnx(cfg: dict, w: dict, head: dict | None, quantized: bool = False, embeddings=None):
    """BertModel (or BertForSequenceClassification with `head`) as an ONNX graph.

    With `quantized`, every dense layer of the encoder is the per-row int8
    pattern of `quant_dense` below (see the module docstring); the head stays
    float. `embeddings(g, one_i, zero_i)`, when given, builds the embedding sum (before its
    LayerNorm) from "input_ids" instead of BERT's word + position + token-type
    tables, and the graph then has no token_type_ids input (scripts/e5_model.py:
    XLM-R's token table and positions, one token type)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    f32 = np.float32
    hidden = cfg["hidden_size"]
    nh = cfg["num_attention_heads"]
    hd = hidden // nh
    eps = float(cfg["layer_norm_eps"])
    g = GraphBuilder()

    def weight(name):
        return g.const(name, np.ascontiguousarray(w[name], dtype=f32))

    def float_dense(x, prefix, params):
        # Store W transposed ([in, out]) so a plain MatMul applies it.
        wt = g.const(prefix + ".weight_t", np.ascontiguousarray(params[prefix + ".weight"].T, dtype=f32))
        b = g.const(prefix + ".bias", np.ascontiguousarray(params[prefix + ".bias"], dtype=f32))
        return g.op("Add", [g.op("MatMul", [x, wt], prefix + "/matmul"), b], prefix + "/out")

    if quantized:
        zero_f = g.const("const/zero_f32", np.array(0.0, dtype=f32))
        u8_max = g.const("const/u8_max", np.array(255.0, dtype=f32))
        tiny = g.const("const/tiny_scale", np.array(1e-30, dtype=f32))

    def quantize_rows(x, prefix):
        """x [B,S,K] float -> (uint8 q, int32 zero point [B,S,1], float scale [B,S,1]).

        DynamicQuantizeLinear's arithmetic (asymmetric uint8, range widened to
        include 0, round half to even), but over each token's row instead of
        the whole tensor: a row's codes depend on that row alone, never on
        the other texts of the batch or on padding."""
        lo = g.op("Min", [g.op("ReduceMin", [x], prefix + "/row_min", axes=[-1], keepdims=1), zero_f],
                  prefix + "/row_lo")
        hi = g.op("Max", [g.op("ReduceMax", [x], prefix + "/row_max", axes=[-1], keepdims=1), zero_f],
                  prefix + "/row_hi")
        scale = g.op("Div", [g.op("Sub", [hi, lo], prefix + "/row_range"), u8_max], prefix + "/row_scale0")
        # An all-zero row would give scale 0 and 0/0 below.
        scale = g.op("Max", [scale, tiny], prefix + "/row_scale")
        zp = g.op("Round", [g.op("Div", [g.op("Neg", [lo], prefix + "/neg_lo"), scale], prefix + "/zp_f")],
                  prefix + "/zp_round")
        q = g.op("Add", [g.op("Round", [g.op("Div", [x, scale], prefix + "/x_scaled")], prefix + "/x_round"), zp],
                 prefix + "/x_shift")
        q = g.op("Clip", [q, zero_f, u8_max], prefix + "/x_clip")
        q = g.op("Cast", [q], prefix + "/x_u8", to=TensorProto.UINT8)
        zp_i = g.op("Cast", [zp], prefix + "/zp_i32", to=TensorProto.INT32)
        return q, zp_i, scale

    def quant_dense(xq, prefix, params, n_out=None):
        """Integer MatMul of row-quantized x with 7-bit per-column weights.

        sum_k (q_k - zp) w_k = MatMulInteger(q, w) - zp * colsum(w), all in
        int32 (exact on every ISA), then one float rescale and the bias."""
        q, zp_i, scale = xq
        wq, wscale = quantize_weight_columns(params[prefix + ".weight"].T)
        colsum = wq.astype(np.int32).sum(axis=0).astype(np.int32)
        acc = g.op("MatMulInteger", [q, g.const(prefix + ".weight_q", wq)], prefix + "/matmul_int")
        corr = g.op("Mul", [zp_i, g.const(prefix + ".weight_colsum", colsum)], prefix + "/zp_corr")
        acc = g.op("Sub", [acc, corr], prefix + "/acc")
        y = g.op("Mul", [g.op("Cast", [acc], prefix + "/acc_f", to=TensorProto.FLOAT), scale], prefix + "/row_rescale")
        y = g.op("Mul", [y, g.const(prefix + ".weight_scale", wscale)], prefix + "/col_rescale")
        b = g.const(prefix + ".bias", np.ascontiguousarray(params[prefix + ".bias"], dtype=f32))
        return g.op("Add", [y, b], prefix + "/out")

    def dense(x, prefix, params, xq=None):
        if not quantized:
            return float_dense(x, prefix, params)
        return quant_dense(xq or quantize_rows(x, prefix + "/in"), prefix, params)

    def layer_norm(x, prefix):
        return g.op("LayerNormalization", [x, weight(prefix + ".weight"), weight(prefix + ".bias")],
                    prefix + "/out", axis=-1, epsilon=eps)

    # Embeddings, then LayerNorm.
    one_i = g.const("const/one_i64", np.array(1, dtype=np.int64))
    zero_i = g.const("const/zero_i64", np.array(0, dtype=np.int64))
    if embeddings is None:
        x = bert_embeddings(g, w, quantized, weight, one_i, zero_i)
    else:
        x = embeddings(g, one_i, zero_i)
    x = layer_norm(x, "embeddings.LayerNorm")

    # Additive mask [B,1,1,S]: 0 for real tokens, MASK_NEG for padding.
    mask = g.op("Cast", ["attention_mask"], "mask/float", to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const("const/mask_axes", np.array([1, 2], dtype=np.int64))], "mask/b11s")
    mask = g.op("Sub", [g.const("const/one_f32", np.array(1.0, dtype=f32)), mask], "mask/inverted")
    mask = g.op("Mul", [mask, g.const("const/mask_neg", np.array(MASK_NEG, dtype=f32))], "mask/additive")

    split_shape = g.const("const/split_heads", np.array([0, 0, nh, hd], dtype=np.int64))
    merge_shape = g.const("const/merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.const("const/attn_scale", np.array(1.0 / math.sqrt(hd), dtype=f32))
    inv_sqrt2 = g.const("const/inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=f32))
    one_f = g.const("const/one_f32_gelu", np.array(1.0, dtype=f32))
    half_f = g.const("const/half_f32", np.array(0.5, dtype=f32))

    for i in range(cfg["num_hidden_layers"]):
        pre = f"encoder.layer.{i}."

        def heads(t, perm, tag):
            t = g.op("Reshape", [t, split_shape], f"{pre}attention.{tag}/split")
            return g.op("Transpose", [t], f"{pre}attention.{tag}/heads", perm=perm)

        # Q, K and V read the same input: quantize it once.
        xq = quantize_rows(x, pre + "attention.self/in") if quantized else None
        q = heads(dense(x, pre + "attention.self.query", w, xq), [0, 2, 1, 3], "q")  # [B,nh,S,hd]
        k = heads(dense(x, pre + "attention.self.key", w, xq), [0, 2, 3, 1], "k")  # [B,nh,hd,S]
        v = heads(dense(x, pre + "attention.self.value", w, xq), [0, 2, 1, 3], "v")  # [B,nh,S,hd]
        scores = g.op("MatMul", [q, k], pre + "attention/scores")
        scores = g.op("Mul", [scores, scale], pre + "attention/scaled")
        scores = g.op("Add", [scores, mask], pre + "attention/masked")
        probs = g.op("Softmax", [scores], pre + "attention/probs", axis=-1)
        ctx = g.op("MatMul", [probs, v], pre + "attention/context")
        ctx = g.op("Transpose", [ctx], pre + "attention/context_t", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape], pre + "attention/context_merged")
        attn = dense(ctx, pre + "attention.output.dense", w)
        x = layer_norm(g.op("Add", [attn, x], pre + "attention/residual"), pre + "attention.output.LayerNorm")

        # Exact GELU: 0.5 * h * (1 + erf(h / sqrt(2))).
        h = dense(x, pre + "intermediate.dense", w)
        e = g.op("Erf", [g.op("Mul", [h, inv_sqrt2], pre + "gelu/scaled")], pre + "gelu/erf")
        h = g.op("Mul", [h, g.op("Add", [e, one_f], pre + "gelu/1p")], pre + "gelu/prod")
        h = g.op("Mul", [h, half_f], pre + "gelu/out")
        ffn = dense(h, pre + "output.dense", w)
        x = layer_norm(g.op("Add", [ffn, x], pre + "output/residual"), pre + "output.LayerNorm")

    def int_input(name):
        return helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])

    inputs = [int_input("input_ids"), int_input("attention_mask")]
    if embeddings is None:
        inputs.append(int_input("token_type_ids"))
    if head is None:
        g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="last_hidden_state"))
        outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                                 ["batch", "sequence", hidden])]
    else:
        cls = g.op("Gather", [x, zero_i], "pooler/cls", axis=1)  # [B,H]
        pooled = g.op("Tanh", [float_dense(cls, "pooler.dense", head)], "pooler/tanh")
        logits = float_dense(pooled, "classifier", head)
        g.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="logits"))
        outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]

    graph = helper.make_graph(g.nodes, "bert", inputs, outputs, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="llm-wiki-retrieval/fetch_models.py",
                              producer_version=str(RECIPE_VERSION))
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


# -- running models with onnxruntime ---------------------------------------


def ort_session(model):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    data = model if isinstance(model, bytes) else str(model)
    return ort.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])


def padded_batch(seqs: list[list[int]], types: list[list[int]] | None = None):
    import numpy as np

    n = max(len(s) for s in seqs)
    ids = np.zeros((len(seqs), n), dtype=np.int64)
    mask = np.zeros_like(ids)
    tt = np.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = s
        mask[i, : len(s)] = 1
        if types is not None:
            tt[i, : len(s)] = types[i]
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}


def embed_with(sess, cases, batched: bool):
    """Pooled embeddings from an ONNX session, one run per case or one padded batch."""
    import numpy as np

    seqs = [c["input_ids"] for c in cases]
    if batched:
        feed = padded_batch(seqs)
        (hidden,) = sess.run(["last_hidden_state"], feed)
        return mean_pool_l2(hidden, feed["attention_mask"])
    out = []
    for s in seqs:
        feed = padded_batch([s])
        (hidden,) = sess.run(["last_hidden_state"], feed)
        out.append(mean_pool_l2(hidden, feed["attention_mask"])[0])
    return np.stack(out)


def logits_with(sess, cases):
    feed = padded_batch([c["input_ids"] for c in cases], [c["token_type_ids"] for c in cases])
    (logits,) = sess.run(["logits"], feed)
    return logits[:, 0].astype("float64")


def check_fp32_embed(model, golden: dict) -> float:
    import numpy as np

    sess = ort_session(model)
    ref = np.array([c["embedding"] for c in golden["cases"]])
    single = float(np.abs(embed_with(sess, golden["cases"], False) - ref).max())
    batch = float(np.abs(embed_with(sess, golden["cases"], True) - ref).max())
    log(f"  check fp32 embed vs fp64 numpy: max|diff| single={single:.3e} padded-batch={batch:.3e} "
        f"(limit {FP32_MAX_ABS_DIFF:g})")
    worst = max(single, batch)
    if not worst < FP32_MAX_ABS_DIFF:
        raise Fail(f"fp32 ONNX embeddings differ from the numpy reference by {worst:.3e}")
    return worst


def golden_cosines(got, golden: dict):
    """Cosine of each embedded golden case with its fp64 reference vector."""
    import numpy as np

    ref = np.array([c["embedding"] for c in golden["cases"]])
    return (got * ref).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(ref, axis=-1))


def check_int8_embed(model, golden: dict) -> float:
    import numpy as np

    sess = ort_session(model)
    alone = embed_with(sess, golden["cases"], False)
    together = embed_with(sess, golden["cases"], True)
    single, batch = golden_cosines(alone, golden), golden_cosines(together, golden)
    # The same texts in the opposite order: other neighbours, other positions.
    reverse = embed_with(sess, golden["cases"][::-1], True)[::-1]
    moved = max(float(1.0 - (a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b)))
                for other in (together, reverse) for a, b in zip(alone, other))
    identical = sum(bool(np.array_equal(a, b)) for other in (together, reverse) for a, b in zip(alone, other))
    log(f"  check int8 embed vs fp64 numpy: cosine single min={single.min():.5f} mean={single.mean():.5f}; "
        f"padded-batch min={batch.min():.5f} mean={batch.mean():.5f} (limit >= {INT8_MIN_COSINE})")
    log(f"    per case single: {' '.join(f'{c:.5f}' for c in single)}")
    log(f"    per case batch:  {' '.join(f'{c:.5f}' for c in batch)}")
    log(f"    batched vs alone: max cosine distance {moved:.1e} (limit {BATCH_MAX_COSINE_DISTANCE:g}), "
        f"{identical}/{2 * len(alone)} bit-identical")
    if not single.min() >= INT8_MIN_COSINE:
        raise Fail(f"int8 embeddings too far from the reference: min cosine {single.min():.5f}")
    if not batch.min() >= INT8_MIN_COSINE:
        raise Fail(f"int8 embeddings in a padded batch too far from the reference: min cosine {batch.min():.5f}")
    if not moved <= BATCH_MAX_COSINE_DISTANCE:
        raise Fail(f"int8 embeddings depend on their batch neighbours: cosine distance {moved:.1e}")
    return float(single.min())


def build_query_model(fp32_model: Path) -> bytes:
    """The fp32 graph through onnxruntime's dynamic quantizer, for queries only.

    Its activations get one scale per run (so a text's vector would depend on
    its batch neighbours), which is harmless for a query, always embedded alone;
    onnxruntime fuses the quantized layers into a few hundred nodes where our
    per-row graph runs ~780, which is most of a query's embedding time on two
    threads (docs/DECISIONS.md, "A query graph"). reduce_range keeps the
    weights within +-64, for the same AVX2 reason as WEIGHT_QMAX.
    """
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    # It advises shape-inference pre-processing, which changes nothing for a BERT graph.
    logging.getLogger().setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "query.onnx"
        quantize_dynamic(str(fp32_model), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=True)
        check_weight_range(out)
        return out.read_bytes()


def check_weight_range(model: Path) -> None:
    """No int8 weight beyond +-64: 255*64*2 = 32640 < 32767, so vpmaddubsw's
    saturating int16 pair sums stay exact on AVX2 (onnxruntime's reduce_range
    promises this; a changed quantizer must not silently break it)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    worst = max((int(np.abs(numpy_helper.to_array(t).astype(np.int32)).max())
                 for t in onnx.load(str(model)).graph.initializer if t.data_type == onnx.TensorProto.INT8),
                default=0)
    if worst > 64:
        raise Fail(f"query graph has int8 weights up to {worst}; more than 64 can saturate on AVX2")


def check_query_embed(model, golden: dict) -> float:
    """The query graph, each golden text alone (as queries run), against fp64."""
    cos = golden_cosines(embed_with(ort_session(model), golden["cases"], False), golden)
    log(f"  check int8 query graph vs fp64 numpy (alone): cosine min={cos.min():.5f} mean={cos.mean():.5f} "
        f"(limit >= {INT8_MIN_COSINE})")
    if not cos.min() >= INT8_MIN_COSINE:
        raise Fail(f"int8 query embeddings too far from the reference: min cosine {cos.min():.5f}")
    return float(cos.min())


def check_cross(model, golden: dict, limit: float, label: str) -> float:
    import numpy as np

    sess = ort_session(model)
    ref = np.array([c["logit"] for c in golden["cases"]])
    got = logits_with(sess, golden["cases"])
    diff = float(np.abs(got - ref).max())
    pairs = ", ".join(f"{r:+.5f}/{g:+.5f}" for r, g in zip(ref, got))
    log(f"  check {label} cross-encoder logits (ref/onnx: {pairs}): max|diff|={diff:.3e} (limit {limit:g})")
    if not diff < limit:
        raise Fail(f"{label} cross-encoder logits differ from the numpy reference by {diff:.3e}")
    return diff
