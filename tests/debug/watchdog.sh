#!/bin/bash
# tests/debug/watchdog.sh [--l2-kernel ID] [--timeout S]: the guest poll
# thread's starvation watchdog with L2 on the sanitizer kernel (default
# `debug`), whose PROVE_RAW_LOCK_NESTING turns a spinlock_t taken in the
# watchdog's hard-irq timer into "BUG: Invalid wait context" (on PREEMPT_RT
# a sleeping lock where nothing may sleep).
#
# L1 runs Debian's 6.1 with our host (a fast L1: with L1 on the sanitizer
# kernel too, L2 is too slow to finish); L2 runs tests/e2e/l2-watchdog.sh
# with the guest driver's test build (tests/lib/faults-named.sh) and a poll
# thread on CPU 0; with the disk there it sets fault_poll_hog_s=1: once the
# thread finds work it spins a second with preemption off, so the watchdog
# must rescue while fio verifies.  The thread's window is fixed and long
# (poll_adaptive=0, poll_idle_us=100000, scaled to TCG as in the recipe):
# with the adaptive window the sanitizer kernel's slow requests dropped it
# to 0, interrupts then left the thread asleep, and in a CI run (2026-12-07)
# it found no work in three fio runs, so the hog never ran.  Any report in either kernel log fails the run (tests/vm/).
# --l2-kernel 6.1-rt runs the same on Debian's PREEMPT_RT kernel (the reap
# in the irq_work thread; that kernel has no lockdep to see the bug).
# Prints the PASS:/FAIL: lines of tests/e2e/run.sh.
set -u
# shellcheck source=tests/lib/stage.sh
. "$(dirname "$0")/../lib/stage.sh"
# shellcheck source=tests/lib/faults-named.sh
. tests/lib/faults-named.sh
l2=debug timeout_s=1200
stage_opt() {
	case "$1" in
	--l2-kernel) l2=$2; STAGE_SHIFT=2 ;;
	*) return 1 ;;
	esac
}
stage_init "e2e watchdog" timeout "$@"
ko=$(sqcq_faults_named_guest "$l2") ||
	{ echo "FAIL: e2e watchdog $l2: test build of the guest driver"; exit 1; }
E2E_GUEST_KO=$ko E2E_GUEST_PARAMS="poll_cpu=0 poll_adaptive=0 poll_idle_us=100000" \
	E2E_L2_SCRIPT=tests/e2e/l2-watchdog.sh E2E_RETRIES=1 E2E_VIOMMU=0 E2E_RESET=0 \
	E2E_RTHOG=0 E2E_POLL_PHASES=0 \
	exec tests/e2e/run.sh --kernel 6.1 --l2-kernel "$l2" --host sqcq --guest sqcq \
	--no-hotplug --timeout "$timeout_s" --l2-timeout $((timeout_s - 200))
