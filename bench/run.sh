#!/usr/bin/env bash
# bench/run.sh - what `make bench` runs: safeverbs against the same work on raw libibverbs
# (build/sfv_bench, both sides of every test in one program) and against perftest's binaries,
# on the same rxe devices in one run. Writes RESULTS.md, results.csv, latency.png and
# throughput.png (bench/, or the VM share when bench/ is read-only).
#
#   bash bench/run.sh            where RDMA devices are; on a host without any it boots the
#                                QEMU guest (tools/on-rxe.sh), runs there, and copies the
#                                results back into bench/
#   SAFEVERBS_BENCH_QUICK=1            a shorter run (fewer sizes and iterations) to try things out
#
# Stages: latency (ping-pong, A-B-B-A, then perftest per size), throughput, message rate,
# event vs busy waiting, callgrind instruction counts (safeverbs, raw, hand-tracked raw),
# strace system-call counts, the peers on one device (bench/peers.sh: perftest, UCX, libfabric,
# qperf), scaling (build/sfv_scale: ranks, channels, peers, depth; scaling.png; build/raw_connect:
# the node connect's raw floor). This script
# runs the programs; build/bench_report reads their output into CSV lines (test,op,variant,
# size,impl,metric,value) and writes the report. Ends with "N passed, N failed" (runs that
# gave their figures, runs that did not).
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
B=build/sfv_bench R=build/bench_report
SDEV=${SAFEVERBS_BENCH_SERVER_DEV:-rxe0} CDEV=${SAFEVERBS_BENCH_CLIENT_DEV:-rxe1} GID=${SAFEVERBS_BENCH_GID:-1}

# ---- on a host without RDMA devices: run in the guest, then bring the results home ----------
if [[ -z ${SAFEVERBS_IN_VM:-} && -z $(ls -A /sys/class/infiniband 2>/dev/null) ]]; then
    SAFEVERBS_BENCH_HOST_UNAME=$(uname -a) SAFEVERBS_BENCH_HOST_NPROC=$(nproc) SAFEVERBS_VM_SHARE=$PWD/build/vm-share share=$PWD/build/vm-share
    export SAFEVERBS_BENCH_HOST_UNAME SAFEVERBS_BENCH_HOST_NPROC SAFEVERBS_VM_SHARE
    mkdir -p "$share" && rm -rf "$share/bench-results" && : >"$share/bench-hostload.txt" || exit
    # the host's load while the guest runs (other guests share these cores), for the report
    (while :; do echo "$(cut -d' ' -f1 /proc/loadavg) $(pgrep -c qemu-system)"; sleep 5; done >>"$share/bench-hostload.txt") &
    bash tools/on-rxe.sh bash bench/run.sh "$@" || exit
    cp "$share"/bench-results/{RESULTS.md,results.csv,latency.png,throughput.png,scaling.png} bench/ || exit
    echo "run.sh: results copied to bench/"
    exit 0
fi

# ---- where the devices are ---------------------------------------------------------------
[[ -x $B && -x $R ]] || { echo "run.sh: build first (make all)" >&2; exit 1; }
if [[ -w bench ]]; then
    OUT=bench WORK=build/bench-work
else # the guest sees this tree read-only; its share is the way out
    OUT=${SAFEVERBS_VM_SHARE:?}/bench-results WORK=$SAFEVERBS_VM_SHARE/bench-work
fi
mkdir -p "$OUT" "$WORK" && rm -f "$WORK"/* || exit # the work files stay until the next run
: >"$WORK/stages.txt"
CSV=$WORK/results.csv T_START=$SECONDS CHECK_QUIET=1 QUICK=${SAFEVERBS_BENCH_QUICK:-} PORT=19100
: >"$CSV"
# RATE_N: ib_send_bw iterations for about TBW seconds at its usual rate here (8000/s). CG_N: a
# multiple of every period of the counted loops (safeverbs' inject signals every 64, UCX reaps its
# send completions every 64, libfabric's verbs provider its send queue every 384), so that the
# difference of two runs holds whole periods: the long-run count per message. PEER_CG_N likewise
# (bench/peers.sh, peers_callgrind: every ring there turns within 64 round trips).
if [[ -n $QUICK ]]; then
    LAT_SIZES=8,512,65536 BW_SIZES=4096,1048576 TLAT=0.3 TBW=0.5 RATE_N=4000 CG_N=384 ST_N=100
    PEER_ROUNDS=2 PEER_N=100 PEER_CG_N=64
    SCALE_RANKS="2 4" SCALE_PEERS="1 8 64" SCALE_DEPTHS="1 16 256" SCALE_N=500
else
    LAT_SIZES=8,64,512,4096,65536 BW_SIZES=4096,16384,65536,262144,1048576
    TLAT=2.0 TBW=5.0 RATE_N=40000 CG_N=384 ST_N=300 PEER_ROUNDS=5 PEER_N=300 PEER_CG_N=64
    SCALE_RANKS="2 4 8 16" SCALE_PEERS="1 4 16 64" SCALE_DEPTHS="1 4 16 64 256" SCALE_N=2000
fi
RATE_BATCH=16 RATE_INLINE=64
# In the test guest, a 1 MiB read response (1024 packets at MTU 1024) overflows the default
# receive backlog of 1000 packets; the drops stall reads in retries. The guest is ours alone.
if [[ -n ${SAFEVERBS_IN_VM:-} && -w /proc/sys/net/core/netdev_max_backlog ]]; then
    echo 16384 >/proc/sys/net/core/netdev_max_backlog
fi
# Every benchmark process runs under SCHED_IDLE: on 2 vCPUs, two busy-polling processes would
# otherwise keep the guest's rxe work (softirq, ksoftirqd) waiting for the 4 ms scheduler tick.
if command -v chrt >/dev/null && chrt -i 0 true 2>/dev/null; then IDLE=(chrt -i 0); else IDLE=(); fi
log() { # the progress line of a stage; its start also into stages.txt for the report's run time
    printf '[%4ds] %s\n' $((SECONDS - T_START)) "$*"
    echo "$((SECONDS - T_START)) ${*%%:*}" >>"$WORK/stages.txt"
}

# ours ARGS...: one sfv_bench pair (server on $SDEV, client on $CDEV); result lines into the CSV
ours() {
    local p=$((PORT++)) s rc f
    f=$WORK/ours-$p
    timeout 900 "${IDLE[@]}" "$B" -d "$SDEV" -x "$GID" -p "$p" >"$f.server" 2>&1 &
    s=$!
    timeout 900 "${IDLE[@]}" "$B" -d "$CDEV" -x "$GID" -p "$p" "$@" 127.0.0.1 >"$f.client" 2>&1
    rc=$?
    wait "$s" || rc=1
    sed -n 's/^result,//p' "$f.client" >>"$CSV"
    check "sfv_bench $*" "$rc" "$(tail -n 3 "$f.client" "$f.server")"
}
# perftest TOOL SIZE ITERS: one perftest pair (its defaults otherwise); the client's output in $PT_FILE
perftest() {
    local f=$WORK/$1-$2-$PORT s
    PT_FILE=$f.client
    timeout 300 "${IDLE[@]}" "$1" -d "$SDEV" -x "$GID" -F -p "$PORT" -s "$2" -n "$3" >"$f.server" 2>&1 &
    s=$!
    if wait_listen "$PORT" "$s"; then
        timeout 300 "${IDLE[@]}" "$1" -d "$CDEV" -x "$GID" -F -p "$PORT" -s "$2" -n "$3" 127.0.0.1 >"$f.client" 2>&1
    fi
    wait "$s"
    PORT=$((PORT + 1))
}
# figures NAME ARGS...: `bench_report ARGS...`'s CSV lines into the CSV, counted as a case
figures() {
    local why
    why=$($R "${@:2}" 2>&1 >>"$CSV")
    check "$1" $? "$why"
}
# perftest_sizes TEST OP VARIANT SECONDS SIZES TRIES: ib_OP_TEST's figures at each size, for
# about SECONDS each (from our raw figure); TRIES runs when one prints no figures or "inf"
perftest_sizes() {
    local size n try
    for size in ${5//,/ }; do
        n=$($R iters "$CSV" "$1,$2,$3,$size,raw" "$4")
        for ((try = 1; try <= $6; try++)); do
            perftest "ib_$2_$1" "$size" "$n"
            $R perftest "$PT_FILE" "$1,$2,$3,$size,perftest" "$n" >/dev/null 2>&1 && break
        done
        figures "ib_$2_$1 -s $size" perftest "$PT_FILE" "$1,$2,$3,$size,perftest" "$n"
    done
}

# ---- 1. latency: ping-pong, every size, sfv and raw alternating A-B-B-A, then perftest -------
for op in send write write_imm read; do
    log "latency: $op, sizes $LAT_SIZES"
    ours --test lat --op "$op" --impl both --sizes "$LAT_SIZES" --time "$TLAT" --warmup 50 --min-iters 200 --max-iters 8000 \
        --block-ms 20
    # perftest has no write-with-immediate latency test
    [[ $op == write_imm ]] || perftest_sizes lat "$op" busy "$TLAT" "$LAT_SIZES" 2
done

# ---- 2. throughput: 128 work requests in flight ------------------------------------------
for op in write read send; do
    log "throughput: $op, sizes $BW_SIZES"
    ours --test bw --op "$op" --impl both --sizes "$BW_SIZES" --time "$TBW" --warmup 64 --min-iters 16 --max-iters 100000 \
        --depth 128 --block-ms 1000 --variant stream
    perftest_sizes bw "$op" stream "$TBW" "$BW_SIZES" 1
done

# ---- 3. message rate: small sends, one per post, then batches, then batches with inline data -
# ib_send_bw (its defaults: tx depth 128, rx depth 512, CQ moderation 100, one work request per
# post) runs before and after each of ours, and each of ours is compared with the mean of the two
# runs beside it, so that a slow or fast spell of the shared machine does not land on one side.
for size in 8 64; do
    log "message rate: send $size B"
    perftest ib_send_bw "$size" "$RATE_N"
    for v in post1 "batch$RATE_BATCH --batch $RATE_BATCH" "batch$RATE_BATCH-inline --batch $RATE_BATCH --inline $RATE_INLINE"; do
        before=$PT_FILE
        read -ra args <<<"$v" # VARIANT ARGS...
        ours --test bw --op send --impl both --sizes "$size" --time "$TBW" --warmup 512 --min-iters 512 --max-iters 200000 \
            --block-ms 250 --variant "${args[@]}"
        perftest ib_send_bw "$size" "$RATE_N"
        figures "ib_send_bw -s $size around ${args[0]}" rate "$before" "$PT_FILE" "bw,send,${args[0]},$size,perftest" "$RATE_N"
    done
done

# ---- 4. waiting: sleeping on the completion channel against busy polling -------------------
log "wait modes: send 8 and 512 B, SFV_WAIT_EVENT"
ours --test lat --op send --impl both --sizes 8,512 --wait event --time "$TLAT" --warmup 20 --min-iters 100 --max-iters 2000 \
    --block-ms 100

# ---- 5. instructions per operation (callgrind), loopback on one device ---------------------
# Every step of the loop (post a receive, post a send, poll the send's completion, poll the
# receive's) is a function cost_<impl>_<step>; callgrind counts only inside them. One run: the
# counters are zeroed after the warm-up (CALLGRIND_ZERO_STATS), so its count over its N
# iterations is the cost of one iteration, start-up and first touches excluded.
CG_WARMUP=32
cg_run() { # OUT CMD...: CMD under callgrind into OUT, annotated per step (OUT.incl) and per function (OUT.self)
    local out=$1
    shift
    LD_BIND_NOW=1 timeout 600 valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
        --toggle-collect='cost_*' "$@" >"$out.log" 2>&1 || return
    callgrind_annotate --inclusive=yes "$out" >"$out.incl" 2>/dev/null
    callgrind_annotate --inclusive=no --threshold=100 "$out" >"$out.self" 2>/dev/null
}
callgrind() { # IMPL BATCH [BINARY LABEL]
    local bin=${3:-$B} label=${4:-$1} f=$WORK/cg.${4:-$1}.$2 n=$((CG_N / $2))
    cg_run "$f" "$bin" -d "$SDEV" -x "$GID" --test cost --impl "$1" --batch "$2" --sizes 64 -n "$n" --warmup "$CG_WARMUP" \
        --settle-us 2000
    figures "callgrind $label, batch $2" callgrind "cost,send,batch$2,64,$label" 0 "$n" "$2" - "$f"
    # heap allocations in the same loop, without valgrind
    timeout 120 "$bin" -d "$SDEV" -x "$GID" --test cost --impl "$1" --batch "$2" --sizes 64 -n "$n" \
        --warmup 10 --settle-us 200 | sed -n "s/^result,\(.*\),$1,/\1,$label,/p" >>"$CSV"
}
log "callgrind: instructions per post and per poll"
for batch in 1 $RATE_BATCH; do
    callgrind sfv "$batch"; callgrind raw "$batch"; callgrind hand "$batch"; callgrind handbuilt "$batch"; callgrind inject "$batch"; callgrind handinject "$batch"
    # the same library built with SAFEVERBS_STATIC: the data path inlined into the loop
    callgrind sfv "$batch" build/sfv_bench_static sfv_static; callgrind inject "$batch" build/sfv_bench_static inject_static
done
# The peers' own small-message paths counted the same way, one per post: UCX's uct am_short +
# progress (bench/uct_cost.c) and libfabric's fi_inject + fi_recv (bench/fi_cost.c).
source bench/peers.sh || exit # (peer_ip; the peers themselves run in stage 7)
peer_cost() { # LABEL CMD...: one run of CG_N iterations (-n) under callgrind, as callgrind() does
    local label=$1 f=$WORK/cg.$1.1
    shift
    cg_run "$f" "$@" -n "$CG_N" --settle-us 2000
    figures "callgrind $label" callgrind "cost,send,batch1,64,$label" 0 "$CG_N" 1 - "$f"
}
log "callgrind: UCX am_short and libfabric fi_inject, counted the same way"
UCX_NET_DEVICES="$SDEV:1" UCX_IB_GID_INDEX="$GID" peer_cost uct build/uct_cost -d "$SDEV"
peer_cost fi_inject build/fi_cost -a "$(peer_ip)" --mode inject
# What SFV_TRACK_INFLIGHT costs: the same loop in a debug build (SFV_DEBUG 1), tracking on and off.
inflight_cost() { # VARIANT (track, notrack)
    local f=$WORK/cg.inflight.$1
    cg_run "$f" "build/sfv_bench_$1" -d "$SDEV" -x "$GID" --test cost --impl sfv --batch 1 --sizes 64 -n "$CG_N" \
        --warmup "$CG_WARMUP" --settle-us 2000
    figures "callgrind debug build, in-flight tracking $1" callgrind "inflight,send,debug,64,$1" 0 "$CG_N" 1 - "$f"
}
log "callgrind: the in-flight tracking's cost (debug build)"
inflight_cost track
inflight_cost notrack

# ---- 6. system calls per operation (strace -c -f on the client), N and 2N iterations ------
syscalls() { # VARIANT N ARGS...
    local impl n s f=$WORK/strace.$1
    for impl in sfv raw; do
        for n in "$2" $((2 * $2)); do
            timeout 600 "${IDLE[@]}" "$B" -d "$SDEV" -x "$GID" -p "$PORT" >/dev/null 2>&1 &
            s=$!
            if ! wait_listen "$PORT" "$s" || # no connection retries in the count
                ! timeout 600 "${IDLE[@]}" strace -c -f -o "$f.$impl.$n" "$B" -d "$CDEV" -x "$GID" -p "$PORT" --impl "$impl" \
                    -n "$n" --warmup 0 "${@:3}" 127.0.0.1 >/dev/null 2>&1; then
                kill "$s" 2>/dev/null
            fi
            wait "$s"
            PORT=$((PORT + 1))
        done
        figures "strace $1, $impl" syscalls "syscalls,send,$1,8,$impl" "$2" "$f.$impl.$2" "$f.$impl.$((2 * $2))"
    done
}
log "strace: system calls per operation"
syscalls lat-busy "$ST_N" --test lat --op send --sizes 8
syscalls lat-event $((ST_N / 3)) --test lat --op send --sizes 8 --wait event --echo-delay-us 10000
syscalls "rate-batch$RATE_BATCH" $((ST_N * RATE_BATCH)) --test bw --op send --sizes 8 --batch "$RATE_BATCH"

# ---- 7. the peers on one device: perftest, UCX, libfabric, qperf beside safeverbs ----------
: >"$WORK/peers-why.txt"
log "peers: $PEER_ROUNDS rounds of $PEER_N round trips, the tools rotating, both ends on $SDEV"
peers_timing "$PEER_ROUNDS" "$PEER_N"
log "peers: instructions per message (callgrind, $PEER_CG_N, 2x, 3x and 2x round trips, each tool's client, inside its loop)"
peers_callgrind "$PEER_CG_N"

# ---- 8. scaling: ranks, channels, peers, depth (build/sfv_scale) ---------------------------
SC=build/sfv_scale
scale_connect() { # RANKS: every rank a process, rxe0 and rxe1 in turn; per round the slowest rank's
    # time and the CPU time summed over the ranks; the least of 3 rounds (noise only adds, as for the floor)
    local w=$1 r k pids=() f=$WORK/scale-connect-$1 rc=0
    : >"$f"
    for k in 1 2 3; do
        pids=()
        : >"$f.$k"
        for ((r = 0; r < w; r++)); do
            timeout 300 "$SC" --test connect -w "$w" -r "$r" -d "$([[ $((r % 2)) == 0 ]] && echo "$SDEV" || echo "$CDEV")" \
                -x "$GID" -p "$PORT" >>"$f.$k" 2>&1 &
            pids+=($!)
        done
        for r in "${pids[@]}"; do wait "$r" || rc=1; done
        sed "s/^result,/result$k,/" "$f.$k" >>"$f"
        PORT=$((PORT + w + 1))
    done
    awk -F, -v w="$w" '$1 ~ /^result[0-9]$/ && $7 ~ /^connect_ms/ { if ($8 > t[$1]) t[$1] = $8; n[$1]++ }
        $1 ~ /^result[0-9]$/ && $7 ~ /^cpu_ms/ { c[$1] += $8 }
        END { for (k in t) { if (n[k] != w) exit 1; if (m == "" || t[k] < m) m = t[k]; if (cm == "" || c[k] < cm) cm = c[k] }
              if (m == "") exit 1
              printf "scale,connect,tree,%d,sfv,connect_ms,%.3f\nscale,connect,tree,%d,sfv,cpu_ms,%.3f\n", w, m, w, cm }' "$f" >>"$CSV" || rc=1
    check "scaling: connect $w ranks" "$rc" "$(grep -v '^result' "$f" | tail -n 3)"
}
# The floor under it (build/raw_connect, bench/raw_connect.c): the same queue pairs, one per rank
# pair and direction as a node has, brought to RTR and RTS with libibverbs alone, the exchange
# through shared memory, between two barriers; as many processes as ranks. 5 rounds in one launch;
# per round the slowest rank's time and the CPU time summed over the ranks; the least of the rounds
# (noise only adds: the floor).
scale_raw_connect() { # RANKS
    local w=$1 r pids=() d f=$WORK/scale-rawconnect-$1 rc=0
    d=$(mktemp -d) || return
    : >"$f"
    for ((r = 0; r < w; r++)); do
        timeout 120 build/raw_connect -n 5 -w "$w" -r "$r" -s "$d" -d "$([[ $((r % 2)) == 0 ]] && echo "$SDEV" || echo "$CDEV")" \
            -x "$GID" >>"$f" 2>&1 &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    rm -rf "$d"
    awk -F, -v w="$w" '$1 == "result" && $7 ~ /^rts_ms/ { if ($8 > t[$4]) t[$4] = $8; n[$4]++ }
        $1 == "result" && $7 ~ /^cpu_ms/ { c[$4] += $8 }
        END { for (k in t) { if (n[k] != w) exit 1; if (m == "" || t[k] < m) m = t[k]; if (cm == "" || c[k] < cm) cm = c[k] }
              if (m == "") exit 1
              printf "scale,connect,raw,%d,raw,connect_ms,%.3f\nscale,connect,raw,%d,raw,cpu_ms,%.3f\n", w, m, w, cm }' "$f" >>"$CSV" || rc=1
    check "scaling: raw connect floor, $w ranks" "$rc" "$(grep -v '^result' "$f" | tail -n 3)"
}
# sfv_node_connect's steps one by one (sfv_scale --variant phases), each timed, and the CPU time
scale_connect_phases() { # RANKS
    local w=$1 r pids=() f=$WORK/scale-connect-phases-$1 rc=0
    : >"$f"
    for ((r = 0; r < w; r++)); do
        timeout 300 "$SC" --test connect --variant phases -w "$w" -r "$r" -d "$([[ $((r % 2)) == 0 ]] && echo "$SDEV" || echo "$CDEV")" \
            -x "$GID" -p "$PORT" >>"$f" 2>&1 &
        pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r" || rc=1; done
    PORT=$((PORT + w + 1))
    awk -F, -v w="$w" '$1 == "result" { k = $7; sub(/_rank[0-9]+$/, "", k); if (k == "cpu_ms") s[k] += $8; else if ($8 > s[k]) s[k] = $8 }
        END { for (k in s) printf "scale,connect,phases,%d,sfv,%s,%.3f\n", w, k, s[k] }' "$f" >>"$CSV"
    check "scaling: connect phases, $w ranks" "$rc" "$(grep -v '^result' "$f" | tail -n 3)"
}
scale_rate() { # VARIANT CHANNELS DEPTH: one pair, server on $SDEV, client on $CDEV
    local p=$PORT s rc f=$WORK/scale-rate-$1-$2-$3
    PORT=$((PORT + 4))
    timeout 300 "${IDLE[@]}" "$SC" --test rate -d "$SDEV" -x "$GID" -p "$p" --channels "$2" --depth "$3" -n "$SCALE_N" >"$f.server" 2>&1 &
    s=$!
    timeout 300 "${IDLE[@]}" "$SC" --test rate -d "$CDEV" -x "$GID" -p "$p" --channels "$2" --depth "$3" -n "$SCALE_N" --variant "$1" \
        127.0.0.1 >"$f" 2>&1
    rc=$?
    wait "$s" || rc=1
    sed -n 's/^result,//p' "$f" >>"$CSV"
    check "scaling: rate, $2 channels, depth $3" "$rc" "$(tail -n 2 "$f" "$f.server")"
}
log "scaling: node connect time, $SCALE_RANKS ranks"
for w in $SCALE_RANKS; do scale_connect "$w"; done
log "scaling: the floor under it (raw verbs, the same queue pairs to RTS), and safeverbs' connect step by step"
for w in $SCALE_RANKS; do scale_raw_connect "$w"; done
for w in ${SCALE_RANKS%% *} ${SCALE_RANKS##* }; do scale_connect_phases "$w"; done
log "scaling: memory per channel, 1..64 channels"
timeout 300 "$SC" --test mem -d "$SDEV" -x "$GID" --channels 1,2,4,8,16,32,64 >"$WORK/scale-mem" 2>&1
check "scaling: memory" $? "$(tail -n 2 "$WORK/scale-mem")"
sed -n 's/^result,//p' "$WORK/scale-mem" >>"$CSV"
log "scaling: message rate against peers (depth 64) and against depth (1 channel)"
for c in $SCALE_PEERS; do scale_rate peers-d64 "$c" 64; done
for d in $SCALE_DEPTHS; do scale_rate depth-c1 1 "$d"; done
log "scaling: instructions per operation at 1 and 64 peers (callgrind)"
for c in 1 64; do
    f=$WORK/cg.scale.$c
    for n in $((2 * 64)) $((4 * 64)); do
        LD_BIND_NOW=1 timeout 600 valgrind --tool=callgrind --callgrind-out-file="$f.$n" --collect-atstart=no \
            --toggle-collect='cost_*' "$SC" --test cost -d "$SDEV" -x "$GID" --channels "$c" -n "$n" --settle-us 2000 \
            >"$f.$n.log" 2>&1 || continue
        callgrind_annotate --inclusive=yes "$f.$n" >"$f.$n.incl" 2>/dev/null
        callgrind_annotate --inclusive=no --threshold=100 "$f.$n" >"$f.$n.self" 2>/dev/null
    done
    figures "scaling: callgrind, $c peers" callgrind "scale,cost,peers$c,64,sfv" 128 256 1 "$f.128" "$f.256"
done

# ---- 9. connection set-up through RDMA-CM: connect to first completed send, A-B-B-A ---------
# (build/cm_setup: safeverbs' >>rdmacm against raw librdmacm; rows test=setup in results.csv)
if [[ -x build/cm_setup ]]; then
    log "connection set-up: RDMA-CM"
    timeout 600 "${IDLE[@]}" build/cm_setup -n "$([[ -n $QUICK ]] && echo 10 || echo 40)" >"$WORK/cm_setup.out" 2>&1
    rc=$?
    sed -n 's/^result,//p' "$WORK/cm_setup.out" >>"$CSV"
    check "cm_setup (RDMA-CM connection set-up)" "$rc" "$(tail -n 2 "$WORK/cm_setup.out")"
fi

# ---- report --------------------------------------------------------------------------------
log "report"
load=${SAFEVERBS_VM_SHARE:-/nonexistent}/bench-hostload.txt
cat >"$WORK/meta.txt" <<META
date=$(date -u '+%Y-%m-%d %H:%M UTC')
host_uname=${SAFEVERBS_BENCH_HOST_UNAME:-$(uname -a)}
host_nproc=${SAFEVERBS_BENCH_HOST_NPROC:-$(nproc)}
in_vm=${SAFEVERBS_IN_VM:-0}
guest_uname=$(uname -a)
guest_nproc=$(nproc)
cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)
rdma_core=$(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null)
libibverbs=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null)
perftest=$(dpkg-query -W -f='${Version}' perftest 2>/dev/null)
ucx=$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null)
libfabric=$(dpkg-query -W -f='${Version}' libfabric1 2>/dev/null)
qperf=$(dpkg-query -W -f='${Version}' qperf 2>/dev/null)
peer_dev=$SDEV (both ends)
valgrind=$(valgrind --version 2>/dev/null)
safeverbs=$(sed -n 's/^#define SAFEVERBS_VERSION_STRING "\(.*\)"/\1/p' safeverbs.h)
commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- safeverbs.h 2>/dev/null || echo ' + uncommitted changes to safeverbs.h')
devices=$SDEV (server) <-> $CDEV (client), GID index $GID
mtu=$(ibv_devinfo -d "$SDEV" 2>/dev/null | awk '/active_mtu/ { print $2; exit }')
rate_batch=$RATE_BATCH
rate_inline=$RATE_INLINE
quick=${QUICK:-0}
$([[ ! -s $load ]] || $R hostload "$load")
failures=$failed
seconds=$((SECONDS - T_START))
stages=$(awk -v end=$((SECONDS - T_START)) '{ t[NR] = $1; $1 = ""; n[NR] = substr($0, 2) }
    END { for (i = 1; i <= NR; i++) d[n[i]] += (i < NR ? t[i + 1] : end) - t[i]
          for (i = 1; i <= NR; i++) if (!(n[i] in done)) { done[n[i]] = 1; printf "%s%s %d s", o, n[i], d[n[i]]; o = ", " } }' "$WORK/stages.txt")
META
{ echo "test,op,variant,size,impl,metric,value"; cat "$CSV"; } >"$OUT/results.csv"
$R "$OUT/results.csv" "$WORK/meta.txt" "$OUT/RESULTS.md" "$WORK"
check "bench_report" $?
command -v gnuplot >/dev/null && gnuplot -e "dir='$WORK'; out='$OUT'" bench/plot.gp
check "gnuplot (bench/plot.gp)" $?
log "done: $OUT/RESULTS.md ($failed failure(s))"
[[ $OUT == bench ]] || echo "run.sh: bench/ is read-only here; \`bash bench/run.sh\` on the host copies the results into bench/"
tally
