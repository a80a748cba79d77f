# shellcheck shell=bash disable=SC2034 # E2E_WHY is for the callers
# Whose fault a failed end-to-end attempt was (sourced by tests/e2e/run.sh
# and tests/e2e/selftest.sh; needs SQCQ_VM_LOG_BAD from tests/vm/common.sh).
#
# e2e_emulator_fault DIR: status 0 when the attempt in DIR (its log: the
# attempt's whole output; results/console.log: L1's console;
# results/l2/console.log, results/viommu/console.log: the L2s') failed in the emulator underneath, not in
# a test; the reason in E2E_WHY.  An attempt is the emulator's only when
#  - every FAIL line it printed is one an emulator break leaves (below), and
#  - neither level's console shows a kernel report (the patterns of the VM
#    rig's own verdict), except the double faults that are the emulated
#    CPU's by their frame (see the two functions below) and what follows
#    them, and
#  - it shows one of the breaks this rig has seen: L1 frozen (the stall
#    file of run.sh's watchdog), "KVM internal error" from L2's QEMU, L2
#    frozen (FAIL: vm-l2-stall), L1 gone before COMMAND's status (FAIL:
#    vm-boot: a reset under -no-reboot, QEMU crashed or killed, a boot that
#    stalled three times), or such a double fault, or L1 stuck in L2
#    (vcpu_run_lockup below), or lockdep's report of an interrupt that
#    came with interrupts off (irq_in_irqoff_lockdep below: by the
#    function it landed in, or by the IF flag its frame saved).
# A soft lockup of our guest poller, an oops, a failed verify: never the
# emulator's, whatever else the attempt shows.

# The FAIL lines an emulator break leaves behind: the rig's own verdicts,
# the watchdog's line for a frozen L1 (run.sh's stall file) and the end of
# the L2 run that the break cut short.
E2E_EMULATOR_FAILS='^FAIL: (vm-kvm-error|vm-l2-stall|vm-boot|vm-timeout) |^FAIL: e2e .* l2-run \(nested\.sh status [0-9]+\)$|^FAIL: e2e .* L1 stalled \(no heartbeat for [0-9]+ s'

# df_frame LOG N: LOG's double-fault reports with the N lines after each
# (nothing, and status 1, when it has none).
df_frame() { grep -a -A "$2" 'traps: PANIC: double fault' "$1"; }

# user_stack_double_fault LOG: the kernel log in LOG has a double fault
# whose frame shows kernel code (CS 0010) running on a user-space stack
# (RSP below 0x800000000000). The CPU switches to the kernel stack on every
# entry from user mode; the only ring-0 code on a user stack is the few
# instructions of the SYSCALL entry and exit between the stack switch and
# SWAPGS, where interrupts are off and nothing of ours runs. A page fault
# there (or an interrupt delivered with IF clear) is the emulated CPU's:
# seen with the L2 of QEMU 7.2 and 10.0 over TCG's SVM, on the fio thread,
# in any phase, with QEMU 7.2, 10.0 or 11.1 as L0.
user_stack_double_fault() {
	df_frame "$1" 12 | grep -E 'RSP: 0018:0000[0-7][0-9a-f]{11}( |$)' >/dev/null
}
# entry_double_fault LOG: a double fault with RIP in error_entry, the
# exception entry code itself: it faulted again and again until the
# kernel stack ran out. Seen in the trixie pair's L2 on its idle CPU
# (swapper, empty call trace) with RAX and RBP 0x1fb80, the per-CPU offset
# of current_task: the GS base was gone, as in the user-stack case. No
# driver code runs there.
entry_double_fault() {
	df_frame "$1" 12 | grep 'RIP: 0010:error_entry+' >/dev/null
}
# entry_trampoline_fault LOG: the entry trampoline's stack overflowed
# (its guard page hit) with the fault in irqentry_enter, where an
# interrupt from user mode (a 0033 frame) first reads current_task through
# %gs and found garbage: the GS base was the user's, the same loss as
# above, seen in the 7.2 L2 of trixie's QEMU on 2 vCPUs (2026-12-04, fio
# running, our driver in no frame).
entry_trampoline_fault() {
	grep -aq 'ENTRY_TRAMPOLINE stack guard page was hit' "$1" &&
		grep -aq 'RIP: 0010:irqentry_enter+' "$1" &&
		grep -aq 'RIP: 0033:' "$1"
}
# null_frame_double_fault LOG: a double fault whose saved frame is all
# zero, code segment included (RIP 0000:0x0, RSP 0000:0): no CPU running
# any code, ours or the kernel's, leaves such a frame; seen in a 6.1 L2
# of the benchmark (2026-12-04) with compare-l2.sh the current task.
null_frame_double_fault() {
	local frame
	frame=$(df_frame "$1" 8 | tr -d '\r') &&
		grep -q 'RIP: 0000:0x0$' <<<"$frame" &&
		grep -q 'RSP: 0000:0000000000000000 ' <<<"$frame"
}
emulator_double_fault() {
	user_stack_double_fault "$1" || entry_double_fault "$1" || entry_trampoline_fault "$1" ||
		null_frame_double_fault "$1"
}
# The first line of a soft lockup report in a kernel log (not the FAIL
# line quoting it): a timestamp, or nothing, before it.
E2E_LOCKUP_RE='^(\[ *[0-9]+\.[0-9]+\] +)?watchdog: BUG: soft lockup - CPU#'
# lockup_id LINE: the CPU and task a soft lockup line names ("CPU#1
# [qemu-system-x86:269]"), the same in the console's copy and dmesg's.
lockup_id() {
	sed -nE 's/.*soft lockup - (CPU#[0-9]+) stuck for [0-9]+s! (\[[^]]*\]).*/\1 \2/p' <<<"$1"
}
# vcpu_run_lockup LOG: L1's first soft lockup is a vCPU thread of L2's
# QEMU inside KVM_RUN (a frame of KVM's run loop within the report) with
# no frame of our modules; prints the lockup's lockup_id. L1 entered L2
# on the emulated SVM and did not get the CPU back for the watchdog's
# 20 s, although L1's own timer interrupt reached it (it printed the
# report). Real SVM leaves L2 on every host interrupt; nothing L2 runs,
# our guest driver included, can keep it there. Seen in the trixie pair
# (L2 on 2 vCPUs) and the benchmark with L2 on 2 vCPUs
# (docs/testing-notes.md). The report of a thread of ours that spins (a
# poller, an ioctl) names our module in its RIP or a reliable frame;
# "? " frames are stale words the unwinder found on the stack (a vCPU
# thread's ioeventfd write passes through our wakeup, leaving such words).
# A console of a quiet kernel has the report's first line only: the
# frames are in dmesg (the attempt's log), see console_report.
# frame_of_ours REPORT: a reliable frame of our modules in the report
# ("? " frames left out).  grep reads to the end: under pipefail an early
# exit would break the pipe and turn a match into "none".
frame_of_ours() {
	grep -vE '\] +\? ' <<<"$1" |
		grep -E '\+0x[0-9a-f]+/0x[0-9a-f]+ \[(vhost|virtio)_scsi_sqcq\]' >/dev/null
}
# in_kvm_run_not_ours REPORT: the report's frames show KVM's run loop and
# no reliable frame of our modules.
in_kvm_run_not_ours() {
	grep -qE '(kvm_arch_vcpu_ioctl_run|vcpu_enter_guest|svm_vcpu_run|vcpu_run)\+0x' <<<"$1" || return 1
	! frame_of_ours "$1"
}
vcpu_run_lockup() {
	local rep
	rep=$(grep -aE -A 40 -m 1 "$E2E_LOCKUP_RE" "$1" 2>/dev/null | tr -d '\r') || return 1
	in_kvm_run_not_ours "$rep" || return 1
	lockup_id "$(head -n 1 <<<"$rep")"
}

# uart_lock_spin LOG: L1's first soft lockup or RCU self-detected stall
# is a CPU spinning on a lock in the 8250 UART's interrupt handler, with
# no reliable frame of our modules in the report; prints the report's
# line number.  Seen in a fresh-clone run (2026-12-07, the trixie pair):
# CPU 0 of L1 in serial8250_handle_irq, on top of L2's QEMU writing L2's
# console to L1's serial port, for 800 s.  The port lock's holder is the
# emulated UART's other user; nothing of ours takes that lock.
E2E_UART_REPORT_RE="$E2E_LOCKUP_RE|rcu: INFO: rcu_(preempt|sched) self-detected stall on CPU"
uart_lock_spin() {
	local n rep
	n=$(grep -anE -m 1 "$E2E_UART_REPORT_RE" "$1" 2>/dev/null | cut -d: -f1)
	[ -n "$n" ] || return 1
	rep=$(tail -n +"$n" "$1" | head -n 45 | tr -d '\r')
	grep -qE 'serial8250_(handle_irq|interrupt)\+0x' <<<"$rep" || return 1
	grep -qE '_raw_spin_lock(_irqsave)?\+0x' <<<"$rep" || return 1
	! frame_of_ours "$rep" || return 1
	echo "$n"
}

# E2E_RCU_STALL_RE: the first line of an RCU stall report in a kernel log.
E2E_RCU_STALL_RE='rcu: INFO: rcu_(preempt|sched) detected stalls on CPUs/tasks:'
# rcu_stall_in_guest LOG: L1's RCU stall reports name a CPU that is inside
# L2, by one of two signs, and no frame of our modules is among its NMI
# backtrace's (prints the report's CPU list):
#  - its NMI backtrace shows KVM's run loop (as vcpu_run_lockup), or
#  - it answered no NMI in two or more reports, on a console that shows
#    warnings (tests/vm/guest-stage2.sh; an NMI backtrace is a warning).
# Real SVM and VMX leave L2 on every NMI and host interrupt; only the
# emulated SVM keeps a CPU in L2 past them (CI's fresh-clone run of
# 2026-12-06: CPU 0 of L1 stalled for 500 s after the migration test's
# L2 moved twice, with no backtrace: that console showed errors only).
# A CPU that spins in our code answers the NMI with its frames.
rcu_stall_in_guest() {
	local log=$1 cpus c nmi
	grep -aqE "$E2E_RCU_STALL_RE" "$log" 2>/dev/null || return 1
	cpus=$(grep -aE -A 4 "$E2E_RCU_STALL_RE" "$log" | tr -d '\r' |
		sed -nE 's/.*rcu: *\t?([0-9]+)-[.0-9A-Za-z]+: .*/\1/p' | sort -un)
	[ -n "$cpus" ] || return 1
	for c in $cpus; do
		nmi=$(grep -aE -A 40 "NMI backtrace for cpu $c\b" "$log" | tr -d '\r')
		if [ -n "$nmi" ]; then
			in_kvm_run_not_ours "$nmi" || return 1
		else
			grep -aq 'sqcq-stage2: console shows warnings' "$log" || return 1
			[ "$(grep -acE "$E2E_RCU_STALL_RE" "$log")" -ge 2 ] || return 1
		fi
	done
	paste -sd ' ' <<<"$cpus"
}

# E2E_IRQOFF_FUNCS: kernel functions whose whole body runs with
# interrupts off (timekeeping_advance holds the timekeeper's raw lock with
# irqsave from its first statement to its last, and its callers are the
# tick's hard interrupt). A hardware interrupt frame on top of one is an
# interrupt delivered while IF was clear, which no real CPU does.
E2E_IRQOFF_FUNCS='timekeeping_advance'
# E2E_LOCKDEP_CHAIN_RE: the first line of lockdep's circular-dependency
# report; E2E_LOCKDEP_RE: that or a recursive-locking report.
E2E_LOCKDEP_CHAIN_RE='WARNING: possible circular locking dependency detected'
E2E_LOCKDEP_RE='WARNING: possible (circular locking dependency|recursive locking) detected'
# irq_in_irqoff_lockdep LOG: LOG's lockdep report is one the emulated CPU
# caused: its newest dependency ("-> #0") was taken by a hardware
# interrupt's handler (an asm_sysvec_/asm_common_interrupt frame) that
# interrupted one of E2E_IRQOFF_FUNCS, and no dependency of the chain
# names a frame of our modules (the interrupted task's own backtrace may:
# it is whatever ran when the tick came). Seen on L2 with the sanitizer
# kernel in the poll-thread watchdog test (2026-12-06): hrtimer_bases.lock
# taken by the timer interrupt inside timekeeping_advance, itself inside
# the tick, while the task was in our virtscsi_add_cmd; L2 then froze.
# A report of either kind is the emulated CPU's as well when its call
# trace holds an interrupt frame (asm_sysvec_*, asm_common_interrupt) whose
# saved registers show kernel code (CS 0010) with IF clear in EFLAGS: a
# maskable interrupt taken with interrupts off (irq_frame_if_clear); and
# no frame of our modules in the report.  Seen in the same test on
# 2026-12-07: hrtimer_bases.lock "recursively" taken by a timer interrupt
# that landed inside the timer interrupt's own __hrtimer_run_queues
# (EFLAGS 00000092), after our module had been unloaded.
irq_in_irqoff_lockdep() {
	irq_frame_if_clear "$1" && return 0
	lockdep_chain_irqoff "$1"
}
# irq_frame_if_clear LOG: LOG's first lockdep report (to the end of its
# call trace) has an interrupt frame over kernel code with IF clear, and
# no frame of ours.
irq_frame_if_clear() {
	local rep v
	grep -aqE "$E2E_LOCKDEP_RE" "$1" 2>/dev/null || return 1
	rep=$(tr -d '\r' <"$1" | sed -E 's/^\[ *[0-9]+\.[0-9]+\] ?//' |
		sed -nE "/$E2E_LOCKDEP_RE/,/^ *<\/TASK>/p" | head -n 200)
	! grep -qE '\[(vhost|virtio)_scsi_sqcq\]' <<<"$rep" || return 1
	# The registers an interrupt entry saved come right after its frame:
	# RIP, the Code line, then RSP with EFLAGS.
	while read -r v; do
		[[ "$v" =~ ^[0-9a-f]{1,16}$ ]] || continue
		(((16#$v & 0x200) == 0)) && return 0
	done < <(awk '
		/asm_(sysvec_[a-z_]*|common_interrupt)[+]0x/ { n = 4; rip = 0; next }
		n > 0 {
			n--
			if ($0 ~ /RIP: 0010:/)
				rip = 1
			else if (rip && $0 ~ /EFLAGS: [0-9a-f]+/) {
				sub(/.*EFLAGS: /, ""); print $1; n = 0
			}
		}' <<<"$rep")
	return 1
}
# lockdep_chain_irqoff LOG: the circular-dependency case above.
lockdep_chain_irqoff() {
	local chain
	grep -aq "$E2E_LOCKDEP_CHAIN_RE" "$1" 2>/dev/null || return 1
	# The dependency chain: from the report's "-> #" blocks to the
	# "other info" part, timestamps dropped.
	chain=$(tr -d '\r' <"$1" | sed -E 's/^\[ *[0-9]+\.[0-9]+\] ?//' |
		sed -n "/$E2E_LOCKDEP_CHAIN_RE/,/^other info that might help/p" |
		sed -n '/^-> #/,$p')
	[ -n "$chain" ] || return 1
	! grep -qE '\[(vhost|virtio)_scsi_sqcq\]' <<<"$chain" || return 1
	# Block #0 only: an interrupt entry with an irq-off function below it.
	sed -n '/^-> #0 /,/^$/p' <<<"$chain" |
		sed -nE '/asm_(sysvec_[a-z_]*|common_interrupt)\+0x/,$p' |
		grep -E "^ +($E2E_IRQOFF_FUNCS)\+0x" >/dev/null
}

# The hung-task lines of memory-management daemons, which take no part in
# our I/O: when L1 froze (the watchdog's stall file) they are what a CPU
# that vanished into the emulator leaves behind (khugepaged waits for
# every CPU to drain its page lists; seen in the in-tree pair's L1 after
# its L2 passed, CI 2026-12-05: no heartbeat for 246 s, khugepaged
# blocked 120 s, nothing else). A task of ours, or QEMU, blocked is
# reported by its own line and still fails.
E2E_MM_HUNG='INFO: task (khugepaged|kcompactd[0-9]+):[0-9]+ blocked for more than [0-9]+ seconds'

# console_report FILE [LOCKUP_ID [FROZEN]]: the console in FILE shows a
# kernel report; with an emulator double fault, or a vCPU lockup (by its
# own frames, or LOCKUP_ID: the one dmesg showed, the console having its
# first line only), only what came before it counts. With FROZEN=1 the
# memory daemons' hung-task lines do not count.
console_report() {
	local n l
	[ -s "$1" ] || return 1
	n=""
	if emulator_double_fault "$1"; then
		n=$(grep -anE -m 1 'traps: PANIC: double fault|ENTRY_TRAMPOLINE stack guard page' "$1" | cut -d: -f1)
	elif vcpu_run_lockup "$1" >/dev/null; then
		n=$(grep -anE -m 1 "$E2E_LOCKUP_RE" "$1" | cut -d: -f1)
	elif n=$(uart_lock_spin "$1"); then
		:
	elif rcu_stall_in_guest "$1" >/dev/null; then
		n=$(grep -anE -m 1 "$E2E_RCU_STALL_RE" "$1" | cut -d: -f1)
	elif irq_in_irqoff_lockdep "$1"; then
		n=$(grep -anE -m 1 "$E2E_LOCKDEP_RE" "$1" | cut -d: -f1)
	elif [ -n "${2:-}" ]; then
		l=$(grep -anE -m 1 "$E2E_LOCKUP_RE" "$1" | tr -d '\r')
		[ -z "$l" ] || [ "$(lockup_id "$l")" != "$2" ] || n=${l%%:*}
	fi
	if [ -n "$n" ]; then head -n "$((n - 1))" "$1"; else cat "$1"; fi |
		{ if [ "${3:-0}" = 1 ]; then grep -avE "$E2E_MM_HUNG|hung_task_timeout_secs"; else cat; fi } |
		grep -aE "$SQCQ_VM_LOG_BAD" >/dev/null
}

# The FAIL lines of a live migration test (tests/e2e/l1-migrate.sh) that
# its L2's death leaves: the guest did not end, its verifier printed no
# result (and found no mismatch before), its console holds a report. Not
# the emulator's unless that console shows an emulator double fault
# (migrate_double_fault), and the report before it is searched as every
# other console's.
E2E_MIGRATE_DEATH_FAILS="^FAIL: e2e .* migrate (sqcq|classic): (L2 did not end on [ABC]|verified I/O across both moves \(no result; no mismatch\)|L2's kernel log clean \(.*\))$"
# migrate_double_fault DIR: a migrated L2's console in DIR's results shows
# an emulator double fault (emulator_double_fault).
migrate_double_fault() {
	local c
	for c in "$1"/results/migrate-*/console-[ABC].log; do
		[ -s "$c" ] && emulator_double_fault "$c" && return 0
	done
	return 1
}

# migrate_boot_freeze DIR: the migration test's first L2 never got to its
# I/O, and its console (results/migrate-*/console-A.log) stops, clean,
# before the SCSI layer loaded: before any SCSI driver, ours or the
# in-tree one, and before it used the host's device. Seen 2026-12-07
# (late): an in-tree L2 silent for 300 s after "9pnet: Installing".
E2E_MIGRATE_BOOT_FAIL='^FAIL: e2e .* migrate (sqcq|classic): L2 did not start its I/O \('
migrate_boot_freeze() {
	local k c n=0
	for k in sqcq classic; do
		tr -d '\r' <"$1/log" | grep -aqE "${E2E_MIGRATE_BOOT_FAIL/(sqcq|classic)/$k}" || continue
		c=$1/results/migrate-$k/console-A.log
		[ -s "$c" ] || return 1
		! grep -aqE "$SQCQ_VM_LOG_BAD|SCSI subsystem initialized|scsi host[0-9]|^migrate-l2: " "$c" || return 1
		n=$((n + 1))
	done
	[ "$n" -gt 0 ]
}

e2e_emulator_fault() {
	local dir=$1 log=$1/log own c df=1 lk rs ii us frozen=0 mdf=0 mbf=0
	E2E_WHY=""
	[ -s "$dir/stall" ] && frozen=1
	migrate_double_fault "$dir" && mdf=1
	migrate_boot_freeze "$dir" && mbf=1
	lk=$(vcpu_run_lockup "$dir/results/console.log") || lk=$(vcpu_run_lockup "$log") || lk=""
	emulator_double_fault "$log" || [ -n "$lk" ] || [ "$mdf" = 1 ] || df=0
	rs=$(rcu_stall_in_guest "$dir/results/console.log") || rs=""
	[ -z "$rs" ] || df=1
	us=$(uart_lock_spin "$dir/results/console.log") || us=$(uart_lock_spin "$log") || us=""
	[ -z "$us" ] || df=1
	ii=0
	for c in "$dir/results/console.log" "$dir/results/l2/console.log"; do
		irq_in_irqoff_lockdep "$c" && ii=1
	done
	[ "$ii" = 0 ] || df=1
	# Our FAIL lines: all but the emulator's set; a vm-kernel-log line
	# only where the log's report is an emulator double fault or lockup,
	# or, L1 frozen, a memory daemon's hung task (the consoles are
	# searched for any other report below).
	# (Lines that came over a serial port end in CR.)
	own=$(tr -d '\r' <"$log" | grep -aE '^FAIL: ' | grep -vE "$E2E_EMULATOR_FAILS" |
		{ if [ "$df" = 1 ]; then grep -v '^FAIL: vm-kernel-log '; else cat; fi } |
		{ if [ "$ii" = 1 ]; then grep -vE "^FAIL: e2e .* l2-stalled \(kernel log: .*$E2E_LOCKDEP_RE\)$"; else cat; fi } |
		{ if [ "$frozen" = 1 ]; then grep -vE "^FAIL: vm-kernel-log \(hung-task: $E2E_MM_HUNG"; else cat; fi } |
		{ if [ "$mdf" = 1 ]; then grep -vE "$E2E_MIGRATE_DEATH_FAILS"; else cat; fi } |
		{ if [ "$mbf" = 1 ]; then grep -vE "$E2E_MIGRATE_BOOT_FAIL"; else cat; fi } |
		head -n 1)
	if [ -n "$own" ]; then
		E2E_WHY="a test failed: $own"
		return 1
	fi
	for c in "$dir/results/console.log" "$dir/results/l2/console.log" \
		"$dir/results/viommu/console.log" "$dir"/results/migrate-*/console-[ABC].log; do
		# The lockup dmesg showed is L1's: only L1's console has it.
		[ "$c" = "$dir/results/console.log" ] || lk=""
		if console_report "$c" "$lk" "$frozen"; then
			E2E_WHY="kernel report on ${c#"$dir"/}: $(grep -aE -m 1 "$SQCQ_VM_LOG_BAD" "$c" | tr -d '\r')"
			return 1
		fi
	done
	if [ "$frozen" = 1 ]; then E2E_WHY="L1 froze (watchdog)"
	elif grep -aq '^FAIL: vm-kvm-error' "$log"; then E2E_WHY="KVM internal error in L2's QEMU"
	elif grep -aq '^FAIL: vm-l2-stall' "$log"; then E2E_WHY="L2 froze with clean consoles"
	elif [ "$ii" = 1 ]; then E2E_WHY="an interrupt delivered with interrupts off (lockdep: the timer interrupt inside $E2E_IRQOFF_FUNCS, or an interrupt frame with IF clear; no frame of ours)"
	elif [ -n "$us" ]; then E2E_WHY="a CPU of L1 spinning on a lock in the 8250 UART's interrupt handler (soft lockup or RCU stall, no frame of ours)"
	elif [ -n "$rs" ]; then E2E_WHY="L1's CPU $rs stalled inside L2 (RCU stall: KVM's run loop in its NMI backtrace, or no answer to the NMI)"
	elif [ "$mbf" = 1 ]; then E2E_WHY="a migrated L2 froze while booting, before its SCSI layer, console clean"
	elif [ "$mdf" = 1 ] && ! emulator_double_fault "$log"; then E2E_WHY="the emulated CPU's broken entry in a migrated L2 (a double fault on a user stack, in error_entry or with an all-zero frame, no frame of ours)"
	elif [ "$df" = 1 ] && ! emulator_double_fault "$log"; then E2E_WHY="an L2 vCPU thread of L1 stuck in KVM_RUN (soft lockup, no frame of ours)"
	elif [ "$df" = 1 ]; then E2E_WHY="the emulated CPU's broken entry (a double fault on a user stack, in error_entry or with an all-zero frame, or a fault in irqentry_enter on the entry trampoline)"
	elif grep -aq '^FAIL: vm-boot (' "$log"; then E2E_WHY="L1 gone before COMMAND's status, no kernel report"
	else
		E2E_WHY="no sign of the emulator"
		return 1
	fi
	return 0
}
