#!/usr/bin/env bash
# run.sh MODE SECONDS: runs every fuzz target (build/fuzz/fuzz_*, from tests/fuzz/fuzz_*.c) for
# SECONDS each, from its seeds in tests/fuzz/corpus/<name>/ (fuzz_<name>.c).
#   check: what `make check` runs. New inputs go to a fresh scratch corpus under build/fuzz/,
#          so the tree stays clean.
#   fuzz:  what `make fuzz` runs. The scratch corpus under build/fuzz/ is kept and grows from
#          run to run.
# A finding (crash, sanitizer report, broken property, leak, timeout, out of memory) fails its
# target; the input is saved as build/fuzz/findings/<name>-*. Closes with "N passed, N failed"
# and exits non-zero if anything failed or nothing ran.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
source tools/lib.sh || exit
mode=${1:?usage: run.sh check|fuzz SECONDS} secs=${2:?usage: run.sh check|fuzz SECONDS}
case $mode in check) scratch=build/fuzz/check-corpus ;; fuzz) scratch=build/fuzz/corpus ;;
    *) echo "run.sh: mode is check or fuzz" >&2; exit 2 ;; esac
[ "$mode" = check ] && rm -rf "$scratch"
mkdir -p build/fuzz/findings
# The targets run side by side, as many at once as the host has cores (libFuzzer runs one
# thread); each one's report is printed in turn, in the order of their names.
jobs=$(nproc 2>/dev/null || echo 2)
TMP=$(mktemp -d) || exit  # removed on exit (tools/lib.sh)
tmp=$TMP
one() {  # one NAME BIN: runs a target; its report goes to $tmp/NAME.report, its verdict to $tmp/NAME.ok
    local name=$1 bin=$2 log=$tmp/$1.log seeds=() d rc runs rate
    mkdir -p "$scratch/$name"
    for d in "tests/fuzz/corpus/$name" "tests/fuzz/corpus/fuzz_$name"; do [ -d "$d" ] && seeds+=("$d"); done
    {
    echo "== fuzz_$name: ${secs}s from ${seeds[*]:-no seeds}"
    "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/findings/$name-" "$scratch/$name" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    if [ "$rc" -eq 0 ]; then
        echo "ok   fuzz_$name: ${runs:-?} runs, ${rate:-?}/s, corpus $(ls "$scratch/$name" | wc -l) files"
        touch "$tmp/$name.ok"
    else
        # The report: the sanitizer's or the property's lines, not libFuzzer's progress.
        grep -v -E '^#[0-9]+|^INFO:|^MS:|^base unit:|^0x|^\\|^stat::' "$log" | head -n 60
        echo "FAIL fuzz_$name: exit $rc, input saved as $(ls -t build/fuzz/findings/"$name"-* 2>/dev/null | head -n 1)"
    fi
    } >"$tmp/$name.report"
}
names=()
for bin in build/fuzz/fuzz_*; do
    [ -x "$bin" ] || continue
    name=${bin##*/fuzz_}
    names+=("$name")
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || :; done
    one "$name" "$bin" &
done
wait
for name in "${names[@]}"; do
    cat "$tmp/$name.report"
    [ -e "$tmp/$name.ok" ]; count $?
done
tally && ((passed > 0))
