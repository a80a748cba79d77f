#!/bin/bash
# The demo: classic vs SQ/CQ in its short form (bench/compare.sh --short).
# Builds both modules for Debian's 6.1 kernel (headers downloaded and
# cached), boots it under QEMU as the host (L1) with vhost_scsi_sqcq and an
# LIO ramdisk target, starts a nested guest (L2) through the unmodified
# QEMU of the distribution with virtio_scsi_sqcq, runs 4 KiB fio at QD1
# and QD32 in classic mode (sqcq=0) and in SQ/CQ mode, and prints one
# table: IOPS, kicks and interrupts per I/O, mode negotiated.
# DEMO_KERNEL picks another kernel of the matrix (tests/lib/kernels.sh).
set -euo pipefail
cd "$(dirname "$0")"
export SQCQ_CACHE=${SQCQ_CACHE:-/var/cache/virtio-sqcq}
KID=${DEMO_KERNEL:-6.1}

echo "== building for Debian kernel $KID"
tests/matrix.sh "$KID"
echo "== host VM + nested guest: classic, then SQ/CQ (a few minutes under TCG)"
exec bench/compare.sh --short --kernel "$KID"
