#!/bin/bash
# tests/guest/tmf-freeze.sh [--kernel ID]
#
# In the guest stage (7.2): a system freeze asked for while a LUN reset
# is outstanding and unanswered (tests/guest/tmf-freeze-inside.sh says
# what is checked).  Boots the test VM (about 25 s of VM wall on 2 cores)
# with one virtio-scsi-pci and one scsi-hd disk, the in-tree virtio_scsi
# blacklisted, and the driver's test build (tests/faults/guest/, built by
# tests/matrix.sh ID).
#
# The freezer, refusing the task that waits for the TMF, dumps that task's
# stack ("Call Trace:"): the VM side declares exactly those lines to the rig
# ($SQCQ_VM_EXPECTED), so any other report still fails the run.
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail

# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
id=7.2 ko=""
stage_init guest-tmf-freeze kernel "$@"
stage_module guest-faults
fko=$ko

work=$(mktemp -d /tmp/sqcq-tmf-freeze.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/results"
cp "$fko" "$work/results/"
truncate -s 256M "$work/disk0.img"
rc=0
tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout 300 \
	--append " modprobe.blacklist=virtio_scsi" --results "$work/results" \
	--qemu-arg -device --qemu-arg virtio-scsi-pci,id=scsi0,num_queues=2 \
	--qemu-arg -drive --qemu-arg "file=$work/disk0.img,format=raw,if=none,id=d0,cache=writeback" \
	--qemu-arg -device --qemu-arg "scsi-hd,drive=d0,bus=scsi0.0,scsi-id=0,lun=0" \
	-- tests/guest/tmf-freeze-inside.sh /run/sqcq/out/virtio_scsi_sqcq_faults.ko \
	>"$work/out.log" 2>&1 || rc=$?
cat "$work/out.log"
exit "$rc"
