# shellcheck shell=bash
# tools/lib.sh - sourced (bash) by the scripts that run programs and count their results:
# tests/*.test.sh, tests/run.sh, tests/nodev/run.sh, tests/fuzz/run.sh, tests/compile_matrix.sh,
# tools/on-rxe.sh, tools/inflight_cost.sh, examples/demo.sh, bench/run.sh.
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
#   count STATUS               counts one case, printing nothing: passed for 0, failed otherwise
#   sum_result FILE STATUS     adds the last "N passed, N failed[, N skipped]" line of FILE (the
#                              output of a program with exit STATUS) to the counts and sets
#                              RESULT_LINE to it. False, with one failure counted, when FILE
#                              has no such line or STATUS is not 0 and no failure was counted
#   tally                      prints "N passed, N failed" (", N skipped" when some were);
#                              false if any failed

TMP='' passed=0 failed=0 skipped=0 RESULT_LINE=
trap 'kill $(jobs -p) 2>/dev/null || :; [[ -z $TMP ]] || rm -rf "$TMP"' EXIT  # || : under set -e: no job to kill is not a failure
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

count() {
    if (($1 == 0)); then passed=$((passed + 1)); else failed=$((failed + 1)); fi
}

sum_result() {
    local p f s
    RESULT_LINE=$(grep -E '^[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$1" | tail -n 1)
    if [[ -z $RESULT_LINE ]]; then
        failed=$((failed + 1))
        return 1
    fi
    read -r p _ f _ s _ <<<"${RESULT_LINE//,/}"
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + ${s:-0}))
    (($2 == 0 || f > 0)) && return 0
    failed=$((failed + 1))  # a run that failed counts one failure at least
    return 1
}

check() {
    count "$2"
    if (($2 == 0)); then
        [[ -n ${CHECK_QUIET:-} ]] || echo "ok   $1"
    else
        echo "FAIL $1"
    fi
    [[ -z ${3:-} || ($2 == 0 && -n ${CHECK_QUIET:-}) ]] || printf '       %s\n' "${3//$'\n'/$'\n'       }"
    (($2 == 0))
}

tally() {
    if ((skipped)); then echo "$passed passed, $failed failed, $skipped skipped"; else echo "$passed passed, $failed failed"; fi
    ((failed == 0))
}
