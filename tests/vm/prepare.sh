#!/bin/bash
# tests/vm/prepare.sh - fetch and cache a Debian guest kernel with Soft-RoCE (rdma_rxe)
# and build the small initramfs that tests/vm/run.sh boots with it.
#
#   prepare.sh [SERIES]   print the ready kernel directory on stdout (builds it if needed)
#
# SERIES: 6.1 (the default: the kernel linux-image-amd64 depends on, Debian 12's own) or
# another series Debian packages as linux-image-SERIES-amd64 (6.12 on Debian 12).
# Cache: ${SAFEVERBS_VM_CACHE:-$HOME/.cache/safeverbs-vm}/<kernel version>/ holds the
# unpacked linux-image package (boot/vmlinuz-*, lib/modules/*, depmod'ed), an uncompressed
# vmlinux when the kernel can boot from it, and initramfs.cpio.gz; "linux-SERIES" points at
# the version prepared for SERIES. Once a kernel is cached no network is used;
# SAFEVERBS_VM_REFRESH=1 asks apt for the newest kernel of the series.
#
# The initramfs holds busybox-static, the modules that mount the host's root over 9p
# (virtio_pci, 9pnet_virtio, 9p and their dependencies, found with modprobe --show-depends;
# decompressed, as busybox insmod cannot read every .ko.xz) and an /init that mounts it, adds
# the writable share and the directories run.sh exports, chroots and hands over to
# "run.sh --in-guest". It is rebuilt when this script's content changes (its hash is kept in
# initramfs.key), so checkouts of the same version share it.
set -euo pipefail

CACHE=${SAFEVERBS_VM_CACHE:-$HOME/.cache/safeverbs-vm}
SELF=$(readlink -f "$0")
log() { echo "prepare.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }
trap 'die "line $LINENO failed: $BASH_COMMAND"' ERR
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
trap "exit 130" INT TERM HUP

SERIES=${1:-6.1}
[[ $SERIES =~ ^[0-9]+\.[0-9]+$ ]] || die "kernel series '$SERIES' is not like 6.1 or 6.12"
META=linux-image-$SERIES-amd64
[ "$SERIES" = 6.1 ] && META=linux-image-amd64

# apt-get download into the current directory; as root, refresh the lists once on failure.
apt_download() {
    local opt=()
    [ "$(id -u)" -eq 0 ] && opt=(-o APT::Sandbox::User=root)  # no "_apt cannot write" warning
    apt-get -qq "${opt[@]}" download "$@" >/dev/null && return 0
    [ "$(id -u)" -eq 0 ] || return 1
    log "apt-get download $* failed; running apt-get update"
    apt-get -qq update && apt-get -qq "${opt[@]}" download "$@" >/dev/null
}

# Find the kernel: the cached one, or the versioned package $META depends on today.
LINK=$CACHE/linux-$SERIES
if [ -z "${SAFEVERBS_VM_REFRESH:-}" ] && [ -e "$LINK/.ready" ]; then
    KDIR=$(readlink -f "$LINK")
else
    command -v apt-get >/dev/null || die "apt-get not found (a Debian host is needed)"
    (cd "$TMP" && apt_download "$META") || die "apt-get download $META failed"
    # Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)   (maybe "-unsigned", maybe alternatives)
    pkg=$(dpkg-deb -f "$TMP/$META"_*.deb Depends | tr ',|' '\n\n' |
          sed -n 's/^ *\(linux-image-[0-9][^ ]*-amd64\(-unsigned\)\?\).*/\1/p' | head -n1)
    [ -n "$pkg" ] || die "cannot find the versioned kernel package $META depends on"
    kver=${pkg#linux-image-}; kver=${kver%-unsigned}
    [[ $kver == "$SERIES".* ]] || die "$META depends on $pkg, not a $SERIES kernel"
    KDIR=$CACHE/$kver
    if [ ! -e "$KDIR/.ready" ]; then
        log "downloading $pkg"
        (cd "$TMP" && apt_download "$pkg") || die "apt-get download $pkg failed"
        mkdir -p "$CACHE"
        rm -rf "$KDIR" "$KDIR.unpack"
        dpkg -x "$TMP/$pkg"_*.deb "$KDIR.unpack" || die "dpkg -x $pkg failed"
        mv "$KDIR.unpack" "$KDIR"
        [ -f "$KDIR/boot/vmlinuz-$kver" ] || die "$pkg has no boot/vmlinuz-$kver"
        depmod -b "$KDIR" "$kver" || die "depmod -b $KDIR $kver failed"
        touch "$KDIR/.ready"
    fi
    ln -sfn "$kver" "$LINK"
fi
kver=$(basename "$KDIR")

# Under TCG, unpacking the compressed bzImage takes ~6 s of every boot. A kernel with
# CONFIG_PVH boots straight from its uncompressed ELF image, so keep that beside it. The
# payload is xz in 6.1, zstd in 6.12: try each magic's first hits until an ELF comes out
# (the decompressor complains about the bytes after its stream, which do not matter).
is_elf() { [ "$(head -c4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = 177ELF ]; }
unpack_vmlinux() {  # $1 = bzImage, $2 = output
    local magic tool off
    for magic in '\xfd7zXZ\x00 xz' '\x28\xb5\x2f\xfd zstd'; do
        tool=${magic#* } magic=${magic% *}
        command -v "$tool" >/dev/null || continue
        for off in $(LC_ALL=C grep -obUaP "$magic" "$1" | head -n 4 | cut -d: -f1); do
            tail -c +"$((off + 1))" "$1" | "$tool" -dcq >"$2" 2>/dev/null || :
            is_elf "$2" && return 0
        done
    done
    return 1
}
if [ ! -s "$KDIR/vmlinux" ] && grep -q '^CONFIG_PVH=y' "$KDIR/boot/config-$kver" 2>/dev/null; then
    if unpack_vmlinux "$KDIR/boot/vmlinuz-$kver" "$KDIR/vmlinux.$$"; then
        mv "$KDIR/vmlinux.$$" "$KDIR/vmlinux"
    else
        rm -f "$KDIR/vmlinux.$$"
        log "could not unpack vmlinux (is xz-utils or zstd missing?); booting the bzImage (slower)"
    fi
fi

INITRD=$KDIR/initramfs.cpio.gz
KEY=$(sha256sum "$SELF" | cut -d' ' -f1)
if [ ! -s "$INITRD" ] || [ "$(cat "$KDIR/initramfs.key" 2>/dev/null)" != "$KEY" ]; then
    log "building initramfs for $kver"
    BB=$(command -v busybox) || die "busybox not found (install busybox-static)"
    ! ldd "$BB" >/dev/null 2>&1 || die "$BB is linked dynamically (install busybox-static)"
    root=$TMP/root
    mkdir -p "$root"/{bin,lib,proc,sys,dev,host,share}
    cp "$BB" "$root/bin/busybox"
    # Modules in load order, each once, uncompressed; "builtin" lines need nothing.
    modprobe -d "$KDIR" -S "$kver" -a --show-depends virtio_pci 9pnet_virtio 9p >"$TMP/deps" ||
        die "modprobe --show-depends virtio_pci 9pnet_virtio 9p failed for $kver"
    while read -r ko; do
        m=$(basename "$ko")
        case $m in
            *.ko) cp "$ko" "$root/lib/$m" ;;
            *.ko.xz) m=${m%.xz}; xz -dc "$ko" >"$root/lib/$m" || die "cannot unpack $ko (install xz-utils)" ;;
            *.ko.zst) m=${m%.zst}; zstd -dcq "$ko" >"$root/lib/$m" || die "cannot unpack $ko (install zstd)" ;;
            *) die "module $ko: unknown compression" ;;
        esac
        echo "$m" >>"$root/modules.order"
    done < <(awk '$1 == "insmod" && !seen[$2]++ { print $2 }' "$TMP/deps")
    cat > "$root/init" <<'INIT'
#!/bin/busybox sh
# initramfs /init written by tests/vm/prepare.sh: mount the host root (9p tag "hostroot",
# read-only) and the writable share (tag "sfvshare"), mount proc/sys/dev/tmp/run inside it,
# then the read-only exports run.sh lists in boot.env (over the new /tmp and /run), chroot
# and run "run.sh --in-guest JOBDIR" (job named by sfv.job= on the kernel command line).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
# ttyS0 carries the job's output; the kernel's own console is ttyS1, which run.sh keeps in a
# file so that a panic or an oops can be shown when the guest stops early.
exec </dev/ttyS0 >/dev/ttyS0 2>&1
echo "@@SFV-INIT@@"
fail() { echo "guest setup failed: $*"; poweroff -f; sleep 10; }
[ -f /modules.order ] && for m in $(cat /modules.order); do insmod "/lib/$m" || fail "insmod $m"; done
job=
for w in $(cat /proc/cmdline); do case $w in sfv.job=*) job=${w#sfv.job=} ;; esac; done
[ -n "$job" ] || fail "no sfv.job= on the kernel command line"
o=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$o,ro,cache=loose" hostroot /host || fail "mount host root over 9p"
mount -t 9p -o "$o" sfvshare /share || fail "mount the writable share over 9p"
[ -f "/share/$job/boot.env" ] || fail "no $job/boot.env in the share"
EXPORTS=
. "/share/$job/boot.env"          # SHARE (host path of the share), RUNSH, EXPORTS
h=/host
mount -t proc proc $h/proc && mount -t sysfs sys $h/sys && mount -t devtmpfs dev $h/dev &&
    mount -t tmpfs -o mode=1777 tmp $h/tmp && mount -t tmpfs -o mode=755 run $h/run ||
    fail "mount proc/sys/dev/tmp/run in the chroot"
mkdir -p $h/dev/pts $h/dev/shm
mount -t devpts devpts $h/dev/pts; mount -t tmpfs -o mode=1777 shm $h/dev/shm
# EXPORTS: one "TAG PATH" a line, host directories under /tmp or /run, mounted at PATH.
while read -r tag path; do
    [ -n "$tag" ] || continue
    mkdir -p "$h$path" && mount -t 9p -o "$o,ro,cache=loose" "$tag" "$h$path" || fail "mount $path over 9p"
done <<EOF
$EXPORTS
EOF
mkdir -p "$h$SHARE" 2>/dev/null   # only works (and is only needed) under a new tmpfs
mount --move /share "$h$SHARE" || fail "move the share to $SHARE"
chroot $h /bin/bash "$RUNSH" --in-guest "$SHARE/$job" || echo "guest: run.sh --in-guest failed"
sync
poweroff -f
sleep 10
INIT
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$INITRD.$$" || die "cpio of the initramfs failed"
    mv "$INITRD.$$" "$INITRD"
    echo "$KEY" >"$KDIR/initramfs.key"
fi
echo "$KDIR"
