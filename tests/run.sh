#!/usr/bin/env bash
# run.sh: the test suite, run where the RDMA devices are (tools/on-rxe.sh puts it there).
# Runs every build/test_* binary and every tests/*.test.sh script, shows their output, and
# closes with the sum: "N passed, N failed". Exits non-zero if anything failed or nothing ran.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit
log=$TMP/log
run_one() { # NAME COMMAND...
    echo "== $1"
    "${@:2}" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    sum_result "$log" "$rc" && return
    if [ -z "$RESULT_LINE" ]; then echo "FAIL $1: printed no result line (exit $rc)"; else echo "FAIL $1: exit $rc"; fi
}
for t in build/test_*; do
    [ -x "$t" ] && run_one "$(basename "$t")" "$t"
done
# The sanitizer builds: any leak, overflow or undefined behaviour fails the test it happens in.
for t in build/asan/test_*; do
    [ -x "$t" ] && run_one "asan/$(basename "$t")" env ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 "$t"
done
for s in tests/*.test.sh; do
    [ -f "$s" ] && run_one "$(basename "$s")" bash "$s"
done
tally && ((passed > 0))
