#!/usr/bin/env bash
# rping.test.sh: examples/rping.c (build/rping) against rdma-core's rping (rdmacm-utils) in all
# four pairings (ours and theirs as server and client), at several sizes and counts, with data
# validated (-V) and each ping printed (-v, counted). The server listens on 192.0.2.1 (rxe0), the
# client connects from 192.0.2.2 (rxe1): tests/vm/run.sh's addresses. One line per scenario,
# then "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit
TMP=$(mktemp -d) || exit
out=$TMP
command -v rping >/dev/null || { echo "FAIL rdma-core's rping is missing (tools/deps.sh installs rdmacm-utils)"; exit 1; }

cm_listening() { # PORT: an RDMA-CM id listens on the port (rdma resource show cm_id)
    rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .*src-addr [0-9.]*:$1 "
}

pair() { # NAME PORT SIZE COUNT "SERVER" "CLIENT" [LISTEN]: the server listens on LISTEN (192.0.2.1)
    local name=$1 port=$2 size=$3 count=$4 listen=${7:-192.0.2.1} spid crc=1 src i
    timeout 60 $5 -s -a "$listen" -p "$port" -S "$size" -C "$count" -v -V >"$out/server" 2>&1 &
    spid=$!
    for ((i = 0; i < 100; i++)); do cm_listening "$port" && break; kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    timeout 60 $6 -c -a 192.0.2.1 -I 192.0.2.2 -p "$port" -S "$size" -C "$count" -v -V >"$out/client" 2>&1
    crc=$?
    ((crc == 0)) || kill "$spid" 2>/dev/null
    wait "$spid"
    src=$?
    # every ping printed on both sides, the client's with its validated data
    local pings spings
    pings=$(grep -c '^ping data: rdma-ping-' "$out/client")
    spings=$(grep -c '^server ping data: rdma-ping-' "$out/server")
    ((crc == 0 && src == 0 && pings == count && spings == count))
    local ok=$? detail
    detail=$(printf 'client exit %s, %s pings; server exit %s, %s pings' "$crc" "$pings" "$src" "$spings")
    ((ok == 0)) || detail+=$'\n'$(grep -v "ping data:" "$out/client" "$out/server" | tail -n 6 | cut -c1-200)
    check "$name (-S $size -C $count)" "$ok" "$detail"
}

# persistent NAME PORT COUNT CLIENTS: build/rping -s -P on every address serves CLIENTS rdma-core
# rping clients one after another (each its COUNT validated pings), then is stopped
persistent() {
    local name=$1 port=$2 count=$3 clients=$4 spid i k ok=0 pings spings=0
    timeout 120 build/rping -s -P -a 0.0.0.0 -p "$port" -C "$count" -v -V >"$out/server" 2>&1 &
    spid=$!
    for ((i = 0; i < 100; i++)); do cm_listening "$port" && break; kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    for ((k = 0; k < clients; k++)); do
        timeout 60 rping -c -a 192.0.2.1 -I 192.0.2.2 -p "$port" -C "$count" -v -V >"$out/client" 2>&1 || ok=1
        pings=$(grep -c '^ping data: rdma-ping-' "$out/client")
        ((pings == count)) || ok=1
    done
    kill -0 "$spid" 2>/dev/null || ok=1 # (still serving)
    kill "$spid" 2>/dev/null
    wait "$spid"
    spings=$(grep -c '^server ping data: rdma-ping-' "$out/server")
    ((spings == count * clients)) || ok=1
    check "$name" "$ok" "$clients clients of $count pings, the server $spings pings$( ((ok == 0)) || tail -n 4 "$out/client" "$out/server")"
}

port=7180
for sc in "64 10" "1024 50" "60000 5"; do
    read -r size count <<<"$sc"
    pair "build/rping server vs rping client" $((port += 1)) "$size" "$count" build/rping rping
    pair "rping server vs build/rping client" $((port += 1)) "$size" "$count" rping build/rping
    pair "build/rping vs build/rping" $((port += 1)) "$size" "$count" build/rping build/rping
    pair "rping vs rping (the reference)" $((port += 1)) "$size" "$count" rping rping
done
# a listener on every address: the server opens the device the request came to
pair "build/rping server on 0.0.0.0 vs rping client" $((port += 1)) 64 10 build/rping rping 0.0.0.0
persistent "build/rping -s -P on 0.0.0.0: three rping clients in turn" $((port += 1)) 5 3

tally
