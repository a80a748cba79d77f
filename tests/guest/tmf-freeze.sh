#!/bin/bash
# tests/guest/tmf-freeze.sh [--kernel ID]
#
# By hand (not in make check): a system freeze asked for while a LUN reset
# is outstanding and unanswered (tests/guest/tmf-freeze-inside.sh says
# what is checked).  Boots the test VM (about 25 s of VM wall on 2 cores)
# with one virtio-scsi-pci and one scsi-hd disk, the in-tree virtio_scsi
# blacklisted, and the driver's test build (tests/faults/guest/, built by
# tests/matrix.sh ID).
#
# The freezer, refusing the task that waits for the TMF, dumps that task's
# stack ("Call Trace:"), which the rig takes for a kernel report and fails
# (FAIL: vm-kernel-log).  The VM side checks that this dump is the only
# report; this script then prints the rig's line as a NOTE and judges by the
# VM side's lines.  Any other report, or any FAIL of the VM side, fails.
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh

id=7.2
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
abi=$(sqcq_kernel_abi "$id") || { echo "FAIL: guest-tmf-freeze $id: cannot resolve the ABI"; exit 1; }
tests/matrix.sh "$id" >&2 || true
fko=$ROOT/out/$abi/tests/faults/guest/virtio_scsi_sqcq_faults.ko
[ -f "$fko" ] || { echo "FAIL: guest-tmf-freeze $id: no test build at $fko"; exit 1; }

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
fails=$(grep -c '^FAIL: ' "$work/out.log" || true)
# Only the rig's dirty-log line, for the report the VM side allowed.
if [ "$rc" = 1 ] && [ "$fails" = 1 ] &&
	grep -q '^FAIL: vm-kernel-log (other: Call Trace:)' "$work/out.log" &&
	grep -q "^PASS: .*kernel log clean apart from the freezer's dump" "$work/out.log" &&
	grep -q '^tmf-freeze tests: 0 failed' "$work/out.log"; then
	sed -e 's/^FAIL: vm-kernel-log/NOTE: vm-kernel-log, the freezer'"'"'s dump only, checked in the VM/' \
		-e '/^---- \(last kernel log\|first report\)/,/^----$/d' "$work/out.log"
	rc=0
else
	cat "$work/out.log"
	[ "$rc" != 0 ] || [ "$fails" = 0 ] || rc=1
fi
exit "$rc"
