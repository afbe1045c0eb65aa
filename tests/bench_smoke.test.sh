#!/usr/bin/env bash
# bench_smoke.test.sh - the benchmark programs still work: each test of build/sfv_bench (both
# implementations, both sides, and the hand-tracked cost loop), the peers stage (bench/peers.sh:
# one short round of every tool, the callgrind fit for safeverbs), each test of build/sfv_scale
# and build/bench_report run for a handful of iterations on the rxe devices, so `make bench`
# cannot rot between runs. No timing is judged here; a run fails
# if it crashes, hangs (timeout 60 on every process), prints no figures, or allocates on the
# heap inside a timed loop. tests/run.sh runs this where the devices are (the test guest).
# Prints "ok   NAME" / "FAIL NAME" per case and ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
B=build/sfv_bench
SDEV=${SAFEVERBS_BENCH_SERVER_DEV:-rxe0} CDEV=${SAFEVERBS_BENCH_CLIENT_DEV:-rxe1} GID=${SAFEVERBS_BENCH_GID:-1}
port=19500
TMP=$(mktemp -d) || exit
tmp=$TMP
# figures_ok FILE: some figures, and not one heap allocation inside a timed loop
figures_ok() {
    grep -q '^result,' "$1" || { echo "no figures"; return 1; }
    if grep '^result,' "$1" | awk -F, '$7 == "allocs_per_op" && $8 != 0 { bad = 1 } END { exit !bad }'; then
        echo "heap allocations in a timed loop"; return 1
    fi
}
# pair NAME CLIENT_ARGS...: server on $SDEV, client on $CDEV, few iterations
pair() {
    local name=$1 p=$((port++)) s rc why
    shift
    timeout 60 "$B" -d "$SDEV" -x "$GID" -p "$p" >"$tmp/server" 2>&1 &
    s=$!
    wait_listen "$p" "$s"
    timeout 60 "$B" -d "$CDEV" -x "$GID" -p "$p" "$@" 127.0.0.1 >"$tmp/client" 2>&1
    rc=$?
    wait "$s" || rc=1
    cat "$tmp/client" >>"$tmp/all"
    why=$(figures_ok "$tmp/client") || rc=1
    ((rc == 0)) || { [[ -n $why ]] || why=$(tail -n 1 "$tmp/client" "$tmp/server" | grep -v '^==>\|^$' | head -n 2 | tr '\n' ' '); }
    check "$name" "$rc" "$why"
}
# alone NAME ARGS...: one process (the loopback cost test)
alone() {
    local name=$1 rc why
    shift
    timeout 60 "$B" -d "$SDEV" -x "$GID" "$@" >"$tmp/alone" 2>&1
    rc=$?
    cat "$tmp/alone" >>"$tmp/all"
    why=$(figures_ok "$tmp/alone") || rc=1
    ((rc == 0)) || { [[ -n $why ]] || why=$(tail -n 1 "$tmp/alone"); }
    check "$name" "$rc" "$why"
}

[[ -x $B && -x build/bench_report && -x build/sfv_scale ]] || { check build 1 "$B, build/bench_report or build/sfv_scale missing (make all)"; tally; exit; }
: >"$tmp/all"
lat=(--test lat --impl both -n 8 --warmup 2)
pair "lat send (sfv, raw)" "${lat[@]}" --op send --sizes 8,4096
pair "lat write" "${lat[@]}" --op write --sizes 8,4096
pair "lat write_imm" "${lat[@]}" --op write_imm --sizes 8
pair "lat read" "${lat[@]}" --op read --sizes 8,4096
pair "lat send, event wait" "${lat[@]}" --op send --sizes 8 --wait event
pair "lat send, sfv only, 2 rounds" --test lat --impl sfv -n 16 --warmup 2 --rounds 2 --op send --sizes 64
bw=(--test bw --impl both -n 64 --warmup 16 --variant stream)
pair "bw write" "${bw[@]}" --op write --sizes 4096,65536
pair "bw read" "${bw[@]}" --op read --sizes 4096 --depth 16
pair "bw send" "${bw[@]}" --op send --sizes 4096
pair "rate send, batch 16" --test bw --impl both -n 256 --warmup 32 --op send --sizes 64 --batch 16 --variant batch16
pair "rate send, batch 16, inline" --test bw --impl both -n 256 --warmup 32 --op send --sizes 8 --batch 16 --inline 64 --variant batch16-inline
alone "cost sfv" --test cost --impl sfv -n 20 --warmup 2 --settle-us 100
alone "cost raw" --test cost --impl raw -n 20 --warmup 2 --settle-us 100
alone "cost sfv, batch 16" --test cost --impl sfv --batch 16 -n 4 --warmup 1 --settle-us 100
alone "cost hand-tracked raw" --test cost --impl hand -n 20 --warmup 2 --settle-us 100
alone "cost hand-tracked raw, batch 16" --test cost --impl hand --batch 16 -n 4 --warmup 1 --settle-us 100
alone "cost inject" --test cost --impl inject -n 20 --warmup 2 --settle-us 100
alone "cost inject, batch 16" --test cost --impl inject --batch 16 -n 4 --warmup 1 --settle-us 100

# The peers beside safeverbs (bench/peers.sh), one short round; the instruction fit for
# safeverbs only (valgrind is slow). ucp is left out: UCX's ucp cannot run on rxe here (see
# bench/RESULTS.md), and its abort would only cost time.
PORT=19600 WORK=$tmp CSV=$tmp/peers.csv R=build/bench_report
: >"$CSV"
: >"$WORK/peers-why.txt"
figures() { local why; why=$($R "${@:2}" 2>&1 >>"$CSV"); check "$1" $? "$why"; }
source bench/peers.sh
PEER_TOOLS="sfv raw perftest uct fi qperf" PEER_TIMEOUT=30
peers_timing 1 20
PEER_TOOLS=sfv peers_callgrind 10
sed 's/^/result,/' "$CSV" >>"$tmp/all"

# Scaling (build/sfv_scale), each test once and small.
SC=build/sfv_scale
scale() { # NAME ARGS...: one process
    local name=$1 rc
    shift
    timeout 60 "$SC" -x "$GID" "$@" >"$tmp/scale" 2>&1
    rc=$?
    grep -q '^result,' "$tmp/scale" || rc=1
    cat "$tmp/scale" >>"$tmp/all"
    check "$name" "$rc" "$(tail -n 2 "$tmp/scale")"
}
for r in 0 1; do timeout 60 "$SC" -x "$GID" --test connect -w 2 -r $r -d "$([[ $r == 0 ]] && echo "$SDEV" || echo "$CDEV")" -p 19650 >"$tmp/connect$r" 2>&1 & done
wait
cat "$tmp/connect0" "$tmp/connect1" >>"$tmp/all"
check "scale: connect a node of 2 ranks" "$(grep -c '^result,scale,connect,tree,2,sfv,connect_ms' "$tmp/connect0" "$tmp/connect1" | awk -F: '{ s += $2 } END { print s != 2 }')" \
    "$(tail -n 2 "$tmp/connect0" "$tmp/connect1")"
scale "scale: memory per channel" --test mem -d "$SDEV" --channels 1,4
timeout 60 "$SC" -x "$GID" --test rate -d "$SDEV" -p 19660 --channels 4 --depth 8 -n 100 >"$tmp/rate.server" 2>&1 &
scale "scale: rate, 4 channels, depth 8" --test rate -d "$CDEV" -p 19660 --channels 4 --depth 8 -n 100 --variant peers-d64 127.0.0.1
wait
scale "scale: cost, 4 peers" --test cost -d "$SDEV" --channels 4 -n 8 --settle-us 100

# The report from what ran above (most tables stay empty: it must still write a page).
{ echo "test,op,variant,size,impl,metric,value"; sed -n 's/^result,//p' "$tmp/all"; } >"$tmp/results.csv"
printf 'date=smoke\nrate_batch=16\nrate_inline=64\nfailures=0\n' >"$tmp/meta.txt"
if timeout 60 build/bench_report "$tmp/results.csv" "$tmp/meta.txt" "$tmp/RESULTS.md" "$tmp" >"$tmp/report.log" 2>&1 &&
    grep -q '^## Targets' "$tmp/RESULTS.md" && grep -q '^### send' "$tmp/RESULTS.md" && [[ -s $tmp/lat_send.dat ]] &&
    grep -q '^## The peers on one device' "$tmp/RESULTS.md" && grep -q '^## How cost grows' "$tmp/RESULTS.md" &&
    [[ -s $tmp/scale_mem.dat ]]; then
    check "bench_report" 0
else
    check "bench_report" 1 "$(tail -n 1 "$tmp/report.log")"
fi

tally
