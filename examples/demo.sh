#!/usr/bin/env bash
# demo.sh [SERVER_DEV CLIENT_DEV]: what `make demo` runs where the RDMA devices are: the devices
# example (devices, ports, GIDs, keys), then the pingpong example in two processes, server on
# rxe0 and client on rxe1, 1000 round trips over TCP-swapped endpoints; prints the latency.
# Ends with "N passed, N failed"; fails if either example failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit
source tools/lib.sh || exit # its EXIT trap stops a server left running
sdev=${1:-rxe0} cdev=${2:-rxe1} port=18515

build/devices
check "devices" $?
echo
echo "pingpong: server on $sdev, client on $cdev, 1000 round trips"
timeout 60 build/pingpong -d "$sdev" -p "$port" -n 1000 &
server=$!
wait_listen "$port" "$server"
timeout 60 build/pingpong -d "$cdev" -p "$port" -n 1000 127.0.0.1
client=$?
((client == 0)) || kill "$server" 2>/dev/null
wait "$server"
server_rc=$?
if ((client == 0 && server_rc == 0)); then
    check "pingpong $sdev <-> $cdev" 0
else
    check "pingpong $sdev <-> $cdev" 1 "client exit $client, server exit $server_rc"
fi
echo "(the guest's NIC and kernel are emulated: only ratios within one run mean anything, and a"
echo " tail many times the median is the emulation's scheduling noise, not the library's)"
tally
