#!/bin/bash
# The demo: build both modules for Debian's 6.1 kernel, boot it under QEMU,
# load the modules with poll parameters and show what a user sees
# (/sys/module parameters, the debugfs view, the device node).
#
# It will grow into the classic vs SQ/CQ fio comparison once both data paths
# and SQ/CQ exist (see README.md "Status": the host has no TCM fabric yet).
set -euo pipefail
cd "$(dirname "$0")"
export SQCQ_CACHE=${SQCQ_CACHE:-/var/cache/virtio-sqcq}
. tests/lib/kernels.sh
KID=${DEMO_KERNEL:-6.1}

echo "== building for Debian kernel $KID (headers are downloaded and cached)"
tests/matrix.sh "$KID"
abi=$(sqcq_kernel_abi "$KID")
exec tests/vm/run.sh --kernel "$KID" --smp 2 -- tests/smoke/demo-inside.sh "$PWD/out/$abi"
