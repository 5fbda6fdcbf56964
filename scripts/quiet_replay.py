#!/usr/bin/env python3
"""Replay automatic-recall rules over recorded evidence (`bench ... --evidence FILE`) for issue 45's
"quiet on chat memory" item: does a rule keep unrelated query sets (SciFact claims, the written
long queries, the everyday prompts) from injecting chat sessions of locomo-dev, while the
locomo-dev questions, the pi *train* queries and the SciFact claims keep their hits?

Development data only: locomo-dev, pi train, SciFact claims, the written sets in bench-data/. The pi
held-out split is printed as "measured only" and chose nothing.

DIR holds the evidence of one model (paths relative to a checkout next to `shared/`):

  precision-locomo.jsonl   bench precision --pi $S/pi/fixture.json --beir $S/locomo-dev --modes lexical,hybrid
  unrelated-locomo.jsonl   bench prompts --prompts bench-data/prompts-names.json --unrelated $S/scifact/queries.jsonl
                             --unrelated bench-data/long-queries-scifact.jsonl --unrelated bench-data/short-negatives.jsonl
                             --vault $S/locomo-dev --modes lexical,hybrid
  precision-scifact.jsonl  bench precision --pi $S/pi/fixture.json --beir $S/scifact --modes lexical,hybrid (optional)

  python3 scripts/quiet_replay.py DIR --model minilm|e5 [--shared ../shared] [--mode hybrid|lexical]

Rows: the confidences as recorded; the specificity factor of main before issue 45 (3 units);
issue 45's hybrid rule (proper names, dense evidence without a shared word, the share) and its
variants — names read from the pages' text, roughly stemmed, as an approximation of the index;
required units scaled with the number of salient terms, or with the query's whole salient weight
(`query_units`: the rule shipped, `MIN_MATCHED_SHARE` 0.40); a matched-term share; in hybrid mode,
dense evidence counted only with some lexical support.

The replay recomputes each hit's automatic confidence from its recorded lexical candidate
(confidence, matched units, exemption) and its dense cosine (the hit's reasons), applies the
role multiplier of the page's type (sources 0.98; pi pages by their frontmatter), and injects the
first 3 hits at or above the floor, as recall does. The first row must equal the bench reports
(up to the few duplicate question texts, counted once, and the pi pages' verification bonus, not
replayed): it checks the replay.
"""
import collections
import json
import math
import os
import re
import sys

FLOOR = 0.50
RESULTS = 3
LEXICAL_LIFT = 0.25
EXACT = 0.95
NAMED = 0.60
MIN_UNITS = 3.0
# Dense cosine mapping per model (crates/llm-wiki-core/src/retrieve/confidence.rs).
CALIBRATION = {"minilm": (0.194, 0.467), "e5": (0.7918, 0.1670)}
CANONICAL = {"concept", "entity", "analysis", "synthesis", "topic", "person", "project", "decision", "howto", "faq", "overview", "note"}
COSINE = re.compile(r"cosine (-?[0-9.]+)")


def passes(path, mode):
    """One pass per (store, query) of `mode`: the suite's first recall of that query."""
    seen = set()
    if not os.path.exists(path):
        return
    for line in open(path):
        r = json.loads(line)
        key = (r["store"], r["query"])
        if r["mode"] != mode or key in seen:
            continue
        seen.add(key)
        yield r


def vault_of(r):
    s = r["store"]
    for v in ("locomo-dev", "scifact", "pi"):
        if f"/{v}/" in s:
            return v
    return "?"


def pi_multipliers(shared):
    """Role multiplier of each pi page (type → role; draft/deprecated status)."""
    out = {}
    vault = os.path.join(shared, "bench", "pi", "vault")
    for root, _, files in os.walk(vault):
        for f in files:
            if not f.endswith(".md"):
                continue
            text = open(os.path.join(root, f), encoding="utf-8").read()
            front = text.split("\n---", 1)[0] if text.startswith("---") else ""
            typ = re.search(r"^type:\s*\"?([^\"\n]+)", front, re.M)
            status = re.search(r"^status:\s*\"?([^\"\n]+)", front, re.M)
            typ = typ.group(1).strip().lower() if typ else ""
            status = status.group(1).strip().lower() if status else ""
            m = 1.0
            if typ in CANONICAL:
                m += 0.03 if status not in ("draft", "deprecated") else 0.0
            else:
                m -= 0.02
            if status == "deprecated":
                m -= 0.08
            pid = re.search(r"^id:\s*\"?([^\"\n]+)", front, re.M)
            out[pid.group(1).strip() if pid else os.path.relpath(os.path.join(root, f), vault)[:-3]] = m
    return out


class Replay:
    def __init__(self, model, shared):
        self.floor, self.span = CALIBRATION[model]
        self.pi_m = pi_multipliers(shared)

    def dense(self, cos):
        return min(1.0, max(0.0, (cos - self.floor) / self.span))

    def multiplier(self, vault, page):
        return self.pi_m.get(page, 1.0) if vault == "pi" else 0.98

    def injected(self, r, rule):
        """Pages the automatic policy injects under `rule` (a function of the pass and one lexical
        candidate returning its automatic lexical confidence)."""
        lex = {c["page"]: c for c in r["lexical"]}
        vault = vault_of(r)
        out = []
        for h in r["hits"][:10]:
            c = lex.get(h["page"])
            l = rule(r, c) if c else 0.0
            if r["mode"] == "lexical":
                a = max(l, EXACT) if h["exact"] else l
            else:
                m = [float(x) for x in COSINE.findall(" ".join(h.get("reasons", [])))]
                d = self.dense(m[0]) if m else 0.0
                gate = getattr(rule, "dense_units", None)
                if gate is not None and not (c and (c["exempt"] or (c["units"] or 0.0) >= gate)):
                    d = 0.0
                qualified = getattr(rule, "hybrid", None)
                if qualified is not None:
                    a = qualified(r, h, c, l, d)
                else:
                    a = min(1.0, max(d, min(l, d + LEXICAL_LIFT)))
                if h["exact"]:
                    a = max(a, EXACT)
                elif c and c["named"]:
                    a = max(a, NAMED)
            if a * self.multiplier(vault, h["page"]) >= FLOOR - 1e-12:
                out.append(h["page"])
            if len(out) == RESULTS:
                break
        return out


def shipped(r, c):
    return c["automatic"]


def scaled(t_of):
    """The specificity factor with a required number of units `t_of(r)` instead of 3."""

    def rule(r, c):
        if c["exempt"] or c["units"] is None:
            return c["confidence"]
        return c["confidence"] * min(1.0, c["units"] / t_of(r))

    return rule


def dense_gate(u0):
    """Hybrid, automatic only: a page's dense evidence counts only where its lexical match holds at
    least `u0` units (or is exempt); otherwise the page keeps its lexical confidence alone."""
    return ("dense_gate", u0)


def weight_rule(k):
    """The specificity factor against max(3, k × the query's whole salient weight in units): a long
    query must be matched by a share `k` of what it says, not only by 3 units of it."""

    def rule(r, c):
        if c["exempt"] or c["units"] is None:
            return c["confidence"]
        return c["confidence"] * min(1.0, c["units"] / max(MIN_UNITS, k * (c.get("query_units") or 0.0)))

    return rule


def share_rule(s0):
    """The specificity factor also scaled by the share of the query's salient terms matched."""

    def rule(r, c):
        if c["exempt"] or c["units"] is None:
            return c["confidence"]
        share = c["matched_terms"] / max(1, c["total_terms"])
        return c["automatic"] * min(1.0, share / s0)

    return rule


TOKEN = re.compile(r"[a-z0-9]+")


def stem(t):
    """A rough stand-in for the index's Snowball stemmer: plural and possessive endings."""
    return re.sub(r"(?:'s|s')$|(?<=[a-z]{3})s$", "", t)


def page_terms(shared):
    """Terms of every benchmark page (locomo-dev, SciFact, pi): lowercase alphanumeric runs,
    roughly stemmed — an approximation of the index's analyzed terms for the name rule."""
    out = {}
    for v in ("locomo-dev", "scifact"):
        root = os.path.join(shared, "bench", v, "vault")
        for f in os.listdir(root):
            if f.endswith(".md"):
                text = open(os.path.join(root, f), encoding="utf-8").read().lower()
                out[f[:-3]] = {stem(t) for t in TOKEN.findall(text)}
    for page in json.load(open(os.path.join(shared, "bench", "pi", "fixture.json")))["pages"]:
        out[page["id"]] = {stem(t) for t in TOKEN.findall(page["markdown"].lower())}
    return out


def written_names(query):
    """`retrieve::query::written_names`."""
    names, cased, start = [], False, True
    for raw in query.split():
        w = raw.strip("".join(c for c in set(raw) if not c.isalnum()))
        if not w:
            continue
        cased |= w[0].islower()
        pronoun = w[0] == "I" and (len(w) == 1 or w[1] in "'\u2019")
        if not pronoun and ((w[0].isupper() and not start) or any(c.isupper() for c in w[1:])):
            names.append(w)
        start = raw.endswith((".", "?", "!", ":", ";"))
    return names if cased else []


def is_proper_name(w):
    """`retrieve::query::is_proper_name`."""
    for suffix in ("'s", "\u2019s", "'", "\u2019"):
        if w.endswith(suffix):
            w = w[: -len(suffix)]
            break
    parts = re.split(r"[-'\u2019]", w)
    return any(c.islower() for c in w) and all(p and p[0].isupper() and all(c.islower() for c in p[1:]) for p in parts)


def name_terms(query, proper_only):
    names = [n for n in written_names(query) if is_proper_name(n) or not proper_only]
    return {stem(t) for n in names for t in TOKEN.findall(n.lower()) if len(t) > 1}


def qualified_dense(terms, proper_only=True, share=0.5, alone=0.76, names=True):
    """Issue 45's hybrid rule (`confidence::automatic_hybrid_confidence`): a page with none of the
    query's proper names keeps its lexical evidence only (bounded by dense + lift); a page with no
    query word keeps `share` of its dense evidence below `alone`."""

    def hybrid(r, h, c, l, d):
        if d < alone and not (c and c["exempt"]) and (c is None or (c["units"] is not None and c["units"] <= 0.0)):
            d *= share
        want = name_terms(r["query"], proper_only) if names else set()
        page = terms.get(h["page"])
        if want and page is not None and not (want & page):
            return min(l, d + LEXICAL_LIFT)
        return min(1.0, max(d, min(l, d + LEXICAL_LIFT)))

    return hybrid


def n_terms(r):
    """Distinct salient query terms the vault contains (the same for every candidate)."""
    return r["lexical"][0]["total_terms"] if r["lexical"] else 0


def examples(d, shared, mode):
    """(group, relevant pages or None for a negative, pass)."""
    out = []
    texts, qrels = {}, collections.defaultdict(set)
    base = os.path.join(shared, "bench")
    for l in open(os.path.join(base, "locomo-dev", "queries.jsonl")):
        q = json.loads(l)
        texts[q["id"]] = q["text"]
    for l in list(open(os.path.join(base, "locomo-dev", "qrels.tsv")))[1:]:
        qid, doc, grade = l.split("\t")
        if int(grade) > 0:
            qrels[texts[qid]].add(doc)
    sf_text, sf_qrels = {}, collections.defaultdict(set)
    for l in open(os.path.join(base, "scifact", "queries.jsonl")):
        q = json.loads(l)
        sf_text[q["id"]] = q["text"]
    for l in list(open(os.path.join(base, "scifact", "qrels.tsv")))[1:]:
        qid, doc, grade = l.strip().split("\t")
        if int(grade) > 0 and qid in sf_text:
            sf_qrels[sf_text[qid]].add(doc)
    locomo_texts = set(texts.values())
    fixture = json.load(open(os.path.join(base, "pi", "fixture.json")))
    pi = {q["text"]: q for q in fixture["queries"]}

    def pi_group(r, seen_pi):
        q = pi[r["query"]]
        if q["autoExpectation"] == "none":
            return ("pi negatives", None)
        rel = {j["pageId"] for j in q["judgments"] if j["grade"] > 0}
        return ("pi held-out (measured only)" if q["split"] != "train" else "pi train", rel)

    seen_pi = set()
    for name in ("precision-locomo", "precision-scifact"):
        for r in passes(os.path.join(d, name + ".jsonl"), mode):
            v, q = vault_of(r), r["query"]
            if v == "locomo-dev" and q in qrels:
                out.append(("locomo-dev questions", qrels[q], r))
            elif v == "locomo-dev" and q in locomo_texts:
                continue  # a question without a judged session (not counted by the bench either)
            elif v == "scifact" and q in sf_qrels:
                out.append(("SciFact claims", sf_qrels[q], r))
            elif v == "pi" and q in pi:
                if q not in seen_pi:
                    seen_pi.add(q)
                    g, rel = pi_group(r, seen_pi)
                    out.append((g, rel, r))
            elif v != "pi" and q not in pi:
                continue  # not a query of the sets counted here
            else:
                out.append((f"cross-collection → {v}", None, r))
    groups = {}
    for l in open(os.path.join(base, "scifact", "queries.jsonl")):
        groups[json.loads(l)["text"]] = "SciFact claims → chat"
    for l in open("bench-data/long-queries-scifact.jsonl"):
        groups[json.loads(l)["text"]] = "long queries → chat"
    for l in open("bench-data/short-negatives.jsonl"):
        groups[json.loads(l)["query"]] = "short generic → chat"
    for p in json.load(open("bench-data/prompts-names.json"))["prompts"]:
        groups[p["text"]] = "everyday prompts → chat"
    for r in passes(os.path.join(d, "unrelated-locomo.jsonl"), mode):
        out.append((groups.get(r["query"], "other → chat"), None, r))
    prompts = {p["text"]: set(p["relevant"]) for p in json.load(open("bench-data/prompts-pi.json"))["prompts"]}
    for r in passes(os.path.join(d, "prompts-pi.jsonl"), mode):
        rel = prompts[r["query"]]
        out.append(("pi prompts, related" if rel else "pi prompts, unrelated", rel or None, r))
    return out


def count(ex, rp, rule):
    n, c = collections.Counter(), collections.Counter()
    for g, rel, r in ex:
        inj = rp.injected(r, rule)
        n[g] += 1
        c[g] += bool(set(inj) & rel) if rel is not None else bool(inj)
    return c, n


COLUMNS = [
    "locomo-dev questions",
    "pi train",
    "pi prompts, related",
    "SciFact claims",
    "SciFact claims → chat",
    "long queries → chat",
    "everyday prompts → chat",
    "short generic → chat",
    "pi prompts, unrelated",
    "cross-collection → pi",
    "cross-collection → locomo-dev",
    "cross-collection → scifact",
    "pi held-out (measured only)",
]


def main():
    d = sys.argv[1]
    arg = lambda k, v: sys.argv[sys.argv.index(k) + 1] if k in sys.argv else v
    shared, model, mode = arg("--shared", "../shared"), arg("--model", "minilm"), arg("--mode", "hybrid")
    rp = Replay(model, shared)
    ex = examples(d, shared, mode)
    cols = [c for c in COLUMNS if any(g == c for g, _, _ in ex)]
    print(f"Replay, {model}, {mode} (hits: a relevant page injected; → chat and cross-collection: anything injected)\n")
    # Salient terms per group: what a rule that scales with the query's terms would see.
    terms = collections.defaultdict(list)
    for g, _, r in ex:
        terms[g].append(n_terms(r))
    print("| group | n | salient terms p10 / p50 / p90 |\n|---|---|---|")
    for g in cols:
        xs = sorted(terms[g])
        p = lambda q: xs[min(len(xs) - 1, int(len(xs) * q))]
        print(f"| {g} | {len(xs)} | {p(0.1)} / {p(0.5)} / {p(0.9)} |")
    rules = [("as recorded (the build that ran)", shipped)]
    rules.append(("3 units (main before issue 45)", scaled(lambda r: MIN_UNITS)))
    for k in (0.25, 0.40, 0.50):
        rules.append((f"units ≥ max(3, {k:.2f} × terms)", scaled(lambda r, k=k: max(MIN_UNITS, k * n_terms(r)))))
    rules.append(("units ≥ 3 × max(1, terms / 8)", scaled(lambda r: MIN_UNITS * max(1.0, n_terms(r) / 8))))
    for k in (0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50):
        rules.append((f"units ≥ max(3, {k:.2f} × query units)", weight_rule(k)))
    for s0 in (0.6,):
        rules.append((f"specificity × min(1, matched share / {s0})", share_rule(s0)))
    if mode == "hybrid":
        terms = page_terms(shared)
        for k, proper, share, alone, names in (
            (0.40, True, 0.5, 0.76, False),
            (0.40, True, 0.5, 0.76, True),
            (0.45, True, 1.0, 0.76, True),
            (0.45, True, 0.5, 0.76, False),
            (0.45, False, 0.5, 0.76, True),
            (0.45, True, 0.5, 2.0, True),
            (0.45, True, 0.6, 0.76, True),
            (0.45, True, 0.5, 0.76, True),
        ):
            rule = weight_rule(k)
            rule.hybrid = qualified_dense(terms, proper, share, alone, names)
            label = "proper names" if proper else "every written name"
            rules.append((
                f"share {k:.2f}; {label if names else 'no name rule'}; no shared word: dense × {share} below {alone}"
                + (" (shipped)" if (k, proper, share, alone, names) == (0.45, True, 0.5, 0.76, True) else ""),
                rule,
            ))
        for u0 in (0.5, 1.0, 1.5):
            rule = lambda r, c: c["automatic"]
            rule.dense_units = u0
            rules.append((f"dense evidence only with ≥ {u0} lexical units", rule))
    print("\n| rule | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, rule in rules:
        c, n = count(ex, rp, rule)
        print(f"| {name} | " + " | ".join(f"{c[g]} / {n[g]}" for g in cols) + " |")


if __name__ == "__main__":
    main()
