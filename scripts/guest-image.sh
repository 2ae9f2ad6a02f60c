#!/usr/bin/env bash
# Builds the test guest image from Debian packages only, and caches it:
#   IMAGES/test-guest/vmlinux      the Debian kernel, uncompressed (boots by PVH)
#   IMAGES/test-guest/initrd.cpio  busybox-static + the virtio/ext4 modules + guest/init
#   IMAGES/test-guest/disk.qcow2   a small ext4 base disk (VMs get copy-on-write overlays)
#   IMAGES/test-guest/image.json   how to boot it
#   IMAGES/test-guest/bios.qcow2   the same guest on a disk that boots by BIOS
#                                  (syslinux on FAT), as an imported image does
#   IMAGES/test-guest-efi/         the same guest on an EFI system partition
#                                  that boots under Secure Boot: Debian's signed
#                                  shim, GRUB and kernel (OVMF's Microsoft keys)
# IMAGES is $VMAAS_IMAGES_DIR, default ~/.local/share/vmaas/images.
# Rebuilds only when this script or guest/ changed.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

IMAGES=${VMAAS_IMAGES_DIR:-$HOME/.local/share/vmaas/images}
OUT=$IMAGES/test-guest
stamp=$(cat "$0" "$ROOT/guest/init" "$ROOT/guest/udhcpc.script" "$ROOT/guest/tpm" "$ROOT/guest/hotplug" | sha256sum | cut -c1-16)
EFI=$IMAGES/test-guest-efi
if [ -f "$OUT/image.json" ] && [ -f "$EFI/image.json" ] && [ "$(cat "$OUT/.stamp" 2>/dev/null)" = "$stamp" ]; then
    exit 0
fi
apt_install e2fsprogs qemu-utils python3 dosfstools mtools syslinux
log "building the test guest image in $OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
kpkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { print $2; exit }')
[ -n "$kpkg" ] || die "cannot find the kernel package behind linux-image-amd64"
# apt-get download writes as _apt when it can: give it a directory it may write.
chmod 777 "$work"
apt-get download -q "$kpkg" busybox-static shim-signed grub-efi-amd64-signed >/dev/null
dpkg -x "$kpkg"_*.deb kernel
dpkg -x shim-signed_*.deb efi
dpkg -x grub-efi-amd64-signed_*.deb efi
dpkg -x busybox-static_*.deb busybox
kver=${kpkg#linux-image-}

python3 - "$work" "$kver" "$ROOT/guest" <<'PY'
import lzma, os, stat, sys
work, kver, guest = sys.argv[1:4]
k = os.path.join(work, "kernel")
# vmlinux: the XZ stream inside the bzImage.
bz = open(f"{k}/boot/vmlinuz-{kver}", "rb").read()
start = bz.find(b"\xfd7zXZ\x00")
if start < 0:
    sys.exit("no XZ stream in the kernel image")
vmlinux = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(bz[start:])
open(f"{work}/vmlinux", "wb").write(vmlinux)

# Modules and their dependencies (the "depends=" of each module's
# .modinfo), in load order.
moddir = f"{k}/lib/modules/{kver}"
by_name = {}
for root, _, files in os.walk(moddir):
    for f in files:
        if f.endswith(".ko"):
            by_name[f[:-3].replace("-", "_")] = os.path.relpath(os.path.join(root, f), moddir)
deps = {}
for name, rel in by_name.items():
    data = open(f"{moddir}/{rel}", "rb").read()
    i = data.find(b"\0depends=")
    names = data[i + 9:data.index(b"\0", i + 1)].decode().split(",") if i >= 0 else []
    deps[rel] = [by_name[n.replace("-", "_")] for n in names if n]
# vfat and its code pages read cloud-init's NoCloud seed disk (label CIDATA).
# efivarfs shows an EFI guest's variables; virtio_mem plugs memory into a
# running guest.
# virtio_balloon reports freed pages back to the host (free page reporting);
# vmgenid reseeds the RNG of a clone restored from a snapshot;
# virtio_console carries the guest agent's port; bochs drives the VGA
# (its framebuffer console is the graphical console's screen).
wanted = ["virtio_pci", "virtio_balloon", "vmgenid", "virtio_net", "virtio_blk", "ext4", "crc32c_generic", "button", "evdev", "vfat", "nls_cp437", "nls_utf8", "nls_ascii",
          "efivarfs", "virtio_mem", "virtio_console", "bochs"]
def load_order(names, done):
    order = []
    def visit(m):
        if m in order or m in done:
            return
        for d in deps[m]:
            visit(d)
        order.append(m)
    for w in names:
        if w in by_name:
            visit(by_name[w])
    return order
order = load_order(wanted, [])
# Drivers of the hardware a template may ask for, each loaded by /init only
# when its device is on the PCI bus (/etc/modules.NAME): SATA (AHCI), the
# e1000e NIC, virtio-scsi.
extra = {"ahci": ["ahci", "sd_mod"], "e1000e": ["e1000e"], "virtio_scsi": ["virtio_scsi", "sd_mod"]}
extra_order = {k: load_order(v, order) for k, v in extra.items()}

# A newc cpio archive, written directly.
entries = []
def add(path, mode, data=b""):
    entries.append((path, mode, data))
for d in ["bin", "sbin", "dev", "proc", "sys", "etc", "lib", "lib/modules", "www", "data", "tmp", "run", "root"]:
    add(d, stat.S_IFDIR | 0o755)
add("bin/busybox", stat.S_IFREG | 0o755, open(f"{work}/busybox/bin/busybox", "rb").read())
add("init", stat.S_IFREG | 0o755, open(f"{guest}/init", "rb").read())
add("etc/udhcpc.script", stat.S_IFREG | 0o755, open(f"{guest}/udhcpc.script", "rb").read())
add("bin/vmaas-tpm", stat.S_IFREG | 0o755, open(f"{guest}/tpm", "rb").read())
add("bin/vmaas-hotplug", stat.S_IFREG | 0o755, open(f"{guest}/hotplug", "rb").read())
add("etc/modules", stat.S_IFREG | 0o644, "".join(os.path.basename(m) + "\n" for m in order).encode())
for k, ms in extra_order.items():
    add(f"etc/modules.{k}", stat.S_IFREG | 0o644, "".join(os.path.basename(m) + "\n" for m in ms).encode())
add("etc/passwd", stat.S_IFREG | 0o644, b"root:x:0:0:root:/root:/bin/sh\n")
add("dev/console", stat.S_IFCHR | 0o600)
for m in order + sorted({m for ms in extra_order.values() for m in ms} - set(order)):
    add("lib/modules/" + os.path.basename(m), stat.S_IFREG | 0o644, open(f"{moddir}/{m}", "rb").read())
out = bytearray()
def pad(n):
    return b"\0" * ((4 - n % 4) % 4)
for ino, (path, mode, data) in enumerate(entries + [("TRAILER!!!", 0, b"")], start=1):
    name = path.encode() + b"\0"
    rdev = (5, 1) if path == "dev/console" else (0, 0)
    fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(name), 0]
    hdr = b"070701" + b"".join(b"%08X" % f for f in fields)
    out += hdr + name + pad(len(hdr) + len(name)) + data + pad(len(data))
open(f"{work}/initrd.cpio", "wb").write(out)
PY

mkdir -p rootfs
echo "test-guest base disk, built $(date -u +%Y-%m-%dT%H:%M:%SZ) from $kpkg" >rootfs/image-id
mkfs.ext4 -q -F -L vmaas-base -d rootfs disk.raw 64M
qemu-img convert -q -f raw -O qcow2 disk.raw disk.qcow2

# The guest on a disk that boots by BIOS, with no -kernel: what tests import.
# syslinux on a FAT file system without a partition table (SeaBIOS boots its
# boot sector), holding the kernel as Debian ships it and the initramfs.
cp "kernel/boot/vmlinuz-$kver" vmlinuz
kib=$(( ($(stat -c %s vmlinuz) + $(stat -c %s initrd.cpio)) / 1024 + 2048 ))
mkfs.fat -C -n VMAASBIOS bios.raw "$kib" >/dev/null
printf '%s\n' 'DEFAULT vmaas' 'SERIAL 0 115200' 'TIMEOUT 0' 'LABEL vmaas' '  KERNEL vmlinuz' '  INITRD initrd.cpio' \
    '  APPEND console=ttyS0 panic=-1 no_timer_check tsc=reliable quiet' >syslinux.cfg
mcopy -i bios.raw vmlinuz initrd.cpio syslinux.cfg ::
syslinux --install bios.raw
qemu-img convert -q -f raw -O qcow2 bios.raw bios.qcow2

# The guest on an EFI system partition (FAT, no partition table: OVMF reads
# it whole), booting by the removable-media path: shim (signed by
# Microsoft's UEFI CA, whose keys OVMF_VARS_4M.ms.fd enrols) loads GRUB
# (signed by Debian), which reads grub.cfg beside itself and has shim
# verify the kernel (signed by Debian) before it boots it.
printf '%s\n' 'set timeout=0' 'linux /vmlinuz console=ttyS0 panic=-1 no_timer_check tsc=reliable quiet memhp_default_state=online_movable' 'initrd /initrd.cpio' 'boot' >grub.cfg
kib=$(( ($(stat -c %s vmlinuz) + $(stat -c %s initrd.cpio)) / 1024 + 8192 ))
mkfs.fat -C -n VMAASEFI esp.raw "$kib" >/dev/null
mmd -i esp.raw ::EFI ::EFI/BOOT ::EFI/debian
mcopy -i esp.raw efi/usr/lib/shim/shimx64.efi.signed ::EFI/BOOT/BOOTX64.EFI
mcopy -i esp.raw efi/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed ::EFI/BOOT/grubx64.efi
mcopy -i esp.raw grub.cfg ::EFI/BOOT/grub.cfg
mcopy -i esp.raw grub.cfg ::EFI/debian/grub.cfg
mcopy -i esp.raw vmlinuz initrd.cpio ::
qemu-img convert -q -f raw -O qcow2 esp.raw efi.qcow2
mkdir -p "$EFI.new"
mv efi.qcow2 "$EFI.new/disk.qcow2"
cat >"$EFI.new/image.json" <<JSON
{
  "name": "test-guest-efi",
  "description": "the test guest on an EFI system partition: Debian's signed shim, GRUB and $kver kernel (Secure Boot)",
  "disk": "disk.qcow2",
  "firmware": "efi",
  "secure_boot": true,
  "clone_hook": true
}
JSON
rm -rf "$EFI"
mv "$EFI.new" "$EFI"

mkdir -p "$OUT.new"
mv vmlinux initrd.cpio disk.qcow2 bios.qcow2 "$OUT.new/"
cat >"$OUT.new/image.json" <<JSON
{
  "name": "test-guest",
  "description": "Debian $kver kernel with a busybox initramfs: DHCP, httpd on port 80, shell on ttyS0",
  "kernel": "vmlinux",
  "initrd": "initrd.cpio",
  "disk": "disk.qcow2",
  "cmdline": "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1 no_timer_check tsc=reliable quiet memhp_default_state=online_movable",
  "clone_hook": true
}
JSON
echo "$stamp" >"$OUT.new/.stamp"
rm -rf "$OUT"
mv "$OUT.new" "$OUT"
log "test guest image ready: $(du -sh "$OUT" | cut -f1)"
