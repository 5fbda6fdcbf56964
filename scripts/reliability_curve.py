#!/usr/bin/env python3
"""Reliability curve of the top-1 score: for each score bucket, how often the top-1 page is
relevant. Reads the `precision-calibration.json` that `bench precision` writes; negatives (no
relevant page on that vault) count as wrong. Prints one Markdown table per mode.

  python3 scripts/reliability_curve.py bench-results/precision-calibration.json [--exclude-heldout]
"""
import json
import sys

EDGES = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0001]


def main():
    path = sys.argv[1]
    skip_heldout = "--exclude-heldout" in sys.argv
    entries = json.load(open(path))["entries"]
    modes = sorted({e["mode"] for e in entries})
    for mode in modes:
        rows = [[0, 0, 0] for _ in EDGES[:-1]]  # n, relevant, negatives
        for e in entries:
            if e["mode"] != mode or (skip_heldout and e["split"] == "heldout"):
                continue
            top = e.get("top1")
            score = top["score"] if top else 0.0
            b = next(i for i in range(len(EDGES) - 1) if EDGES[i] <= score < EDGES[i + 1])
            rows[b][0] += 1
            rows[b][1] += int(bool(top and top.get("relevant")))
            rows[b][2] += int(e["polarity"] == "negative")
        print(f"\n{mode}\n\n| top-1 score | queries | top-1 relevant | precision | of which negatives |")
        print("|---|---|---|---|---|")
        for i, (n, r, neg) in enumerate(rows):
            hi = min(EDGES[i + 1], 1.0)
            prec = f"{r / n:.2f}" if n else "–"
            print(f"| [{EDGES[i]:.1f}, {hi:.1f}{']' if hi == 1.0 else ')'} | {n} | {r} | {prec} | {neg} |")


if __name__ == "__main__":
    main()
