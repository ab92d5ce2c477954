#!/usr/bin/env bash
# Builds the VM tier's guest once: Debian's stock kernel (which has fq_codel, fq and cake),
# netdevsim built for it from Debian's matching kernel source (Debian does not enable it),
# and a busybox initramfs that boots into this machine's own / (read-only 9p + tmpfs
# overlay), so the guest runs the project's .venv and tests as they are on the host.
#
#   bash tests/vm/build.sh [DIR]      (root; DIR defaults to /var/cache/nettop-vm)
#
# Idempotent: a finished build is reused until the kernel package changes. Prints the
# directory on its last line. Nothing is installed into the host's /boot or /lib/modules.
set -euo pipefail
W=${1:-${NETTOP_VM_DIR:-/var/cache/nettop-vm}}
mkdir -p "$W"
cd "$W"
export DEBIAN_FRONTEND=noninteractive

kver() { apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: linux-image-\(.*-amd64\)$/\1/p' | head -n 1; }
KVER=$(kver)
if [ -z "$KVER" ]; then
  apt-get update -qq
  KVER=$(kver)
fi
[ -n "$KVER" ] || { echo "vm build: apt knows no linux-image-amd64; check the Debian sources" >&2; exit 1; }
if [ -f done ] && [ "$(cat done)" = "$KVER" ] && [ -f initramfs.gz ] && [ -f "kroot/boot/vmlinuz-$KVER" ]; then
  echo "$W"
  exit 0
fi
echo "vm build: guest kernel $KVER in $W" >&2
SRC=linux-source-$(echo "$KVER" | cut -d. -f1-2)

# the kernel image and its modules, unpacked here only; first, because the source and
# headers are installed at its version: the archive may carry a newer source release
# than the image (29 Nov 2026: linux-source-6.1 6.1.192-3 beside linux-image 6.1.192-2,
# both still there), and netdevsim must be built from the image's own
rm -rf kroot ./*.deb
apt-get download -qq "linux-image-$KVER" 2>/dev/null || { apt-get update -qq; apt-get download -qq "linux-image-$KVER"; }
dpkg -x "linux-image-${KVER}"_*.deb kroot
img_ver=$(dpkg-deb -f "linux-image-${KVER}"_*.deb Version)

need=(qemu-system-x86 busybox-static kmod gcc make xz-utils)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
for p in "linux-headers-$KVER" "$SRC"; do
  [ "$(dpkg-query -W -f='${Status} ${Version}' "$p" 2>/dev/null)" = "install ok installed $img_ver" ] \
    || missing+=("$p=$img_ver")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends --allow-downgrades "${missing[@]}" >/dev/null \
    || { echo "vm build: cannot install ${missing[*]} (the source and headers of linux-image-$KVER $img_ver)" >&2; exit 1; }
fi
src_ver=$(dpkg-query -W -f='${Version}' "$SRC")
[ "$img_ver" = "$src_ver" ] || { echo "vm build: $SRC $src_ver does not match linux-image-$KVER $img_ver" >&2; exit 1; }

# netdevsim from the same source release, against the same headers
rm -rf src; mkdir src
tar -xJf "/usr/src/$SRC.tar.xz" -C src --wildcards "$SRC/drivers/net/netdevsim/*"
make -s -C "/usr/src/linux-headers-$KVER" M="$W/src/$SRC/drivers/net/netdevsim" CONFIG_NETDEVSIM=m modules
install -D -m644 "src/$SRC/drivers/net/netdevsim/netdevsim.ko" "kroot/lib/modules/$KVER/extra/netdevsim.ko"
depmod -b kroot "$KVER"

# initramfs: static busybox, the modules to reach the host's / over virtio 9p, and /init
mods=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p overlay)
rm -rf ird; mkdir -p ird/bin ird/dev ird/proc ird/sys ird/lib/mod
cp /bin/busybox ird/bin/
for m in "${mods[@]}"; do
  path=$(modprobe -d kroot -S "$KVER" -n -v --show-depends "$m" | awk '{print $2}' | tail -n 1)
  [ -n "$path" ] && [ -f "$path" ] && cp "$path" "ird/lib/mod/$m.ko"   # built in: nothing to load
done
cat > ird/init <<'INIT'
#!/bin/busybox sh
# Guest /init: host / (9p, read-only) under a tmpfs overlay becomes the root; the share
# "out" (read-write) holds cmd.sh in and rc out. Then power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p overlay; do
  [ -f /lib/mod/$m.ko ] && insmod /lib/mod/$m.ko 2>/dev/null
done
mkdir -p /lower /rw /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,cache=loose hostroot /lower || { echo "vm: 9p mount failed"; poweroff -f; }
mount -t tmpfs -o mode=755 tmpfs /rw; mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || { echo "vm: overlay failed"; poweroff -f; }
KVER=$(uname -r)
for arg in $(cat /proc/cmdline); do case "$arg" in klmods=*) klmods=${arg#klmods=};; esac; done
mkdir -p /newroot/lib/modules/$KVER; mount --bind /lower$klmods /newroot/lib/modules/$KVER
mkdir -p /newroot/tmp/vmout; mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 out /newroot/tmp/vmout
mount -t tmpfs tmpfs /newroot/run
mount --move /proc /newroot/proc; mount --move /sys /newroot/sys; mount --move /dev /newroot/dev
exec switch_root /newroot /bin/sh -c 'mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs tmpfs /dev/shm; mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null; ip link set lo up; sh /tmp/vmout/cmd.sh; echo $? > /tmp/vmout/rc; echo o > /proc/sysrq-trigger; sleep 10'
INIT
chmod +x ird/init
(cd ird && find . | busybox cpio -o -H newc 2>/dev/null) | gzip -1 > initramfs.gz
echo "$KVER" > done
echo "$W"
