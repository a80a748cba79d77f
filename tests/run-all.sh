#!/bin/bash
# The whole test suite (`make check`): every stage prints one line per test,
# "PASS: ...", "FAIL: ..." or "SKIP: ..." (a check that could not be made
# here, saying why), and this script counts them and ends with
# "N passed, N failed, N skipped".  "REPEAT: ..." lines (an e2e attempt the
# emulator broke, run again) are counted too.  Exit status is non-zero when anything failed.
#
#   tests/run-all.sh                 all stages
#   tests/run-all.sh unit model      only those stages
#
# Stages: unit model matrix vm host sqcq guest debug fuzz pkg e2e.  Each installs what it needs.
# SQCQ_FULL=1 (`make check-full`) adds what `make check` leaves out as a
# repeat of what another stage already proves (tests/README.md, "make
# check-full"); `make check` must fit 60 minutes on 2 cores.
# Downloads (and the sanitizer kernel of `debug`) are cached under $SQCQ_CACHE (default
# /var/cache/virtio-sqcq).
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
FULL=${SQCQ_FULL:-0}
export SQCQ_CACHE=${SQCQ_CACHE:-/var/cache/virtio-sqcq}
. tests/lib/kernels.sh

# e2e last: its repeats of runs the emulator broke stop at the budget
# (E2E_DEADLINE) instead of pushing the other stages past it.
ALL_STAGES="unit model matrix vm host sqcq guest debug fuzz pkg e2e"
STAGES=${*:-$ALL_STAGES}
LOGDIR=$ROOT/out/logs
mkdir -p "$LOGDIR"
SUMMARY=$LOGDIR/summary.txt
: >"$SUMMARY"
passed=0
failed=0
repeats=0
skipped=0
stage_times=""

# CI gives the whole run 90 minutes.  Past SQCQ_CHECK_BUDGET_S seconds from
# the start no further stage or long run is started: each one left out is a
# FAIL line, so a run that hung somewhere still ends red with its counts
# instead of being cut off mid-stage.
BUDGET=${SQCQ_CHECK_BUDGET_S:-4900}
total_start=$(date +%s)
# Nor does an end-to-end run repeat an attempt the emulator broke after it.
export E2E_DEADLINE=$((total_start + BUDGET))

# budgeted CMD...: CMD, or a FAIL line when the time budget is spent.
budgeted() {
	local spent=$(($(date +%s) - total_start))
	if [ "$spent" -ge "$BUDGET" ]; then
		echo "FAIL: not run, ${spent}s of the ${BUDGET}s budget spent (SQCQ_CHECK_BUDGET_S): $*"
		return 1
	fi
	"$@"
}

# run_stage NAME CMD...: run CMD, stream its output, count its result lines.
# A stage that fails without printing a FAIL line counts as one failure.
run_stage() {
	local name=$1 start rc p f r k out
	shift
	out=$LOGDIR/stage-$name.log
	start=$(date +%s)
	echo "=== stage $name: $*"
	budgeted "$@" 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	p=$(grep -ac '^PASS: ' "$out")
	f=$(grep -ac '^FAIL: ' "$out")
	r=$(grep -ac '^REPEAT: ' "$out")
	k=$(grep -ac '^SKIP: ' "$out")
	skipped=$((skipped + k))
	repeats=$((repeats + r))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL: stage $name exited with status $rc"
		f=1
	fi
	if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL: stage $name ran no test"
		f=1
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	grep -aE '^(PASS|FAIL|SKIP|REPEAT): ' "$out" >>"$SUMMARY"
	local rep=""
	[ "$r" -eq 0 ] || rep=", $r attempts repeated as the emulator's (REPEAT: lines)"
	echo "=== stage $name: $p passed, $f failed, $k skipped, $(($(date +%s) - start))s$rep"
	stage_times+="$(printf '%-8s %6ss  %5s passed %4s failed' "$name" "$(($(date +%s) - start))" "$p" "$f")"$'\n'
}

# The userspace unit tests, and the list of tests/check.
unit_stage() {
	local rc=0
	tests/unit/run.sh || rc=1
	tests/check --selftest || rc=1
	return $rc
}

# The VM smoke tests (tests/smoke/run.sh) on every kernel of the matrix.
vm_stage() {
	local id rc=0
	for id in $SQCQ_VM_KERNELS; do
		tests/smoke/run.sh --kernel "$id" || rc=1
	done
	# The rig's nested self-test boots an L2 as every e2e pair does, with
	# the same results path back (tests/vm/nested.sh): check-full only.
	if [ "$FULL" = 1 ]; then
		tests/vm/selftest.sh || rc=1
	else
		tests/vm/selftest.sh log-parser boot-6.1 boot-7.2 exit-status dirty-log \
			timeout boot-retry boot-stall cwd-tmp || rc=1
	fi
	return $rc
}

# The host module driven by the userspace client, and the guest driver
# against QEMU's virtio-scsi: on 7.2 here, and on 6.1 in the debug stage,
# whose sanitizer kernel is Debian's 6.1 source (the same checks, with
# KASAN and lockdep watching).  Debian's own 6.1 build as well costs about
# 7 minutes CI has not got (SQCQ_STAGE_KERNELS="6.1 7.2" by hand); the vm,
# matrix, e2e and pkg stages run Debian's 6.1.
per_kernel() {
	local script=$1 id rc=0
	for id in ${SQCQ_STAGE_KERNELS:-7.2}; do
		budgeted "$script" --kernel "$id" || rc=1
	done
	return $rc
}

# The host client on the stage kernels, then what one owner can make the
# module hold (tests/host/limits.sh) on Debian's 6.1, whose workers are
# kthreads: the kernel charges and counts a thread of the owner (7.2) by
# itself, and the sanitizer kernel has no cgroups.
host_stage() {
	local rc=0
	per_kernel tests/host/run.sh || rc=1
	budgeted tests/host/limits.sh --kernel 6.1 || rc=1
	return $rc
}

# The guest driver on the stage kernels, and on Debian's PREEMPT_RT kernel
# (6.1-rt): spinlocks sleep there and interrupt handlers run in threads,
# so a lock taken where nothing may sleep shows as "scheduling while
# atomic" or a hang (that kernel has no DEBUG_ATOMIC_SLEEP; the debug
# stage's PROVE_RAW_LOCK_NESTING sees the same class of bug always).
guest_stage() {
	local rc=0
	per_kernel tests/guest/run.sh || rc=1
	budgeted tests/guest/run.sh --kernel 6.1-rt || rc=1
	# The poll thread's watchdog rescuing a thread that holds its CPU, in
	# an L2 on the rt kernel with our host in L1 (its reap in the irq_work
	# thread there; about 90 s).
	budgeted tests/debug/watchdog.sh --l2-kernel 6.1-rt || rc=1
	# A freeze asked for with a LUN reset unanswered (#24: the LUN must
	# run after; about 25 s).
	budgeted tests/guest/tmf-freeze.sh --kernel 7.2 || rc=1
	return $rc
}

# Nested end to end with unmodified QEMU (tests/e2e/run.sh, kernel 6.1): our
# guest driver against the in-tree vhost_scsi (SQ/CQ falls back to classic),
# our host with the in-tree guest driver under the in-tree names
# (takeover=1: by vhostfd and by plain wwpn=), and both of ours with SQ/CQ
# negotiated; each with fio verify, a device reset under load (our guest
# driver) and a LUN hotplug; with our host also a second L2 beside an
# emulated intel-iommu (iommu_platform=on: the host refuses
# VIRTIO_F_ACCESS_PLATFORM, QEMU reports it).  Both of ours run twice,
# each time with one thing newer than the first two pairs: L2 started by
# trixie's QEMU 10, and L2 on kernel 7.2 (below).  Both of ours with
# bookworm's QEMU and L2 on 6.1 as well costs about 3 minutes CI has not
# got (tests/e2e/run.sh --host sqcq --guest sqcq, by hand).  A run the emulator broke is
# repeated, here up to 3 times (tests/e2e/run.sh, E2E_RETRIES: with 5, one
# CI run spent most of its 90 minutes on repeats, before the budget's
# E2E_DEADLINE stopped them; a fresh-clone run of 2026-12-03 needed 3
# attempts for the trixie pair: L1 reset mid-run, then L2 reset before
# its kernel printed a line); a hang costs
# at most --timeout.  Then both of ours again with trixie's QEMU 10 starting
# L2 (--l2-qemu, its chroot made on first use) and num_queues=2,
# worker_per_virtqueue=on (a worker of its own for the second I/O queue,
# SQ/CQ all the same): the ioctls a newer QEMU sends and its virtio-pci,
# ~5 min.  These L2s run under KVM in L1, on
# TCG's emulated SVM, which breaks an L2 whose CPU is kept busy by the
# guest poller beside fio: a double fault with the kernel on a user stack
# or with the user's GS base, or a silent reset, in every attempt of a CI
# run (2026-12-01).  So the guest poller's phases (runtime poll_idle_us,
# adaptive window, CPU hog) run in a last pair whose L2 is under TCG inside
# L1's TCG (SQCQ_VM_NESTED_ACCEL=tcg: no emulated SVM; ~6 min), on a CPU of
# L1 apart from the host poller (E2E_L2_ISOLATE=1: otherwise L2's emulation
# keeps the poller yielding; and with a fixed 1 s window, since L2's
# requests come too far apart for the adaptive one: 0 or 1 kick saved in
# about 1900 requests without), with a smaller first fio
# and without the reset, hotplug and vIOMMU parts the others cover.  The
# SCHED_FIFO loops (rt-hog) are in none: under TCG, as on the sanitizer L1,
# L2 completed no I/O in the 5 s under them (cause not found), and with KVM
# they are where the emulated SVM breaks most.  sid's QEMU, rt-hog and the
# other pairs are by-hand runs (tests/README.md).
e2e_stage() {
	local rc=0 pair hg q k opts smp viommu gp mig retries=${E2E_RETRIES:-3}
	# The verdict that decides which attempts are repeated can fail, and
	# so can the benchmark's parser of L1's exit reasons.
	tests/e2e/selftest.sh || rc=1
	bash bench/l1-exits.sh --selftest || rc=1
	# The same verdict on a real pair whose guest poller locks up (a test
	# build of the driver): check-full, ~5 minutes.
	if [ "$FULL" = 1 ]; then
		tests/e2e/selftest-lockup.sh || rc=1
	fi
	# HOST/GUEST[@SUITE of L2's QEMU]
	for pair in intree/sqcq takeover/intree sqcq/sqcq@trixie; do
		hg=${pair%@*} q=bookworm opts="" smp=1
		[ "$hg" = "$pair" ] || q=${pair#*@}
		# trixie's QEMU 10 with a worker per I/O queue after the first;
		# L2 on 2 vCPUs, so that the guest uses both queues.
		# Its guest poll thread on L2's second vCPU (poll_cpu=1: the
		# thread only where a CPU is given to it); the 7.2 pair below
		# runs the default, without one.
		gp=""
		[ "$q" = trixie ] && opts=num_queues=2,worker_per_virtqueue=on smp=2 gp=poll_cpu=1
		# Our host's refusal behind a vIOMMU is the same with any guest:
		# the takeover pair checks it, check-full every pair of ours.
		viommu=1
		[ "$FULL" = 1 ] || [ "$hg" = takeover/intree ] || viommu=0
		# Live migration (tests/e2e/l1-migrate.sh, ~4 min) in the
		# takeover pair: our host with both guest drivers.  In one
		# fresh-clone run (2026-12-06) L1's CPU 0 stalled inside L2 after
		# both moves had passed; such a stall is repeated as the
		# emulator's only by the signs tests/e2e/verdict.sh names.
		mig=0
		[ "$hg" = takeover/intree ] && mig=1
		E2E_MIGRATE=$mig E2E_VIOMMU=$viommu E2E_L2_SMP=$smp E2E_L2_VHOST_OPTS=$opts E2E_RTHOG=0 E2E_POLL_PHASES=0 E2E_GUEST_PARAMS=$gp \
			E2E_RETRIES=$retries budgeted tests/e2e/run.sh --kernel 6.1 --host "${hg%/*}" --guest "${hg#*/}" \
			--l2-qemu "$q" --timeout 900 --l2-timeout 720 || rc=1
	done
	# Our 7.2 guest driver with SQ/CQ against our host (L1 stays on 6.1: a
	# 7.2 L1's KVM stops L2 with "KVM internal error", tests/README.md).
	# Not merged into the trixie pair (2 vCPUs): in the one run that tried
	# it (2026-12-04) the 7.2 L2 lost its GS base on an interrupt from user
	# mode (tests/e2e/verdict.sh).
	# This pair is also the recipe of README "Tuning" (the other pairs run
	# the host's default, serve-only without a poll CPU): L1 on 3 vCPUs,
	# the host polling on CPU 0 (E2E_L2_ISOLATE sets poll_cpu=0;
	# poll_shared=0, a 100 ms window scaled to TCG as in bench/compare.sh
	# --recipe), L2 alone on CPU 1, L1's own work on CPU 2 (with 2 vCPUs
	# it shared the poll CPU: a contended sleep per request), and a second
	# queue on the device for the guest's poll queue of the limit case
	# (E2E_HIPRI, tests/e2e/l2.sh 3b).  As long as with 2 vCPUs (199 s).
	E2E_L1_SMP=3 E2E_L2_ISOLATE=1 E2E_HOST_PARAMS="poll_shared=0 poll_idle_us=100000" E2E_L2_VHOST_OPTS=num_queues=2 E2E_HIPRI=1 \
	E2E_RTHOG=0 E2E_POLL_PHASES=0 E2E_VIOMMU=0 E2E_RETRIES=$retries \
		budgeted tests/e2e/run.sh --kernel 6.1 --l2-kernel 7.2 --host sqcq --guest sqcq \
		--timeout 900 --l2-timeout 720 || rc=1
	# libvirt (E2E_L2_VIA=libvirt) is by hand: in one of two local CI runs
	# L1 panicked under it ("corrupted stack end detected inside scheduler"
	# in the vCPU thread of the QEMU libvirt started), cause not found
	# (tests/README.md).
	# L2 under TCG (no emulated SVM) with L1 and L2 on 7.2 (E2E_TCG_KERNELS,
	# by hand, see below): our 7.2 host and guest modules together (a 7.2
	# L1's KVM cannot run L2 on the emulated SVM, tests/README.md), and the
	# guest poller's phases; 6.1 too with E2E_TCG_KERNELS="6.1 7.2".
	# Our host polls with a poller per device here (poll_shared=0), as
	# these pairs did when they passed two CI runs: in the one local CI
	# run with the shared poller (CPU 0; the device's worker then runs on
	# CPU 1 beside L2's busy vCPU thread) the 7.2 pair's L2 completed no
	# I/O during the guest's CPU hog.  Cause not established: a rerun
	# with poll_shared=0 was as slow in its fio phases (96 s, 61 s in
	# earlier runs).  The shared poller is tested in the sqcq stage (4e),
	# the fuzzer and the model; by hand here with E2E_HOST_PARAMS.
	# Out of make check (E2E_TCG_KERNELS=7.2 by hand): L2 under TCG in
	# TCG is too slow for these phases to be reliable (2026-12-02: 89 I/Os
	# in a QD8 fio's 18 s, fio over a minute to start, tests/README.md).
	# E2E_GUEST_HOG=0 leaves the hog out.
	for k in ${E2E_TCG_KERNELS:-}; do
		SQCQ_VM_NESTED_ACCEL=tcg E2E_L2_ISOLATE=1 E2E_RTHOG=0 E2E_RESET=0 E2E_VIOMMU=0 E2E_GUEST_PARAMS=poll_cpu=0 \
			E2E_HOST_PARAMS="poll_idle_us=1000000 poll_adaptive=0 poll_shared=0" E2E_RETRIES=$retries \
			budgeted tests/e2e/run.sh --kernel "$k" --host sqcq --guest sqcq --no-hotplug \
			--fio-size 4m --min-ios 1000 --timeout 1500 --l2-timeout 1300 || rc=1
	done
	return $rc
}

# The sanitizer kernel (tests/debug/): build it (cached; an hour cold on 2
# cores), our modules against it, prove the detectors fire on a module with
# deliberate bugs, then the host, SQ/CQ, guest and sqcq/sqcq end-to-end runs
# on it (L1 and L2). Any KASAN/UBSAN/KFENCE/lockdep/atomic-sleep/ODEBUG report
# or kmemleak object fails the run that saw it (tests/vm/run.sh).
timed() {
	local t0=$SECONDS rc=0
	budgeted "$@" || rc=$?
	echo "debug: $* took $((SECONDS - t0))s (status $rc)" >&2
	return $rc
}

debug_stage() {
	local rc=0 t0=$SECONDS
	if tests/debug/build-kernel.sh >/dev/null; then
		echo "PASS: debug kernel-build ($((SECONDS - t0))s)"
	else
		echo "FAIL: debug kernel-build (tests/debug/build-kernel.sh)"
		return 1
	fi
	timed tests/matrix.sh debug || return 1
	timed tests/debug/selftest.sh || rc=1
	# A hang must not eat CI's 90 minutes, nor a slow machine fail it:
	# timeouts about 1.3 times the slowest runs measured on a 2-core
	# machine (2026-12-03: host 544-620 s, SQ/CQ 1041 s with 20 000
	# steady and 5 000 classic/own-workers I/Os, guest 931-960 s, the
	# whole stage 2965 s).  Everything a test script does is some ten
	# times slower on this kernel (an exec of /bin/true 0.8 s, a start of
	# Debian's fio 11-18 s), so its runs do less of what only adds
	# volume, the sanitizers watching the same paths: the SQ/CQ run
	# verifies fewer I/Os (SQCQ_STEADY_IOS, SQCQ_LOAD_IOS: 5000 and 1000,
	# halved on 2026-12-05 when make check passed 60 minutes) and opens 50
	# devices, not 1000 (SQCQ_SETUP_CYCLES); the guest run's verify runs
	# write a quarter and its section 9 (the probe without poll queues) is
	# left out (SQCQ_GUEST_IO_DIV).
	timed tests/host/run.sh --kernel debug --timeout 900 || rc=1
	# The polling policy's timing-bound checks are not counted there, and
	# section 4c, all such checks, is not run (SQCQ_POLICY_CHECKS,
	# tests/host/sqcq-inside.sh): 7.2's run asserts them.
	SQCQ_STEADY_IOS=5000 SQCQ_LOAD_IOS=1000 SQCQ_SETUP_CYCLES=50 SQCQ_POLICY_CHECKS=0 \
		timed tests/host/sqcq.sh --kernel debug --timeout 1500 || rc=1
	# --no-iommu: the q35 + intel-iommu VM does not see its disk on this
	# kernel (pci=noacpi, tests/debug/cmdline, is the suspect).
	SQCQ_GUEST_IO_DIV=4 timed tests/guest/run.sh --kernel debug --no-iommu --timeout 1300 || rc=1
	# The guest poll thread's watchdog rescuing a thread that holds its
	# CPU, with L2 on this kernel (PROVE_RAW_LOCK_NESTING: nothing in the
	# hard-irq timer may take a spinlock_t) and L1 on Debian's 6.1.
	timed tests/debug/watchdog.sh || rc=1
	# By hand (SQCQ_DEBUG_E2E=1; 14 minutes of a CI run that must end in
	# 90): both of ours end to end with L1 (our host module, LIO, KVM) on this
	# kernel and L2 on Debian's 6.1 (with L2 on the debug kernel too the
	# nested guest is too slow to finish).  Measured 9 to 14 minutes; one
	# repeat at most of a run the emulator broke (one CI run on
	# 2026-12-01 saw L1 and then L2 reset silently, both without a word in
	# their kernel logs), which bounds it to 40 minutes.  No
	# SCHED_FIFO loops in L2 here (by hand only, see e2e_stage): under them
	# L2 on this slow L1 completed no I/O at all in 5 s (cause not found,
	# docs/sqcq.md).
	# The refusal behind a vIOMMU (E2E_VIOMMU) is left to the e2e stage:
	# a second L2 on this L1 costs minutes.  Without the guest poller's
	# phases, as in the e2e stage's KVM pairs: its L2 runs on TCG's emulated
	# SVM too, and a CI run on 2026-12-01 saw that L2 reset silently in them.
	[ "${SQCQ_DEBUG_E2E:-0}" = 1 ] || return $rc
	# The guest poll thread runs (poll_cpu=0), under the sanitizers.
	E2E_RTHOG=0 E2E_POLL_PHASES=0 E2E_RETRIES=1 E2E_VIOMMU=0 E2E_GUEST_PARAMS=poll_cpu=0 \
		timed tests/e2e/run.sh --kernel debug --l2-kernel 6.1 \
		--host sqcq --guest sqcq --timeout 1200 --l2-timeout 1000 || rc=1
	return $rc
}

for stage in $STAGES; do
	case $stage in
	unit) run_stage unit unit_stage ;;
	model) run_stage model tests/model/run.sh ;;
	matrix) run_stage matrix tests/matrix.sh ;;
	vm) run_stage vm vm_stage ;;
	host) run_stage host host_stage ;;
	sqcq) run_stage sqcq per_kernel tests/host/sqcq.sh ;;
	guest) run_stage guest guest_stage ;;
	e2e) run_stage e2e e2e_stage ;;
	debug) run_stage debug debug_stage ;;
	fuzz)
		# The adversarial client on the sanitizer kernel, a fresh seed each
		# run (printed; tests/fuzz/README.md says how to replay one).
		run_stage fuzz tests/fuzz/run.sh --kernel debug
		;;
	pkg) run_stage pkg tests/pkg/run.sh ;;
	*) echo "FAIL: unknown stage $stage"; failed=$((failed + 1)) ;;
	esac
done
# CI keeps only the head and the tail of this output: what failed is
# repeated here, at the end, so that its tail says which checks (the fuzz
# seed with them) and what the first kernel report of each stage was.
if [ "$failed" -ne 0 ]; then
	echo "=== what failed (the first 40 FAIL lines, each cut at 600 characters):"
	grep -a '^FAIL: ' "$SUMMARY" | head -n 40 | cut -c1-600
	if [[ " $STAGES " == *" fuzz "* ]] && grep -aq '^FAIL: ' "$LOGDIR/stage-fuzz.log"; then
		grep -a -m1 '^fuzz seed: ' "$LOGDIR/stage-fuzz.log"
		grep -a -m1 -A16 'new kernel report line' "$LOGDIR/stage-fuzz.log" | cut -c1-300
	fi
	# A VM's kernel report (an oops, a lockup): its registers and call
	# trace as tests/vm/run.sh printed them, first one of each stage; the
	# FAIL line alone did not say whose code it was (CI, 2026-12-06).
	for f in "$LOGDIR"/stage-*.log; do
		grep -aqi '^FAIL: vm-kernel-log' "$f" || continue
		echo "=== first kernel report in $(basename "$f" .log):"
		awk '/^---- first report / { p = 1 } p { print; if (++n >= 45) exit }' "$f" | cut -c1-240
	done
fi
echo "=== stage times (seconds):"
printf '%s' "$stage_times"
echo "=== total $(($(date +%s) - total_start))s; $repeats e2e attempts repeated as the emulator's; logs in $LOGDIR"
# A SKIP is never a pass: counted apart, and each one's line is above.
echo "$passed passed, $failed failed, $skipped skipped" | tee "$LOGDIR/result.txt"
[ "$failed" -eq 0 ]
