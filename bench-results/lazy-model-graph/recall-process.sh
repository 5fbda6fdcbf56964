#!/bin/bash
# Fresh-process hybrid recall on an embedded SciFact store: two eval binaries alternating.
# Usage: recall-process.sh <scratch>  — <scratch> holds bin_main, bin_lazy and reuse/scifact (the
# store left by `bench ../shared/bench/scifact --modes lexical,hybrid --reuse-dir <scratch>/reuse`).
# Run from the repository root (models in .models). Writes <scratch>/lazy.tsv.
set -eu
S=${1:?scratch directory}
export LLM_WIKI_MODELS_DIR=$PWD/.models LLM_WIKI_THREADS=2
V=$S/reuse/scifact
OUT=$S/lazy.tsv
echo -e "round\tbinary\twall_s\tuser_s\tsys_s\tmaxrss_kib" > "$OUT"
Q="0-dimensional biomaterials show inductive properties."
for b in main lazy; do "$S/bin_$b" recall "$V" "$Q" --mode hybrid > /dev/null 2>&1; done  # warm the page cache
for r in $(seq 1 12); do
  for b in main lazy; do
    /usr/bin/time -f "$r\t$b\t%e\t%U\t%S\t%M" -a -o "$OUT" "$S/bin_$b" recall "$V" "$Q" --mode hybrid > "$S/lazy-$b-$r.out" 2>&1
  done
done
