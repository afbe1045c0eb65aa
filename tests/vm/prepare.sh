#!/bin/bash
# tests/vm/prepare.sh - fetch and cache a Debian guest kernel with Soft-RoCE (rdma_rxe)
# and build the small initramfs that tests/vm/run.sh boots with it.
#
#   prepare.sh            print the ready kernel directory on stdout (builds it if needed)
#
# Cache: ${SAFEVERBS_VM_CACHE:-$HOME/.cache/safeverbs-vm}/<kernel version>/ holds the
# unpacked linux-image package (boot/vmlinuz-*, lib/modules/*, depmod'ed) and
# initramfs.cpio.gz; "current" points at the last one prepared. Once a kernel is cached
# no network is used; SAFEVERBS_VM_REFRESH=1 asks apt for the newest linux-image-amd64.
#
# The initramfs holds busybox-static, the modules that mount the host's root over 9p
# (virtio_pci, 9pnet_virtio, 9p and their dependencies, found with modprobe --show-depends)
# and an /init that mounts it, adds the writable share, chroots and hands over to
# "run.sh --in-guest". It is rebuilt whenever this script is newer than it.
set -euo pipefail

CACHE=${SAFEVERBS_VM_CACHE:-$HOME/.cache/safeverbs-vm}
SELF=$(readlink -f "$0")
log() { echo "prepare.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

# apt-get download into the current directory; as root, refresh the lists once on failure.
apt_download() {
    local opt=()
    [ "$(id -u)" -eq 0 ] && opt=(-o APT::Sandbox::User=root)  # no "_apt cannot write" warning
    apt-get -qq "${opt[@]}" download "$@" >/dev/null && return 0
    [ "$(id -u)" -eq 0 ] || return 1
    log "apt-get download $* failed; running apt-get update"
    apt-get -qq update && apt-get -qq "${opt[@]}" download "$@" >/dev/null
}

# Make sure $CACHE/$1 holds an unpacked, depmod'ed kernel ($1 = versioned package name).
fetch_kernel() {
    local pkg=$1 tmp
    tmp=$(mktemp -d)
    log "downloading $pkg"
    (cd "$tmp" && apt_download "$pkg") || die "apt-get download $pkg failed"
    mkdir -p "$CACHE/.unpack"
    rm -rf "$CACHE/.unpack/$pkg"
    dpkg -x "$tmp"/"$pkg"_*.deb "$CACHE/.unpack/$pkg"
    rm -rf "$tmp"
}

# Find the kernel to use: the cached one, or the one linux-image-amd64 depends on today.
KDIR=
if [ -z "${SAFEVERBS_VM_REFRESH:-}" ] && [ -e "$CACHE/current/.ready" ]; then
    KDIR=$(readlink -f "$CACHE/current")
else
    command -v apt-get >/dev/null || die "apt-get not found (a Debian host is needed)"
    tmp=$(mktemp -d)
    (cd "$tmp" && apt_download linux-image-amd64) || die "apt-get download linux-image-amd64 failed"
    # Depends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)   (maybe "-unsigned", maybe alternatives)
    pkg=$(dpkg-deb -f "$tmp"/linux-image-amd64_*.deb Depends | tr ',|' '\n\n' |
          sed -n 's/^ *\(linux-image-[0-9][^ ]*-amd64\(-unsigned\)\?\).*/\1/p' | head -n1)
    rm -rf "$tmp"
    [ -n "$pkg" ] || die "cannot find the versioned kernel package linux-image-amd64 depends on"
    kver=${pkg#linux-image-}; kver=${kver%-unsigned}
    KDIR=$CACHE/$kver
    if [ ! -e "$KDIR/.ready" ]; then
        fetch_kernel "$pkg"
        rm -rf "$KDIR"
        mv "$CACHE/.unpack/$pkg" "$KDIR"
        rmdir "$CACHE/.unpack" 2>/dev/null || true
        [ -f "$KDIR/boot/vmlinuz-$kver" ] || die "$pkg has no boot/vmlinuz-$kver"
        depmod -b "$KDIR" "$kver"
        touch "$KDIR/.ready"
    fi
    ln -sfn "$kver" "$CACHE/current"
fi

kver=$(basename "$KDIR")
# Under TCG, unpacking the xz-compressed bzImage takes ~6 s of every boot. A kernel with
# CONFIG_PVH boots straight from its uncompressed ELF image, so keep that beside it.
if [ ! -s "$KDIR/vmlinux" ] && grep -q '^CONFIG_PVH=y' "$KDIR/boot/config-$kver" 2>/dev/null &&
   command -v xz >/dev/null; then
    z=$KDIR/boot/vmlinuz-$kver
    off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$z" | head -n1 | cut -d: -f1)
    # xz complains about the bytes after its stream; what counts is that an ELF came out.
    [ -n "$off" ] && { tail -c +"$((off + 1))" "$z" | xz -dcq > "$KDIR/vmlinux.$$" 2>/dev/null || :; }
    if [ "$(head -c4 "$KDIR/vmlinux.$$" 2>/dev/null | od -An -c | tr -d ' ')" = 177ELF ]; then
        mv "$KDIR/vmlinux.$$" "$KDIR/vmlinux"
    else
        rm -f "$KDIR/vmlinux.$$"; log "could not unpack vmlinux; booting the bzImage (slower)"
    fi
fi
INITRD=$KDIR/initramfs.cpio.gz
if [ ! -s "$INITRD" ] || [ "$SELF" -nt "$INITRD" ]; then
    log "building initramfs for $kver"
    BB=$(command -v busybox) || die "busybox not found (install busybox-static)"
    ! ldd "$BB" >/dev/null 2>&1 || die "$BB is linked dynamically (install busybox-static)"
    root=$(mktemp -d)
    mkdir -p "$root"/{bin,lib,proc,sys,dev,host,share}
    cp "$BB" "$root/bin/busybox"
    # Modules in load order, each once; "builtin" lines need nothing.
    modprobe -d "$KDIR" -S "$kver" -a --show-depends virtio_pci 9pnet_virtio 9p |
        awk '$1 == "insmod" && !seen[$2]++ { print $2 }' > "$root/modules.list"
    while read -r ko; do
        cp "$ko" "$root/lib/"
        basename "$ko" >> "$root/modules.order"
    done < "$root/modules.list"
    rm "$root/modules.list"
    cat > "$root/init" <<'INIT'
#!/bin/busybox sh
# initramfs /init written by tests/vm/prepare.sh: mount the host root (9p tag "hostroot",
# read-only) and the writable share (tag "sfvshare"), mount proc/sys/dev/tmp/run inside it,
# chroot and run "run.sh --in-guest JOBDIR" (job named by sfv.job= on the kernel command line).
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
exec </dev/console >/dev/console 2>&1
echo "@@SFV-INIT@@"
fail() { echo "guest setup failed: $*"; poweroff -f; sleep 10; }
for m in $(cat /modules.order); do insmod "/lib/$m" || fail "insmod $m"; done
job=
for w in $(cat /proc/cmdline); do case $w in sfv.job=*) job=${w#sfv.job=} ;; esac; done
[ -n "$job" ] || fail "no sfv.job= on the kernel command line"
o=trans=virtio,version=9p2000.L,msize=512000
mount -t 9p -o "$o,ro,cache=loose" hostroot /host || fail "mount host root over 9p"
mount -t 9p -o "$o" sfvshare /share || fail "mount the writable share over 9p"
[ -f "/share/$job/boot.env" ] || fail "no $job/boot.env in the share"
. "/share/$job/boot.env"          # SFV_SHARE (host path of the share), SFV_RUNSH
h=/host
mount -t proc proc $h/proc && mount -t sysfs sys $h/sys && mount -t devtmpfs dev $h/dev &&
    mount -t tmpfs -o mode=1777 tmp $h/tmp && mount -t tmpfs -o mode=755 run $h/run ||
    fail "mount proc/sys/dev/tmp/run in the chroot"
mkdir -p $h/dev/pts $h/dev/shm
mount -t devpts devpts $h/dev/pts; mount -t tmpfs -o mode=1777 shm $h/dev/shm
mkdir -p "$h$SFV_SHARE" 2>/dev/null   # only works (and is only needed) under the new /tmp
mount --move /share "$h$SFV_SHARE" || fail "move the share to $SFV_SHARE"
chroot $h /bin/bash "$SFV_RUNSH" --in-guest "$SFV_SHARE/$job" || echo "guest: run.sh --in-guest failed"
sync
poweroff -f
sleep 10
INIT
    chmod +x "$root/init"
    (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$INITRD.$$"
    mv "$INITRD.$$" "$INITRD"
    rm -rf "$root"
fi
echo "$KDIR"
