#!/bin/sh
# tools/deps.sh - install the Debian packages safeverbs needs to build and to run its
# tests inside a QEMU guest with Soft-RoCE (see tests/vm/run.sh). Idempotent: it only
# calls apt-get when a package is missing. Not root and something missing: it lists
# what is missing and exits 1.
set -eu

PKGS="gcc g++ make clang libibverbs-dev ibverbs-providers ibverbs-utils rdma-core
iproute2 kmod qemu-system-x86 busybox-static perftest gnuplot-nox valgrind strace cpio
xz-utils zstd"
# RDMA-CM (SAFEVERBS_RDMACM, examples/rping.c) and rdma-core's rping to test it against
PKGS="$PKGS librdmacm-dev rdmacm-utils"
# clang's sanitizer and libFuzzer runtimes (make check-fuzz): only recommended by clang, so
# --no-install-recommends leaves them out.
PKGS="$PKGS libclang-rt-14-dev"
# the peers `make bench` runs beside safeverbs (bench/peers.sh): UCX, libfabric, qperf
PKGS="$PKGS ucx-utils libucx-dev libfabric-bin libfabric-dev qperf"
# Build-system consumers (make consumers), the API reference generator, the MPI example.
PKGS="$PKGS cmake meson ninja-build pkg-config python3 libopenmpi-dev openmpi-bin"

missing=
for p in $PKGS; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [ "$st" = "install ok installed" ] || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "deps.sh: missing Debian packages:$missing" >&2
    echo "deps.sh: as root run: apt-get install --no-install-recommends$missing" >&2
    exit 1
fi

echo "deps.sh: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps.sh: done" >&2
