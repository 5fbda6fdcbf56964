#!/usr/bin/env python3
"""Replay automatic-recall rules over recorded evidence (`bench ... --evidence FILE`, hybrid mode)
on development data only: the calibration split, locomo-dev, the pi *train* split, the written
prompt sets. Prints the two tables of docs/DECISIONS.md, "Issue 15: can the chat vault's
everyday-prompt injections be told apart?": the dense list's shape per query group, and what
gates on it (or a higher cosine floor on the chat vault) would do.

Expects DIR to hold the files the commands of that section write (paths relative to a checkout
next to `shared/`):

  calibration.jsonl, calibration/calibration-labels.jsonl   bench calibration
  precision-locomo.jsonl                                    bench precision (pi <-> locomo-dev)
  prompts-pi.jsonl                                          bench prompts, bench-data/prompts-pi.json
  names-pi.jsonl, names-scifact.jsonl, names-locomo.jsonl   bench prompts, bench-data/prompts-names.json

  python3 scripts/evidence_replay.py DIR [--shared ../shared]
"""
import collections
import json
import os
import sys

FLOOR = 0.50  # the automatic floor (contract constant)
RESULTS = 3  # automatic results per recall


def passes(path):
    """Hybrid passes of one evidence file, one per (store, query): a suite's warm-up and timed
    passes record the same evidence."""
    seen = set()
    for line in open(path):
        r = json.loads(line)
        key = (r["store"], r["query"])
        if r["mode"] != "hybrid" or key in seen:
            continue
        seen.add(key)
        yield r


def kind_of(r):
    """The collection a pass searched, from the page ids it saw."""
    ids = [h["page"] for h in r["hits"]] + [c["page"] for c in r["dense"]]
    if not ids:
        return None
    if ids[0].startswith("conv"):
        return "chat"
    return "scifact" if ids[0].isdigit() else "pi"


def injected(r):
    return [h["page"] for h in r["hits"] if h["automatic"] >= FLOOR][:RESULTS]


def examples(d, shared):
    """(group, relevant pages or None for a negative, pass) over every development query."""
    out = []
    labels = [json.loads(l) for l in open(os.path.join(d, "calibration", "calibration-labels.jsonl"))]
    for r in passes(os.path.join(d, "calibration.jsonl")):
        rel = next((set(x["related"]) for x in labels if x["query"] == r["query"] and r["store"].startswith(x["vault"])), None)
        if rel is not None:
            out.append(("calibration titles" if rel else "calibration unrelated", rel or None, r))
    texts = {}
    for l in open(os.path.join(shared, "bench", "locomo-dev", "queries.jsonl")):
        q = json.loads(l)
        texts[q["id"]] = q["text"]
    qrels = collections.defaultdict(set)
    for l in list(open(os.path.join(shared, "bench", "locomo-dev", "qrels.tsv")))[1:]:
        qid, doc, grade = l.split("\t")
        if int(grade) > 0:
            qrels[texts[qid]].add(doc)
    fixture = json.load(open(os.path.join(shared, "bench", "pi", "fixture.json")))
    pi = {q["text"]: q for q in fixture["queries"]}
    for r in passes(os.path.join(d, "precision-locomo.jsonl")):
        kind = kind_of(r)
        if kind == "chat" and r["query"] in qrels:
            out.append(("locomo-dev questions", qrels[r["query"]], r))
        elif kind == "pi" and r["query"] in pi:
            q = pi[r["query"]]
            if q["autoExpectation"] == "none":
                out.append(("pi negatives", None, r))
            elif q["split"] == "train":  # the held-out split is never looked at
                out.append(("pi train", {j["pageId"] for j in q["judgments"] if j["grade"] > 0}, r))
        elif kind == "pi" or (kind == "chat" and r["query"] in pi):
            out.append(("cross-collection", None, r))
    prompts = {p["text"]: set(p["relevant"]) for p in json.load(open("bench-data/prompts-pi.json"))["prompts"]}
    for r in passes(os.path.join(d, "prompts-pi.jsonl")):
        rel = prompts[r["query"]]
        out.append(("dev prompts, related" if rel else "dev prompts, unrelated", rel or None, r))
    for v in ("pi", "scifact", "locomo"):
        for r in passes(os.path.join(d, f"names-{v}.jsonl")):
            out.append((f"name-bearing prompts on {v}", None, r))
    return out


def outcome(rel, inj):
    return bool(set(inj) & rel) if rel is not None else bool(inj)


def count(ex, rule):
    n, c = collections.Counter(), collections.Counter()
    for g, rel, r in ex:
        n[g] += 1
        c[g] += outcome(rel, rule(r))
    return c, n


def cosines(r):
    return [c["cosine"] for c in r["dense"]]


def gap_gate(k, t):
    return lambda r: [] if len(cosines(r)) >= k and cosines(r)[0] - cosines(r)[k - 1] < t else injected(r)


def chat_floor(t):
    return lambda r: injected(r) if kind_of(r) != "chat" or (cosines(r) and cosines(r)[0] >= t) else []


def pct(xs):
    xs = sorted(xs)
    return " / ".join("%.2f" % xs[min(len(xs) - 1, int(len(xs) * p))] for p in (0.1, 0.5, 0.9))


def main():
    d = sys.argv[1]
    shared = sys.argv[sys.argv.index("--shared") + 1] if "--shared" in sys.argv else "../shared"
    ex = examples(d, shared)
    c, n = count(ex, injected)
    print("Replayed automatic recall (hit = a relevant page injected; negatives: anything injected):\n")
    for g in sorted(n):
        print(f"- {g}: {c[g]} / {n[g]}")
    print("\n| queries (hybrid, automatic policy; ≥ 20 pages in the dense list) | n | top-1 cosine | 10th page's cosine | gap top-1 − 10th |")
    print("|---|---|---|---|---|")
    groups = collections.defaultdict(list)
    for g, rel, r in ex:
        cs = cosines(r)
        if len(cs) < 20:
            continue
        inj = injected(r)
        state = ("injected" if inj else "not injected") if rel is None else ("hit" if outcome(rel, inj) else "missed")
        groups[f"{g}, {state}"].append(cs)
    for g in sorted(groups):
        cs = groups[g]
        print(f"| {g} | {len(cs)} | {pct([x[0] for x in cs])} | {pct([x[9] for x in cs])} | {pct([x[0] - x[9] for x in cs])} |")
    cols = ["locomo-dev questions", "name-bearing prompts on locomo", "pi train", "calibration unrelated"]
    print("\n| rule on top of the automatic floor | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    rules = [("none (shipped)", injected)]
    rules += [(f"gap to the {k}th page ≥ {t:.2f}", gap_gate(k, t)) for k, t in ((10, 0.05), (10, 0.10), (5, 0.08), (20, 0.10))]
    rules += [(f"top-1 cosine ≥ {t:.2f} (chat vault only)", chat_floor(t)) for t in (0.47, 0.50, 0.55)]
    for name, rule in rules:
        c, n = count(ex, rule)
        print(f"| {name} | " + " | ".join(f"{c[g]} / {n[g]}" for g in cols) + " |")


if __name__ == "__main__":
    main()
