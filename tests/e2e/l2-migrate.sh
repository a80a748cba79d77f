#!/bin/busybox sh
# The nested guest of the live-migration test (tests/e2e/l1-migrate.sh), run
# as its init from the initramfs (kernel parameter sqcq.init): no 9p share
# is mounted, as QEMU refuses to migrate a guest with one.  The rig's init
# loaded the modules (the guest driver among them) before it came here.
#
# Scans the vhost-scsi target, then runs migrate-verify on the disk for
# sqcq.mig_s seconds (default 120) while L1 migrates the guest back and
# forth, and prints the driver's mode every 2 s (our driver's debugfs
# "mode:"; "-" for the in-tree driver).  Everything goes to the console,
# which L1 reads from each QEMU's serial file; the lines L1 acts on start
# with "migrate-l2:" or "verify:".  Ends by rebooting (QEMU -no-reboot
# exits).
# shellcheck shell=sh
export PATH=/bin
mount -t proc proc /proc 2>/dev/null
mount -t sysfs sysfs /sys 2>/dev/null
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null

say() { echo "migrate-l2: $*"; }
end() {
	say "end ($*)"
	sync
	echo b >/proc/sysrq-trigger
	sleep 60
}

secs=120 tpgt=1
# shellcheck disable=SC2013 # words are wanted
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	sqcq.mig_s=*) secs=${arg#*=} ;;
	sqcq.mig_tpgt=*) tpgt=${arg#*=} ;;
	esac
done

# The guest boots with scsi_mod.scan=manual: scan the one target used.
i=0
while [ -z "$(ls /sys/class/scsi_host 2>/dev/null)" ] && [ $i -lt 60 ]; do
	sleep 1
	i=$((i + 1))
done
for h in /sys/class/scsi_host/*; do
	echo "0 $tpgt 0" >"$h/scan" 2>/dev/null
done
i=0
while [ ! -b /dev/sda ] && [ $i -lt 60 ]; do
	sleep 1
	i=$((i + 1))
done
[ -b /dev/sda ] || end "no disk"

mode() {
	m=-
	for f in /sys/kernel/debug/virtio_scsi_sqcq/*/info; do
		[ -r "$f" ] || continue
		m=$(sed -n 's/^mode: //p' "$f")
	done
	echo "$m"
}

/migrate-verify /dev/sda "$secs" &
vpid=$!
say "ready (verify for $secs s, driver mode $(mode))"
while kill -0 "$vpid" 2>/dev/null; do
	say "mode $(mode)"
	sleep 2
done
wait "$vpid"
say "verify status $?"
end "done"
