# shellcheck shell=bash
# tools/lib.sh - sourced (bash) by the scripts that run programs on the rxe devices:
# tests/examples.test.sh, tests/bench_smoke.test.sh, examples/demo.sh, bench/run.sh.
# Sourcing it sets an EXIT trap (INT and TERM exit through it): background jobs still running
# are killed, and the directory in $TMP, if the script made one, is removed.
#
#   listening PORT             true when a TCP socket listens on PORT (reads /proc/net/tcp*,
#                              starts nothing)
#   wait_listen PORT PID [S]   waits up to S seconds (default 20) for PORT to listen instead of
#                              a blind sleep; false if PID died first or the time ran out
#   check NAME STATUS [TEXT]   counts one case: "ok   NAME" for STATUS 0 (not printed when
#                              CHECK_QUIET is set), "FAIL NAME" otherwise, then TEXT indented;
#                              true for STATUS 0
#   tally                      prints "N passed, N failed"; false if any failed

TMP='' passed=0 failed=0
trap 'kill $(jobs -p) 2>/dev/null; [[ -z $TMP ]] || rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

listening() {
    local want f _ addr st
    printf -v want ':%04X' "$1"
    for f in /proc/net/tcp /proc/net/tcp6; do
        while read -r _ addr _ st _; do [[ $addr == *"$want" && $st == 0A ]] && return 0; done <"$f"
    done
    return 1
}

wait_listen() {
    local i
    for ((i = 0; i < ${3:-20} * 10; i++)); do
        listening "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

check() {
    if (($2 == 0)); then
        passed=$((passed + 1))
        [[ -n ${CHECK_QUIET:-} ]] || echo "ok   $1"
    else
        failed=$((failed + 1))
        echo "FAIL $1"
    fi
    [[ -z ${3:-} || ($2 == 0 && -n ${CHECK_QUIET:-}) ]] || printf '       %s\n' "${3//$'\n'/$'\n'       }"
    (($2 == 0))
}

tally() {
    echo "$passed passed, $failed failed"
    ((failed == 0))
}
