#!/bin/sh
# Run the fuzz targets for a fixed number of executions each and summarize.
#
#   fuzz/run.sh [-n RUNS] [TARGET...]      (default: 1000000 runs of every target)
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The targets are built once
# (`cargo fuzz build`), then run from that build, so editing the sources during a long run does not
# rebuild under it. Each target starts from
# its committed seeds (fuzz/seeds/<target>) plus whatever an earlier run left in fuzz/corpus/<target>
# (generated, not committed). Crashes, invariant violations, timeouts (-timeout, seconds per input)
# and memory blow-ups (-rss_limit_mb) stop a target and leave the input in fuzz/artifacts/<target>/.
# Logs go to fuzz/logs/<target>.log, the summary to fuzz/logs/summary.md. Exit status 1 if any
# target failed.
#
# Environment: FUZZ_SANITIZER (default none: the targets are safe Rust and run ~2x faster without
# ASan; set `address` to add it), FUZZ_TIMEOUT (default 10), FUZZ_RSS_MB (default 2048),
# FUZZ_NICE (default 10).
set -u
cd "$(dirname "$0")"
RUNS=1000000
while getopts n: opt; do
  case $opt in
    n) RUNS=$OPTARG ;;
    *) echo "usage: $0 [-n RUNS] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
TARGETS=${*:-frontmatter chunker query store_files journal feedback_files ann_file}
SAN=${FUZZ_SANITIZER:-none}
TIMEOUT=${FUZZ_TIMEOUT:-10}
RSS=${FUZZ_RSS_MB:-2048}
NICE=${FUZZ_NICE:-10}
mkdir -p logs
echo "== building $TARGETS (sanitizer $SAN)"
for t in $TARGETS; do
  nice -n "$NICE" cargo +nightly fuzz build --features libfuzzer -s "$SAN" "$t" >> logs/build.log 2>&1 || { echo "build of $t failed: fuzz/logs/build.log" >&2; exit 1; }
done
TRIPLE=$(rustc +nightly -vV | sed -n 's/^host: //p')
BIN_DIR=../target/$TRIPLE/release
SUMMARY=logs/summary.md
{
  echo "| target | runs | seconds | exec/s | corpus | result |"
  echo "|---|---|---|---|---|---|"
} > "$SUMMARY"
failed=0
for t in $TARGETS; do
  case $t in
    frontmatter) dict=dicts/yaml.dict; max=16384 ;;
    chunker) dict=dicts/markdown.dict; max=16384 ;;
    query) dict=dicts/markdown.dict; max=8192 ;;
    store_files|journal|feedback_files) dict=dicts/json.dict; max=16384 ;;
    ann_file) dict=dicts/json.dict; max=65536 ;;
    *) echo "unknown target $t" >&2; exit 2 ;;
  esac
  mkdir -p "corpus/$t" "artifacts/$t"
  log=logs/$t.log
  echo "== $t: $RUNS runs (sanitizer $SAN, timeout ${TIMEOUT}s, rss ${RSS} MB)"
  start=$(date +%s)
  nice -n "$NICE" "$BIN_DIR/$t" "corpus/$t" "seeds/$t" \
    -runs="$RUNS" -timeout="$TIMEOUT" -rss_limit_mb="$RSS" -max_len="$max" -dict="$dict" \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" > "$log" 2>&1
  status=$?
  secs=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  corpus=$(ls "corpus/$t" | wc -l | tr -d ' ')
  if [ "$status" -eq 0 ]; then
    result="ok: 0 crashes, 0 timeouts, 0 OOMs"
  else
    failed=1
    result="FAILED (exit $status): $(grep -m1 -E 'ERROR: libFuzzer|panicked at|deadly signal' "$log" | cut -c1-120)"
  fi
  echo "| $t | ${execs:-?} | $secs | ${rate:-?} | $corpus | $result |" >> "$SUMMARY"
  echo "   $result ($secs s, ${execs:-?} executions); log: fuzz/$log"
done
cat "$SUMMARY"
exit $failed
