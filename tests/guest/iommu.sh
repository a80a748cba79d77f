#!/bin/bash
# Guest-module test under a vIOMMU, run INSIDE the test VM that
# tests/guest/run.sh boots on q35 with QEMU's intel-iommu, the kernel's
# intel_iommu=on, and one virtio-scsi-pci with iommu_platform=on (so
# VIRTIO_F_ACCESS_PLATFORM: the rings go through the DMA API) carrying one
# scsi-hd at target 0.  The doorbell area address in the SQ/CQ setup
# request must be a device address: either the driver refuses SQ/CQ with
# one line (no DMA device it can name on this kernel), or it allocates the
# area through the DMA API on the virtqueue's DMA device and sends that
# (an IOVA the IOMMU translates, never a guest-physical address).  QEMU's
# virtio-scsi then rejects the request; I/O must verify and the IOMMU must
# report no fault.  Prints one PASS:/FAIL: line per check.
#
# Usage: iommu.sh KO
set -u
KO=${1:?KO}
MOD=virtio_scsi_sqcq
DBG=/sys/kernel/debug/$MOD
PREFIX="guest-iommu $(uname -r)"
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
log() { echo "guest-iommu: [${SECONDS}s] $*" >&2; }

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe -a scsi_mod sd_mod 2>/dev/null

check "iommu-active (DMAR translation)" bash -c \
	"ls /sys/class/iommu/ 2>/dev/null | grep -q . && dmesg | grep -q 'DMAR'"
VDEV=""
for d in /sys/bus/virtio/devices/virtio*; do
	[ "$(cat "$d/device")" = 0x0008 ] && VDEV=${d##*/}
done
[ -n "$VDEV" ] || { fail "no virtio-scsi device in the VM"; exit 1; }
[ -e /sys/bus/virtio/drivers/virtio_scsi/$VDEV ] &&
	echo "$VDEV" >/sys/bus/virtio/drivers/virtio_scsi/unbind
n0=$(dmesg | wc -l)
check "insmod" insmod "$KO"
info() { awk -v k="$1:" '$1 == k { print $2 }' "$DBG/$VDEV/info"; }
disk() {
	local b
	for b in /sys/bus/virtio/devices/$VDEV/host*/target*/*/block/*; do
		[ -e "$b" ] && { echo "/dev/${b##*/}"; return 0; }
	done
	return 1
}
has_disk() { disk >/dev/null; }
check "disk-visible" wait_for 30 has_disk
DISK=$(disk)
check "disk-node ($DISK)" wait_for 30 test -b "$DISK"
check "access-platform-negotiated" [ "$(info access_platform)" = 1 ]
kind=$(info setup_addr_kind)
addr=$(info setup_addr)
new_log() { dmesg | tail -n +$((n0 + 1)); }
log "setup_addr_kind=$kind setup_addr=$addr"
new_log | grep -E 'SQ/CQ' >&2
# RAM ends below 1 GiB + the PCI hole: a guest-physical address of the area
# is below 4 GiB and inside RAM; an IOVA of intel-iommu's DMA domain is
# handed out from the top of the device's DMA window down.
mem_end=$(( $(awk '/MemTotal/ { print $2 }' /proc/meminfo) * 1024 ))
case $kind in
none)
	check "sqcq-refused-with-one-line" \
		bash -c "[ \$(dmesg | tail -n +$((n0 + 1)) | grep -c 'SQ/CQ refused (') = 1 ]"
	;;
dma)
	check "setup-address-is-an-iova ($addr above RAM end $(printf %#x "$mem_end"))" \
		[ $((addr)) -gt "$mem_end" ]
	check "sqcq-rejected-by-qemu (classic)" [ "$(info mode)" = classic ]
	;;
*)
	fail "setup address is guest-physical ($kind $addr) under VIRTIO_F_ACCESS_PLATFORM"
	;;
esac
check "fio-verify-through-the-iommu" "${SQCQ_FIO:-fio}" --eta=never --name=iommu --filename="$DISK" \
	--ioengine=libaio --direct=1 --rw=randwrite --bssplit=4k/50:64k/40:1m/10 \
	--iodepth=16 --size=32m --verify=crc32c --verify_fatal=1 --do_verify=1 \
	--verify_state_save=0 --output=/tmp/fio-iommu.log
check "no-iommu-faults" bash -c "! dmesg | grep -Eiq 'DMAR: \\[DMA|fault addr|PTE Read access'"
check "rmmod" rmmod $MOD
echo "guest iommu tests: $fails failed"
[ "$fails" = 0 ]
