#!/bin/bash
# The demo: classic vs SQ/CQ in its short form, twice (bench/compare.sh).
# Builds both modules for Debian's 6.1 kernel (headers downloaded and
# cached), boots it under QEMU as the host (L1) with vhost_scsi_sqcq and an
# LIO ramdisk target, starts a nested guest (L2) through the unmodified
# QEMU of the distribution with virtio_scsi_sqcq, and runs 4 KiB fio in
# classic mode (sqcq=0) and in SQ/CQ mode, alternating:
#   1. both modules with their defaults (what a user gets untuned);
#   2. the recipe of README "Tuning" (--recipe): a CPU of the host given to
#      its poll thread, the nested guest apart from it, and io_uring --hipri
#      on a guest poll queue (the limit case: no kick, no interrupt).
# Each prints its tables: IOPS, kicks and interrupts per I/O, VM exits per
# I/O and by reason, why the pollers slept.  A step that fails shows why.
# DEMO_KERNEL picks another kernel of the matrix (tests/lib/kernels.sh).
set -euo pipefail
cd "$(dirname "$0")"
export SQCQ_CACHE=${SQCQ_CACHE:-/var/cache/virtio-sqcq}
KID=${DEMO_KERNEL:-6.1}

echo "== building for Debian kernel $KID"
if ! tests/matrix.sh "$KID"; then
	echo "demo: the build failed (above); nothing to run" >&2
	exit 1
fi
rc=0
echo "== 1/2 defaults: host VM + nested guest, classic and SQ/CQ (a few minutes under TCG)"
bench/compare.sh --short --kernel "$KID" || rc=1
echo "== 2/2 the recipe (README, Tuning): host poll CPU of its own, guest poll queue + io_uring --hipri"
bench/compare.sh --short --recipe --kernel "$KID" || rc=1
[ "$rc" = 0 ] || echo "demo: a run failed; its reason is printed above" >&2
exit $rc
