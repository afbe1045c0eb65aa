#!/bin/bash
# tests/vm/run.sh - run a command as root inside a QEMU guest kernel that has Soft-RoCE.
#
#   tests/vm/run.sh [--timeout SECS] -- COMMAND [ARG...]
#
# The guest (kernel and initramfs from tests/vm/prepare.sh) mounts this machine's root
# read-only over 9p and chroots into it, so COMMAND runs the host's binaries. Before it runs,
# the guest has rxe0 on veth end sva (192.0.2.1/24) and rxe1 on svb (192.0.2.2/24), both ports
# ACTIVE with the IPv4 GID at index 1, and lo up. Both addresses are local, so the kernel
# would route between them through lo and rxe could not connect them: policy routing sends
# each address's traffic to the other out of its own veth end. One word is run with
# `sh -c WORD`; several are run as they are.
# COMMAND runs in the caller's directory (same path in the guest), stdin /dev/null, with
# PATH, HOME=/tmp, SAFEVERBS_IN_VM=1, SAFEVERBS_VM_SHARE and the host's SAFEVERBS_*
# variables. Its stdout+stderr arrive here live, from the guest's serial console. The guest
# has its own tmpfs on /tmp and /run: the checkout, the caller's directory and the kernel,
# when they are under /tmp or /run, are exported read-only and mounted at their paths.
#
# Environment: SAFEVERBS_VM_KERNEL kernel series to boot: 6.1 (default) or 6.12 (prepare.sh)
#              SAFEVERBS_VM_SHARE  host directory the guest can write, mounted at the same
#                                  path (default $PWD/build/vm-share; created)
#              SAFEVERBS_VM_CACHE  kernel cache (see prepare.sh)
#              SAFEVERBS_VM_ACCEL  QEMU accelerator (default tcg,thread=multi; this host's
#                                  KVM is nested "kvm-pvm" and hangs the guest)
#              SAFEVERBS_VM_VERBOSE=1  print boot and run times on stderr
#              SAFEVERBS_VM_KEEP=1     keep the job directory (.job.*) in the share
# Exit status: COMMAND's; 124 if --timeout (default 1800 s) expired and QEMU was killed;
#              125 if the guest did not boot or could not set up rxe (the reason is printed);
#              2 for a usage error.
set -uo pipefail

# ---------------------------------------------------------------- guest side
# "run.sh --in-guest JOBDIR" is what the initramfs /init runs, chrooted into the host root.
guest_fail() {  # $1 = failed step; the step's output is in $JOB/setup.log
    { echo "guest setup failed: $1"; cat "$JOB/setup.log"; dmesg -l err,warn | tail -n 5; } >&2
    echo "$1" > "$JOB/setup-error"
    exit 1
}
step() {  # run "$@" as setup step $1, logging guest uptime and output to $JOB/setup.log
    local what=$1 up; shift; read -r up _ </proc/uptime
    echo "[$up] $what" >>"$JOB/setup.log"
    "$@" >>"$JOB/setup.log" 2>&1 || guest_fail "$what"
}
mp() { modprobe -d "$KDIR" -S "$KVER" "$@"; }
port_ready() {  # rxe device $1: port ACTIVE and a non-zero GID at index 1
    local p=/sys/class/infiniband/$1/ports/1 st gid
    read -r st <"$p/state" && read -r gid <"$p/gids/1" &&
        [[ $st == *ACTIVE* && $gid != 0000:0000:0000:0000:0000:0000:0000:0000 ]]
} 2>/dev/null
sysctls() {  # each address must reach the other out of its own veth end, not via lo
    local c
    for c in all sva svb; do
        echo 1 >/proc/sys/net/ipv4/conf/"$c"/accept_local && echo 0 >/proc/sys/net/ipv4/conf/"$c"/rp_filter || return
        # a test that takes sva down and up again must not lose its IPv6 addresses (the default)
        echo 1 >/proc/sys/net/ipv6/conf/"$c"/keep_addr_on_down || return
    done
}
# Every exec of a host binary over 9p costs ~50-150 ms under TCG, so setup batches its
# commands: one modprobe, one ip -batch, one rdma -b. Fixed MACs and permanent neighbours: the
# RDMA-CM's address resolution (rdma_resolve_addr) does not see the first ARP answer between two
# local addresses, and would wait out its timeout on the first connection.
NET='link set lo up
link add sva address 02:00:c0:00:02:01 type veth peer name svb address 02:00:c0:00:02:02
addr add 192.0.2.1/24 dev sva
addr add 192.0.2.2/24 dev svb
link set sva up
link set svb up
rule add pref 100 lookup local
rule del pref 0
rule add pref 10 iif lo from 192.0.2.1 to 192.0.2.2 lookup 101
route add 192.0.2.2 dev sva src 192.0.2.1 table 101
rule add pref 11 iif lo from 192.0.2.2 to 192.0.2.1 lookup 102
route add 192.0.2.1 dev svb src 192.0.2.2 table 102
neigh replace 192.0.2.2 lladdr 02:00:c0:00:02:02 dev sva nud permanent
neigh replace 192.0.2.1 lladdr 02:00:c0:00:02:01 dev svb nud permanent'
# IPv6 link-local (RDMA-CM tests, rping): fe80::1 on sva, fe80::2 on svb, routed like the IPv4 pair.
NET6='addr add fe80::1/64 dev sva nodad
addr add fe80::2/64 dev svb nodad
rule add pref 100 lookup local
rule del pref 0
rule add pref 10 iif lo from fe80::1 to fe80::2 lookup 101
route add fe80::2 dev sva src fe80::1 table 101
rule add pref 11 iif lo from fe80::2 to fe80::1 lookup 102
route add fe80::1 dev svb src fe80::2 table 102
neigh replace fe80::2 lladdr 02:00:c0:00:02:02 dev sva nud permanent
neigh replace fe80::1 lladdr 02:00:c0:00:02:01 dev svb nud permanent'
RXE='link add rxe0 type rxe netdev sva
link add rxe1 type rxe netdev svb'
in_guest() {
    JOB=$1
    export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    . "$JOB/job.env"    # KDIR KVER GUEST_CWD GUEST_ENV=() GUEST_CMD=() (written below)
    : > "$JOB/setup.log"
    ulimit -l unlimited
    # rxe needs crc32 from the crypto API; the guest cannot auto-load it from the kernel's
    # unpacked module tree, so "rdma link add" would fail with ENOENT without it.
    step "load modules crc32_generic veth ib_core ib_uverbs rdma_rxe rdma_ucm" \
        mp -a crc32_generic veth ib_core ib_uverbs rdma_rxe rdma_ucm   # rdma_ucm: RDMA-CM (>>rdmacm, rping)
    mp -q crc32_pclmul 2>/dev/null || true   # optional: faster crc32, needs PCLMULQDQ
    step "network: lo, veth sva/svb, 192.0.2.1-2/24, policy routing (ip -batch)" ip -batch - <<<"$NET"
    step "sysctls accept_local=1 rp_filter=0 keep_addr_on_down=1" sysctls
    step "network: IPv6 link-local fe80::1-2, policy routing (ip -6 -batch)" ip -6 -batch - <<<"$NET6"
    step "rdma link add rxe0 on sva, rxe1 on svb (rdma -b)" rdma -b - <<<"$RXE"
    local deadline=$((SECONDS + 30))
    until port_ready rxe0 && port_ready rxe1 || ((SECONDS > deadline)); do sleep 0.1; done
    port_ready rxe0 && port_ready rxe1 || { grep -s . /sys/class/infiniband/rxe*/ports/1/{state,gids/1} \
        >>"$JOB/setup.log"; guest_fail "wait 30 s for rxe0/rxe1: port ACTIVE and GID index 1"; }
    cd "$GUEST_CWD" 2>>"$JOB/setup.log" || guest_fail "cd $GUEST_CWD"

    read -r up _ < /proc/uptime
    echo "$up" > "$JOB/ready-uptime"
    echo "@@SFV-READY@@"
    env -i PATH="$PATH" HOME=/tmp SAFEVERBS_IN_VM=1 "${GUEST_ENV[@]}" "${GUEST_CMD[@]}" </dev/null
    echo $? > "$JOB/status"
}
if [[ ${1:-} == --in-guest ]]; then in_guest "$2"; exit; fi

# ---------------------------------------------------------------- host side
die() { echo "run.sh: $1" >&2; exit "${2:-125}"; }
usage() { die "usage: $0 [--timeout SECS] -- COMMAND [ARG...]" 2; }
TIMEOUT=1800
while (($#)); do
    case $1 in
        --timeout) [[ ${2:-} =~ ^[0-9]+$ ]] || usage; TIMEOUT=$2; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
    esac
done
(($#)) || usage
((TIMEOUT > 0)) || usage
T0=$EPOCHREALTIME

HERE=$(dirname "$(readlink -f "$0")")
SERIES=${SAFEVERBS_VM_KERNEL:-6.1}
KDIR=$(bash "$HERE/prepare.sh" "$SERIES") || die "tests/vm/prepare.sh $SERIES failed"
KVER=$(basename "$KDIR")
echo "run.sh: booting Linux $KVER (SAFEVERBS_VM_KERNEL=$SERIES) under QEMU" >&2
# The guest mounts its own tmpfs on /tmp and /run, hiding the host's: what it needs from
# there is exported (each directory once, a parent before what is inside it).
EXPORTS=()
while IFS= read -r d; do
    case $d/ in /tmp/* | /run/*) ;; *) continue ;; esac
    for e in "${EXPORTS[@]}"; do [[ $d/ == "$e"/* ]] && continue 2; done
    EXPORTS+=("$d")
done < <(readlink -f "$HERE/../.." "$PWD" "$KDIR" | sort -u)
SHARE=${SAFEVERBS_VM_SHARE:-$PWD/build/vm-share}
mkdir -p "$SHARE" && SHARE=$(readlink -f "$SHARE") || die "cannot create $SHARE"
JOB=$(mktemp -d "$SHARE/.job.XXXXXX") || die "cannot write to $SHARE"
QPID=
cleanup() {
    [[ -n $QPID ]] && kill "$QPID" 2>/dev/null
    [[ -n ${SAFEVERBS_VM_KEEP:-} ]] || rm -rf "$JOB"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Everything the guest needs travels as files in the share; the kernel command line only
# names the job. boot.env is read by busybox sh, job.env by bash (printf %q).
fsdev() { echo "local,id=$1,path=${2//,/,,},security_model=none,multidevs=remap$3"; }
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }
XLIST='' XDEV=()
for i in "${!EXPORTS[@]}"; do
    XLIST+="sfvx$i ${EXPORTS[i]}"$'\n'
    XDEV+=(-fsdev "$(fsdev "x$i" "${EXPORTS[i]}" ,readonly=on)" -device "virtio-9p-pci,fsdev=x$i,mount_tag=sfvx$i")
done
printf 'SHARE=%s\nRUNSH=%s\nEXPORTS=%s\n' "$(sq "$SHARE")" "$(sq "$HERE/run.sh")" "$(sq "$XLIST")" > "$JOB/boot.env"
(($# == 1)) && set -- sh -c "$1"
{
    printf 'KDIR=%q KVER=%q GUEST_CWD=%q\nGUEST_ENV=(' "$KDIR" "$KVER" "$PWD"
    printf ' %q' "SAFEVERBS_VM_SHARE=$SHARE"
    for v in $(compgen -e); do
        [[ $v =~ ^SAFEVERBS_ && $v != SAFEVERBS_VM_SHARE ]] && printf ' %q' "$v=${!v}"
    done
    printf ' )\nGUEST_CMD=('; printf ' %q' "$@"; printf ' )\n'
} > "$JOB/job.env"

# prepare.sh leaves an uncompressed vmlinux (PVH boot) when it can: ~6 s faster under TCG;
# qboot is a quicker and quieter firmware than SeaBIOS.
KERNEL=$KDIR/vmlinux; [[ -s $KERNEL ]] || KERNEL=$KDIR/boot/vmlinuz-$KVER
BIOS=/usr/share/qemu/qboot.rom; [[ -f $BIOS ]] && BIOS=(-bios "$BIOS") || BIOS=()
exec 3< <(exec timeout -k 5 "$TIMEOUT" qemu-system-x86_64 "${BIOS[@]}" \
    -accel "${SAFEVERBS_VM_ACCEL:-tcg,thread=multi}" -cpu max -m 2048 -smp 2 \
    -nographic -no-reboot -nic none -serial mon:stdio -serial "file:$JOB/kernel.log" \
    -kernel "$KERNEL" -initrd "$KDIR/initramfs.cpio.gz" \
    -append "console=ttyS1 loglevel=7 panic=-1 sfv.job=$(basename "$JOB")" \
    -fsdev "$(fsdev r / ,readonly=on)" -device virtio-9p-pci,fsdev=r,mount_tag=hostroot \
    -fsdev "$(fsdev s "$SHARE" "")" -device virtio-9p-pci,fsdev=s,mount_tag=sfvshare "${XDEV[@]}" \
    </dev/null 2>&1)
QPID=$!

# Console: firmware noise before the init's marker is kept back (shown only if the guest
# never got that far); the ready marker is dropped; everything else goes out live.
booted='' pre='' TREADY=''
while IFS= read -r line <&3 || [[ -n $line ]]; do
    line=${line%$'\r'}
    if [[ -z $booted ]]; then
        [[ $line == *@@SFV-INIT@@* ]] && booted=1 || pre+=$line$'\n'
    elif [[ $line == @@SFV-READY@@ ]]; then
        TREADY=$EPOCHREALTIME
    else
        printf '%s\n' "$line"
    fi
done
wait "$QPID"; qrc=$?
QPID=

if [[ -n ${SAFEVERBS_VM_VERBOSE:-} ]]; then
    t() { awk -v a="$1" -v b="$T0" 'BEGIN { printf "%.1f", a - b }'; }
    echo "run.sh: kernel $KVER; command started at +$( [[ -n $TREADY ]] && t "$TREADY" || echo -)s" \
         "(guest uptime $(cat "$JOB/ready-uptime" 2>/dev/null || echo -)s), run total $(t "$EPOCHREALTIME")s" >&2
fi
[[ -f $JOB/status ]] && exit "$(cat "$JOB/status")"
[[ -n $booted ]] || printf 'run.sh: the guest never reached its init; console said:\n%s' "$pre" >&2
((qrc == 124 || qrc == 137)) && die "guest timed out after $TIMEOUT s; QEMU killed" 124
[[ -f $JOB/setup-error ]] && die "guest setup failed at step: $(cat "$JOB/setup-error")"
if [[ -s $JOB/kernel.log ]]; then
    echo "run.sh: the guest kernel's last messages (console ttyS1):" >&2
    # from the first sign of trouble when there is one (an oops's head comes before its trace)
    first=$(grep -n -m1 -E 'BUG:|Oops|general protection|Kernel panic|WARNING:|Out of memory' "$JOB/kernel.log" | cut -d: -f1)
    if [[ -n $first ]]; then sed -n "$((first > 5 ? first - 5 : 1)),$((first + 120))p" "$JOB/kernel.log"; else tail -n 60 "$JOB/kernel.log"; fi | tr -d '\r' >&2
fi
# 123: the guest itself stopped (a kernel panic or a reset) while COMMAND ran; on-rxe.sh tells it
# apart from COMMAND's own failures.
die "guest stopped before COMMAND finished (QEMU exit status $qrc; see the guest's message above)" 123
