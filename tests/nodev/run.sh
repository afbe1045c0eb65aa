#!/usr/bin/env bash
# run.sh: the device-free tier (make check-nodev), on this host, before any guest boots: every
# build/nodev/test_* binary, plain and under ASan/UBSan, on the fake NIC of fake_verbs.c. Shows
# their output and closes with the sum, "N passed, N failed"; exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
pass=0 fail=0
log=$(mktemp)
for t in build/nodev/test_* build/nodev/asan/test_*; do
    [ -x "$t" ] || continue
    echo "== nodev/${t#build/nodev/}"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$line" ]; then echo "FAIL $t: printed no result line (exit $rc)"; fail=$((fail + 1)); continue; fi
    set -- $line
    pass=$((pass + $1)) fail=$((fail + $3))
    if [ "$rc" -ne 0 ] && [ "$3" -eq 0 ]; then echo "FAIL $t: exit $rc"; fail=$((fail + 1)); fi
done
rm -f "$log"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ] && [ "$pass" -gt 0 ]
