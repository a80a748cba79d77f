#!/bin/bash
# Queue sizing under isolcpus=managed_irq, run INSIDE the VM that
# tests/guest/run.sh boots with 2 vCPUs, CPU 1 isolated from managed
# interrupts, and one virtio-scsi-pci offering 2 request queues.  Our
# driver must make as many interrupt queues (the SCSI host's nr_hw_queues,
# no poll queues) as the kernel's own virtio_scsi on the same device: both
# ask the block layer where it can say (blk_mq_num_possible_queues(), 7.x),
# which leaves isolated CPUs out on kernels that honour managed_irq there.
# (Debian's 7.2 does not: both make 2.)
#
# Usage: queues.sh KO
set -u
KO=${1:?KO}
PREFIX="guest-queues $(uname -r)"
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"

modprobe -a scsi_mod sd_mod 2>/dev/null
check "booted with isolcpus=managed_irq,1" grep -qw 'isolcpus=managed_irq,1' /proc/cmdline
VDEV=""
for d in /sys/bus/virtio/devices/virtio*; do
	[ "$(cat "$d/device")" = 0x0008 ] && VDEV=${d##*/}
done
[ -n "$VDEV" ] || { fail "no virtio-scsi device in the VM"; exit 1; }
# hw_queues: REPLY = nr_hw_queues of the SCSI host on $VDEV.
hw_queues() {
	local f
	for f in /sys/bus/virtio/devices/"$VDEV"/host*/scsi_host/host*/nr_hw_queues; do
		[ -r "$f" ] && { read -r REPLY <"$f"; return 0; }
	done
	return 1
}
helper=no
grep -qw blk_mq_num_possible_queues /proc/kallsyms && helper=yes

[ -e "/sys/bus/virtio/drivers/virtio_scsi/$VDEV" ] &&
	echo "$VDEV" >/sys/bus/virtio/drivers/virtio_scsi/unbind
check "insmod" insmod "$KO"
wait_for 30 hw_queues
ours=${REPLY:-none}
rmmod virtio_scsi_sqcq
check "the kernel's virtio_scsi loads" modprobe virtio_scsi
REPLY=""
wait_for 30 hw_queues
theirs=${REPLY:-none}
check "as many interrupt queues as the kernel's own driver (ours $ours, the kernel's $theirs; block layer helper: $helper)" \
	[ "$ours" = "$theirs" -a "$ours" != none ]
exit $((fails > 0))
