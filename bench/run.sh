#!/usr/bin/env bash
# bench/run.sh - what `make bench` runs: safeverbs against the same work on raw libibverbs
# (build/sfv_bench, both sides of every test in one program) and against perftest's binaries,
# on the same rxe devices in one run. Writes RESULTS.md, results.csv, latency.png and
# throughput.png (bench/, or the VM share when bench/ is read-only) through build/bench_report.
#
#   bash bench/run.sh            where RDMA devices are; on a host without any it boots the
#                                QEMU guest (tools/on-rxe.sh), runs there, and copies the
#                                results back into bench/
#   SFV_BENCH_QUICK=1            a shorter run (fewer sizes and iterations) to try things out
#
# Stages: latency (ping-pong, A-B-B-A, then perftest per size), throughput, message rate,
# event vs busy waiting, callgrind instruction counts, strace system-call counts.
# Results: one CSV line per figure (test,op,variant,size,impl,metric,value).
set -uo pipefail
cd "$(dirname "$0")/.."
TOP=$PWD

# ---- on a host without RDMA devices: run in the guest, then bring the results home ----------
if [[ -z ${SAFEVERBS_IN_VM:-} && -z $(ls -A /sys/class/infiniband 2>/dev/null) ]]; then
    share=$TOP/build/vm-share
    export SFV_BENCH_HOST_UNAME="$(uname -a)" SFV_BENCH_HOST_NPROC="$(nproc)" SAFEVERBS_VM_SHARE=$share
    mkdir -p "$share"
    rm -rf "$share/bench-results"
    # The host's load while the guest runs (other guests share these cores), for the report.
    load=$share/bench-hostload.txt
    : >"$load"
    (while :; do echo "$(cut -d' ' -f1 /proc/loadavg) $(pgrep -c qemu-system)" >>"$load"; sleep 5; done) &
    sampler=$!
    trap 'kill $sampler 2>/dev/null' EXIT
    bash tools/on-rxe.sh bash bench/run.sh "$@" || exit
    for f in RESULTS.md results.csv latency.png throughput.png; do
        cp "$share/bench-results/$f" bench/ || exit
    done
    echo "run.sh: results copied to bench/"
    exit 0
fi

# ---- where the devices are ---------------------------------------------------------------
SDEV=${SFV_BENCH_SERVER_DEV:-rxe0} CDEV=${SFV_BENCH_CLIENT_DEV:-rxe1} GID=${SFV_BENCH_GID:-1}
B=build/sfv_bench
[[ -x $B && -x build/bench_report ]] || { echo "run.sh: build first (make all)" >&2; exit 1; }
if [[ -w bench ]]; then
    OUT=bench WORK=build/bench-work
else # the guest sees this tree read-only; its share is the way out
    OUT=${SAFEVERBS_VM_SHARE:?}/bench-results WORK=$SAFEVERBS_VM_SHARE/bench-work
fi
mkdir -p "$OUT" "$WORK" || exit 1
rm -f "$WORK"/*
CSV=$WORK/results.csv
: >"$CSV"
T_START=$SECONDS
failures=0
QUICK=${SFV_BENCH_QUICK:-}

if [[ -n $QUICK ]]; then
    LAT_SIZES=8,512,65536 BW_SIZES=4096,1048576 TLAT=0.3 TBW=0.5 CG_N=200 ST_N=100
else
    LAT_SIZES=8,32,128,512,2048,8192,32768,65536 BW_SIZES=4096,16384,65536,262144,1048576
    TLAT=2.5 TBW=5.0 CG_N=1000 ST_N=300
fi
# In the test guest, a 1 MiB read response (1024 packets at MTU 1024) overflows the default
# receive backlog of 1000 packets; the drops stall reads in retries. The guest is ours alone.
if [[ -n ${SAFEVERBS_IN_VM:-} && -w /proc/sys/net/core/netdev_max_backlog ]]; then
    echo 16384 >/proc/sys/net/core/netdev_max_backlog
fi
RATE_BATCH=16 RATE_INLINE=64

# Every benchmark process runs under SCHED_IDLE: on 2 vCPUs, two busy-polling processes would
# otherwise keep the guest's rxe work (softirq, ksoftirqd) waiting for the 4 ms scheduler tick.
if command -v chrt >/dev/null && chrt -i 0 true 2>/dev/null; then IDLE=(chrt -i 0); else IDLE=(); fi
log() { printf '[%4ds] %s\n' $((SECONDS - T_START)) "$*"; }
source tools/listening.sh
wait_listen() { # PORT PID: up to ~20 s for the server to listen, unless it died
    local i
    for ((i = 0; i < 200; i++)); do
        listening "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

PORT=19100
# ours ARGS...: one sfv_bench pair (server on $SDEV, client on $CDEV); result lines into the CSV
ours() {
    local p=$((PORT++)) s rc
    timeout 900 "${IDLE[@]}" "$B" -d "$SDEV" -x "$GID" -p "$p" >"$WORK/ours-$p.server" 2>&1 &
    s=$!
    timeout 900 "${IDLE[@]}" "$B" -d "$CDEV" -x "$GID" -p "$p" "$@" 127.0.0.1 >"$WORK/ours-$p.client" 2>&1
    rc=$?
    wait "$s" || rc=1
    sed -n 's/^result,//p' "$WORK/ours-$p.client" >>"$CSV"
    if ((rc != 0)); then
        echo "run.sh: sfv_bench $* failed:" >&2
        tail -n 3 "$WORK/ours-$p.client" "$WORK/ours-$p.server" >&2
        failures=$((failures + 1))
    fi
}

# perftest TOOL SIZE ITERS [ARGS...]: one perftest pair; prints the client's output file
perftest() {
    local tool=$1 size=$2 n=$3 p=$((PORT++)) s f
    shift 3
    f=$WORK/$tool-$size.client
    timeout 300 "${IDLE[@]}" "$tool" -d "$SDEV" -x "$GID" -F -p "$p" -s "$size" -n "$n" "$@" >"$WORK/$tool-$size.server" 2>&1 &
    s=$!
    if wait_listen "$p" "$s"; then
        timeout 300 "${IDLE[@]}" "$tool" -d "$CDEV" -x "$GID" -F -p "$p" -s "$size" -n "$n" "$@" 127.0.0.1 >"$f" 2>&1
    fi
    wait "$s"
    echo "$f"
}
csv() { echo "$1" >>"$CSV"; } # test,op,variant,size,impl,metric,value
# the value of one figure already in the CSV (the last one)
figure() { awk -F, -v k="$1,$2,$3,$4,$5,$6" '{ if (index($0, k ",") == 1) v = $7 } END { print v }' "$CSV"; }
clamp_iters() { # ESTIMATE_SECONDS_PER_OP BUDGET MIN MAX
    awk -v e="$1" -v b="$2" -v lo="$3" -v hi="$4" 'BEGIN { n = (e > 0) ? int(b / e) : hi; if (n < lo) n = lo; if (n > hi) n = hi; print n }'
}

# ---- 1. latency: ping-pong, every size, sfv and raw alternating A-B-B-A, then perftest -------
declare -A PT_LAT=([send]=ib_send_lat [write]=ib_write_lat [read]=ib_read_lat)
for op in send write write_imm read; do
    log "latency: $op, sizes $LAT_SIZES"
    ours --test lat --op "$op" --impl both --sizes "$LAT_SIZES" --time "$TLAT" --warmup 50 --min-iters 200 --max-iters 8000 \
        --block-ms 20
    tool=${PT_LAT[$op]:-}
    [[ -n $tool ]] || continue # perftest has no write-with-immediate latency test
    for size in ${LAT_SIZES//,/ }; do
        med=$(figure lat "$op" busy "$size" raw median_us)
        rt=$(awk -v m="${med:-0}" -v op="$op" 'BEGIN { print (op == "read" ? m : 2 * m) / 1e6 }')
        n=$(clamp_iters "$rt" "$TLAT" 200 4000)
        # #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%; a second try when
        # perftest prints no figures or "inf" (it sometimes does under emulation)
        for try in 1 2; do
            f=$(perftest "$tool" "$size" "$n")
            line=$(awk -v s="$size" '$1 == s && NF >= 9 && $2 ~ /^[0-9]+$/ && $5 ~ /^[0-9.]+$/ && $8 ~ /^[0-9.]+$/ { print $5, $6, $8 }' "$f" | tail -n 1)
            [[ -n $line ]] && break
        done
        if [[ -z $line ]]; then
            echo "run.sh: $tool -s $size gave no result:" >&2; tail -n 3 "$f" >&2
            failures=$((failures + 1)); continue
        fi
        read -r typ avg p99 <<<"$line"
        csv "lat,$op,busy,$size,perftest,median_us,$typ"
        csv "lat,$op,busy,$size,perftest,p99_us,$p99"
        csv "lat,$op,busy,$size,perftest,mean_us,$avg"
        csv "lat,$op,busy,$size,perftest,iters,$n"
    done
done

# ---- 2. throughput: 128 work requests in flight ------------------------------------------
declare -A PT_BW=([send]=ib_send_bw [write]=ib_write_bw [read]=ib_read_bw)
perftest_bw() { # OP VARIANT SIZE ITERS [ARGS...]: one perftest bandwidth figure
    local op=$1 variant=$2 size=$3 n=$4 f line
    shift 4
    f=$(perftest "${PT_BW[$op]}" "$size" "$n" "$@")
    # #bytes #iterations BW_peak BW_average[MiB/s] MsgRate[Mpps]
    line=$(awk -v s="$size" '$1 == s && NF == 5 && $2 ~ /^[0-9]+$/ { print $4, $5 }' "$f" | tail -n 1)
    if [[ -z $line ]]; then
        echo "run.sh: ${PT_BW[$op]} -s $size gave no result:" >&2; tail -n 3 "$f" >&2
        failures=$((failures + 1)); return
    fi
    read -r mib mpps <<<"$line"
    csv "bw,$op,$variant,$size,perftest,mib_s,$mib"
    csv "bw,$op,$variant,$size,perftest,kmsg_s,$(awk -v m="$mpps" 'BEGIN { print m * 1000 }')"
    csv "bw,$op,$variant,$size,perftest,iters,$n"
}
for op in write read send; do
    log "throughput: $op, sizes $BW_SIZES"
    ours --test bw --op "$op" --impl both --sizes "$BW_SIZES" --time "$TBW" --warmup 64 --min-iters 16 --max-iters 100000 \
        --depth 128 --block-ms 1000 --variant stream
    for size in ${BW_SIZES//,/ }; do
        mib=$(figure bw "$op" stream "$size" raw mib_s)
        n=$(awk -v m="${mib:-0}" -v s="$size" -v t="$TBW" 'BEGIN { n = (m > 0) ? int(t * m * 1048576 / s) : 100; print (n < 16 ? 16 : n) }')
        perftest_bw "$op" stream "$size" "$n"
    done
done

# ---- 3. message rate: small sends, one per post, then batches, then batches with inline data -
# ib_send_bw runs before and after each of ours, and each of ours is compared with the mean of
# the two runs beside it, so that a slow or fast spell of the shared machine does not land on one
# side of the comparison only.
perftest_rate() { # SIZE ITERS: one ib_send_bw message rate (thousands/s) on stdout
    local f
    f=$(perftest ib_send_bw "$1" "$2")
    awk -v s="$1" '$1 == s && NF == 5 && $2 ~ /^[0-9]+$/ && $5 ~ /^[0-9.]+$/ { v = $5 * 1000 } END { if (v != "") print v }' "$f"
}
for size in 8 64; do
    log "message rate: send $size B"
    pt_n=$(awk -v t="$TBW" 'BEGIN { print int(t * 8000) }') # about TBW seconds at perftest's usual rate here
    pt_before=$(perftest_rate "$size" "$pt_n")
    for variant in post1 "batch$RATE_BATCH" "batch$RATE_BATCH-inline"; do
        case $variant in
        post1) extra=() ;;
        *-inline) extra=(--batch "$RATE_BATCH" --inline "$RATE_INLINE") ;;
        *) extra=(--batch "$RATE_BATCH") ;;
        esac
        ours --test bw --op send --impl both --sizes "$size" --time "$TBW" --warmup 512 --min-iters 512 --max-iters 200000 \
            --block-ms 250 --variant "$variant" "${extra[@]}"
        pt_after=$(perftest_rate "$size" "$pt_n")
        if [[ -n $pt_before && -n $pt_after ]]; then
            # ib_send_bw's defaults: tx depth 128, rx depth 512, CQ moderation 100, one work request per post
            csv "bw,send,$variant,$size,perftest,kmsg_s,$(awk -v a="$pt_before" -v b="$pt_after" 'BEGIN { print (a + b) / 2 }')"
            csv "bw,send,$variant,$size,perftest,kmsg_s_before,$pt_before"
            csv "bw,send,$variant,$size,perftest,kmsg_s_after,$pt_after"
            csv "bw,send,$variant,$size,perftest,iters,$pt_n"
        else
            echo "run.sh: ib_send_bw -s $size gave no result" >&2
            failures=$((failures + 1))
        fi
        pt_before=$pt_after
    done
done

# ---- 4. waiting: sleeping on the completion channel against busy polling -------------------
log "wait modes: send 8 and 512 B, SFV_WAIT_EVENT"
ours --test lat --op send --impl both --sizes 8,512 --wait event --time "$TLAT" --warmup 20 --min-iters 100 --max-iters 2000 \
    --block-ms 100

# ---- 5. instructions per operation (callgrind), loopback on one device ---------------------
# Every step of the loop (post a receive, post a send, poll the send's completion, poll the
# receive's) is a function cost_<impl>_<step>; callgrind counts only inside them. Two runs, N
# and 2N iterations: the difference over N is the cost of one iteration, start-up excluded.
callgrind_ir() { # IMPL BATCH ITERS OUTFILE: prints "step Ir" lines
    local impl=$1 batch=$2 n=$3 f=$4
    LD_BIND_NOW=1 timeout 600 valgrind --tool=callgrind --callgrind-out-file="$f" --collect-atstart=no \
        --toggle-collect='cost_*' "$B" -d "$SDEV" -x "$GID" --test cost --impl "$impl" --batch "$batch" \
        --sizes 64 -n "$n" --warmup 0 --settle-us 2000 >"$f.log" 2>&1 || { echo "failed" >&2; return 1; }
    callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
        awk '/:cost_[a-z]+_[a-z_]+ \[/ { v = $1; gsub(",", "", v)
            for (i = 2; i <= NF; i++) if ($i ~ /:cost_/) { f = $i; sub(/.*:cost_[a-z]+_/, "", f); print f, v } }'
    # the same instructions by whose code they are: the library's (safeverbs.h), the harness's
    # (sfv_bench.c), and the rest (the rxe provider, libibverbs and its inline verbs, libc)
    callgrind_annotate --inclusive=no --threshold=100 "$f" 2>/dev/null |
        awk '/file:function/ { on = 1; next } on == 1 && /^-----/ { on = 2; next } on == 2 && /^-----/ { exit }
            on == 2 && /^ *[0-9,]+ +\(/ { v = $1; gsub(",", "", v); l = $0; sub(/^[^)]*\) +/, "", l); sub(/:.*/, "", l)
                t[l ~ /safeverbs\.h$/ ? "part_lib" : l ~ /bench\/sfv_bench\.c$/ ? "part_harness" : "part_verbs"] += v }
            END { print "part_lib", t["part_lib"] + 0; print "part_harness", t["part_harness"] + 0; print "part_verbs", t["part_verbs"] + 0 }'
}
log "callgrind: instructions per post and per poll"
for batch in 1 $RATE_BATCH; do
    n1=$((CG_N / batch)) n2=$((2 * CG_N / batch))
    for impl in sfv raw; do
        declare -A ir1=() ir2=()
        callgrind_ir "$impl" "$batch" "$n1" "$WORK/cg.$impl.$batch.1" >"$WORK/cg.$impl.$batch.1.ir"
        callgrind_ir "$impl" "$batch" "$n2" "$WORK/cg.$impl.$batch.2" >"$WORK/cg.$impl.$batch.2.ir"
        while read -r step v; do ir1[$step]=$v; done <"$WORK/cg.$impl.$batch.1.ir"
        while read -r step v; do ir2[$step]=$v; done <"$WORK/cg.$impl.$batch.2.ir"
        total=0
        for step in post_recv post_send poll_send poll_recv part_lib part_harness part_verbs; do
            if [[ -z ${ir1[$step]:-} || -z ${ir2[$step]:-} ]]; then
                echo "run.sh: callgrind gave no count for $impl $step (batch $batch)" >&2
                failures=$((failures + 1)); continue
            fi
            per=$(awk -v a="${ir1[$step]}" -v b="${ir2[$step]}" -v n="$((n2 - n1))" -v k="$batch" 'BEGIN { printf "%.1f", (b - a) / n / k }')
            csv "cost,send,batch$batch,64,$impl,ir_$step,$per"
            [[ $step == part_* ]] || total=$(awk -v t="$total" -v p="$per" 'BEGIN { print t + p }')
        done
        csv "cost,send,batch$batch,64,$impl,ir_per_op,$total"
        # heap allocations in the same loop, without valgrind
        timeout 120 "$B" -d "$SDEV" -x "$GID" --test cost --impl "$impl" --batch "$batch" --sizes 64 -n "$n1" \
            --warmup 10 --settle-us 200 | sed -n 's/^result,//p' >>"$CSV"
    done
done

# ---- 6. system calls per operation (strace -c -f on the client), N and 2N iterations ------
syscalls() { # IMPL N ARGS...: total system calls of the client process
    local impl=$1 n=$2 p=$((PORT++)) s f
    shift 2
    f=$WORK/strace.$impl.$n.$p
    timeout 600 "${IDLE[@]}" "$B" -d "$SDEV" -x "$GID" -p "$p" >/dev/null 2>&1 &
    s=$!
    wait_listen "$p" "$s" || return 1 # no connection retries in the count
    timeout 600 "${IDLE[@]}" strace -c -f -o "$f" "$B" -d "$CDEV" -x "$GID" -p "$p" --impl "$impl" -n "$n" --warmup 0 "$@" 127.0.0.1 >/dev/null 2>&1
    wait "$s"
    awk '$NF == "total" { print $4 }' "$f"
}
log "strace: system calls per operation"
strace_case() { # VARIANT N ARGS...
    local variant=$1 n=$2 impl a b
    shift 2
    for impl in sfv raw; do
        a=$(syscalls "$impl" "$n" "$@") b=$(syscalls "$impl" $((2 * n)) "$@")
        if [[ -z $a || -z $b ]]; then
            echo "run.sh: strace gave no count ($variant, $impl)" >&2; failures=$((failures + 1)); continue
        fi
        csv "syscalls,send,$variant,8,$impl,syscalls_per_op,$(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.3f", (b - a) / n }')"
    done
}
strace_case lat-busy "$ST_N" --test lat --op send --sizes 8
strace_case lat-event $((ST_N / 3)) --test lat --op send --sizes 8 --wait event --echo-delay-us 2000
strace_case "rate-batch$RATE_BATCH" $((ST_N * RATE_BATCH)) --test bw --op send --sizes 8 --batch "$RATE_BATCH"

# ---- report --------------------------------------------------------------------------------
log "report"
{
    echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "host_uname=${SFV_BENCH_HOST_UNAME:-$(uname -a)}"
    echo "host_nproc=${SFV_BENCH_HOST_NPROC:-$(nproc)}"
    echo "in_vm=${SAFEVERBS_IN_VM:-0}"
    echo "guest_uname=$(uname -a)"
    echo "guest_nproc=$(nproc)"
    echo "cpu=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
    echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
    echo "rdma_core=$(dpkg-query -W -f='${Version}' rdma-core 2>/dev/null)"
    echo "libibverbs=$(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null)"
    echo "perftest=$(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
    echo "valgrind=$(valgrind --version 2>/dev/null)"
    echo "safeverbs=$(sed -n 's/^#define SAFEVERBS_VERSION_STRING "\(.*\)"/\1/p' safeverbs.h)"
    echo "commit=$(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- safeverbs.h 2>/dev/null || echo ' + uncommitted changes to safeverbs.h')"
    echo "devices=$SDEV (server) <-> $CDEV (client), GID index $GID"
    echo "mtu=$(ibv_devinfo -d "$SDEV" 2>/dev/null | awk '/active_mtu/ { print $2; exit }')"
    echo "rate_batch=$RATE_BATCH"
    echo "rate_inline=$RATE_INLINE"
    echo "quick=${QUICK:-0}"
    if [[ -s ${SAFEVERBS_VM_SHARE:-/nonexistent}/bench-hostload.txt ]]; then
        awk 'NR == 1 { lo = hi = $1 } { if ($1 < lo) lo = $1; if ($1 > hi) hi = $1; if ($2 > 1) other++ }
             END { printf "host_load=%s .. %s (1-minute load average, %d samples); another QEMU guest running in %d of them\n", lo, hi, NR, other }' \
            "$SAFEVERBS_VM_SHARE/bench-hostload.txt"
    fi
    echo "failures=$failures"
    echo "seconds=$((SECONDS - T_START))"
} >"$WORK/meta.txt"
{ echo "test,op,variant,size,impl,metric,value"; cat "$CSV"; } >"$OUT/results.csv"
build/bench_report "$OUT/results.csv" "$WORK/meta.txt" "$OUT/RESULTS.md" "$WORK" || failures=$((failures + 1))
if command -v gnuplot >/dev/null; then
    gnuplot -e "dir='$WORK'; out='$OUT'" bench/plot.gp || failures=$((failures + 1))
else
    echo "run.sh: gnuplot not found: no plots" >&2
    failures=$((failures + 1))
fi
log "done: $OUT/RESULTS.md ($failures failure(s))"
[[ $OUT == bench ]] || echo "run.sh: bench/ is read-only here; \`bash bench/run.sh\` on the host copies the results into bench/"
((failures == 0))
