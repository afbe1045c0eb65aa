#!/usr/bin/env bash
# run.sh: the test suite, run where the RDMA devices are (tools/on-rxe.sh puts it there).
# Runs every build/test_* binary and every tests/*.test.sh script, shows their output, and
# closes with the sum: "N passed, N failed". Exits non-zero if anything failed or nothing ran.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
pass=0 fail=0 skip=0
log=$(mktemp) || exit
trap 'rm -f "$log"' EXIT
run_one() { # NAME COMMAND...
    echo "== $1"
    "${@:2}" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]} line
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAIL $1: printed no result line (exit $rc)"
        fail=$((fail + 1))
        return
    fi
    set -- $line
    pass=$((pass + $1)) fail=$((fail + $3)) skip=$((skip + ${5:-0}))
    if [ "$rc" -ne 0 ] && [ "$3" -eq 0 ]; then
        echo "FAIL $1: exit $rc"
        fail=$((fail + 1))
    fi
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
if [ "$skip" -gt 0 ]; then echo "$pass passed, $fail failed, $skip skipped"; else echo "$pass passed, $fail failed"; fi
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
