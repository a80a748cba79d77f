#!/bin/bash
# Runs inside the demo VM: load both modules with poll settings and show them.
set -eu
KO=${1:?KO_DIR}
mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
echo "== kernel $(uname -r)"
# insmod does not resolve dependencies (virtio, scsi_mod, ...): modprobe
# what modinfo lists first.
load() {
	local ko=$1 d
	shift
	for d in $(modinfo -F depends "$ko" | tr ',' ' '); do
		modprobe "$d"
	done
	insmod "$ko" "$@"
}
load "$KO/host/vhost_scsi_sqcq.ko" poll_cpu=1 poll_idle_us=200
load "$KO/guest/virtio_scsi_sqcq.ko" poll_queues=2 poll_idle_us=500
for m in vhost_scsi_sqcq virtio_scsi_sqcq; do
	echo "== /sys/module/$m (version $(cat /sys/module/$m/version))"
	for p in /sys/module/$m/parameters/*; do
		printf '  %-22s %s\n' "$(basename "$p")" "$(cat "$p")"
	done
	echo "== /sys/kernel/debug/$m/params"
	sed 's/^/  /' /sys/kernel/debug/$m/params
done
ls -l /dev/vhost-scsi-sqcq
echo "== runtime change: poll_idle_us=50 on the host module"
echo 50 >/sys/module/vhost_scsi_sqcq/parameters/poll_idle_us
grep poll_idle /sys/kernel/debug/vhost_scsi_sqcq/params
echo "== a bad value is refused:"
echo 7 >/sys/module/vhost_scsi_sqcq/parameters/poll_cpu || true
dmesg | grep -E 'sqcq' | tail -n 6
rmmod virtio_scsi_sqcq vhost_scsi_sqcq
echo "PASS: demo modules loaded, tuned and unloaded"
