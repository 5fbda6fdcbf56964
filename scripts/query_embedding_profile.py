#!/usr/bin/env python3
"""Where one query embedding's time goes: single-text ONNX runs of a model directory.

Development tool behind docs/DECISIONS.md ("Query embedding: the graph's share"), not part of
the engine or of `npm test`. Runs every query of a JSONL file ({"text": ...} per line) alone,
as a recall does, through onnxruntime (the wheel `scripts/fetch_models.py` installs into
`.models/venv`), and prints p50/p95 wall time per run and, with --profile, the kernel time per
operator type from onnxruntime's own profiler (averaged per run; the profiler adds overhead, so
compare its columns with each other, not with the wall times).

    .models/venv/bin/python scripts/query_embedding_profile.py .models/all-MiniLM-L6-v2-int8 \\
        ../shared/bench/scifact/queries.jsonl --threads 2 --profile
"""

import argparse
import collections
import json
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_dir", type=Path, help="directory with model.onnx and tokenizer.json")
    ap.add_argument("queries", type=Path, help="JSONL file with a text field per line")
    ap.add_argument("--threads", type=int, default=2, help="intra-op threads (the engine's default: 2)")
    ap.add_argument("--limit", type=int, default=200, help="queries timed (after 20 warm-up runs)")
    ap.add_argument("--profile", action="store_true", help="also report kernel time per operator type")
    args = ap.parse_args()

    import numpy as np
    import onnx
    import onnxruntime as ort
    from tokenizers import Tokenizer

    texts = []
    with args.queries.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                texts.append(json.loads(line)["text"])
    texts = texts[: args.limit]
    tok = Tokenizer.from_file(str(args.model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(256)

    def session(profile: bool):
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        so.inter_op_num_threads = 1
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.enable_profiling = profile
        return ort.InferenceSession(str(args.model_dir / "model.onnx"), so, providers=["CPUExecutionProvider"])

    def feed(s, text):
        enc = tok.encode(text)
        ids = np.array([enc.ids], dtype=np.int64)
        inputs = {"input_ids": ids, "attention_mask": np.array([enc.attention_mask], dtype=np.int64)}
        if any(i.name == "token_type_ids" for i in s.get_inputs()):
            inputs["token_type_ids"] = np.zeros_like(ids)
        return inputs

    graph = onnx.load(str(args.model_dir / "model.onnx")).graph
    tokens = sorted(len(tok.encode(t).ids) for t in texts)
    s = session(False)
    for t in texts[:20]:
        s.run(None, feed(s, t))
    times = []
    for t in texts:
        inputs = feed(s, t)
        start = time.perf_counter()
        s.run(None, inputs)
        times.append((time.perf_counter() - start) * 1000)
    times.sort()
    print(f"{args.model_dir.name}: {len(graph.node)} graph nodes, {len(texts)} queries "
          f"(median {tokens[len(tokens) // 2]} tokens), {args.threads} threads: "
          f"p50 {times[len(times) // 2]:.2f} ms, p95 {times[int(len(times) * 0.95)]:.2f} ms")

    if args.profile:
        s = session(True)
        for t in texts:
            s.run(None, feed(s, t))
        trace = Path(s.end_profiling())
        events = json.loads(trace.read_text())
        trace.unlink()
        kernel = collections.Counter()
        nodes = collections.Counter()
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                kernel[e["args"]["op_name"]] += e["dur"]
                nodes[e["args"]["op_name"]] += 1
        total = sum(kernel.values())
        print(f"  kernel time per run {total / len(texts) / 1000:.2f} ms (profiled), "
              f"{sum(nodes.values()) // len(texts)} nodes executed")
        for op, us in kernel.most_common(12):
            print(f"  {op:<28} {us / len(texts):8.0f} us/run  {100 * us / total:5.1f} %  "
                  f"{nodes[op] // len(texts)} nodes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
