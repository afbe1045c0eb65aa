#!/usr/bin/env bash
# demo.sh [SERVER_DEV CLIENT_DEV]: what `make demo` runs where the RDMA devices are: the devices
# example (devices, ports, GIDs, keys), then the pingpong
# example in two processes, server on rxe0 and client on rxe1, 1000 round trips over TCP-swapped
# endpoints; prints the latency. Fails if either side failed.
set -uo pipefail
cd "$(dirname "$0")/.."
sdev=${1:-rxe0} cdev=${2:-rxe1} port=18515

source tools/listening.sh

build/devices || exit 1
echo
echo "pingpong: server on $sdev, client on $cdev, 1000 round trips"
timeout 60 build/pingpong -d "$sdev" -p "$port" -n 1000 &
server=$!
trap 'kill "$server" 2>/dev/null' EXIT
for ((i = 0; i < 100; i++)); do # up to ~10 s for the server to listen; stop if it died
    if listening "$port" || ! kill -0 "$server" 2>/dev/null; then break; fi
    sleep 0.1
done
timeout 60 build/pingpong -d "$cdev" -p "$port" -n 1000 127.0.0.1
client=$?
((client == 0)) || kill "$server" 2>/dev/null
wait "$server"
server_rc=$?
((client == 0 && server_rc == 0)) || { echo "demo failed: client exit $client, server exit $server_rc" >&2; exit 1; }
