#!/bin/bash
# tests/e2e/selftest-lockup.sh: the e2e verdict fails a pair whose guest
# poller locked up, and never repeats it as the emulator's (make
# check-full; about 5 minutes).
#
# Builds the guest driver's test build under the driver's own name for the
# 6.1 L2 (tests/lib/faults-named.sh), and runs the sqcq/sqcq pair with it and
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

# shellcheck source=tests/lib/faults-named.sh
. tests/lib/faults-named.sh
ko=$(sqcq_faults_named_guest 6.1) || { fail "test build of the guest driver for 6.1"; exit 1; }
check "test build has the poll hog" bash -c \
	"modinfo -p '$ko' | grep -q '^fault_poll_hog_s:'"

log=$ROOT/out/logs/e2e-selftest-lockup.log
mkdir -p "${log%/*}"
E2E_GUEST_KO=$ko E2E_GUEST_PARAMS="poll_cpu=0 fault_poll_hog_s=60" \
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
