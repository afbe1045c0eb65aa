#!/usr/bin/env bash
# on-rxe.sh COMMAND...: runs COMMAND where RDMA devices are. On a host that has one
# (/sys/class/infiniband is not empty; SAFEVERBS_TEST_DEVICE names the one to test), it runs
# here. Otherwise (these CI machines: the host kernel has no RDMA) it boots the QEMU guest of
# tests/vm/, which has rxe0 and rxe1 on a veth pair, and runs COMMAND there. SAFEVERBS_USE_VM=1
# forces the guest. The exit status is COMMAND's; a guest that cannot bring up rxe fails.
#
# SAFEVERBS_VM_KERNEL lists the guest kernels (default 6.1; e.g. "6.1 6.12"): COMMAND runs
# once in each, under a header line naming the kernel. With several, a recap line per kernel
# follows, then, if the runs printed "N passed, N failed" lines, their sum as the last line
# (a run that printed none, or failed with none counted, counts as one failure); the exit
# status is the first failing run's.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
source "$top/tools/lib.sh"
if [ "${SAFEVERBS_USE_VM:-0}" != 1 ] && [ -n "$(ls -A /sys/class/infiniband 2>/dev/null)" ]; then
    echo "on-rxe: using this host's RDMA devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
    exec "$@"
fi
echo "on-rxe: this host has no RDMA device; running in a QEMU guest with rxe0 and rxe1"
read -ra kernels <<<"${SAFEVERBS_VM_KERNEL:-6.1}"
# A guest that stops by itself mid-run (tests/vm/run.sh exits 123: a kernel panic or a reset, the
# kernel's last messages printed above) runs COMMAND once more from the start, saying so; the
# recap names the kernel that crashed. Failures of COMMAND itself are never run again.
TMP=$(mktemp -d)  # removed on exit (tools/lib.sh)
crashed=$TMP/crashed out=$TMP/out
: >"$crashed"
vm() {
    local rc=0
    SAFEVERBS_VM_KERNEL=$1 bash "$top/tests/vm/run.sh" --timeout "${SAFEVERBS_VM_TIMEOUT:-3000}" -- "${@:2}" || rc=$?
    ((rc == 123)) || return "$rc"
    echo "$1" >>"$crashed"  # a file: vm runs in a pipeline's subshell
    echo "on-rxe: the guest's kernel ($1) stopped in the middle of the run (see its messages above);" \
         "running the command once more on it from the start"
    SAFEVERBS_VM_KERNEL=$1 bash "$top/tests/vm/run.sh" --timeout "${SAFEVERBS_VM_TIMEOUT:-3000}" -- "${@:2}"
}
if ((${#kernels[@]} == 1)); then
    echo "======== kernel ${kernels[0]} ========"
    rc=0
    vm "${kernels[0]}" "$@" || rc=$?
    [[ -s $crashed ]] && echo "on-rxe: kernel ${kernels[0]}: its guest crashed once and the command ran again"
    exit "$rc"
fi

rc=0 sums=0 recap=()
for k in "${kernels[@]}"; do
    echo "======== kernel $k ========"
    t0=$SECONDS
    vm "$k" "$@" | tee "$out" && krc=0 || krc=${PIPESTATUS[0]}
    ((rc)) || rc=$krc
    sum_result "$out" "$krc" || :   # a run that failed counts one failure at least
    line=${RESULT_LINE:-printed no result line}
    [ -z "$RESULT_LINE" ] || sums=1
    again=''; grep -qx -- "$k" "$crashed" && again=' (its guest crashed once: run again)'
    recap+=("on-rxe: kernel $k: ${line}, exit $krc, $((SECONDS - t0)) s$again")
done
printf '%s\n' "${recap[@]}"
if ((sums)); then tally || :; fi
exit "$rc"
