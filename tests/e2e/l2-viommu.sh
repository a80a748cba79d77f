#!/bin/bash
# End-to-end test, vIOMMU part: runs in the second nested guest that
# tests/e2e/l1.sh starts on q35 beside an emulated Intel IOMMU, its
# vhost-scsi-pci device with iommu_platform=on.  Such a device offers
# VIRTIO_F_ACCESS_PLATFORM; our host has no IOTLB and must refuse the
# feature rather than take an IOVA for a guest-physical address.  This part
# binds the guest driver and records what the guest saw (an IOMMU or none,
# whether insmod returned, the features and status the driver reached, a
# disk or none) in $SQCQ_RESULTS/viommu.txt, a line at a time: L2 may not
# live to the end, since its QEMU exits when the vhost device fails to
# start.  L1's checks decide.
#
# Usage: l2-viommu.sh GUEST LABEL [KO] (as tests/e2e/l2.sh; E2E_SLOT_A,
# E2E_TPGT from l1.sh)
set -u
GUEST=${1:?GUEST}
LABEL=${2:?LABEL}
KO=${3:-}
SLOT_A=${E2E_SLOT_A:?}
TPGT=${E2E_TPGT:?}
PREFIX="e2e $LABEL viommu" TAG=e2e-l2v
# shellcheck source=tests/e2e/l2-lib.sh
. tests/e2e/l2-lib.sh
out=$SQCQ_RESULTS/viommu.txt
# note KEY VALUE: one line for L1, written at once (L2 may die any time).
note() { echo "$1 $2" >>"$out"; sync "$out" 2>/dev/null; }
: >"$out"

# Whether the guest enabled the vIOMMU (it needs ACPI's DMAR table).
iommu=none
for d in /sys/class/iommu/*; do [ -e "$d" ] && iommu=${d##*/}; done
note iommu "$iommu"
[ -d /sys/module/sd_mod ] || modprobe -a scsi_mod sd_mod
if [ "$GUEST" = intree ]; then
	want=virtio_scsi
	modprobe virtio_scsi
else
	want=virtio_scsi_sqcq
	# shellcheck disable=SC2086 # parameters are words
	insmod "$KO" ${E2E_GUEST_PARAMS:-}
fi
note insmod $?
# The device's offered features (bit 33, VIRTIO_F_ACCESS_PLATFORM) show in
# the virtio device's features once a driver has read them; the status
# says how far the driver got (8: FEATURES_OK, 4: DRIVER_OK, 0x40: FAILED).
bound_a() { vdev "$SLOT_A" && [ -e "/sys/bus/virtio/drivers/$want/${REPLY##*/}" ]; }
wait_for 20 bound_a
if vdev "$SLOT_A"; then
	read -r f <"$REPLY/features" && note features "$f"
	read -r s <"$REPLY/status" && note status "$s"
	note bound "$([ -e "/sys/bus/virtio/drivers/$want/${REPLY##*/}" ] && echo yes || echo no)"
fi
# A disk would mean I/O through addresses the host could not translate.
disk=none
has_disk_a() {
	local d
	for d in /sys/bus/pci/devices/0000:00:"$SLOT_A".0/virtio*/host*/target*:0:"$TPGT"/*/block/*; do
		[ -e "$d" ] && { disk=${d##*/}; return 0; }
	done
	return 1
}
for h in /sys/bus/pci/devices/0000:00:"$SLOT_A".0/virtio*/host*; do
	[ -e "$h" ] && echo "0 $TPGT -" >"/sys/class/scsi_host/${h##*/}/scan" 2>/dev/null
done
wait_for 10 has_disk_a
note disk "$disk"
note "done" 1
exit 0
