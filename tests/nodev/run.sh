#!/usr/bin/env bash
# run.sh: the device-free tier (make check-nodev), on this host, before any guest boots: every
# build/nodev/test_* binary, plain and under ASan/UBSan (test_race under TSan too, twelve under clang's
# unsigned-integer-overflow sanitizer), on the fake NIC of fake_verbs.c, and the
# real-build tests that need no device (build/test_exchange and its ASan build: the exchange over
# loopback, with strangers), and one fake-NIC test under valgrind. Shows their output and closes with the sum, "N passed, N failed";
# exits non-zero if anything failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit  # removed on exit (tools/lib.sh)
log=$TMP/log
for t in build/nodev/test_* build/nodev/asan/test_* build/nodev/tsan/test_* build/nodev/uio/test_* build/nodev/cxx/test_* build/test_exchange build/asan/test_exchange; do
    [ -x "$t" ] || { [[ $t != *exchange ]] || { echo "FAIL $t: not built"; count 1; }; continue; }
    echo "== ${t#build/}"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 TSAN_OPTIONS=halt_on_error=1:exitcode=66 "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    sum_result "$log" "$rc" && continue
    if [ -z "$RESULT_LINE" ]; then echo "FAIL $t: printed no result line (exit $rc)"; else echo "FAIL $t: exit $rc"; fi
done
# Under valgrind memcheck: a post the verb refuses leaves the memory it did not hand over as the
# program had it (defined), and reads the handle it was given without a report.
t=build/nodev/test_inflight_fake
echo "== valgrind ${t#build/} t_refused_post_keeps_memory"
if ! command -v valgrind >/dev/null; then
    echo "FAIL valgrind not installed (tools/deps.sh installs it)"; count 1
else
    valgrind -q --error-exitcode=3 "$t" t_refused_post_keeps_memory 2>&1 | grep -v '^safeverbs: ' | tee "$log"
    rc=${PIPESTATUS[0]}
    sum_result "$log" "$rc" || echo "FAIL valgrind $t: exit $rc"
fi
tally && ((passed > 0))
