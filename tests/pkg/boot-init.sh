#!/bin/busybox sh
# shellcheck shell=dash
# SPDX-License-Identifier: GPL-2.0-only
#
# /sbin/init of the root disk the pkg stage's boot tests give a VM
# (tests/pkg/switch.sh: boot_root).  It runs after the Debian initramfs under
# test (initramfs-tools or dracut, built in the package chroot) found the
# root disk on a virtio-scsi controller and switched to it.  It reports, one
# KEY=VALUE a line on the second serial port, what the host side checks:
#
#   controller=virtioN driver=DRIVER   each virtio-scsi controller
#   modules=M,...                       virtio_scsi* modules loaded
#   rootctl=virtioN                     the controller of the root disk
#   io-raw=ok|bad                       4 MiB written to the data disk (LUN 1)
#                                       with O_DIRECT and read back equal
#   io-root=ok|bad                      a file on the root file system written,
#                                       synced, dropped from the cache, read back
#   done=1
#
# then reboots (QEMU runs with -no-reboot and exits).  Only busybox is here.
export PATH=/bin
exec >/dev/ttyS1 2>&1

for c in /sys/bus/virtio/devices/*; do
	[ "$(cat "$c/device")" = 0x0008 ] || continue
	d=$(readlink "$c/driver")
	echo "controller=${c##*/} driver=${d##*/}"
done
echo "modules=$(awk '/^virtio_scsi/ { printf "%s,", $1 }' /proc/modules)"
rootdev=$(awk '$2 == "/" { print $1 }' /proc/mounts | tail -n 1)
echo "rootctl=$(readlink -f "/sys/class/block/${rootdev#/dev/}" | grep -o 'virtio[0-9]*' | head -n 1)"

mount -t tmpfs tmpfs /tmp
dd if=/dev/urandom of=/tmp/pattern bs=64k count=64 2>/dev/null
data=""
for b in /sys/bus/scsi/devices/*:0:0:1/block/*; do
	[ -e "$b" ] && data=/dev/${b##*/}
done
r=bad
if [ -n "$data" ] && dd if=/tmp/pattern of="$data" bs=64k oflag=direct conv=fsync 2>/dev/null &&
	dd if="$data" of=/tmp/back bs=64k count=64 iflag=direct 2>/dev/null &&
	cmp /tmp/pattern /tmp/back; then
	r=ok
fi
echo "io-raw=$r"
r=bad
if cp /tmp/pattern /pattern && sync && echo 3 >/proc/sys/vm/drop_caches &&
	cmp /tmp/pattern /pattern; then
	r=ok
fi
echo "io-root=$r"
echo "done=1"
sync
echo b >/proc/sysrq-trigger
sleep 60
