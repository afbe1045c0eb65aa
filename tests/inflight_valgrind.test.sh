#!/usr/bin/env bash
# inflight_valgrind.test.sh: a receive into fresh malloc memory, run under valgrind memcheck.
# safeverbs marks the bytes a completion says the NIC wrote as defined (SFV_TRACK_INFLIGHT, with
# <valgrind/memcheck.h>), so a branch on each received byte is clean: no "uninitialised value"
# report, and valgrind exits 0. Prints the suite's "N passed, N failed" line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
if ! command -v valgrind >/dev/null; then
    echo "valgrind not installed (tools/deps.sh installs it)"
    echo "0 passed, 1 failed"
    exit 1
fi
out=$(valgrind --error-exitcode=3 --leak-check=no --child-silent-after-fork=no -q build/test_inflight t_receive_into_malloc 2>&1)
rc=$?
echo "$out"
if [ "$rc" -eq 0 ] && grep -q '^ok   t_receive_into_malloc' <<<"$out" && ! grep -q 'uninitialised' <<<"$out"; then
    echo "1 passed, 0 failed"
else
    echo "FAIL: valgrind exit $rc"
    echo "0 passed, 1 failed"
    exit 1
fi
