#!/bin/bash
# bench/host.sh [--kernel ID] [--seconds S] [--idle-us US]
#
# Host module: vhost_scsi_sqcq (classic and SQ/CQ) vs the in-tree vhost_scsi,
# side by side in one L1 boot (QEMU TCG, tests/vm/run.sh).  Both fabrics export
# the SAME rd_mcp ramdisk backstore (one LUN each), and the same userspace
# client (tests/host/vhost-io.c, playing VMM and guest driver) drives
# /dev/vhost-scsi and /dev/vhost-scsi-sqcq (classic, then with SQ/CQ
# doorbells: the client plays the guest driver's SQ/CQ side) in turn: 4 KiB
# random read and write, 1 and 4 request queues, queue depth 1 and 32.  The
# order of the three rotates point by point to even out drift.
#
# Prints one table: IOPS of each, the ratios ours/in-tree and SQ/CQ/classic,
# and notifications (kicks + calls) per I/O seen by the client.  It is a
# benchmark, not a test: no timing is asserted; but a client run that did
# not run as its column says (its status, verify errors, a refused SQ/CQ
# setup) gives a FAIL line, no ratios for its point and exit status 1.
# TCG on a small machine: only the ratios mean anything.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
. tests/lib/kernels.sh

id=6.1 seconds=5 idle=1000
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--idle-us) idle=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
abi=$(sqcq_kernel_abi "$id")
ko=$ROOT/out/$abi/host/vhost_scsi_sqcq.ko
[ -f "$ko" ] || tests/matrix.sh "$id" >&2
mkdir -p out/tools
gcc -O2 -Wall -Wextra -Werror -o out/tools/vhost-io tests/host/vhost-io.c
tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout 1800 \
	-- bench/host-inside.sh "$ko" "$ROOT/out/tools/vhost-io" "$seconds" "$idle"
