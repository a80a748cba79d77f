# shellcheck shell=bash
# Helpers of the scripts that run in the nested guest (tests/e2e/l2.sh,
# bench/compare-l2.sh); sourced from the repository root.  Starting a
# process costs seconds there, so these use bash builtins only.
# The caller sets PREFIX (start of its PASS:/FAIL: lines, see
# tests/lib/check.sh) and TAG (its log lines' tag) first.
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

log() { echo "$TAG: [${SECONDS}s] $*" >&2; }
# vdev SLOT: REPLY = the virtio device directory under that PCI slot.
vdev() {
	local d
	REPLY=""
	for d in /sys/bus/pci/devices/0000:00:"$1".0/virtio*; do
		[ -d "$d" ] && { REPLY=$d; return 0; }
	done
	return 1
}
# scsi_host SLOT: REPLY = its SCSI host (hostN).
scsi_host() {
	local h
	vdev "$1" || return 1
	for h in "$REPLY"/host*; do
		[ -d "$h" ] && { REPLY=${h##*/}; return 0; }
	done
	return 1
}
