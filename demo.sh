#!/bin/bash
# The demo: classic vs SQ/CQ, two tables (bench/compare.sh), in about 7
# minutes on 2 cores (10 with a nested guest the emulator breaks).
# Builds both modules for Debian's 6.1 kernel (headers downloaded and
# cached), boots it under QEMU as the host (L1) with vhost_scsi_sqcq and an
# LIO ramdisk target, starts a nested guest (L2) through the unmodified
# QEMU of the distribution with virtio_scsi_sqcq, and runs 4 KiB fio in
# classic mode (sqcq=0) and in SQ/CQ mode, alternating, 3 rounds of 5 s
# per point:
#   1. both modules with their defaults (what a user gets untuned):
#      randread QD1 and randwrite QD32 (libaio);
#   2. the recipe of README "Tuning" (--recipe): a CPU of the host given to
#      its poll thread, the nested guest apart from it: randread QD1 with
#      libaio, and with io_uring --hipri on a guest poll queue (the limit
#      case: no kick, no interrupt).
# Each prints its tables: IOPS, kicks and interrupts per I/O, VM exits per
# I/O and by reason, why the pollers slept.  A step that fails shows why.
# The peers (Debian's in-tree pair, classic with guest halt-polling) and
# more points are bench/compare.sh's full form (bench/README.md).
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
echo "== 1/2 defaults: host VM + nested guest, classic and SQ/CQ (about 3 minutes under TCG)"
CMP_HALTPOLL=0 CMP_INTREE=0 bench/compare.sh --short --runtime 5 --kernel "$KID" \
	--points "randread:1:1 randwrite:32:1" || rc=1
echo "== 2/2 the recipe (README, Tuning): host poll CPU of its own, guest poll queue + io_uring --hipri"
bench/compare.sh --short --recipe --runtime 5 --kernel "$KID" \
	--points "randread:1:1 randread:1:1:hipri" || rc=1
[ "$rc" = 0 ] || echo "demo: a run failed; its reason is printed above" >&2
exit $rc
