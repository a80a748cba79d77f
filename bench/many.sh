#!/bin/bash
# bench/many.sh [--kernel ID] [--devices N] [--seconds S] [--poll-cpu CPU]
#               [--idle-us US]
#
# Many devices, one poll CPU: N vhost-scsi devices of vhost_scsi_sqcq (one
# LIO TPG each, all on one rd_mcp ramdisk) under load at once, each driven
# by its own userspace client (tests/host/vhost-io.c, VMM and guest in one
# process, pinned to CPU 0), with poll_cpu=CPU (default 1), first classic,
# then with SQ/CQ and the shared poller (poll_shared=1, the default), then
# with SQ/CQ and a poller per device ("dedicated", poll_shared=0).  One L1
# boot (QEMU TCG, 2 vCPUs, tests/vm/run.sh).
#
# Prints one line per mode: total IOPS, notifications (kicks + calls) per
# I/O, the host's worker and shared poll threads, their CPU time per second
# of wall time (all of them, and the busiest one), how many of them ran on
# the poll CPU and how many used more than half a CPU.
# A benchmark, not a test: no timing is asserted; a client that failed or
# ran another mode than asked gives a FAIL line and exit status 1.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
. tests/lib/kernels.sh

id=6.1 devices=4 seconds=10 cpu=1 idle=200000
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--devices) devices=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--poll-cpu) cpu=$2; shift 2 ;;
	--idle-us) idle=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
abi=$(sqcq_kernel_abi "$id")
ko=$ROOT/out/$abi/host/vhost_scsi_sqcq.ko
tests/matrix.sh "$id" >&2
mkdir -p out/tools
gcc -O2 -Wall -Wextra -Werror -o out/tools/vhost-io tests/host/vhost-io.c
tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout 1800 \
	-- bench/many-inside.sh "$ko" "$ROOT/out/tools/vhost-io" "$devices" \
	"$seconds" "$cpu" "$idle"
