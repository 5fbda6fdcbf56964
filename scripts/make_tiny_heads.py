#!/usr/bin/env python3
"""Write two tiny ONNX pair classifiers with deterministic random heads, for plumbing tests of
the cross-encoder head handling (crates/llm-wiki-core/tests/models.rs). They are NOT rerankers:
their scores mean nothing, only their relation does.

  tests/fixtures/tiny-heads/two-class.onnx  logits [batch, 2] = tanh(mean(E[id mod 97])) @ W + b
  tests/fixtures/tiny-heads/one-class.onnx  logits [batch, 1] with the head (W[:,1] - W[:,0],
                                             b[1] - b[0]): the two-class model's relevance
                                             log-odds, so both must give the same scores.

Inputs: input_ids, attention_mask (int64 [batch, seq]); output: logits. Token embeddings come
from a 97 x 4 table indexed by `id mod 97`, so the files stay a few kilobytes and work with any
BERT tokenizer. Run with the model venv (needs numpy and onnx):

  .models/venv/bin/python scripts/make_tiny_heads.py
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20261201
ROWS, DIM = 97, 4
OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "llm-wiki-core", "tests", "fixtures", "tiny-heads")


def graph(table, w, b, name):
    init = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(b, "b"),
        numpy_helper.from_array(np.array(ROWS, dtype=np.int64), "rows"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axis1"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
    ]
    nodes = [
        helper.make_node("Mod", ["input_ids", "rows"], ["ids"]),
        helper.make_node("Gather", ["table", "ids"], ["emb"], axis=0),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis2"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["maskf", "axis1"], ["count"], keepdims=1),
        helper.make_node("Div", ["summed", "count"], ["mean"]),
        helper.make_node("Tanh", ["mean"], ["h"]),
        helper.make_node("MatMul", ["h", "w"], ["hw"]),
        helper.make_node("Add", ["hw", "b"], ["logits"]),
    ]
    ints = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask")]
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", w.shape[1]])]
    g = helper.make_graph(nodes, name, ints, out, init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_tiny_heads.py")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    rng = np.random.RandomState(SEED)
    table = rng.normal(0, 1.5, (ROWS, DIM)).astype(np.float32)
    w = rng.normal(0, 2.0, (DIM, 2)).astype(np.float32)
    b = rng.normal(0, 0.5, (2,)).astype(np.float32)
    os.makedirs(OUT, exist_ok=True)
    onnx.save(graph(table, w, b, "two_class"), os.path.join(OUT, "two-class.onnx"))
    w1 = (w[:, 1] - w[:, 0]).reshape(DIM, 1).astype(np.float32)
    b1 = np.array([b[1] - b[0]], dtype=np.float32)
    onnx.save(graph(table, w1, b1, "one_class"), os.path.join(OUT, "one-class.onnx"))
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    main()
