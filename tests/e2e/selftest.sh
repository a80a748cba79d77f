#!/bin/bash
# tests/e2e/selftest.sh: the e2e verdict (tests/e2e/verdict.sh) can fail.
# Attempts made up of the lines real ones print (no VM, a second): each
# must be judged the emulator's, and so repeated, or a test's failure, as
# below.  Above all a lockup of our guest poller that stopped L2 (its
# report on L2's console only, its user space silent) is never repeated.
# Last, bench/compare.sh's tables of a made-up run the emulator broke.
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -u
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=tests/vm/common.sh
. tests/vm/common.sh
# shellcheck source=tests/e2e/verdict.sh
. tests/e2e/verdict.sh
PREFIX="e2e-selftest"
# shellcheck source=tests/lib/check.sh
. tests/lib/check.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# attempt NAME: a fresh attempt directory in $d; its files are written by
# the caller (log, stall, results/console.log, results/l2/console.log).
attempt() {
	d=$tmp/$1
	mkdir -p "$d/results/l2"
	: >"$d/log"
}
# expect_repeat NAME / expect_ours NAME: the verdict on attempt $d.
expect_repeat() {
	if e2e_emulator_fault "$d"; then pass "$1 repeated ($E2E_WHY)"; else fail "$1 must be repeated, was judged ours: $E2E_WHY"; fi
}
expect_ours() {
	if e2e_emulator_fault "$d"; then fail "$1 must fail, was repeated: $E2E_WHY"; else pass "$1 fails ($E2E_WHY)"; fi
}
ok_lines='PASS: e2e sqcq/sqcq l2 sqcq-negotiated
PASS: e2e sqcq/sqcq fio-verify-crc32c'
dfault_user='[  80.1] traps: PANIC: double fault, error_code: 0x0
[  80.1] CPU: 0 PID: 312 Comm: fio Not tainted 6.1.0-57-amd64
[  80.1] RIP: 0010:entry_SYSCALL_64+0x4/0x40
[  80.1] RSP: 0018:00007ffd2c3a1e58 EFLAGS: 00010086
[  80.1] Kernel panic - not syncing: Machine halted.'
lockup='[  61.3] watchdog: BUG: soft lockup - CPU#0 stuck for 26s! [virtscsi-poll/0:211]
[  61.3] RIP: 0010:virtscsi_poll_fn+0x91/0x2f0 [virtio_scsi_sqcq]'

# The poller lockup of tests/README.md's "How each verdict can fail": L2's
# user space stopped (no heartbeat: vm-l2-stall), the report is on L2's
# console only.
attempt lockup-stall
printf '%s\nFAIL: vm-l2-stall (no heartbeat from L2 for 190 s, clean kernel log)\nFAIL: e2e sqcq/sqcq l2-run (nested.sh status 124)\n' \
	"$ok_lines" >"$d/log"
printf 'booting\n%s\n' "$lockup" >"$d/results/l2/console.log"
expect_ours "guest poller lockup on L2's console, L2 stalled"
# The same lockup with L1 frozen as well.
attempt lockup-l1-stall
echo "L1 silent for 300 s" >"$d/stall"
printf 'booting\n%s\n' "$lockup" >"$d/results/l2/console.log"
expect_ours "lockup on L2's console, L1 frozen"
# A lockup in L1 (our host poller) on L1's console, L1 then gone.
attempt host-lockup
echo 'FAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)' >"$d/log"
printf '%s\n' "${lockup//virtscsi-poll\/0/vhost-sqcq-poll}" >"$d/results/console.log"
expect_ours "lockup on L1's console, L1 gone"
# A test that failed before the emulator broke the attempt.
attempt verify-then-reset
printf 'FAIL: e2e sqcq/sqcq fio-verify-crc32c (2 verify errors)\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)\n' >"$d/log"
expect_ours "a failed verify, then L1 gone"
# A double fault preceded by a report of ours.
attempt report-then-dfault
printf '%s\nFAIL: vm-kernel-log (BUG: double fault)\n' "$ok_lines" >"$d/log"
printf '%s\n%s\n' "$lockup" "$dfault_user" >"$d/results/l2/console.log"
cp "$d/results/l2/console.log" "$d/log.l2"
cat "$d/log.l2" >>"$d/log"
expect_ours "a lockup, then the emulator's double fault"
# A double fault in our code (not a user stack, not error_entry).
attempt own-dfault
printf 'FAIL: vm-kernel-log (panic: double fault)\n[ 9.0] traps: PANIC: double fault, error_code: 0x0\n[ 9.0] RIP: 0010:virtscsi_poll_fn+0x10/0x2f0 [virtio_scsi_sqcq]\n[ 9.0] RSP: 0018:ffffb4a0c0123f58 EFLAGS: 00010086\n' >"$d/log"
cp "$d/log" "$d/results/l2/console.log"
expect_ours "a double fault in our code"
# A timeout and nothing else: no sign of the emulator.
attempt timeout
echo 'FAIL: vm-timeout (QEMU killed after 900s, kernel 6.1.0-57)' >"$d/log"
expect_ours "a timeout without a sign of the emulator"

# What the emulator does here, and nothing else: repeated.
attempt l2-stall-clean
printf '%s\nFAIL: vm-l2-stall (no heartbeat from L2 for 190 s, clean kernel log)\nFAIL: e2e sqcq/sqcq l2-run (nested.sh status 124)\n' \
	"$ok_lines" >"$d/log"
printf 'booting\nsqcq-stage2: running command\n' >"$d/results/l2/console.log"
expect_repeat "L2 frozen, clean consoles"
attempt l1-reset
echo 'FAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)' >"$d/log"
printf 'booting\n' >"$d/results/console.log"
expect_repeat "L1 reset silently"
attempt kvm-error
printf 'FAIL: vm-kvm-error (KVM internal error. Suberror: 3 in the nested guest)\nFAIL: e2e sqcq/sqcq l2-run (nested.sh status 125)\n' >"$d/log"
expect_repeat "KVM internal error"
attempt emulator-dfault
printf '%s\nFAIL: vm-kernel-log (panic: double fault)\n%s\nFAIL: e2e sqcq/sqcq l2-run (nested.sh status 1)\n' \
	"$ok_lines" "$dfault_user" >"$d/log"
printf 'booting\n%s\n' "$dfault_user" >"$d/results/l2/console.log"
expect_repeat "double fault on a user stack"
# The trampoline fault of 2026-12-04 (CI of the stop that added it).
tramp='[  35.59] BUG: ENTRY_TRAMPOLINE stack guard page was hit at fffffe000003cfd8 (stack is fffffe000003d000..fffffe000003e000)
[  35.59] Oops: stack guard page: 0000 [#1] SMP NOPTI
[  35.59] RIP: 0010:irqentry_enter+0x15/0x90
[  35.59]  asm_common_interrupt+0x26/0x40
[  35.59] RIP: 0033:0x55b009686dcc
[  35.59] Kernel panic - not syncing: Fatal exception in interrupt'
attempt trampoline
printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 7.2.13+deb14)\nFAIL: vm-kernel-log (Oops, panic: Oops: stack guard page: 0000 [#1] SMP NOPTI)\n%s\nFAIL: e2e sqcq/sqcq qemu-trixie l2-7.2 l2-run (nested.sh status 125)\n' \
	"$ok_lines" "$tramp" >"$d/log"
printf 'booting\n%s\n' "$tramp" >"$d/results/l2/console.log"
expect_repeat "GS base lost on an interrupt from user mode (entry trampoline)"
attempt lockup-then-trampoline
cp "$tmp/trampoline/log" "$d/log"
printf 'booting\n%s\n%s\n' "$lockup" "$tramp" >"$d/results/l2/console.log"
expect_ours "a lockup, then the trampoline fault"
# A migrated L2 that died of the emulator's double fault on a user stack
# (the takeover pair's migration test, CI of 2026-12-07, late): its three
# FAIL lines are what its death leaves.
mig_fails='FAIL: e2e takeover/intree migrate sqcq: L2 did not end on C
FAIL: e2e takeover/intree migrate sqcq: verified I/O across both moves (no result; no mismatch)
FAIL: e2e takeover/intree migrate sqcq: L2'"'"'s kernel log clean ([   66.804592] Call Trace:)'
mig_dfault='[   66.802712] traps: PANIC: double fault, error_code: 0x0
[   66.804562] double fault: 0000 [#1] PREEMPT SMP NOPTI
[   66.804592] CPU: 0 PID: 126 Comm: migrate-verify Tainted: G           OE      6.1.0-57-amd64 #1
[   66.804592] RIP: 0010:exc_page_fault+0x7/0x170
[   66.804592] RSP: 0018:00007ff8e8ed6000 EFLAGS: 00000083
[   66.804592] Call Trace:
[   66.804592] Kernel panic - not syncing: Fatal exception in interrupt'
# mig_attempt NAME FAILS CONSOLE-C: such an attempt.
mig_attempt() {
	attempt "$1"
	mkdir -p "$d/results/migrate-sqcq"
	printf '%s\n%s\n' "$ok_lines" "$2" >"$d/log"
	printf 'verify: t=58 ios=56348 bad=0 errors=0\n%s\n' "$3" >"$d/results/migrate-sqcq/console-C.log"
}
mig_attempt migrate-dfault "$mig_fails" "$mig_dfault"
expect_repeat "a migrated L2's double fault on a user stack"
mig_attempt migrate-dfault-mismatch "${mig_fails/no mismatch/verify: block 812 mismatch}" "$mig_dfault"
expect_ours "a verify mismatch, then the migrated L2's double fault"
mig_attempt migrate-lockup-dfault "$mig_fails" "$lockup"$'\n'"$mig_dfault"
expect_ours "a lockup of ours, then the migrated L2's double fault"
mig_attempt migrate-oops "$mig_fails" "${mig_dfault//traps: PANIC: double fault/BUG: kernel NULL pointer dereference}"
expect_ours "a migrated L2's oops that is no double fault"
# A migrated L2 that froze while booting, before its SCSI layer (CI of
# 2026-12-07, late): repeated; frozen after its disk appeared, or with a
# report, not.
mig_boot='[    4.874598] virtio-pci 0000:00:08.0: enabling device (0000 -> 0003)
[    4.960247] 9pnet: Installing 9P2000 support'
mig_boot_attempt() {
	attempt "$1"
	# The sqcq run before it passed, its console kept.
	mkdir -p "$d/results/migrate-classic" "$d/results/migrate-sqcq"
	printf '%s\nmigrate-l2: end\n' "$mig_boot" >"$d/results/migrate-sqcq/console-A.log"
	printf '%s\nFAIL: e2e takeover/intree migrate classic: L2 did not start its I/O (%s)\n' "$ok_lines" "${2//$'\n'/ }" >"$d/log"
	printf '%s\n' "$2" >"$d/results/migrate-classic/console-A.log"
}
mig_boot_attempt migrate-boot-freeze "$mig_boot"
expect_repeat "a migrated L2 frozen while booting, before its SCSI layer"
mig_boot_attempt migrate-scan-freeze "$mig_boot"$'\n[    5.579061] SCSI subsystem initialized\n[    5.718109] scsi host0: Virtio SCSI HBA'
expect_ours "a migrated L2 frozen in its SCSI scan"
mig_boot_attempt migrate-boot-report "$mig_boot"$'\n'"$lockup"
expect_ours "a migrated L2 with a report while booting"
attempt migrate-boot-noconsole
printf '%s\nFAIL: e2e takeover/intree migrate classic: L2 did not start its I/O (x)\n' "$ok_lines" >"$d/log"
expect_ours "a migrated L2 that did not start, its console missing"
# A double fault with an all-zero frame (the benchmark's L2, 2026-12-04).
nullframe='[ 107.09] traps: PANIC: double fault, error_code: 0x0
[ 107.09] double fault: 0000 [#1] PREEMPT SMP NOPTI
[ 107.09] CPU: 0 PID: 216 Comm: compare-l2.sh Tainted: G           OE      6.1.0-57-amd64 #1
[ 107.09] RIP: 0000:0x0
[ 107.09] RSP: 0000:0000000000000000 EFLAGS: 00000000 ORIG_RAX: 0000000000000000
[ 107.09] Kernel panic - not syncing: Fatal exception in interrupt'
attempt null-frame
printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)\nFAIL: vm-kernel-log (panic: Kernel panic - not syncing: Fatal exception in interrupt)\n%s\nFAIL: e2e sqcq/sqcq l2-run (nested.sh status 125)\n' \
	"$ok_lines" "$nullframe" >"$d/log"
printf 'booting\n%s\n' "$nullframe" >"$d/results/l2/console.log"
expect_repeat "double fault with an all-zero frame"
# Lines from a serial port end in CR: the same verdicts.
attempt l2-stall-crlf
printf '%s\nFAIL: vm-l2-stall (no heartbeat from L2 for 190 s, clean kernel log)\nFAIL: e2e sqcq/sqcq l2-run (nested.sh status 124)\n' \
	"$ok_lines" | sed 's/$/\r/' >"$d/log"
expect_repeat "L2 frozen, clean consoles, CR LF lines"
attempt l1-frozen
echo "FAIL: e2e sqcq/sqcq qemu-trixie 6.1.0-57 L1 stalled (no heartbeat for 245 s; frozen emulator?)" >"$d/stall"
printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)\n' "$ok_lines" >"$d/log"
cat "$d/stall" >>"$d/log"
expect_repeat "L1 frozen (the watchdog's line in the log)"
# L2's vCPU thread stuck in KVM_RUN in L1 (the trixie pair in CI,
# 2026-12-05: L1's watchdog saw it, then L1 stopped answering): repeated.
# The same lockup in an ioctl of our host module, or after a report of
# ours: never.
vcpu_lockup='[ 512.40] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [qemu-system-x86:290]
[ 512.40] Modules linked in: vhost_scsi_sqcq(OE) target_core_mod kvm_amd kvm
[ 512.40] CPU: 1 PID: 290 Comm: qemu-system-x86 Tainted: G           OE      6.1.0-57-amd64 #1
[ 512.40] RIP: 0010:svm_vcpu_run+0x3c4/0x7a0 [kvm_amd]
[ 512.40] Call Trace:
[ 512.40]  <TASK>
[ 512.40]  vcpu_enter_guest+0x6f1/0x1130 [kvm]
[ 512.40]  kvm_arch_vcpu_ioctl_run+0x1d8/0x560 [kvm]
[ 512.40]  kvm_vcpu_ioctl+0x26e/0x6a0 [kvm]
[ 512.40]  __x64_sys_ioctl+0x8d/0xd0
[ 512.40]  </TASK>'
l1_lockup_fails='FAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)
FAIL: vm-kernel-log (lockup: watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [qemu-system-x86:290]
)
FAIL: e2e sqcq/sqcq qemu-trixie 6.1.0-57 L1 stalled (no heartbeat for 246 s; frozen emulator?)'
attempt vcpu-run-lockup
printf '%s\n%s\n' "$ok_lines" "$l1_lockup_fails" >"$d/log"
printf 'booting\n%s\n' "$vcpu_lockup" >"$d/results/console.log"
echo "L1 silent for 246 s" >"$d/stall"
expect_repeat "L2's vCPU thread stuck in KVM_RUN in L1"
attempt vcpu-run-lockup-own-frame
printf '%s\n%s\n' "$ok_lines" "$l1_lockup_fails" >"$d/log"
printf 'booting\n%s\n' "${vcpu_lockup/vcpu_enter_guest+0x6f1\/0x1130 \[kvm\]/vhost_scsi_ep_lock+0x21\/0x80 [vhost_scsi_sqcq]}" >"$d/results/console.log"
expect_ours "a QEMU thread stuck in our module beside KVM_RUN"
attempt vcpu-run-lockup-no-kvm
printf '%s\n%s\n' "$ok_lines" "$l1_lockup_fails" >"$d/log"
printf 'booting\n%s\n' "$(grep -v -e vcpu -e svm <<<"$vcpu_lockup")" >"$d/results/console.log"
expect_ours "a QEMU thread stuck outside KVM_RUN"
attempt report-then-vcpu-run-lockup
printf '%s\n%s\n' "$ok_lines" "$l1_lockup_fails" >"$d/log"
printf 'booting\n[ 300.1] WARNING: CPU: 0 PID: 77 at host/vhost_sqcq.c:812 vhost_sqcq_poll_run+0x40/0x300 [vhost_scsi_sqcq]\n%s\n' \
	"$vcpu_lockup" >"$d/results/console.log"
expect_ours "a warning of ours, then L2's vCPU stuck"
# The same in CI (2026-12-05, trixie pair): L1 lived on, so the frames are
# in dmesg (the log's first report) and L1's quiet console has the
# report's first lines only; the vCPU thread's trace carries a stale
# "? " word of our wakeup. Repeated; the console's lockup naming another
# task, or a reliable frame of ours, fails.
vcpu_dmesg='[  114.39] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [qemu-system-x86:269]
[  114.39] Modules linked in: vhost_scsi_sqcq(OE) target_core_iblock kvm_amd kvm
[  114.39] CPU: 1 PID: 269 Comm: qemu-system-x86 Tainted: G           OE      6.1.0-57-amd64 #1  Debian 6.1.192-3
[  114.39] RIP: 0010:__apic_accept_irq+0x72/0x290 [kvm]
[  114.39] RSP: 0018:ffffc900005c3cb0 EFLAGS: 00000202
[  114.39] Call Trace:
[  114.39]  <TASK>
[  114.39]  kvm_apic_local_deliver+0x7e/0xc0 [kvm]
[  114.39]  kvm_inject_apic_timer_irqs+0x27/0x70 [kvm]
[  114.39]  kvm_arch_vcpu_ioctl_run+0x59d/0x1750 [kvm]
[  114.39]  ? vhost_poll_wakeup+0x2c/0x40 [vhost_scsi_sqcq]
[  114.39]  kvm_vcpu_ioctl+0x25e/0x720 [kvm]
[  114.39]  __x64_sys_ioctl+0x8d/0xd0
[  114.39]  do_syscall_64+0x5d/0xb0
[  114.39]  entry_SYSCALL_64_after_hwframe+0x6e/0xd8
[  114.39]  </TASK>'
vcpu_console='[  114.391] watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [qemu-system-x86:269]
[  147.428] rcu: INFO: rcu_preempt self-detected stall on CPU
[  147.428] 	1-....: (20868 ticks this GP) idle=cafc/1/0x4000000000000000'
# ci_vcpu_attempt CONSOLE DMESG: the CI attempt's log with DMESG as the
# first report, CONSOLE as L1's console.
ci_vcpu_attempt() {
	printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)\nFAIL: e2e sqcq/sqcq qemu-trixie l2-run (nested.sh status 125)\nFAIL: vm-kernel-log (lockup, RCU-stall: watchdog: BUG: soft lockup - CPU#1 stuck for 45s! [qemu-system-x86:269]; tainted 28672 (L))\n---- last kernel log lines (kernel 6.1.0-57, dmesg) ----\n[  148.16] vhost_scsi_sqcq: dev1: endpoint naa.5001405e2e000001 cleared\n----\n---- first report (kernel 6.1.0-57, dmesg, line 390) ----\n%s\n----\n' \
		"$ok_lines" "$2" >"$d/log"
	printf 'booting\n%s\n' "$1" | sed 's/$/\r/' >"$d/results/console.log"
}
attempt vcpu-run-lockup-ci
ci_vcpu_attempt "$vcpu_console" "$vcpu_dmesg"
expect_repeat "L2's vCPU thread in KVM_RUN, frames in dmesg only, a stale word of ours"
attempt vcpu-run-lockup-ci-other-task
ci_vcpu_attempt "${vcpu_console/qemu-system-x86:269/vhost-269:271}" "$vcpu_dmesg"
expect_ours "the console's lockup is another task than dmesg's vCPU thread"
attempt vcpu-run-lockup-ci-own-frame
ci_vcpu_attempt "$vcpu_console" "${vcpu_dmesg/\? vhost_poll_wakeup/vhost_poll_wakeup}"
expect_ours "a reliable frame of ours in the vCPU thread's trace"
# L1 froze after its L2 passed (CI 2026-12-05, the in-tree pair): its
# console shows khugepaged blocked, nothing else. Repeated; a blocked
# QEMU beside it, or khugepaged blocked with L1 alive, fails.
mm_hung='[  250.12] INFO: task khugepaged:35 blocked for more than 120 seconds.
[  250.12]       Tainted: G           OE      6.1.0-57-amd64 #1 Debian 6.1.192-3
[  250.12] "echo 0 > /proc/sys/kernel/hung_task_timeout_secs" disables this message.'
# frozen_attempt CONSOLE [STALL]: L1's console CONSOLE, the watchdog's
# stall file when STALL is 1.
frozen_attempt() {
	printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)\nFAIL: vm-kernel-log (hung-task: INFO: task khugepaged:35 blocked for more than 120 seconds.\n)\n' \
		"$ok_lines" >"$d/log"
	if [ "${2:-1}" = 1 ]; then
		echo "FAIL: e2e takeover/intree 6.1.0-57 L1 stalled (no heartbeat for 246 s; frozen emulator?)" >"$d/stall"
		cat "$d/stall" >>"$d/log"
	fi
	printf 'booting\n%s\n' "$1" >"$d/results/console.log"
}
attempt l1-frozen-khugepaged
frozen_attempt "$mm_hung"
expect_repeat "L1 frozen, khugepaged blocked"
attempt l1-frozen-qemu-hung
frozen_attempt "$mm_hung
[  250.13] INFO: task qemu-system-x86:269 blocked for more than 120 seconds."
expect_ours "L1 frozen, QEMU blocked beside khugepaged"
attempt khugepaged-l1-alive
frozen_attempt "$mm_hung" 0
expect_ours "khugepaged blocked, L1 not frozen"
# L1's CPU stalled inside L2 (the migration pair of a fresh-clone CI run,
# 2026-12-06: RCU stalls on CPU 0 for 500 s, then QEMU's timeout): with
# the console at warning level, no NMI backtrace from that CPU, or one in
# KVM's run loop, is repeated; one in our module, a single report without
# an answer, an older console (errors only), or a report of ours before
# the stall fails.
stall_hdr='[  334.62] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:
[  334.62] rcu: 	0-...0: (1 GPs behind) idle=26a4/1/0x4000000000000000 softirq=37788/37789 fqs=1049
[  334.62] 	(detected by 1, t=5253 jiffies, g=74133, q=6750 ncpus=2)'
stall_nmi='[  334.63] NMI backtrace for cpu 0
[  334.63] CPU: 0 PID: 611 Comm: qemu-system-x86 Tainted: G           OE      6.1.0-57-amd64 #1
[  334.63] RIP: 0010:svm_vcpu_run+0x3c4/0x7a0 [kvm_amd]
[  334.63] Call Trace:
[  334.63]  <TASK>
[  334.63]  vcpu_enter_guest+0x6f1/0x1130 [kvm]
[  334.63]  kvm_arch_vcpu_ioctl_run+0x1d8/0x560 [kvm]
[  334.63]  kvm_vcpu_ioctl+0x26e/0x6a0 [kvm]
[  334.63]  </TASK>'
warn_on='[    2.40] sqcq-stage2: console shows warnings'
# stall_attempt CONSOLE: L1's console CONSOLE, killed at its timeout.
stall_attempt() {
	printf '%s
PASS: e2e takeover/intree migrate sqcq B->C: completed
FAIL: vm-timeout (QEMU killed after 900s, kernel 6.1.0-57)
FAIL: vm-kernel-log (RCU-stall: rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:)
' \
		"$ok_lines" >"$d/log"
	printf 'booting\n%s\n' "$1" | sed 's/$/\r/' >"$d/results/console.log"
}
attempt rcu-stall-no-nmi
stall_attempt "$warn_on
$stall_hdr
${stall_hdr//334.62/397.64}"
expect_repeat "L1's CPU stalled, no answer to the NMI in two reports"
attempt rcu-stall-in-kvm
stall_attempt "$warn_on
$stall_hdr
$stall_nmi"
expect_repeat "L1's CPU stalled, its NMI backtrace in KVM's run loop"
attempt rcu-stall-own-frame
stall_attempt "$warn_on
$stall_hdr
${stall_nmi/vcpu_enter_guest+0x6f1\/0x1130 \[kvm\]/vhost_sqcq_poll_run+0x40\/0x300 [vhost_scsi_sqcq]}"
expect_ours "L1's CPU stalled in our poller (its NMI backtrace)"
attempt rcu-stall-outside-kvm
stall_attempt "$warn_on
$stall_hdr
$(grep -v -e vcpu -e svm <<<"$stall_nmi")"
expect_ours "L1's CPU stalled outside KVM_RUN (its NMI backtrace)"
attempt rcu-stall-once
stall_attempt "$warn_on
$stall_hdr"
expect_ours "a single stall report without an answer"
attempt rcu-stall-errors-only-console
stall_attempt "$stall_hdr
${stall_hdr//334.62/397.64}"
expect_ours "stalls on a console that hides warnings (NMI backtraces unseen)"
attempt warning-then-rcu-stall
stall_attempt "$warn_on
[  300.1] WARNING: CPU: 0 PID: 77 at host/vhost_sqcq.c:812 vhost_sqcq_poll_run+0x40/0x300 [vhost_scsi_sqcq]
$stall_hdr
${stall_hdr//334.62/397.64}"
expect_ours "a warning of ours, then L1's CPU stalled"
# L2 on the sanitizer kernel froze after lockdep saw the timer interrupt
# inside timekeeping_advance (the poll-thread watchdog test, 2026-12-06):
# an interrupt delivered with interrupts off, repeated. The same chain with
# a frame of ours, or with the interrupt landing in a function that runs
# with interrupts on, fails.
irqoff_report='[   24.48] ======================================================
[   24.48] WARNING: possible circular locking dependency detected
[   24.48] 6.1.192-debug-amd64 #1 Tainted: G           O
[   24.48] ------------------------------------------------------
[   24.48] kworker/0:1H/27 is trying to acquire lock:
[   24.48] ffff88800cc2a558 (hrtimer_bases.lock){-.-.}-{2:2}, at: hrtimer_interrupt+0xc6/0x760
[   24.48] 
[   24.48] but task is already holding lock:
[   24.48] ffffffff834c51c8 (tk_core.seq.seqcount){----}-{0:0}, at: update_wall_time+0xb/0x20
[   24.48] 
[   24.48] which lock already depends on the new lock.
[   24.48] 
[   24.48] the existing dependency chain (in reverse order) is:
[   24.48] 
[   24.48] -> #1 (tk_core.seq.seqcount){----}-{0:0}:
[   24.48]        ktime_get_update_offsets_now+0x6f/0x2d0
[   24.48]        hrtimer_run_queues+0xb6/0x340
[   24.48]        tick_handle_periodic+0x3f/0xe0
[   24.48]        asm_sysvec_apic_timer_interrupt+0x1b/0x20
[   24.48]        vprintk_store+0x7e2/0x910
[   24.48]        kernel_init+0x18/0x140
[   24.48] 
[   24.48] -> #0 (hrtimer_bases.lock){-.-.}-{2:2}:
[   24.48]        __lock_acquire+0x2f03/0x6eb0
[   24.48]        _raw_spin_lock_irqsave+0x39/0x60
[   24.48]        hrtimer_interrupt+0xc6/0x760
[   24.48]        __sysvec_apic_timer_interrupt+0xfa/0x320
[   24.48]        asm_sysvec_apic_timer_interrupt+0x1b/0x20
[   24.48]        lock_release+0x16c/0x870
[   24.48]        timekeeping_advance+0x4c4/0x7b0
[   24.48]        update_wall_time+0xb/0x20
[   24.48]        tick_do_update_jiffies64+0x1e4/0x320
[   24.48] 
[   24.48] other info that might help us debug this:
[   24.48] 
[   24.48] Call Trace:
[   24.48]  <TASK>
[   24.48]  virtqueue_notify+0x61/0xc0
[   24.48]  virtscsi_add_cmd+0x790/0xe00 [virtio_scsi_sqcq]
[   24.48]  virtscsi_queuecommand+0x11a/0x370 [virtio_scsi_sqcq]
[   24.48]  </TASK>'
# irqoff_attempt L2CONSOLE: the watchdog test's attempt, L2 stalled with
# L2CONSOLE as its console.
irqoff_attempt() {
	printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.192-debug)\nFAIL: vm-kernel-log (lockdep: WARNING: possible circular locking dependency detected)\nFAIL: e2e sqcq/sqcq l2-debug l2-stalled (kernel log: [   24.48] WARNING: possible circular locking dependency detected)\nFAIL: e2e sqcq/sqcq l2-debug l2-run (nested.sh status 125)\n' \
		"$ok_lines" >"$d/log"
	printf 'booting\n%s\n' "$1" | sed 's/$/\r/' >"$d/results/l2/console.log"
	printf 'booting\n' >"$d/results/console.log"
}
attempt lockdep-irq-in-irqoff
irqoff_attempt "$irqoff_report"
expect_repeat "lockdep: the timer interrupt inside timekeeping_advance, L2 froze"
attempt lockdep-irqoff-own-frame
irqoff_attempt "${irqoff_report/tick_do_update_jiffies64+0x1e4\/0x320/virtscsi_poll_fn+0x91\/0x2f0 [virtio_scsi_sqcq]}"
expect_ours "the same chain with a frame of ours"
attempt lockdep-irq-in-irqon
irqoff_attempt "${irqoff_report/timekeeping_advance+0x4c4\/0x7b0/vhost_sqcq_poll_run+0x40\/0x300}"
expect_ours "the interrupt in a function that runs with interrupts on"
attempt lockdep-irqoff-other-fail
irqoff_attempt "$irqoff_report"
echo 'FAIL: e2e sqcq/sqcq l2-debug watchdog rescue (poll_rescues 0 -> 0)' >>"$d/log"
expect_ours "the same report beside a failed check"
attempt lockdep-irqoff-report-before
irqoff_attempt "[   20.1] BUG: KASAN: use-after-free in virtscsi_poll_fn+0x91/0x2f0 [virtio_scsi_sqcq]
$irqoff_report"
expect_ours "a KASAN report of ours before it"

# The same test on 2026-12-07: a timer interrupt taken inside the timer
# interrupt's own __hrtimer_run_queues, its saved EFLAGS without IF
# (00000092): lockdep saw hrtimer_bases.lock taken "recursively" and L2
# froze. Repeated; with IF set in that frame, or a frame of ours, it fails.
recursive_report='[   84.70] ============================================
[   84.70] WARNING: possible recursive locking detected
[   84.70] 6.1.192-debug-amd64 #1 Tainted: G           O
[   84.70] --------------------------------------------
[   84.70] cat/126 is trying to acquire lock:
[   84.70] ffff88800cc2a558 (hrtimer_bases.lock){-.-.}-{2:2}, at: hrtimer_interrupt+0xc6/0x760
[   84.70] 
[   84.70] but task is already holding lock:
[   84.70] ffff88800cc2a558 (hrtimer_bases.lock){-.-.}-{2:2}, at: __hrtimer_run_queues+0x27c/0x8d0
[   84.70] Call Trace:
[   84.70]  <IRQ>
[   84.70]  _raw_spin_lock_irqsave+0x39/0x60
[   84.70]  hrtimer_interrupt+0xc6/0x760
[   84.70]  __sysvec_apic_timer_interrupt+0xfa/0x320
[   84.70]  sysvec_apic_timer_interrupt+0x33/0xa0
[   84.70]  asm_sysvec_apic_timer_interrupt+0x1b/0x20
[   84.70] RIP: 0010:lock_acquire+0x5e/0x4c0
[   84.70] Code: 00 89 b5 34 ff ff ff 89 8d 30 ff ff ff 44 89 85 2c ff ff ff <48> c7 85 48 ff ff ff a0 9f
[   84.70] RSP: 0018:ffff88800cc09bf8 EFLAGS: 00000092
[   84.70] RAX: ffffed1001981382 RBX: 1ffff11001981382 RCX: 0000000000000000
[   84.70]  debug_object_activate+0x140/0x4f0
[   84.70]  enqueue_hrtimer+0x29/0x290
[   84.70]  __hrtimer_run_queues+0x6e8/0x8d0
[   84.70]  hrtimer_interrupt+0x2aa/0x760
[   84.70]  __sysvec_apic_timer_interrupt+0xfa/0x320
[   84.70]  sysvec_apic_timer_interrupt+0x6f/0xa0
[   84.70]  </IRQ>
[   84.70]  <TASK>
[   84.70]  asm_sysvec_apic_timer_interrupt+0x1b/0x20
[   84.70] RIP: 0010:_raw_spin_unlock_irqrestore+0x38/0x60
[   84.70] Code: 48 89 fb 48 83 c7 18 e8 26 24 c7 fe 48 89 df e8 de ae c7 fe <74> 09 5b 41 5c 5d c3 cc
[   84.70] RSP: 0018:ffff8880071af740 EFLAGS: 00000286
[   84.70]  kmemleak_free+0x5c/0x90
[   84.70]  </TASK>'
# recursive_attempt L2CONSOLE: irqoff_attempt with the recursive report's lines.
recursive_attempt() {
	irqoff_attempt "$1"
	sed -i 's/circular locking dependency/recursive locking/' "$d/log"
}
attempt lockdep-recursive-if-clear
recursive_attempt "$recursive_report"
expect_repeat "lockdep: a timer interrupt on a frame with IF clear (recursive hrtimer_bases.lock), L2 froze"
attempt lockdep-recursive-if-set
recursive_attempt "${recursive_report/EFLAGS: 00000092/EFLAGS: 00000292}"
expect_ours "the same report with IF set in the interrupted frame"
attempt lockdep-recursive-own-frame
recursive_attempt "${recursive_report/kmemleak_free+0x5c\/0x90/virtscsi_vq_drain+0x91\/0x2f0 [virtio_scsi_sqcq]}"
expect_ours "the same report with a frame of ours"

# A CPU of L1 spinning on the 8250 UART's lock in its interrupt handler,
# on top of L2's QEMU writing its console (a fresh-clone run, 2026-12-07,
# the trixie pair): repeated.  With a frame of ours in the report: never.
uart_report='[   93.577769] rcu: INFO: rcu_preempt self-detected stall on CPU
[   93.577769] rcu: 	0-....: (1 GPs behind) idle=386c/1/0x4000000000000000 softirq=9591/9592 fqs=2610
[   93.577769] CPU: 0 PID: 270 Comm: qemu-system-x86 Tainted: G           OE      6.1.0-57-amd64 #1  Debian 6.1.192-3
[   93.581707] Call Trace:
[   93.581707]  <IRQ>
[   93.581707]  _raw_spin_lock_irqsave+0x39/0x50
[   93.581707]  serial8250_handle_irq+0x2c/0x370
[   93.581707]  serial8250_default_handle_irq+0x41/0x80
[   93.581707]  serial8250_interrupt+0x5f/0x100
[   93.581707]  __handle_irq_event_percpu+0x43/0x190
[   93.581707]  </IRQ>
[   93.581707]  <TASK>
[   93.581707]  asm_common_interrupt+0x22/0x40
[   93.581707]  uart_write+0x102/0x1e0
[   93.581707]  n_tty_write+0x1aa/0x500
[   93.581707]  do_writev+0x7e/0x160
[   93.581707]  do_syscall_64+0x5d/0xb0
[   93.581707]  ? kvm_vm_ioctl_irq_line+0x23/0x40 [kvm]
[   93.581707]  entry_SYSCALL_64_after_hwframe+0x6e/0xd8
[   93.581707]  </TASK>
[  876.565756] watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [qemu-system-x86:270]'
uart_fails='FAIL: vm-timeout (QEMU killed after 900s, kernel 6.1.0-57)
FAIL: vm-kernel-log (lockup, RCU-stall: watchdog: BUG: soft lockup - CPU#0 stuck for 45s! [qemu-system-x86:270])'
attempt uart-lock-spin
printf '%s\n%s\n' "$ok_lines" "$uart_fails" >"$d/log"
printf 'booting\n%s\n' "$uart_report" >"$d/results/console.log"
expect_repeat "a CPU of L1 spinning on the UART's lock, no frame of ours"
attempt uart-lock-spin-own-frame
printf '%s\n%s\n' "$ok_lines" "$uart_fails" >"$d/log"
printf 'booting\n%s\n' "${uart_report/n_tty_write+0x1aa\/0x500/vhost_scsi_ioctl+0x1aa\/0x500 [vhost_scsi_sqcq]}" >"$d/results/console.log"
expect_ours "the same spin with a frame of ours"
attempt uart-lock-spin-other-fail
printf '%s\n%s\nFAIL: e2e sqcq/sqcq qemu-trixie fio-verify-crc32c (bad=3)\n' "$ok_lines" "$uart_fails" >"$d/log"
printf 'booting\n%s\n' "$uart_report" >"$d/results/console.log"
expect_ours "the same spin beside a failed check"

# run.sh judges under pipefail: a report of ours early in a long console
# must still be seen (a grep -q at the end of a pipe quit at the match,
# its writer died of SIGPIPE, and the report counted as none: repeated).
attempt long-console-pipefail
printf '%s\nFAIL: vm-boot (VM exited (QEMU status 0) without COMMAND'"'"'s status, kernel 6.1.0-57)\n' "$ok_lines" >"$d/log"
{
	echo booting
	echo '[   20.1] BUG: KASAN: use-after-free in vhost_sqcq_poll_run+0x91/0x2f0 [vhost_scsi_sqcq]'
	seq 1 200000 | sed 's/^/[   21.0] filler /'
} >"$d/results/console.log"
if why=$(set -o pipefail; e2e_emulator_fault "$d" && echo "$E2E_WHY"); then
	fail "a report of ours early in a long console was repeated under pipefail: $why"
else
	pass "a report of ours early in a long console fails under pipefail"
fi

# bench/compare.sh's tables keep the rounds an L1 completed before the
# emulator broke it, and leave out the round it broke: a made-up run of
# two L1s, the first broken in round 2 (only classic's points of it, with
# ten kicks per I/O), the second running rounds 2 and 3.
cmp_point_lines() {	# cmp_point_lines MODE ROUND IOPS KICKS
	local p
	for p in "randread 1" "randread 32" "randwrite 1" "randwrite 32"; do
		echo "cmp $1 ${p% *} ${p#* } 1 $3 5000 $4 5000 20000 4000000 $2 - - - - - - -"
	done
}
{
	echo "cmp-attempt 1"
	cmp_point_lines classic 1 1000 5000
	cmp_point_lines sqcq 1 1100 5000
	cmp_point_lines classic 2 99999 50000
	echo "e2e: attempt 1 failed in the emulator, not in a test (made up); no repeat left (E2E_RETRIES=0)"
	echo "cmp-attempt 2"
	for r in 2 3; do
		cmp_point_lines sqcq $r 1100 5000
		cmp_point_lines classic $r 1000 5000
	done
	echo "PASS: compare classic mode-negotiated (classic, every round)"
	echo "PASS: compare sqcq mode-negotiated (sqcq, every round)"
} >"$tmp/compare.log"
cmp_out=$(CMP_HALTPOLL=0 CMP_INTREE=0 bench/compare.sh --short --rounds 3 --log "$tmp/compare.log" 2>&1)
check "compare.sh: rounds of a broken L1 kept, its broken round left out (3 rounds in 2 boots)" \
	grep -qF '3 alternating rounds, in 2 boots of L1' <<<"$cmp_out"
check "compare.sh: the broken round's IOPS and kicks counted nowhere" \
	grep -qF '| randread QD1 x1 | 1000 | 1100 | 1.10 (1.10-1.10, 3) | 1.000 | 1.000 | 1.000 | 1.000 |' <<<"$cmp_out"
# A round that lacks one point is not complete either.
grep -v '^cmp sqcq randwrite 32 1 1100 5000 5000 5000 20000 4000000 3 ' "$tmp/compare.log" >"$tmp/compare2.log"
cmp_out=$(CMP_HALTPOLL=0 CMP_INTREE=0 bench/compare.sh --short --rounds 3 --log "$tmp/compare2.log" 2>&1)
check "compare.sh: a round without one of its points is left out (2 rounds)" \
	grep -qF '| randread QD1 x1 | 1000 | 1100 | 1.10 (1.10-1.10, 2) |' <<<"$cmp_out"
exit $((fails > 0))
