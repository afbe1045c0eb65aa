#!/usr/bin/env bash
# inflight_cost.sh: what SFV_TRACK_INFLIGHT costs. Instructions (callgrind) per 64 B send +
# receive in loopback on rxe0 (post a receive, post a send, poll both: bench/sfv_bench's "cost"
# test), in the same -O2 SFV_DEBUG build with and without the tracking: (Ir(2N) - Ir(N)) / N.
# On a host without RDMA it runs itself in the guest (tools/on-rxe.sh). Prints one line per build.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
if [[ -z ${SAFEVERBS_IN_VM:-} && -z $(ls -A /sys/class/infiniband 2>/dev/null) ]]; then
    for v in track notrack; do
        flag=; [ $v = notrack ] && flag=-DSFV_TRACK_INFLIGHT=0
        ${CC:-cc} -O2 -g $flag -I. -o build/sfv_bench_$v bench/sfv_bench.c -libverbs -lpthread || exit
    done
    exec bash tools/on-rxe.sh bash tools/inflight_cost.sh
fi
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit  # removed on exit, a failed run's too (tools/lib.sh)
w=$TMP
N=${SAFEVERBS_COST_N:-2000}
for v in track notrack; do
    ir=()
    for n in "$N" $((2 * N)); do
        LD_BIND_NOW=1 valgrind --tool=callgrind --callgrind-out-file="$w/$v.$n" --collect-atstart=no --toggle-collect='cost_*' \
            "build/sfv_bench_$v" -d rxe0 -x 1 --test cost --impl sfv --batch 1 --sizes 64 -n "$n" --warmup 0 --settle-us 2000 \
            >"$w/$v.$n.log" 2>&1 || { echo "$v: sfv_bench failed"; cat "$w/$v.$n.log"; exit 1; }
        ir+=("$(callgrind_annotate "$w/$v.$n" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,)")
    done
    echo "$v: $(((ir[1] - ir[0]) / N)) instructions per 64 B send + receive"
done
