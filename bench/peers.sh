# bench/peers.sh - sourced by bench/run.sh (and tests/bench_smoke.test.sh): safeverbs beside the
# other RDMA layers on the same device, both ends on one device ($SDEV, as UCX, libfabric and
# qperf are usually run), 64-byte send ping-pong:
#   sfv       build/sfv_bench --impl sfv          raw   build/sfv_bench --impl raw
#   perftest  ib_send_lat                          uct   ucx_perftest -x rc_verbs -t am_lat
#   ucp       ucx_perftest -t tag_lat (UCX_TLS=rc_verbs,ud_verbs)
#   fi        fi_pingpong -p verbs -e msg (needs rdma_ucm, and rxe's IP address)
#   qperf     qperf rc_lat -cm1 -cp1 (connected through rdma_cm, polling)
# Two measurements:
#   peers_timing ROUNDS ITERS   ROUNDS rounds, every tool once per round in an order rotated
#                               each round; CSV peers,lat,rR,SIZE,TOOL,lat_us,V
#   peers_callgrind N           each tool's client under callgrind (the server not) for N, 2N,
#                               3N and 2N again messages, counted only inside the tool's
#                               measurement loop (peer_loop_fn), less the clock reads of its
#                               waits and the loop's one-time set-up (peer_cg_count); per run
#                               that count and the calls of the provider's poll function go to
#                               `bench_report peerfit`, which fits Ir = a * messages + b * polls
#                               + c (the empty polls vary with timing; b is one poll with the
#                               tool's loop around it) and gives a + 2b (no empty poll) and the
#                               fourth run's residual: CSV peers,cg,fit,SIZE,TOOL,ir_rt|...
# A tool that is missing or fails leaves a line "peers,why,-,SIZE,TOOL" in $WORK/peers-why.txt
# (the report prints it) and is counted as a failed case.
# Needs from the caller: B R SDEV GID WORK CSV PORT, and check, figures, wait_listen.

PEER_SIZE=64 PEER_TIMEOUT=60
# Every tool runs as it would by default (no SCHED_IDLE, unlike the other stages): under
# SCHED_IDLE fi_pingpong's round trip took 16x longer here (5.7 ms against 0.36 ms).
PEER_IDLE=()
PEER_TOOLS="sfv raw perftest uct ucp fi qperf"
PEER_SFV_ARGS=() PEER_PT_ARGS=() # more arguments for sfv_bench's client and ib_send_lat (peers_callgrind)
# Counted from outside (peers_callgrind): safeverbs and the tools of the signalled-path target.
# UCX's and libfabric's small-message paths are counted in make bench's stage 5 instead, by
# loops of their own (bench/uct_cost.c, bench/fi_cost.c) that repeat exactly.
PEER_CG_TOOLS="sfv raw perftest qperf" # raw: the same loop on libibverbs alone, the floor of any layer on it
# rxe's IP address (fi_pingpong and qperf connect through rdma_cm to it)
peer_ip() {
    local nd
    nd=$(cat "/sys/class/infiniband/$SDEV/ports/1/gid_attrs/ndevs/$GID" 2>/dev/null) || return 1
    ip -4 -o addr show dev "$nd" 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }'
}
peer_bin() {
    case $1 in sfv | raw) echo "$B" ;; perftest) echo ib_send_lat ;; uct | ucp) echo ucx_perftest ;; fi) echo fi_pingpong ;;
    qperf) echo qperf ;; esac
}
# peer_cmd TOOL N PORT server|client: the command line (an array PEER_CMD), env in PEER_ENV
peer_cmd() {
    local t=$1 n=$2 p=$3 side=$4 ip
    PEER_ENV=(UCX_NET_DEVICES="$SDEV:1" UCX_IB_GID_INDEX="$GID")
    case $t in
    sfv | raw)
        PEER_CMD=("$B" -d "$SDEV" -x "$GID" -p "$p")
        [[ $side == server ]] ||
            PEER_CMD+=(--test lat --op send --impl "$t" --sizes "$PEER_SIZE" -n "$n" --warmup 20 --rounds 1 "${PEER_SFV_ARGS[@]}" 127.0.0.1) ;;
    perftest)
        PEER_CMD=(ib_send_lat -d "$SDEV" -x "$GID" -F -p "$p" -s "$PEER_SIZE" -n "$n" "${PEER_PT_ARGS[@]}")
        [[ $side == server ]] || PEER_CMD+=(127.0.0.1) ;;
    uct)
        PEER_CMD=(ucx_perftest -d "$SDEV:1" -x rc_verbs -t am_lat -s "$PEER_SIZE" -n "$n" -p "$p")
        [[ $side == server ]] || PEER_CMD+=(127.0.0.1) ;;
    ucp)
        PEER_ENV+=(UCX_TLS=rc_verbs,ud_verbs)
        PEER_CMD=(ucx_perftest -t tag_lat -s "$PEER_SIZE" -n "$n" -p "$p")
        [[ $side == server ]] || PEER_CMD+=(127.0.0.1) ;;
    fi)
        ip=$(peer_ip) || ip=
        PEER_CMD=(fi_pingpong -p verbs -e msg -d "$SDEV" -S "$PEER_SIZE" -I "$n")
        if [[ $side == server ]]; then PEER_CMD+=(-B "$p"); else PEER_CMD+=(-P "$p" "$ip"); fi ;;
    qperf)
        ip=$(peer_ip) || ip=
        PEER_CMD=(qperf -lp "$p")
        # qperf's -n (a count of messages) never ends here: it runs for N seconds instead, and
        # says how many messages it sent (-vv: loc_send_msgs)
        [[ $side == server ]] || PEER_CMD+=(-vv -cm1 -cp1 -m "$PEER_SIZE" -t "$n" "$ip" rc_lat) ;;
    esac
}
# peer_pair TOOL N OUT [WRAP...]: one server/client pair; the client's output in OUT (the
# server's in OUT.server); WRAP (valgrind ...) goes before the client only. Status: the client's.
peer_pair() {
    local t=$1 n=$2 out=$3 p=$((PORT++)) s rc
    shift 3
    peer_cmd "$t" "$n" "$p" server
    # qperf's server serves one client then keeps listening: it is killed below
    env "${PEER_ENV[@]}" timeout $((PEER_TIMEOUT + 30)) "${PEER_IDLE[@]}" "${PEER_CMD[@]}" >"$out.server" 2>&1 &
    s=$!
    if ! wait_listen "$p" "$s" 30; then
        kill "$s" 2>/dev/null; wait "$s" 2>/dev/null
        echo "the server did not listen on port $p: $(tail -n 2 "$out.server" | tr '\n' ' ')" >"$out"
        return 1
    fi
    peer_cmd "$t" "$n" "$p" client
    env "${PEER_ENV[@]}" timeout "$PEER_TIMEOUT" "${PEER_IDLE[@]}" "$@" "${PEER_CMD[@]}" >"$out" 2>&1
    rc=$?
    # a failed client leaves its server waiting; qperf's server never ends on its own
    if ((rc)) || [[ $t == qperf ]]; then kill "$s" 2>/dev/null; wait "$s" 2>/dev/null; else wait "$s" || rc=$?; fi
    return "$rc"
}
# peer_latency TOOL FILE: the client's mean latency (microseconds, half the round trip as every
# one of these tools reports it). Means, as fi_pingpong and qperf give nothing else; UCX's
# "50.0%ile" is not a median of the run here (12 us where the run took 680 us per half round
# trip by the wall clock): its "overall" average is.
peer_latency() {
    case $1 in
    sfv | raw) awk -F, -v t="$1" '$1 == "result" && $6 == t && $7 == "mean_us" { v = $8 } END { if (v == "") exit 1; print v }' "$2" ;;
    perftest) awk '$1 ~ /^[0-9]+$/ && NF >= 7 { v = $6 } END { if (v == "") exit 1; print v }' "$2" ;; # t_avg
    uct | ucp) awk '$1 == "Final:" { v = $5 } END { if (v == "") exit 1; print v }' "$2" ;;              # overall
    fi) awk '$1 ~ /^[0-9]+$/ && $3 ~ /^=/ { v = $7 } END { if (v == "") exit 1; print v }' "$2" ;;         # usec/xfer
    qperf) awk '$1 == "latency" { v = $3; if ($4 == "ms") v *= 1000; if ($4 == "ns") v /= 1000 }
                END { if (v == "") exit 1; print v }' "$2" ;;
    esac
}
peer_why() { # TOOL TEXT: why a tool gave no figure (kept for the report, one line)
    printf '%s,%s\n' "$1" "$(printf '%s' "$2" | tr '\n,' '  ' | cut -c1-300)" >>"$WORK/peers-why.txt"
}
peer_usable() { # TOOL: installed, and its earlier failure not recorded
    command -v "$(peer_bin "$1")" >/dev/null || { grep -q "^$1," "$WORK/peers-why.txt" 2>/dev/null ||
        peer_why "$1" "$(peer_bin "$1") is not installed (tools/deps.sh installs it)"; return 1; }
    ! grep -q "^$1," "$WORK/peers-why.txt" 2>/dev/null
}

peers_timing() { # ROUNDS ITERS
    local rounds=$1 n=$2 r i t v f tools
    read -ra tools <<<"$PEER_TOOLS"
    for ((r = 1; r <= rounds; r++)); do
        for ((i = 0; i < ${#tools[@]}; i++)); do
            t=${tools[(i + r - 1) % ${#tools[@]}]}
            peer_usable "$t" || continue
            f=$WORK/peer-lat-$t-$r
            if peer_pair "$t" "$([[ $t == qperf ]] && echo 1 || echo "$n")" "$f" && v=$(peer_latency "$t" "$f"); then
                echo "peers,lat,r$r,$PEER_SIZE,$t,lat_us,$v" >>"$CSV"
                check "peers: $t latency, round $r" 0
            else
                peer_why "$t" "latency run failed: $( (grep -h -m 2 -E 'ERROR|rror|Assert|failed' "$f" "$f.server" || tail -n 2 "$f") | cut -c1-200)"
                # a peer that cannot run here is recorded (RESULTS.md says why) and left out of the
                # rounds; safeverbs' or the raw loop's failure is a failure of the bench
                if [[ $t == sfv || $t == raw ]]; then check "peers: $t latency, round $r" 1 "$(tail -n 3 "$f")"
                else echo "skip peers: $t (cannot run here: $(tail -n 1 "$WORK/peers-why.txt" | cut -d, -f2- | cut -c1-160))"; fi
            fi
        done
    done
}

# The provider's poll function (librxe's, not exported): the callee of ibv_poll_cq in the
# cost test's raw loop (stage 5's callgrind run of raw_wait), or the first argument.
peer_poll_fn() {
    local f
    f=${1:-$(ls "$WORK"/cg.raw.1.[0-9]* 2>/dev/null | grep -E '\.[0-9]+$' | head -n 1)}
    [[ -n $f ]] || return 1
    callgrind_annotate --tree=calling --inclusive=yes "$f" 2>/dev/null |
        awk '/\*  / && index($0, "verbs.h:raw_wait") { on = 1; next }
             on && />/ && fn == "" { for (i = 1; i <= NF; i++) if ($i ~ /^\?\?\?:0x/) fn = $i } /^ *$/ { on = 0 }
             END { if (fn == "") exit 1; print fn }'
}
# The tool's measurement loop, the only code counted (callgrind --toggle-collect): safeverbs'
# ping-pong in sfv_bench (lib_lat), and in Debian's stripped binaries (no symbols: callgrind names
# a function by its offset in the object) the function that posts and polls: ib_send_lat's
# latency loop (perftest 4.5+0.17-1: the caller of the provider's post_send and poll functions,
# run_iter_lat_send in perftest's sources) and qperf's rc_lat client (0.4.11: the function that
# calls its poll wrapper and its two post functions once per message; its rdma_cm set-up runs in
# it too, in callees called once, which peer_cg_count leaves out). Another build of a tool has
# other offsets: peers_callgrind then finds no poll calls in the loop and says so.
peer_loop_fn() {
    case $1 in sfv | raw) echo "${1/sfv/lib}_lat" ;; perftest) echo 0x0000000000023100 ;; qperf) echo 0x00000000000131e0 ;; esac
}
# peer_cg_count TREE FN LOOP: "S POLLS TICKS" from `callgrind_annotate --tree=calling --inclusive=yes
# --threshold=100` of a run collected inside LOOP only. S: the collected instructions less (1)
# the clock reads made while waiting (gettimeofday, clock_gettime and safeverbs' deadline check
# sfv__wait_tick, which runs only after 64 empty polls) and (2) the loop function's callees
# called fewer than 16 times, with all they call (set-up inside the loop function, the same in
# every run of at least 64 round trips: ib_send_lat's loop measures the CPU clock, get_cpu_mhz,
# by spinning on gettimeofday for a while; sfv_bench's waits for its peer's start byte). POLLS:
# calls of FN. TICKS: the calls left out by (1): their call sites stay in S, a few instructions
# each, and in safeverbs' wait they come every 64 empty polls of each wait, not a fixed share of
# all polls, so peerfit takes them as a term of their own.
peer_cg_count() {
    awk -v fn="$2" -v loop="$3" '
        function num(s) { gsub(/,/, "", s); return s + 0 }
        function key(s) { sub(/^ *[0-9,]+ \([ 0-9.]+%\) +[*>] +/, "", s); sub(/ \([0-9,]+x\)/, "", s); return s }
        function clk(s) { return s ~ /gettimeofday|clock_gettime|sfv__wait_tick/ }
        /^ *[0-9,]+ .*PROGRAM TOTALS/ { total = num($1) }
        /\*  / { cur = key($0); next }
        /^ *$/ { cur = ""; next }
        />  / && cur != "" {
            c = $0; sub(/.*\(/, "", c); sub(/x\).*/, "", c); c = num(c)
            e++; from[e] = cur; to[e] = key($0); ir[e] = num($1); nc[e] = c
            if (index($0, fn " (")) polls += c
        }
        END {
            # (2): the loop function'"'"'s callees called fewer than 16 times, and all below them
            for (i = 1; i <= e; i++)
                if (index(from[i], ":" loop " ") && !index(to[i], fn " ") && nc[i] < 16) { skip += ir[i]; below[to[i]] = 1 }
            for (more = 1; more;) {
                more = 0
                for (i = 1; i <= e; i++) if ((from[i] in below) && !(to[i] in below)) { below[to[i]] = 1; more = 1 }
            }
            # (1): clock reads outside those
            for (i = 1; i <= e; i++) if (clk(to[i]) && !clk(from[i]) && !(from[i] in below)) { skip += ir[i]; ticks += nc[i] }
            printf "%d %d %d\n", total - skip, polls, ticks
        }' "$1"
}
peers_callgrind() { # N
    local n1=$1 t k n f fn loop cnt polls lines run=0
    fn=$(peer_poll_fn) || true
    if [[ -z $fn ]]; then # no callgrind run of the cost test yet: a short one
        LD_BIND_NOW=1 timeout 300 valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.raw.poll" --collect-atstart=no \
            --toggle-collect='cost_*' "$B" -d "$SDEV" -x "$GID" --test cost --impl raw -n 20 --warmup 0 --settle-us 200 \
            >/dev/null 2>&1
        fn=$(peer_poll_fn "$WORK/cg.raw.poll") || true
    fi
    if [[ -z $fn ]]; then
        check "peers: callgrind (the provider's poll function)" 1 "not found in the cost test's callgrind run of raw_wait"
        return
    fi
    fn=${fn#'???:'}
    # sfv_bench's server pauses 1 ms before each echo here: the send's completion then always comes
    # back well before the reply, and each takes its own poll call, as in ib_send_lat, which polls
    # one completion per call. Without it, safeverbs' drain (up to 16 completions a call) takes
    # both in one call in some round trips and in two in others, as timing falls. The pause is the
    # server's; the client's counted work is the same. Queues of 16 (sfv_bench's defaults: 128
    # sends, 512 receives): the cost of a post or a completion varies a little with its place in
    # the rings (rxe's, safeverbs' and sfv_bench's), so counts are linear in N only over whole
    # turns of every ring; with these queues every ring turns within 64 round trips, and N is a
    # multiple of 64 (bench/run.sh: PEER_CG_N).
    # ib_send_lat gets a receive queue of 16 too (-r; its default is 512): it posts its receive
    # queue full before its loop and posts a receive again in the loop only while more messages
    # remain than the queue holds, so with 512 a run of up to 512 round trips would count no
    # receive posted at all.
    local PEER_TIMEOUT=300 PEER_SFV_ARGS=(--echo-delay-us 1000 --depth 16 --rx-depth 16) PEER_PT_ARGS=(-r 16)
    for t in $PEER_CG_TOOLS; do
        peer_usable "$t" || continue
        lines= loop=$(peer_loop_fn "$t")
        # runs of N, 2N, 3N, 2N, 3N round trips: one more than the unknowns of the fit (a, b, c, and
        # t where there are ticks), so the last checks it
        for k in 1 2 3 2 3; do
            n=$((k * n1)) f=$WORK/peer-cg-$t-$((++run))
            [[ $t != qperf ]] || n=$((k * 2)) # seconds
            if ! peer_pair "$t" "$n" "$f.log" env LD_BIND_NOW=1 valgrind --tool=callgrind --callgrind-out-file="$f" \
                --trace-children=no --collect-atstart=no --toggle-collect="$loop"; then
                continue
            fi
            [[ $t != qperf ]] || n=$(awk '$1 == "loc_send_msgs" { gsub(/,/, "", $3); print $3 }' "$f.log")
            callgrind_annotate --tree=calling --inclusive=yes --threshold=100 "$f" >"$f.tree" 2>/dev/null
            cnt=$(peer_cg_count "$f.tree" "$fn" "$loop")
            read -r _ polls _ <<<"$cnt"
            if [[ $polls == 0 ]]; then # nothing polled inside the loop: not the loop function of this build
                peer_why "$t" "callgrind: no call of the provider's poll function ($fn) inside $loop, the loop function of the build these offsets were read from; this build has another"
                break
            fi
            lines+="$n $cnt"$'\n'
        done
        printf '%s' "$lines" >"$WORK/peer-cg-$t.runs"
        figures "peers: $t instructions per message (callgrind)" peerfit "peers,cg,fit,$PEER_SIZE,$t" "$WORK/peer-cg-$t.runs"
    done
}
