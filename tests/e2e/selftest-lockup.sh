#!/bin/bash
# tests/e2e/selftest-lockup.sh: the e2e verdict fails a pair whose guest
# poller locked up, and never repeats it as the emulator's (make
# check-full; about 5 minutes).
#
# Builds the guest driver's test build (tests/faults/guest/, fault hooks of
# common/sqcq_faults.h) under the driver's own name for the 6.1 L2, into
# out/faults-named/<abi>/, and runs the sqcq/sqcq pair with it and
# fault_poll_hog_s=60: the poll thread, once it finds work, spins 60 s with
# preemption off on L2's one vCPU.  The pair must fail (a kernel report on
# L2's console: a soft lockup or an RCU stall), with no REPEAT: line
# although up to two repeats are allowed.  Prints PASS:/FAIL: lines.
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh
PREFIX="e2e-selftest lockup"
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh

abi=$(sqcq_kernel_abi 6.1) || { fail "cannot resolve the 6.1 ABI"; exit 1; }
tests/matrix.sh 6.1 >&2 || { fail "matrix build for 6.1"; exit 1; }
# Not under out/$abi: the matrix build tests/e2e/run.sh starts makes that anew.
dir=$ROOT/out/faults-named/$abi
rm -rf "$dir"
mkdir -p "$dir/guest" "$dir/common" "$dir/scripts"
# Only the guest, built from the test build's source as module
# virtio_scsi_sqcq (L2's scripts know the driver by that name).
sed -e '/^obj-m += host\//d' -e '/SQCQ_TEST_MODULES/d' Kbuild >"$dir/Kbuild"
cp VERSION "$dir/" && cp common/*.h "$dir/common/" &&
	cp scripts/detect-features.sh "$dir/scripts/" &&
	cp guest/virtio_scsi_sqcq.c tests/faults/guest/virtio_scsi_sqcq_faults.c "$dir/guest/" ||
	{ fail "copy the sources"; exit 1; }
printf '%s\n' 'obj-m += virtio_scsi_sqcq.o' \
	'virtio_scsi_sqcq-y := virtio_scsi_sqcq_faults.o' \
	'ccflags-y += -DSQCQ_COMPAT_GUEST -DSQCQ_TEST_FAULTS' >"$dir/guest/Kbuild"
if ! make -C "$SQCQ_CACHE/kheaders/$abi/build" M="$dir" W=1 KCFLAGS=-Werror modules \
	>"$dir/build.log" 2>&1; then
	tail -n 20 "$dir/build.log"
	fail "test build of the guest driver"
	exit 1
fi
check "test build has the poll hog" bash -c \
	"modinfo -p '$dir/guest/virtio_scsi_sqcq.ko' | grep -q '^fault_poll_hog_s:'"

log=$ROOT/out/logs/e2e-selftest-lockup.log
mkdir -p "${log%/*}"
E2E_GUEST_KO=$dir/guest/virtio_scsi_sqcq.ko E2E_GUEST_PARAMS="poll_cpu=0 fault_poll_hog_s=60" \
	E2E_RETRIES=2 E2E_RTHOG=0 E2E_POLL_PHASES=0 E2E_VIOMMU=0 E2E_RESET=0 \
	tests/e2e/run.sh --kernel 6.1 --host sqcq --guest sqcq --no-hotplug \
	--timeout 900 --l2-timeout 720 >"$log" 2>&1
rc=$?
echo "  e2e status $rc; its log: $log"
grep -E '^(FAIL|REPEAT): ' "$log" | sed 's/^/  | /'
check "the pair failed (status $rc)" [ "$rc" != 0 ]
check "no attempt repeated as the emulator's" bash -c "! grep -q '^REPEAT: ' '$log'"
check "a FAIL line names the lockup" \
	grep -qE '^FAIL: .*(soft lockup|stall|LOCKUP)' "$log"
exit $((fails > 0))
