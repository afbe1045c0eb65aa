#!/usr/bin/env bash
# inflight_valgrind.test.sh: a receive into fresh malloc memory, run under valgrind memcheck.
# safeverbs marks the bytes a completion says the NIC wrote as defined (SFV_TRACK_INFLIGHT, with
# <valgrind/memcheck.h>), so a branch on each received byte is clean: no "uninitialised value"
# report, and valgrind exits 0. Prints the suite's "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
if ! command -v valgrind >/dev/null; then
    echo "valgrind not installed (tools/deps.sh installs it)"
    count 1
    tally; exit
fi
out=$(valgrind --error-exitcode=3 --leak-check=no --child-silent-after-fork=no -q build/test_inflight t_receive_into_malloc 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 0 ] && grep -q '^ok   t_receive_into_malloc' <<<"$out" && ! grep -q 'uninitialised' <<<"$out"
ok=$?
count "$ok"
((ok == 0)) || echo "FAIL: valgrind exit $rc"
tally
