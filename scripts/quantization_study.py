#!/usr/bin/env python3
"""The int8 recipe study behind docs/DECISIONS.md ("Embedding quantization").

Builds candidate all-MiniLM-L6-v2 ONNX models next to the ones fetch_models.py
made, then measures each against the fp64 numpy reference and for batch
independence, or times them. Run it with the fetch_models venv's interpreter
(numpy, onnx, onnxruntime, tokenizers); under `qemu-x86_64 -cpu Haswell` or
`qemu-aarch64` it measures another ISA (see docs/DECISIONS.md).

    PY=.models/venv/bin/python
    $PY scripts/quantization_study.py build  --models .models --work /tmp/q
    $PY scripts/quantization_study.py measure --models .models --work /tmp/q --beir ../shared/bench/scifact --tag vnni
    $PY scripts/quantization_study.py speed  --models .models --work /tmp/q --beir ../shared/bench/scifact

Candidates: fp32; dyn8 = onnxruntime quantize_dynamic per-channel (recipe 1);
dyn7 = the same with reduce_range (7-bit weights); static7 = quantize_static
(QDQ, MinMax ranges from calibration texts written for this study, below);
row7 = fetch_models.py's int8 graph (per-row activation scales, 7-bit weights).
Texts measured: the golden sentences plus the first N pages of a BEIR-style
vault (title + body, truncated to 256 tokens). Benchmark data is only read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fetch_models as fm  # noqa: E402

CANDIDATES = ["fp32", "dyn8", "dyn7", "static7", "row7"]

# Calibration texts for the static candidate, written for this study (no benchmark data).
CALIBRATION = [
    '# Backups\n\nKeep three copies of important files on two kinds of storage, one of them off site. Test a restore every quarter.',
    'Meeting notes 2024-03-12: we agreed to move the release to Friday because the migration script still fails on empty tables.',
    'The sourdough starter needs feeding twice a day when kept at room temperature; in the fridge once a week is enough.',
    '## Rust ownership\n\nEvery value has one owner. Borrowing lends access without moving it; the borrow checker rejects a mutable borrow while shared borrows live.',
    'Photosynthesis converts light energy into chemical energy stored in glucose. Chlorophyll absorbs mostly blue and red light.',
    'TODO: renew the passport before June, check whether the visa for the conference requires an invitation letter.',
    'Mitochondria produce ATP through oxidative phosphorylation; defects in complex I are linked to several neurodegenerative disorders.',
    'A B-tree keeps keys sorted in wide nodes so that lookups, inserts and range scans touch few disk pages.',
    'Recipe: roast the peppers until the skins blister, cover them for ten minutes, peel, then blend with garlic, olive oil and lemon.',
    'The committee reviewed 42 applications and shortlisted 7 candidates for interviews in the second week of May.',
    '```python\ndef mean(xs):\n    return sum(xs) / len(xs)\n```\nThis fails on an empty list; return None instead.',
    'Vaccination coverage above 95 percent is usually needed to interrupt measles transmission in a population.',
    'Git rebase rewrites commits on top of another base; never rebase commits that others already pulled.',
    'Zettelkasten: one idea per card, link cards to each other, and write in your own words rather than copying quotes.',
    'The patient presented with fever, elevated C-reactive protein and a cough lasting two weeks; chest imaging showed no consolidation.',
    'Kubernetes restarts a container whose liveness probe fails; a readiness probe only removes it from the service endpoints.',
    'Interest rates rose for the third time this year, and mortgage applications fell to their lowest level since 2015.',
    "Bird migration is timed by day length; many species also navigate using the Earth's magnetic field.",
    '| metric | before | after |\n|---|---|---|\n| p50 latency | 12 ms | 7 ms |\n| errors | 0.4% | 0.1% |',
    'Hypothesis: the regression appeared when the cache eviction policy changed from LRU to FIFO in version 2.3.',
    'Reading list: a history of the printing press, an introduction to category theory, and a field guide to mushrooms.',
    'Insulin resistance reduces glucose uptake in muscle and fat tissue and is an early sign of type 2 diabetes.',
    'The library uses a write-ahead log: changes are appended and flushed before the main file is updated, so a crash loses nothing committed.',
    'Le marché du samedi ouvre à huit heures; les fromages de chèvre partent vite.',
    'Der Zug nach München fährt heute wegen Bauarbeiten zwanzig Minuten später ab.',
    '東京の天気は明日雨の予報です。傘を忘れないでください。',
    'Climbing notes: the crux is the third bolt, clip from the left side, and the rock stays wet until noon after rain.',
    'Gene expression is regulated by transcription factors binding to promoter and enhancer regions of DNA.',
    'Quarterly goals: reduce onboarding time to one day, document the deploy process, and retire the old reporting server.',
    'An index of 5,000 short notes fits comfortably in memory; exact search over all vectors takes well under a millisecond.',
    'Tectonic plates move a few centimetres per year; earthquakes release stress that builds up where they lock together.',
    'The contract renews automatically unless cancelled in writing thirty days before the end of the term.',
    'Antibiotic resistance spreads through horizontal gene transfer between bacteria, including plasmids carrying resistance genes.',
    "Idea: use the calendar export to build a weekly review page automatically, with links to each meeting's notes.",
    'Tea steeping times: green two minutes at 80 degrees, black four minutes at boiling, herbal five to seven minutes.',
    'The T cell receptor recognises peptide fragments presented by MHC molecules on the surface of infected cells.',
    'Error: connection refused on port 5432. Check that the database container is running and that the firewall allows the port.',
    'Marathon training plan: long run on Sundays, intervals on Tuesdays, easy runs in between, and a taper in the last two weeks.',
    'In a randomized controlled trial, participants are assigned to treatment or control by chance, which balances unknown confounders.',
    'a',
    '',
    'ok',
    'See [[project-alpha]] and [[weekly-review]] for context; the decision log lives in decisions.md.',
    'Dark matter does not emit light, but its gravity shapes the rotation curves of galaxies and the bending of light from distant sources.',
    'Household: the boiler service is due in October, the gutters need clearing, and the spare key is with the neighbour at number 12.',
    'The compiler inlines small functions and removes bounds checks when it can prove the index is in range.',
    'Sleep deprivation impairs working memory and attention; a single night of recovery sleep does not fully restore performance.',
    'Poem draft: grey harbour, gulls over the slipway, the ferry late again, and someone laughing on the pier.',
]


def vault_texts(beir: str | None, n: int) -> list[str]:
    if not beir or n <= 0:
        return []
    out = []
    for f in sorted((Path(beir) / "vault").glob("*.md"))[:n]:
        _, meta, body = f.read_text(encoding="utf-8").split("---", 2)
        title = next((line[6:].strip().strip('"') for line in meta.splitlines() if line.startswith("title:")), "")
        out.append(f"{title}\n\n{body.strip()}")
    return out


def build(models: Path, work: Path, src: Path) -> None:
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_dynamic, quantize_static)
    from safetensors.numpy import load_file

    fp32 = models / "all-MiniLM-L6-v2-fp32" / "model.onnx"
    cfg = json.loads((src / "config.json").read_text())
    tok = fm.load_tokenizer(src)
    for name in CANDIDATES:
        d = work / name
        d.mkdir(parents=True, exist_ok=True)
        m = d / "model.onnx"
        if name == "fp32":
            shutil.copyfile(fp32, m)
        elif name in ("dyn8", "dyn7"):
            quantize_dynamic(fp32, m, weight_type=QuantType.QInt8, per_channel=True, reduce_range=name == "dyn7")
        elif name == "static7":
            feeds = iter([fm.padded_batch([tok.encode(t).ids]) for t in CALIBRATION])

            class Reader(CalibrationDataReader):
                def get_next(self):
                    return next(feeds, None)

            quantize_static(fp32, m, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=True,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                            op_types_to_quantize=["MatMul"], calibrate_method=CalibrationMethod.MinMax)
        else:
            import onnx

            onnx.save(fm.build_bert_onnx(cfg, load_file(str(src / "model.safetensors")), None, quantized=True), str(m))
        print(f"{name}: {m} {m.stat().st_size:,} B", flush=True)


def session(model: Path, threads: int = 2):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.log_severity_level = 3
    o.intra_op_num_threads = threads
    return ort.InferenceSession(str(model), sess_options=o, providers=["CPUExecutionProvider"])


def embed(sess, seqs):
    import numpy as np

    feed = fm.padded_batch(seqs)
    (h,) = sess.run(["last_hidden_state"], feed)
    mask = feed["attention_mask"].astype(np.float32)[..., None]
    v = (h * mask).sum(1) / np.maximum(mask.sum(1), 1)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def reference(src: Path, work: Path, texts: list[str]):
    """fp64 numpy forward pass per text (cached: it is slow and ISA-independent)."""
    import numpy as np

    cache = work / f"reference-{len(texts)}.npy"
    if cache.is_file():
        return np.load(cache)
    w = fm.read_safetensors_raw(src / "model.safetensors")
    cfg = json.loads((src / "config.json").read_text())
    tok = fm.load_tokenizer(src)
    rows = []
    for t in texts:
        enc = tok.encode(t)
        h, _ = fm.reference_forward(w, cfg, np.array(enc.ids), np.array(enc.type_ids))
        rows.append(fm.mean_pool_l2(h, np.ones(len(enc.ids))))
    np.save(cache, np.stack(rows))
    return np.stack(rows)


def measure(args, src: Path) -> None:
    import numpy as np

    texts = list(fm.GOLDEN_SENTENCES) + vault_texts(args.beir, args.pages)
    ref = reference(src, args.work, texts)
    tok = fm.load_tokenizer(src)
    seqs = [tok.encode(t).ids for t in texts]
    longest, shortest = int(np.argmax([len(s) for s in seqs])), int(np.argmin([len(s) for s in seqs]))
    rng = np.random.RandomState(7)
    layouts = [list(range(i, min(i + 8, len(seqs)))) for i in range(0, len(seqs), 8)]
    for _ in range(args.shuffles):
        p = rng.permutation(len(seqs))
        layouts += [list(p[i:i + 8]) for i in range(0, len(seqs), 8)]
    layouts += [[i, longest, shortest] for i in range(len(seqs))]
    for name in args.candidates:
        sess = session(args.work / name / "model.onnx")
        alone = np.stack([embed(sess, [s])[0] for s in seqs])
        cos = (alone * ref).sum(-1)
        worst, identical, total, batched = 0.0, 0, 0, []
        for layout in layouts:
            for j, i in enumerate(layout):
                v = embed(sess, [seqs[k] for k in layout])[j]
                worst = max(worst, float(1 - np.dot(v.astype(np.float64), alone[i])))
                identical += bool(np.array_equal(v, alone[i]))
                total += 1
                batched.append(float(np.dot(v, ref[i])))
        g = len(fm.GOLDEN_SENTENCES)
        row = {"candidate": name, "tag": args.tag, "golden_min": float(cos[:g].min()),
               "pages": len(texts) - g, "pages_min": float(cos[g:].min()) if len(texts) > g else None,
               "pages_mean": float(cos[g:].mean()) if len(texts) > g else None,
               "batched_min": min(batched), "batch_vs_alone_max_cos_distance": worst,
               "batch_identical": f"{identical}/{total}"}
        np.save(args.work / f"vectors-{name}-{args.tag}.npy", alone)
        print(json.dumps(row), flush=True)


def compare(args) -> None:
    import numpy as np

    for name in args.candidates:
        a, b = (np.load(args.work / f"vectors-{name}-{t}.npy") for t in args.tags)
        n = min(len(a), len(b))
        a, b = a[:n], b[:n]
        d = 1 - (a.astype(np.float64) * b).sum(-1)
        same = sum(bool(np.array_equal(x, y)) for x, y in zip(a, b))
        print(json.dumps({"candidate": name, "tags": args.tags, "texts": n, "identical": same,
                          "max_cos_distance": float(d.max()), "max_abs": float(np.abs(a - b).max())}))


def speed(args, src: Path) -> None:
    import numpy as np

    tok = fm.load_tokenizer(src)
    seqs = sorted((tok.encode(t).ids for t in vault_texts(args.beir, args.pages)), key=len)  # as the engine
    variants = [(n, b) for n in args.candidates for b in (8, 1)]
    sessions = {n: session(args.work / n / "model.onnx") for n in args.candidates}
    rates: dict[str, list[float]] = {f"{n}/batch{b}": [] for n, b in variants}
    for r in range(args.rounds):
        for n, b in variants if r % 2 == 0 else variants[::-1]:  # alternate the order against drift
            embed(sessions[n], seqs[:b])
            t = time.perf_counter()
            for i in range(0, len(seqs), b):
                embed(sessions[n], seqs[i:i + b])
            rates[f"{n}/batch{b}"].append(len(seqs) / (time.perf_counter() - t))
        print(f"round {r}: load {os.getloadavg()[0]:.1f}", flush=True)
    med = {k: float(np.median(v)) for k, v in rates.items()}
    base = med.get("dyn8/batch8") or next(iter(med.values()))
    print(json.dumps({"texts": len(seqs), "mean_tokens": float(np.mean([len(s) for s in seqs])),
                      "median_texts_per_s": med, "ratio_to_dyn8_batch8": {k: v / base for k, v in med.items()},
                      "all": rates}, indent=1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["build", "measure", "compare", "speed"])
    ap.add_argument("--models", type=Path, default=fm.REPO_ROOT / ".models", help="fetch_models.py output")
    ap.add_argument("--cache", type=Path, default=fm.REPO_ROOT / ".models" / "cache", help="fetch_models.py cache")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--beir", help="BEIR-style directory whose vault/ pages are measured")
    ap.add_argument("--pages", type=int, default=60)
    ap.add_argument("--shuffles", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tag", default="native")
    ap.add_argument("--tags", nargs=2, default=["native", "haswell"])
    ap.add_argument("--candidates", nargs="+", default=CANDIDATES)
    args = ap.parse_args()
    src = args.cache / "src" / "all-MiniLM-L6-v2"
    args.work.mkdir(parents=True, exist_ok=True)
    if args.command == "build":
        build(args.models, args.work, src)
    elif args.command == "measure":
        measure(args, src)
    elif args.command == "compare":
        compare(args)
    else:
        speed(args, src)
    return 0


if __name__ == "__main__":
    sys.exit(main())
