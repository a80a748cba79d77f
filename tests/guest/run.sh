#!/bin/bash
# tests/guest/run.sh [--kernel ID] [--ko FILE] [--no-monitor] [--no-iommu]
#                    [--timeout S]
#
# The guest module (virtio_scsi_sqcq) against QEMU's own userspace
# virtio-scsi: boots the test VM (tests/vm/run.sh) with
#   -device virtio-scsi-pci,num_queues=4 and three scsi-hd disks backed by
#   sparse files under /tmp: target 0 plain, target 1 through a blkdebug
#   node without rules (the monitor can stall one of its reads: "break"),
#   target 3 through QEMU's
#   blkdebug driver, which fails every read of the 4 KiB block at 1 MiB
#   and every write of the 4 KiB block at 2 MiB with EIO (werror=report,
#   rerror=report: the guest gets a CHECK CONDITION),
# the in-tree virtio_scsi blacklisted, and runs tests/guest/inside.sh there:
# bind, fio crc32c verification with libaio and io_uring (512 B .. 1 MiB),
# io_uring --hipri on two poll queues proven by the debugfs counters (I/O
# completed there, 0 interrupts), injected I/O errors reaching fio as EIO
# on interrupt and poll queues with the driver staying usable, LUN
# hotplug/unplug through the QEMU monitor (event queue), a throttled disk
# with one read stalled in QEMU for 45 s under a 3 s SCSI timeout while
# fio verifies another disk of the controller (the device owns the command:
# no abort, no offline disk, the read completes when the stall ends),
# unbind under I/O and rebind, rmmod under I/O.  --no-monitor skips the
# monitor-driven parts.
#
# Then a second VM (--no-iommu skips it): q35 with QEMU's intel-iommu, the
# guest kernel with intel_iommu=on, and a virtio-scsi-pci with
# iommu_platform=on (VIRTIO_F_ACCESS_PLATFORM): tests/guest/iommu.sh checks
# that the driver either refuses SQ/CQ with one line or sends the doorbell
# area as a DMA (IOMMU) address, and that I/O verifies.
#
# Then a VM with isolcpus=managed_irq,1 (tests/guest/queues.sh): as many
# interrupt queues as the in-tree driver of that kernel makes.
#
# The module comes from out/<abi>/guest/ (tests/matrix.sh ID builds it) or
# --ko. Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail

# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
id=6.1 ko="" hotplug=1 iommu=1 timeout_s=480
stage_opt() {
	case "$1" in
	--no-monitor) hotplug=0; STAGE_SHIFT=1 ;;
	--no-iommu) iommu=0; STAGE_SHIFT=1 ;;
	*) return 1 ;;
	esac
}
stage_init guest "kernel ko timeout" "$@"
stage_module guest
# shellcheck source=tests/lib/verdict.sh
. tests/lib/verdict.sh
# fio runs inside the VM from this machine's root; a fresh machine may have
# empty package lists, so update once if the first install fails.
# A lean build of the same fio (tests/lib/fio.sh: Debian's loads 64
# libraries, 11-18 s a start on the sanitizer kernel).
# shellcheck source=tests/lib/fio.sh
. tests/lib/fio.sh
sqcq_fio_setup || { echo "FAIL: guest $id: cannot install fio"; exit 1; }

work=$(mktemp -d /tmp/sqcq-guest.XXXXXX)
mon=$work/monitor.sock
watch_pid=""
cleanup() {
	[ -n "$watch_pid" ] && kill "$watch_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/results"
# The VM loads its own copy (seen at $SQCQ_RESULTS there), taken while no
# tests/matrix.sh runs (it holds out/.matrix.lock and rewrites out/<abi>/ in
# place; an insmod of a half-written module fails).
if [ -e out/.matrix.lock ]; then
	exec 7<out/.matrix.lock
	flock -s -w 1800 7 || echo "guest-test: out/.matrix.lock still held; copying anyway" >&2
fi
cp "$ko" "$work/results/virtio_scsi_sqcq.ko"
# The driver's test build with fault hooks (tests/faults/guest/, built by the
# matrix beside it), for section 10; inside.sh fails that section without it.
fko=$(dirname "$(dirname "$ko")")/tests/faults/guest/virtio_scsi_sqcq_faults.ko
[ ! -f "$fko" ] || cp "$fko" "$work/results/"
exec 7<&-
for d in 0 1 2 3 4; do
	truncate -s 1G "$work/disk$d.img"
done
# Disk 3's bad blocks (blkdebug sectors are 512 B; a rule fails any request
# that covers its sector, on every try: once=off).  inside.sh knows these
# offsets: reads of [1 MiB, 1 MiB + 4 KiB), writes of [2 MiB, 2 MiB + 4 KiB).
{
	for s in $(seq 2048 2055); do
		printf '[inject-error]\nevent = "read_aio"\niotype = "read"\nerrno = "5"\nsector = "%d"\nonce = "off"\n\n' "$s"
	done
	for s in $(seq 4096 4103); do
		printf '[inject-error]\nevent = "write_aio"\niotype = "write"\nerrno = "5"\nsector = "%d"\nonce = "off"\n\n' "$s"
	done
} >"$work/blkdebug.conf"

# monitor COMMAND: one human-monitor command on the VM's socket.
monitor() {
	python3 - "$mon" "$1" <<'EOF'
import re, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(5)
def drain():
    buf = b""
    try:
        while not buf.endswith(b"(qemu) "):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        pass
    return buf
drain()
s.sendall(sys.argv[2].encode() + b"\n")
out = drain().decode(errors="replace")
# The monitor echoes the command with terminal editing sequences; a
# successful command prints nothing else, a failed one an error line.
errs = [l for l in out.splitlines() if "rror" in l or "not found" in l]
sys.stderr.write("monitor: %s -> %s\n" % (sys.argv[2],
                 re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", errs[-1]) if errs else "ok"))
EOF
}

# Answer the guest's monitor requests (inside.sh writes monitor-request):
# LUN hotplug/unplug on target 2, and throttling disk 1 to a few IOPS (so
# commands outlive the SCSI timeout and error handling runs).
watch_monitor() {
	local req
	while sleep 0.5; do
		[ -e "$work/results/monitor-request" ] || continue
		req=$(cat "$work/results/monitor-request")
		rm -f "$work/results/monitor-request"
		# inside.sh renames a whole request into place; anything else is
		# answered with a line and no "done", so the guest's check fails.
		case $req in
		add) monitor "device_add scsi-hd,drive=d2,bus=scsi0.0,scsi-id=2,lun=0,id=hp2" || true ;;
		del) monitor "device_del hp2" || true ;;
		addhi) monitor "device_add scsi-hd,drive=d4,bus=scsi0.0,scsi-id=2,lun=300,id=hp3" || true ;;
		delhi) monitor "device_del hp3" || true ;;
		throttle) monitor "block_set_io_throttle d1 0 0 0 2 0 0" || true ;;
		unthrottle) monitor "block_set_io_throttle d1 0 0 0 0 0 0" || true ;;
		# The next read of d1 that reaches blkdebug waits until resumed.
		stall) monitor 'qemu-io d1 "break read_aio stall"' || true ;;
		resume) monitor 'qemu-io d1 "resume stall"' || true ;;
		*) echo "monitor: unknown request '$req' from the guest" >&2; continue ;;
		esac
		touch "$work/results/monitor-done"
	done
}

# shellcheck disable=SC2054 # the commas belong to one option
qargs=(
	--qemu-arg -monitor --qemu-arg "unix:$mon,server=on,wait=off"
	--qemu-arg -device --qemu-arg virtio-scsi-pci,id=scsi0,num_queues=4
)
# d2 and d4: for hotplug (a device_del takes its drive along).
for d in 0 2 4; do
	qargs+=(--qemu-arg -drive
		--qemu-arg "file=$work/disk$d.img,format=raw,if=none,id=d$d,cache=writeback")
done
# d1: raw over a rule-less blkdebug over the file (for "break").
: >"$work/empty.conf"
qargs+=(--qemu-arg -drive --qemu-arg "if=none,id=d1,format=raw,cache=writeback,file.driver=blkdebug,file.config=$work/empty.conf,file.image.driver=file,file.image.filename=$work/disk1.img")
for d in 0 1; do
	qargs+=(--qemu-arg -device --qemu-arg "scsi-hd,drive=d$d,bus=scsi0.0,scsi-id=$d,lun=0")
done
# raw (emits the read_aio/write_aio events) over blkdebug over the file.
qargs+=(--qemu-arg -drive --qemu-arg "if=none,id=d3,format=raw,cache=writeback,file.driver=blkdebug,file.config=$work/blkdebug.conf,file.image.driver=file,file.image.filename=$work/disk3.img"
	--qemu-arg -device --qemu-arg "scsi-hd,drive=d3,bus=scsi0.0,scsi-id=3,lun=0,werror=report,rerror=report")

if [ "$hotplug" = 1 ]; then
	watch_monitor &
	watch_pid=$!
fi
# The main VM. One the emulator froze or reset with a clean console
# (sqcq_emulator_break: no check of ours failed, no kernel report; a CI run
# of 2026-12-07 froze on 6.1-rt as inside.sh switched the tracepoints on,
# a live text patch) runs once more: a REPEAT line says why, and the first
# attempt's output stays in $work/attempt1.out, out of the report.
# inside.sh takes about 130 s; the timeout leaves it 3-4 times that.
for attempt in 1 2; do
	rc=0
	tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
		--append " modprobe.blacklist=virtio_scsi" --results "$work/results" \
		--env "SQCQ_GUEST_MONITOR=$hotplug" --env SQCQ_GUEST_EIO_DISK=3 "${qargs[@]}" \
		-- tests/guest/inside.sh /run/sqcq/out/virtio_scsi_sqcq.ko >"$work/main.out" 2>&1 || rc=$?
	if [ "$rc" != 0 ] && [ "$attempt" = 1 ] && sqcq_emulator_break "$work/main.out"; then
		mv "$work/main.out" "$work/attempt1.out"
		rm -f "$work/results/monitor-request" "$work/results/monitor-done"
		last=$(grep -a '^guest-test: ' "$work/attempt1.out" | tail -n 1 | tr -d '\r')
		echo "REPEAT: guest $id: $sqcq_break_why, its last line: ${last:-none}; the main VM once more"
		continue
	fi
	cat "$work/main.out"
	break
done

# side_vm NAME TIMEOUT APPEND SCRIPT QEMU-ARG...: one more VM with the
# driver's copy in its own results directory (results-NAME), running
# tests/guest/SCRIPT on it; its status into rc.
side_vm() {
	local name=$1 tmo=$2 append=$3 script=$4 a qa=()
	shift 4
	mkdir -p "$work/results-$name"
	cp "$work/results/virtio_scsi_sqcq.ko" "$work/results-$name/"
	for a in "$@"; do qa+=(--qemu-arg "$a"); done
	tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$tmo" \
		--append " modprobe.blacklist=virtio_scsi$append" \
		--results "$work/results-$name" "${qa[@]}" \
		-- "tests/guest/$script" /run/sqcq/out/virtio_scsi_sqcq.ko || rc=$?
}

# shellcheck disable=SC2054 # the commas belong to one option
if [ "$iommu" = 1 ]; then
	# The vIOMMU before the devices that translate through it.
	side_vm iommu 600 " intel_iommu=on iommu.passthrough=0" iommu.sh \
		-machine q35 -device intel-iommu,intremap=off \
		-device virtio-scsi-pci,id=scsi1,num_queues=2,iommu_platform=on,disable-legacy=on \
		-drive "file=$work/disk0.img,format=raw,if=none,id=i0,cache=writeback" \
		-device "scsi-hd,drive=i0,bus=scsi1.0,scsi-id=0,lun=0"
fi

# A VM with CPU 1 isolated from managed interrupts (isolcpus=managed_irq,1)
# and a virtio-scsi-pci offering 2 request queues: tests/guest/queues.sh
# checks that the driver makes as many interrupt queues as the in-tree
# virtio_scsi of that kernel (fewer where the block layer leaves isolated
# CPUs out: blk_mq_num_possible_queues()).
# shellcheck disable=SC2054 # the commas belong to one option
side_vm queues 300 " isolcpus=managed_irq,1" queues.sh \
	-device virtio-scsi-pci,id=scsi2,num_queues=2 \
	-drive "file=$work/disk0.img,format=raw,if=none,id=q0,cache=writeback" \
	-device "scsi-hd,drive=q0,bus=scsi2.0,scsi-id=0,lun=0"
exit "$rc"
