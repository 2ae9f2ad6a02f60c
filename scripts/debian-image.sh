#!/usr/bin/env bash
# Builds the debian-12 image and caches it: a Debian minbase root made with
# debootstrap (plus systemd, networking, cloud-init, OpenSSH and a web
# server), turned into an
# ext4 file system with mkfs.ext4 -d, then into a qcow2 base disk. It boots
# with the test guest's kernel and initramfs, which hand over to systemd.
# Clones start from a template snapshot taken in that initramfs, before the
# root is mounted (clone_hook): each mounts its own disk and runs
# cloud-init as a first boot (its own host keys, name and machine-id).
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
# cloud-init, OpenSSH and sudo come through apt inside the root (debootstrap
# alone cannot order the configuration of cloud-init's Python packages);
# nothing is started in the chroot.
echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod +x "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
trap 'umount "$root/proc" 2>/dev/null || true; rm -rf "$work"' EXIT
chroot "$root" apt-get -q update >"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; die "apt-get update in the image failed"; }
DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get -q install -y --no-install-recommends cloud-init openssh-server sudo \
    >>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; die "installing cloud-init in the image failed"; }
chroot "$root" apt-get clean
umount "$root/proc"
rm -f "$root/usr/sbin/policy-rc.d"

echo vmaas-debian >"$root/etc/hostname"
# cloud-init configures the NICs from the seed's network-config (written to
# interfaces.d), the host name, the default user "debian" with the tenant's
# SSH keys, and runs the user data. It reads the NoCloud seed disk and
# nothing else: no probe of any metadata address.
printf 'auto lo\niface lo inet loopback\nsource /etc/network/interfaces.d/*\n' >"$root/etc/network/interfaces"
mkdir -p "$root/etc/network/interfaces.d"
cat >"$root/etc/cloud/cloud.cfg.d/90-vmaas.cfg" <<'CFG'
datasource_list: [ NoCloud, None ]
datasource:
  NoCloud:
    fs_label: cidata
# Each VM makes its own host keys on its first boot; ed25519 and ECDSA are
# quick to make even on an emulated CPU.
ssh_deletekeys: true
ssh_genkeytypes: [ed25519, ecdsa]
# The image has no "locales" package (C.UTF-8 is built in): cloud-init's
# locale module would fail on update-locale and leave "status: error".
locale: false
# Only the modules this image can use (Debian's lists name every cloud's).
# Left out: what needs a package the image does not have (GRUB, whose
# grub-dpkg ran debconf for 2.2 s of a TCG boot; rsyslog, byobu, snap,
# keyboard, ssh-import-id, lxd, fan, landscape, puppet, chef, mcollective,
# salt-minion), other clouds' (EC2 metadata, RightScale, RMC), the locale
# (off above), the migrator of old cloud-init versions' state (none here)
# and apt-pipelining (apt's default). Everything a tenant's cloud-config can
# ask of this image stays: users, keys, files, commands, disks, mounts,
# apt sources and packages, passwords, time zone, NTP, power state.
cloud_init_modules: [seed_random, bootcmd, write-files, growpart, resizefs, disk_setup, mounts, set_hostname,
  update_hostname, update_etc_hosts, ca-certs, users-groups, ssh]
cloud_config_modules: [set-passwords, apt-configure, ntp, timezone, runcmd]
cloud_final_modules: [package-update-upgrade-install, write-files-deferred, scripts-vendor, scripts-per-once,
  scripts-per-boot, scripts-per-instance, scripts-user, ssh-authkey-fingerprints, keys-to-console, install-hotplug,
  phone-home, final-message, power-state-change]
CFG
# Host keys are per VM (cloud-init makes them): none ship in the image.
rm -f "$root"/etc/ssh/ssh_host_*
# Interfaces keep their kernel names (eth0), as ifupdown expects.
ln -sf /dev/null "$root/etc/systemd/network/99-default.link"
printf '/dev/vda / ext4 defaults 0 1\n' >"$root/etc/fstab"
chroot "$root" passwd -d root >/dev/null
mkdir -p "$root/var/www"
echo "<h1>vmaas debian-12 guest</h1>" >"$root/var/www/index.html"
cat >"$root/etc/systemd/system/vmaas-httpd.service" <<'UNIT'
[Unit]
Description=vmaas demo web server on port 80
# Last: the template's readiness probe fetches this page, so the VM is
# READY once cloud-init has finished with it (host keys, the tenant's SSH
# keys, the user data's files and scripts), not while it still works.
# cloud-final runs after multi-user.target, so this one belongs to
# graphical.target (the default), not multi-user.target (a cycle).
After=network.target cloud-final.service

[Service]
ExecStart=/bin/busybox httpd -f -p 80 -h /var/www
Restart=always

[Install]
WantedBy=graphical.target
UNIT
chroot "$root" systemctl enable vmaas-httpd.service >/dev/null 2>&1
# Lean boot: nothing that competes with cloud-init for the (often
# emulated) CPU and is of no use here. e2scrub_reap looks for stale LVM
# snapshots (there is no LVM; it took 5 s of a TCG boot); getty-static
# starts gettys on tty2-6 (tty1, on the display, stays); the apt and
# e2scrub timers would wake an idle guest to run apt or scan (the image
# has no network by default; the tenant updates it on purpose).
for unit in e2scrub_reap.service getty-static.service apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer; do
    ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
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
  "description": "Debian 12 minbase with systemd, cloud-init (NoCloud), OpenSSH and a web server on port 80; root on /dev/vda",
  "kernel": "vmlinux",
  "initrd": "initrd.cpio",
  "disk": "disk.qcow2",
  "cmdline": "console=ttyS0 vmaas.root=/dev/vda panic=-1 quiet",
  "clone_hook": true
}
JSON
echo "$stamp" >"$OUT.new/.stamp"
rm -rf "$OUT"
mv "$OUT.new" "$OUT"
log "debian-12 image ready: $(du -sh "$OUT" | cut -f1)"
