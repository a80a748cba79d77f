#!/bin/bash
# tests/e2e/qemu-ioctls.sh [--kernel ID] [--host sqcq|takeover|intree]
#                          [--l2-qemu bookworm|trixie|sid] [--props P]
#
# Which vhost ioctls a QEMU sends the host backend while it creates a
# vhost-scsi-pci device (and takes it down again), and what each got back:
# a VM (tests/vm/run.sh, kernel ID, default 6.1) loads the backend and
# builds a target like tests/e2e/l1.sh, then runs the QEMU of --l2-qemu
# (tests/lib/qemu-chroot.sh) under strace with
#   -S -device vhost-scsi-pci,wwpn=W,vhostfd=7,PROPS
# (default PROPS "num_queues=2,worker_per_virtqueue=on": a second I/O queue
# makes QEMU ask for a worker of its own, VHOST_NEW_WORKER and
# VHOST_ATTACH_VRING_WORKER; plus hotplug=on where the QEMU has it), stops
# it after 15 s and prints every ioctl on that descriptor, decoded, with its
# result, and QEMU's own messages. The guest never runs (-S): the ioctls of a
# device start (features, memory table, rings, endpoint) come with a guest
# driver, in tests/e2e/run.sh --l2-qemu.
#
# PASS: QEMU still ran after 15 s (it accepted every answer). FAIL: it quit
# or never started, with its message. Lines "qemu-ioctl: ..." list the calls;
# an ENOTTY among them is what the backend does not implement and QEMU went
# on without.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"

WWPN=naa.5001405e2e000001

# ---- inside the VM --------------------------------------------------------------
if [ "${1:-}" = --inside ]; then
	host=$2 props=$3
	# shellcheck source=tests/lib/target.sh
	. tests/lib/target.sh
	set +e
	out=$SQCQ_RESULTS
	case "$host" in
	intree) fabric=vhost node=/dev/vhost-scsi; modprobe vhost_scsi ;;
	sqcq)
		fabric=vhost_sqcq node=/dev/vhost-scsi-sqcq
		modprobe target_core_mod
		insmod "out/$SQCQ_ABI/host/vhost_scsi_sqcq.ko"
		;;
	takeover)
		fabric=vhost node=/dev/vhost-scsi
		modprobe target_core_mod
		insmod "out/$SQCQ_ABI/host/vhost_scsi_sqcq.ko" takeover=1
		;;
	esac
	[ -c "$node" ] || { echo "FAIL: qemu-ioctls $host: no $node"; exit 1; }
	err=$(sqcq_target_setup "$fabric" "$WWPN" 1 1 64 2>&1) ||
		{ echo "FAIL: qemu-ioctls $host: target setup ($err)"; exit 1; }
	read -r -a qemu <<<"${E2E_L2_QEMU:-qemu-system-x86_64}"
	"${qemu[@]}" --version | head -n 1 | sed 's/^/qemu-version: /'
	if "${qemu[@]}" -device vhost-scsi-pci,help 2>/dev/null | grep '^ *hotplug=' >/dev/null; then
		props="$props,hotplug=on"
	fi
	echo "qemu-device: vhost-scsi-pci,wwpn=$WWPN,vhostfd=7,$props"
	exec 7<>"$node"
	strace -f -qq -e trace=ioctl -e signal=none -o "$out/strace.txt" \
		"${qemu[@]}" -S -nodefaults -display none -monitor none -serial none \
		-device "vhost-scsi-pci,wwpn=$WWPN,vhostfd=7,$props" 2>"$out/qemu.err" &
	sp=$!
	exec 7>&-
	sleep 15
	if pgrep -x qemu-system-x86 >/dev/null; then
		alive=1
		pkill -TERM -x qemu-system-x86
	else
		alive=0
	fi
	wait "$sp"
	# The calls on the vhost descriptor, strace's names where it has them,
	# ours for the newer ones (linux/vhost.h: type 0xaf).
	grep -E '^[0-9]+ +ioctl\(7, ' "$out/strace.txt" | sed -E \
		-e 's/^[0-9]+ +//' \
		-e 's/_IOC\(_IOC_READ, 0xaf, 0x8, [^)]*\)/VHOST_NEW_WORKER/' \
		-e 's/_IOC\(_IOC_WRITE, 0xaf, 0x9, [^)]*\)/VHOST_FREE_WORKER/' \
		-e 's/_IOC\(_IOC_WRITE, 0xaf, 0x15, [^)]*\)/VHOST_ATTACH_VRING_WORKER/' \
		-e 's/_IOC\(_IOC_READ\|_IOC_WRITE, 0xaf, 0x16, [^)]*\)/VHOST_GET_VRING_WORKER/' \
		-e 's/_IOC\(_IOC_READ, 0xaf, 0x83, [^)]*\)/VHOST_GET_FEATURES_ARRAY/' \
		-e 's/_IOC\(_IOC_WRITE, 0xaf, 0x83, [^)]*\)/VHOST_SET_FEATURES_ARRAY/' \
		-e 's/_IOC\(_IOC_WRITE, 0xaf, 0x84, [^)]*\)/VHOST_SET_FORK_FROM_OWNER/' \
		-e 's/_IOC\(_IOC_READ, 0xaf, 0x85, [^)]*\)/VHOST_GET_FORK_FROM_OWNER/' \
		-e 's/^/qemu-ioctl: /'
	grep -v 'terminating on signal' "$out/qemu.err" | sed 's/^/qemu-stderr: /'
	if [ "$alive" = 1 ]; then
		echo "PASS: qemu-ioctls $host: QEMU created the device and ran on ($(grep -c '^[0-9]* *ioctl(7, ' "$out/strace.txt") ioctls on the vhost descriptor)"
	else
		echo "FAIL: qemu-ioctls $host: QEMU quit ($(head -n 1 "$out/qemu.err"))"
	fi
	sqcq_target_teardown "$fabric" "$WWPN" >/dev/null 2>&1
	exit 0
fi

# ---- on the build machine -----------------------------------------------------
# shellcheck source=tests/vm/common.sh
. tests/vm/common.sh
id=6.1 host=sqcq l2_qemu=trixie props="num_queues=2,worker_per_virtqueue=on"
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--host) host=$2; shift 2 ;;
	--l2-qemu) l2_qemu=$2; shift 2 ;;
	--props) props=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
case "$host" in intree | sqcq | takeover) ;; *) echo "${0##*/}: --host intree|sqcq|takeover" >&2; exit 2 ;; esac
# shellcheck source=tests/lib/qemu-chroot.sh
. tests/lib/qemu-chroot.sh
qcmd=$(sqcq_qemu_cmd "$l2_qemu") || { echo "FAIL: qemu-ioctls $host: no QEMU of $l2_qemu"; exit 1; }
sqcq_install strace >/dev/null || { echo "FAIL: qemu-ioctls $host: cannot install strace"; exit 1; }
abi=$(sqcq_kernel_abi "$id") || { echo "FAIL: qemu-ioctls $host: cannot resolve kernel $id"; exit 1; }
if [ "$host" != intree ]; then
	tests/matrix.sh "$id" >&2 || true
	[ -f "out/$abi/host/vhost_scsi_sqcq.ko" ] ||
		{ echo "FAIL: qemu-ioctls $host: no out/$abi/host/vhost_scsi_sqcq.ko"; exit 1; }
fi
exec tests/vm/run.sh --kernel "$id" --timeout 300 --env "E2E_L2_QEMU=$qcmd" \
	-- tests/e2e/qemu-ioctls.sh --inside "$host" "$props"
