#!/bin/busybox sh
# SPDX-License-Identifier: GPL-2.0-only
#
# The guest of the host switch's libvirt domain (tests/pkg/vm-host-switch.sh,
# boots 2 and 3), run as its init from the initramfs (kernel parameter
# sqcq.init; tests/vm/initramfs-init.sh loaded scsi_mod, sd_mod and the
# package's virtio_scsi_sqcq before it came here).  No 9p share: libvirt
# builds this guest from its saved definition, the rig does not.
#
# Scans the vhost-scsi target (tpgt 1, LUN 0), writes 4 MiB of random data
# with O_DIRECT, reads it back the same way and compares, and prints the
# driver's mode and counters from /sys/class/scsi_host/hostN/sqcq_*.  The
# lines L1 reads start with "autostart-l2:" on the console (a file of
# libvirt's <serial>).  Then it waits for L1 to destroy the domain (L1 reads
# the host's view of the device meanwhile), and reboots after 300 s
# (on_reboot: destroy) if L1 does not.
# shellcheck shell=sh
export PATH=/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /tmp
mount -t tmpfs tmpfs /tmp 2>/dev/null

say() { echo "autostart-l2: $*"; }
end() {
	say "end ($*)"
	i=0
	while [ $i -lt 300 ]; do
		sleep 1
		i=$((i + 1))
	done
	echo b >/proc/sysrq-trigger
	sleep 60
}

# The guest boots with scsi_mod.scan=manual: scan the one target used.
i=0
while [ -z "$(ls /sys/class/scsi_host 2>/dev/null)" ] && [ $i -lt 60 ]; do
	sleep 1
	i=$((i + 1))
done
h=""
for d in /sys/class/scsi_host/host*; do
	[ -e "$d" ] && { h=$d; break; }
done
[ -n "$h" ] || end "no SCSI host"
say "driver $(cat "$h/proc_name" 2>/dev/null)"
echo "0 1 0" >"$h/scan" 2>/dev/null
i=0
while [ ! -b /dev/sda ] && [ $i -lt 60 ]; do
	sleep 1
	i=$((i + 1))
done
[ -b /dev/sda ] || end "no disk"

# counters: the driver's sysfs counters on one line.
counters() {
	for c in requests kicks kicks_saved interrupts completions; do
		printf ' %s=%s' "$c" "$(cat "$h/sqcq_$c" 2>/dev/null)"
	done
}
dd if=/dev/urandom of=/tmp/pattern bs=64k count=64 2>/dev/null || end "no pattern"
if dd if=/tmp/pattern of=/dev/sda bs=64k count=64 oflag=direct 2>/dev/null &&
	dd if=/dev/sda of=/tmp/back bs=64k count=64 iflag=direct 2>/dev/null &&
	cmp -s /tmp/pattern /tmp/back; then
	v=ok
else
	v=bad
fi
# A second, other pattern: what the first pass left must not pass again.
dd if=/dev/urandom of=/tmp/pattern bs=64k count=64 2>/dev/null
if [ "$v" = ok ] && dd if=/tmp/pattern of=/dev/sda bs=64k count=64 oflag=direct 2>/dev/null &&
	dd if=/dev/sda of=/tmp/back bs=64k count=64 iflag=direct 2>/dev/null &&
	cmp -s /tmp/pattern /tmp/back; then
	v=ok
else
	v=bad
fi
say "verify=$v mode=$(cat "$h/sqcq_mode" 2>/dev/null) why=$(tr ' ' _ <"$h/sqcq_classic_why" 2>/dev/null)$(counters)"
end "done"
