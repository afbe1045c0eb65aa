#!/usr/bin/env bash
# on-rxe.sh COMMAND...: runs COMMAND where RDMA devices are. On a host that has one
# (/sys/class/infiniband is not empty; SAFEVERBS_TEST_DEVICE names the one to test), it runs
# here. Otherwise (these CI machines: the host kernel has no RDMA) it boots the QEMU guest of
# tests/vm/, which has rxe0 and rxe1 on a veth pair, and runs COMMAND there. SAFEVERBS_USE_VM=1
# forces the guest. The exit status is COMMAND's; a guest that cannot bring up rxe fails.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
if [ "${SAFEVERBS_USE_VM:-0}" != 1 ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
    echo "on-rxe: using this host's RDMA devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
    exec "$@"
fi
echo "on-rxe: this host has no RDMA device; running in a QEMU guest with rxe0 and rxe1"
exec bash "$top/tests/vm/run.sh" --timeout "${SAFEVERBS_VM_TIMEOUT:-3000}" -- "$@"
