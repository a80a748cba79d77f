#!/bin/bash
# tests/smoke/run.sh [--kernel ID]: the vm stage's smoke tests on one
# kernel (default 6.1), each in a VM of its own: tests/smoke/params.sh
# (both modules' parameters, the ioctl probe) and tests/smoke/load-fail.sh
# (a kernel booted with debugfs=off, loads that fail on purpose).  The
# modules come from out/<abi>/, built here by tests/matrix.sh.
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh

id=6.1
case "${1:-}" in
--kernel) id=${2:?--kernel needs an ID} ;;
"") ;;
*) sed -n '2,/^set -u/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
abi=$(sqcq_kernel_abi "$id") || { echo "FAIL: vm $id: cannot resolve ABI"; exit 1; }
[ -f "out/$abi/host/vhost_scsi_sqcq.ko" ] || tests/matrix.sh "$id" >&2
if [ ! -f "out/$abi/host/vhost_scsi_sqcq.ko" ]; then
	echo "FAIL: vm $id: out/$abi has no modules (tests/matrix.sh $id)"
	exit 1
fi
mkdir -p out/tools
gcc -O2 -Wall -Wextra -Werror -o out/tools/ioctl-probe tests/smoke/ioctl-probe.c ||
	{ echo "FAIL: vm $id: ioctl-probe does not build"; exit 1; }
rc=0
tests/vm/run.sh --kernel "$id" --smp 2 --timeout 600 -- \
	tests/smoke/params.sh "$ROOT/out/$abi" "$ROOT/out/tools/ioctl-probe" || rc=1
# debugfs=off, and loads that fail on purpose (a VM of its own: the
# kernel's command line says it).
tests/vm/run.sh --kernel "$id" --smp 2 --timeout 300 --append debugfs=off -- \
	tests/smoke/load-fail.sh "$ROOT/out/$abi" || rc=1
exit $rc
