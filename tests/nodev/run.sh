#!/usr/bin/env bash
# run.sh: the device-free tier (make check-nodev), on this host, before any guest boots: every
# build/nodev/test_* binary, plain and under ASan/UBSan (test_race under TSan too), on the fake NIC of fake_verbs.c, and the
# real-build tests that need no device (build/test_exchange and its ASan build: the exchange over
# loopback, with strangers). Shows their output and closes with the sum, "N passed, N failed";
# exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit  # removed on exit (tools/lib.sh)
log=$TMP/log
for t in build/nodev/test_* build/nodev/asan/test_* build/nodev/tsan/test_* build/test_exchange build/asan/test_exchange; do
    [ -x "$t" ] || { [[ $t != *exchange ]] || { echo "FAIL $t: not built"; count 1; }; continue; }
    echo "== ${t#build/}"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 TSAN_OPTIONS=halt_on_error=1:exitcode=66 "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    sum_result "$log" "$rc" && continue
    if [ -z "$RESULT_LINE" ]; then echo "FAIL $t: printed no result line (exit $rc)"; else echo "FAIL $t: exit $rc"; fi
done
tally && ((passed > 0))
