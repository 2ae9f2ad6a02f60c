#!/usr/bin/env bash
# Builds the debian-12 image and caches it: a Debian minbase root made with
# debootstrap (plus systemd, networking and a web server), turned into an
# ext4 file system with mkfs.ext4 -d, then into a qcow2 base disk. It boots
# with the test guest's kernel and initramfs, which hand over to systemd.
#   IMAGES/debian-12/{vmlinux,initrd.cpio,disk.qcow2,image.json}
# Rebuilds only when this script changed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
. "$ROOT/scripts/deps.sh"

IMAGES=${VMAAS_IMAGES_DIR:-$HOME/.local/share/vmaas/images}
OUT=$IMAGES/debian-12
"$ROOT/scripts/guest-image.sh"
stamp=$(cat "$0" "$IMAGES/test-guest/.stamp" | sha256sum | cut -c1-16)
if [ -f "$OUT/image.json" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$stamp" ]; then
    exit 0
fi
apt_install debootstrap e2fsprogs qemu-utils
mirror=$(debian_mirror) || die "cannot find this machine's Debian mirror"
log "building the debian-12 image in $OUT (debootstrap from $mirror)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
debootstrap --variant=minbase --include=systemd-sysv,udev,busybox,iproute2,ifupdown,isc-dhcp-client,kmod \
    bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log"; die "debootstrap failed"; }

echo vmaas-debian >"$root/etc/hostname"
printf 'auto lo\niface lo inet loopback\nallow-hotplug eth0\niface eth0 inet dhcp\n' >"$root/etc/network/interfaces"
# Interfaces keep their kernel names (eth0), as ifupdown expects.
ln -sf /dev/null "$root/etc/systemd/network/99-default.link"
printf '/dev/vda / ext4 defaults 0 1\n' >"$root/etc/fstab"
chroot "$root" passwd -d root >/dev/null
mkdir -p "$root/var/www"
echo "<h1>vmaas debian-12 guest</h1>" >"$root/var/www/index.html"
cat >"$root/etc/systemd/system/vmaas-httpd.service" <<'UNIT'
[Unit]
Description=vmaas demo web server on port 80
After=network.target

[Service]
ExecStart=/bin/busybox httpd -f -p 80 -h /var/www
Restart=always

[Install]
WantedBy=multi-user.target
UNIT
chroot "$root" systemctl enable vmaas-httpd.service >/dev/null 2>&1
# The serial console logs in as root without a password.
mkdir -p "$root/etc/systemd/system/serial-getty@ttyS0.service.d"
printf '[Service]\nExecStart=\nExecStart=-/sbin/agetty --autologin root --keep-baud 115200,57600,38400,9600 %%I $TERM\n' \
    >"$root/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf"
rm -rf "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*

size_mib=$(( $(du -sm "$root" | cut -f1) + 256 ))
mkfs.ext4 -q -F -L debian-12 -d "$root" "$work/disk.raw" "${size_mib}M"
qemu-img convert -q -f raw -O qcow2 "$work/disk.raw" "$work/disk.qcow2"

mkdir -p "$OUT.new"
mv "$work/disk.qcow2" "$OUT.new/"
cp "$IMAGES/test-guest/vmlinux" "$IMAGES/test-guest/initrd.cpio" "$OUT.new/"
cat >"$OUT.new/image.json" <<JSON
{
  "name": "debian-12",
  "description": "Debian 12 minbase with systemd, DHCP and a web server on port 80; root on /dev/vda",
  "kernel": "vmlinux",
  "initrd": "initrd.cpio",
  "disk": "disk.qcow2",
  "cmdline": "console=ttyS0 vmaas.root=/dev/vda panic=-1 quiet"
}
JSON
echo "$stamp" >"$OUT.new/.stamp"
rm -rf "$OUT"
mv "$OUT.new" "$OUT"
log "debian-12 image ready: $(du -sh "$OUT" | cut -f1)"
