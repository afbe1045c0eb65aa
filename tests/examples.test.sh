#!/usr/bin/env bash
# examples.test.sh: runs each example's real scenarios on rxe0 and rxe1 (tests/run.sh runs it
# where the devices are): devices, pingpong (loopback, two processes, event mode), rc_pingpong
# against rdma-core's ibv_rc_pingpong in both roles and against itself, write_read, atomics, srq, allgather
# (2, 3 and 4 ranks, each barrier algorithm). One line per scenario ("ok   NAME" or "FAIL NAME",
# with the output of a failure), then "N passed, N failed".
# Every process runs under `timeout 60`; each two-process scenario has its own TCP port.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit
out=$TMP

result() { # NAME STATUS FILE...: count it; a failure shows the files, a success the last line
    if (($2 == 0)); then check "$1" 0 "$(tail -n 1 "$3")"; else check "$1" "$2" "$(cat "${@:3}")"; fi
}

solo() { # NAME COMMAND...
    timeout 60 "${@:2}" >"$out/solo" 2>&1
    result "$1" $? "$out/solo"
}

pair_run() { # PORT "SERVER COMMAND" "CLIENT COMMAND": the client connects to 127.0.0.1:PORT; sets crc, src
    local port=$1 server client spid
    read -ra server <<<"$2"
    read -ra client <<<"$3"
    crc=1
    timeout 60 "${server[@]}" -p "$port" >"$out/server" 2>&1 &
    spid=$!
    : >"$out/client"
    if wait_listen "$port" "$spid"; then
        timeout 60 "${client[@]}" -p "$port" 127.0.0.1 >"$out/client" 2>&1
        crc=$?
    else
        echo "the server did not listen on port $port" >"$out/client"
    fi
    ((crc == 0)) || kill "$spid" 2>/dev/null
    wait "$spid"
    src=$?
}

pair() { # NAME PORT "SERVER COMMAND" "CLIENT COMMAND" [REJECT]: both must exit 0, and neither print
    # a line matching the regex REJECT
    local name=$1 reject=${5:-} crc src
    pair_run "$2" "$3" "$4"
    ((crc == 0 && src == 0)) && { [[ -z $reject ]] || ! grep -Eq "$reject" "$out/client" "$out/server"; }
    result "$name" $? "$out/client" "$out/server"
}

pair_refused() { # NAME PORT "SERVER COMMAND" "CLIENT COMMAND" EXPECT: the server must fail, saying EXPECT
    local name=$1 crc src
    pair_run "$2" "$3" "$4"
    ((src != 0)) && grep -q "$5" "$out/server"
    result "$name" $? "$out/server" "$out/client"
}

# devices: both rxe devices, each with its IPv4 GID, and a remote descriptor.
timeout 60 build/devices >"$out/devices" 2>&1 &&
    grep -q '^rxe0: GUID' "$out/devices" && grep -q '^rxe1: GUID' "$out/devices" &&
    grep -q 'IPv4 192.0.2.1' "$out/devices" && grep -q 'remote descriptor 5352' "$out/devices" &&
    grep -q 'limits: max_qp_wr [1-9]' "$out/devices"
result "devices lists rxe0 and rxe1" $? "$out/devices"

solo "pingpong --loopback" build/pingpong -d rxe0 --loopback
pair "pingpong rxe0 <-> rxe1" 18601 "build/pingpong -d rxe0" "build/pingpong -d rxe1"
pair "pingpong rxe0 <-> rxe1, event mode (-e)" 18602 "build/pingpong -d rxe0 -e" "build/pingpong -d rxe1 -e"

port=18610
for size in 100 4096; do
    pair "rc_pingpong client vs ibv_rc_pingpong server, -s $size" $((port += 1)) \
        "ibv_rc_pingpong -d rxe0 -g 1 -s $size" "build/rc_pingpong -d rxe1 -g 1 -s $size"
    pair "rc_pingpong server vs ibv_rc_pingpong client, -s $size" $((port += 1)) \
        "build/rc_pingpong -d rxe0 -g 1 -s $size" "ibv_rc_pingpong -d rxe1 -g 1 -s $size"
done
pair "rc_pingpong vs itself" 18620 "build/rc_pingpong -d rxe0 -g 1" "build/rc_pingpong -d rxe1 -g 1"
# ibv_rc_pingpong's own options for a check of every page received (-c: it only prints a page that
# fails, hence the REJECT) and a service level (-l), on both sides, in both roles
pair "rc_pingpong client vs ibv_rc_pingpong server, -c -l 1 -s 12288" 18621 \
    "ibv_rc_pingpong -d rxe0 -g 1 -c -l 1 -s 12288 -n 200" "build/rc_pingpong -d rxe1 -g 1 -c -l 1 -s 12288 -n 200" "invalid data"
pair "rc_pingpong server vs ibv_rc_pingpong client, -c -l 1 -s 12288" 18622 \
    "build/rc_pingpong -d rxe0 -g 1 -c -l 1 -s 12288 -n 200" "ibv_rc_pingpong -d rxe1 -g 1 -c -l 1 -s 12288 -n 200" "invalid data"
# and the check checks: ibv_rc_pingpong without -c fills its pages with 0x7b, so its first message
# fails ours
pair_refused "rc_pingpong -c refuses ibv_rc_pingpong's unchecked pages" 18623 \
    "build/rc_pingpong -d rxe0 -g 1 -c -s 8192 -n 20" "ibv_rc_pingpong -d rxe1 -g 1 -s 8192 -n 20" "invalid data in page 0"

# ibv_rc_pingpong's long options (and -N, the same work requests on the wire) in both roles
pair "rc_pingpong --long options client vs ibv_rc_pingpong -N server" 18624 \
    "ibv_rc_pingpong -d rxe0 -g 1 -s 100 -n 50 -N" "build/rc_pingpong --ib-dev=rxe1 --gid-idx=1 --size=100 --iters=50 --ib-port=1 --mtu=1024 --rx-depth=64 --sl=0 --new_send"
pair "rc_pingpong --long options server vs ibv_rc_pingpong client" 18625 \
    "build/rc_pingpong --ib-dev rxe0 --gid-idx 1 --size 0x64 --iters 50 --events --chk" "ibv_rc_pingpong --ib-dev=rxe1 --gid-idx=1 --size=100 --iters=50 --events --chk" "invalid data"
# what rc_pingpong refuses, each with its reason: a number it cannot take (usage, exit 2), a verb
# safeverbs does not offer (exit 1, nothing opened), and -o where the device has no on-demand paging
# (rxe on either kernel: the registration fails, exit 1)
refused() { # NAME STATUS EXPECT COMMAND...: the command exits STATUS, saying EXPECT
    timeout 60 "${@:4}" >"$out/solo" 2>&1
    local rc=$?
    ((rc == $2)) && grep -q -- "$3" "$out/solo"
    result "$1" $? "$out/solo"
}
refused "rc_pingpong -n 1x is a usage error" 2 'want a number' build/rc_pingpong -d rxe0 -n 1x
refused "rc_pingpong --port=65536 is a usage error" 2 'want a number from 1 to 65535' build/rc_pingpong -d rxe0 --port=65536
refused "rc_pingpong -m 1000 is a usage error" 2 'an MTU is' build/rc_pingpong -d rxe0 -m 1000
refused "rc_pingpong --size=-1 is a usage error" 2 'want a number' build/rc_pingpong -d rxe0 --size=-1
refused "rc_pingpong --bogus is a usage error" 2 'usage' build/rc_pingpong -d rxe0 --bogus
for o in -t --ts -j --dm -O --iodp -P --prefetch; do
    refused "rc_pingpong $o: not offered, said" 1 'is not offered by safeverbs' build/rc_pingpong -d rxe0 "$o"
done
refused "rc_pingpong -o on rxe (no on-demand paging): the registration refused" 1 'on-demand paging, -o' build/rc_pingpong -d rxe0 -g 1 -o -p 18626 127.0.0.1

pair "write_read rxe0 <-> rxe1" 18630 "build/write_read -d rxe0" "build/write_read -d rxe1"
solo "write_read --loopback" build/write_read -d rxe0 --loopback
pair "atomics rxe0 <-> rxe1: a shared counter and a spinlock" 18635 "build/atomics -d rxe0" "build/atomics -d rxe1"
solo "atomics --loopback" build/atomics -d rxe0 --loopback
solo "srq (one SRQ, four clients)" build/srq -s rxe0 -c rxe1

ranks() { # NAME N ALGORITHM PORT: allgather with N ranks on rxe0 and rxe1 by turns, all must exit 0
    local name=$1 n=$2 algo=$3 port=$4 r ok=0 pids=()
    for ((r = 0; r < n; r++)); do
        timeout 60 build/allgather -n "$n" -r "$r" -d "rxe$((r % 2))" -a "$algo" -p "$port" >"$out/rank$r" 2>&1 &
        pids+=($!)
    done
    for r in "${!pids[@]}"; do wait "${pids[$r]}" || ok=1; done
    ((ok == 0)) && [ "$(cat "$out"/rank* | grep -c "all right")" -eq "$n" ]
    result "$name" $? "$out"/rank*
    rm -f "$out"/rank*
}
ranks "allgather, 3 ranks, tree barrier" 3 tree 18640
ranks "allgather, 4 ranks, dissemination barrier" 4 dissemination 18650
ranks "allgather, 2 ranks, central barrier" 2 central 18660

tally
