#!/bin/bash
# tests/debug/selftest.sh [TEST...]: proves that the sanitizer lane can fail.
# Prints "PASS: debug-selftest-NAME (N s)" when the rig flagged what it had
# to (or, for `clean`, flagged nothing), "FAIL: ..." otherwise, then a
# summary line; exits non-zero if any failed.
#
# Tests (default: all, in this order):
#   classes   the FAIL line of tests/vm/run.sh names the class of each kind
#             of report (KASAN, KFENCE, UBSAN, lockdep, wait context, sleeping in atomic,
#             scheduling while atomic, ODEBUG, SLUB, kmemleak) from sample
#             kernel-log lines; a kmemleak file is summarised (no VM)
#   build     tests/debug/bad/sqcq_bad.ko builds against the debug kernel
#             (W=1 -Werror), into out/<abi>/debug-bad/
#   clean     debug VM: the module loaded without parameters; the run must
#             pass (no report, kmemleak scan done, lockdep still on)
#   all       ... with all six bugs in one VM (lockdep=1 sleep=1 ubsan=1
#             odebug=1 leak=1 oob=1): run.sh must fail naming every class,
#             lockdep, sleeping-in-atomic, UBSAN, ODEBUG, kmemleak (the
#             end-of-run scan) and KASAN.  The module makes lockdep's bug
#             first (any report switches lockdep off); the others do not
#             silence each other.  One VM instead of four: a VM of the
#             sanitizer kernel costs about 100 s before its command does
#             anything (boot, two kmemleak scans, power-off).
#   rawnest   ... with a spinlock_t taken in a hard-irq hrtimer (rawnest=1):
#             run.sh must fail naming wait-context ("BUG: Invalid wait
#             context", PROVE_RAW_LOCK_NESTING; the guest watchdog's bug on
#             PREEMPT_RT).  A VM of its own: it is a lockdep report, and
#             lockdep reports once per boot.
#   oob, leak, sleep, lockdep, ubsan, odebug   one bug each (by hand)
#   more      lockdep, UBSAN and ODEBUG in one VM (by hand)
#
# Options: --kernel ID (default debug), --timeout S per VM (default 300,
# about three times a clean run on 2 busy cores).
set -euo pipefail

# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
# shellcheck source=tests/vm/common.sh
. tests/vm/common.sh

id=debug timeout_s=300
tests=()
# The tests to run: the words that are not options.
stage_opt() {
	case "$1" in
	-*) return 1 ;;
	*) tests+=("$1"); STAGE_SHIFT=1 ;;
	esac
}
stage_init debug-selftest "kernel timeout" "$@"
[ ${#tests[@]} -gt 0 ] || tests=(classes build clean all rawnest)

passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME FUNCTION ARGS...: run it with its output in $tmp/NAME.log (shown,
# indented, on failure: a FAIL line of the rig in there must not count as
# one of ours), print the verdict with the wall time.
check() {
	local name=$1 t0 st
	shift
	t0=$(date +%s)
	set +e
	(set -e; "$@") >"$tmp/$name.log" 2>&1
	st=$?
	set -e
	if [ "$st" = 0 ]; then
		echo "PASS: debug-selftest-$name ($(($(date +%s) - t0)) s)"
		passed=$((passed + 1))
	else
		echo "FAIL: debug-selftest-$name ($(($(date +%s) - t0)) s)"
		sed 's/^/    | /' "$tmp/$name.log" | tail -n 60
		failed=$((failed + 1))
	fi
	grep -h -e 'run.sh: kernel' -e '^FAIL: vm-' "$tmp/$name.log" | sed 's/^/    /' || true
}

# expect WHAT COND...: fail the current test unless COND.
expect() {
	local what=$1
	shift
	"$@" || { echo "expectation failed: $what"; return 1; }
}

# ---- classes: the naming of reports, without a VM -----------------------------
# class_of LINE: the class part of the FAIL line for a log holding LINE.
class_of() {
	printf '[    1.0] ok\n[    2.0] %s\n' "$1" >"$tmp/fake-dmesg"
	sqcq_vm_log_problems "$tmp/fake-dmesg" | sqcq_vm_log_classes | sed 's/: .*//'
}

t_classes() {
	local line want got
	while IFS='|' read -r want line; do
		got=$(class_of "$line")
		expect "'$line' is $want (got '$got')" [ "$got" = "$want" ]
	done <<'EOF'
KASAN|BUG: KASAN: slab-out-of-bounds in bad_oob+0x6d/0xa0 [sqcq_bad]
KFENCE|BUG: KFENCE: out-of-bounds read in foo+0x1/0x2
UBSAN|UBSAN: array-index-out-of-bounds in /work/main/tests/debug/bad/sqcq_bad.c:101:2
lockdep|WARNING: possible circular locking dependency detected
lockdep|WARNING: inconsistent lock state
lockdep|WARNING: possible recursive locking detected
lockdep|INFO: trying to register non-static key.
wait-context|BUG: Invalid wait context
sleeping-in-atomic|BUG: sleeping function called from invalid context at kernel/locking/mutex.c:580
scheduling-while-atomic|BUG: scheduling while atomic: insmod/123/0x00000002
ODEBUG|ODEBUG: free active (active state 0) object: 0000 object type: timer_list hint: bad_timer_fn+0x0/0x10
SLUB|BUG kmalloc-64 (Not tainted): Poison overwritten
kmemleak|kmemleak: 1 new suspected memory leaks (see /sys/kernel/debug/kmemleak)
list-corruption|list_add corruption. prev->next should be next (ffff), but was ffff.
deprecated-wq|workqueue: work func vhc_worker_reap [vhost_scsi_sqcq] enqueued on deprecated workqueue. Use system_{percpu|dfl}_wq instead.
WARNING|WARNING: CPU: 1 PID: 42 at drivers/vhost/scsi.c:123 foo+0x1/0x2
EOF
	# run.sh's own line when lockdep switched itself off.
	got=$(echo "lockdep turned itself off (debug_locks 0)" | sqcq_vm_log_classes)
	expect "lockdep off: '$got'" [ "${got%%:*}" = lockdep-off ]
	# A clean log names nothing.
	expect "a clean log has no class" [ -z "$(class_of 'virtio_scsi_sqcq: SQ/CQ negotiated')" ]
	# Several reports: every class is named, the most specific first.
	printf '%s\n' '[ 1.0] ------------[ cut here ]------------' \
		'[ 1.1] ODEBUG: free active (active state 0) object type: timer_list' \
		'[ 1.2] WARNING: CPU: 0 PID: 1 at lib/debugobjects.c:505 debug_print_object+0x1/0x2' \
		'[ 2.0] BUG: KASAN: slab-out-of-bounds in bad_oob+0x6d/0xa0 [sqcq_bad]' >"$tmp/fake-dmesg"
	got=$(sqcq_vm_log_problems "$tmp/fake-dmesg" | sqcq_vm_log_classes)
	expect "two reports: '$got'" [ "$got" = "KASAN, ODEBUG: BUG: KASAN: slab-out-of-bounds in bad_oob+0x6d/0xa0 [sqcq_bad]" ]
	# The kmemleak file: count, first object, first frames.
	cat >"$tmp/kmemleak" <<'EOF'
unreferenced object 0xffff888003a1c000 (size 96):
  comm "insmod", pid 123, jiffies 4294893102 (age 12.340s)
  hex dump (first 32 bytes):
    6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b 6b  kkkkkkkkkkkkkkkk
  backtrace:
    [<ffffffff812a3b4c>] kmalloc_trace+0x26/0x90
    [<ffffffffc0123456>] bad_leak+0x1c/0x40 [sqcq_bad]
    [<ffffffff81002a3b>] do_one_initcall+0x5b/0x300
    [<ffffffff81002a3b>] do_init_module+0x5b/0x300
    [<ffffffff81002a3b>] load_module+0x5b/0x300
unreferenced object 0xffff888003a1c100 (size 32):
  backtrace:
    [<ffffffff812a3b4c>] __kmalloc+0x4c/0x120
EOF
	got=$(sqcq_vm_kmemleak_problems "$tmp/kmemleak")
	expect "kmemleak summary: '$got'" [ "$got" = "kmemleak: 2 unreferenced object(s); first: unreferenced object 0xffff888003a1c000 (size 96); backtrace: kmalloc_trace+0x26/0x90 < bad_leak+0x1c/0x40 [sqcq_bad] < do_one_initcall+0x5b/0x300 < do_init_module+0x5b/0x300" ]
	: >"$tmp/kmemleak"
	expect "no kmemleak objects, no summary" [ -z "$(sqcq_vm_kmemleak_problems "$tmp/kmemleak")" ]
}

# ---- the bad module in a debug VM -----------------------------------------------
# The module's place (the build test makes it; a failed build leaves none).
module_path() { echo "$ROOT/out/$(sqcq_kernel_abi "$id")/debug-bad/sqcq_bad.ko"; }

t_build() {
	local tree dir abi
	abi=$(sqcq_kernel_abi "$id")
	tree=$SQCQ_CACHE/kimage/$abi/lib/modules/$abi-amd64/build
	dir=$ROOT/out/$abi/debug-bad
	rm -rf "$dir"
	mkdir -p "$dir"
	cp tests/debug/bad/Kbuild tests/debug/bad/sqcq_bad.c "$dir/"
	make -C "$tree" M="$dir" W=1 KCFLAGS=-Werror modules >"$dir/build.log" 2>&1 ||
		{ cat "$dir/build.log"; return 1; }
	expect "no warning in the build" bash -c "! grep -i 'warning' '$dir/build.log'"
	expect "vermagic names $abi-amd64" \
		[ "$(modinfo -F vermagic "$dir/sqcq_bad.ko" | awk '{ print $1 }')" = "$abi-amd64" ]
}

# bad_run PARAM: boot the debug kernel, load the module with PARAM (empty:
# none) and end the command at once: the wait for kmemleak's minimum object
# age (5 s) is the rig's own (tests/vm/guest-stage2.sh), the one every real
# run has, so the leak test proves it; run.sh's output into $tmp/run.out,
# its status into $tmp/run.rc.
bad_run() {
	local rc=0 ko try
	ko=$(module_path)
	[ -f "$ko" ] || { echo "no $ko (the build test did not pass)"; return 1; }
	# A VM that never got to the command (the emulator hung in the
	# firmware or the kernel's boot) tested nothing: once more, saying so.
	for try in 1 2; do
		rc=0
		# shellcheck disable=SC2016 # expanded by the inner bash
		tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" -- \
			bash -c 'insmod "$1" $2 && echo "loaded: $2"' _ "$ko" "$1" \
			>"$tmp/run.raw" 2>&1 || rc=$?
		grep -q 'command started at ?s' "$tmp/run.raw" || break
		[ "$try" = 1 ] &&
			echo "    the VM never reached the command (boot hang); running it again"
	done
	# The serial port adds a CR to each line and may start with a stray byte.
	LC_ALL=C tr -d '\r\377' <"$tmp/run.raw" >"$tmp/run.out"
	cat "$tmp/run.out"
	echo "$rc" >"$tmp/run.rc"
}

t_clean() {
	bad_run ""
	expect "run.sh succeeded" [ "$(cat "$tmp/run.rc")" = 0 ]
	expect "the module loaded" grep -qx 'loaded: ' "$tmp/run.out"
	expect "no FAIL line" bash -c "! grep -q '^FAIL:' '$tmp/run.out'"
}

# t_bad PARAMS CLASS...: the run fails with vm-kernel-log lines naming
# every CLASS.
t_bad() {
	local classes params=$1 c
	shift
	bad_run "$params"
	expect "the module loaded" grep -qx "loaded: $params" "$tmp/run.out"
	expect "run.sh failed" [ "$(cat "$tmp/run.rc")" != 0 ]
	# One line for the kernel log, one for kmemleak's scan: the classes
	# are listed before the first ": " inside the parentheses.
	classes=$(sed -n 's/^FAIL: vm-kernel-log (\([^:]*\): .*/\1/p' "$tmp/run.out" |
		paste -sd, -)
	expect "a FAIL: vm-kernel-log line" [ -n "$classes" ]
	# Whole names: "lockdep-off" is not "lockdep".
	for c in "$@"; do
		expect "'$c' named in '$classes'" \
			grep -qx -- "$c" < <(tr ',' '\n' <<<"$classes" | sed 's/^ *//')
	done
}

for t in "${tests[@]}"; do
	case "$t" in
	classes) check classes t_classes ;;
	build) check build t_build ;;
	clean) check clean t_clean ;;
	oob) check oob t_bad oob=1 KASAN ;;
	leak) check leak t_bad leak=1 kmemleak ;;
	sleep) check sleep t_bad sleep=1 sleeping-in-atomic ;;
	all) check all t_bad "lockdep=1 sleep=1 ubsan=1 odebug=1 leak=1 oob=1" \
		lockdep sleeping-in-atomic UBSAN ODEBUG kmemleak KASAN ;;
	more) check more t_bad "lockdep=1 ubsan=1 odebug=1" lockdep UBSAN ODEBUG ;;
	lockdep) check lockdep t_bad lockdep=1 lockdep ;;
	rawnest) check rawnest t_bad rawnest=1 wait-context ;;
	ubsan) check ubsan t_bad ubsan=1 UBSAN ;;
	odebug) check odebug t_bad odebug=1 ODEBUG ;;
	*) echo "FAIL: debug-selftest-$t (unknown test)"; failed=$((failed + 1)) ;;
	esac
done
echo "debug selftest: $passed passed, $failed failed"
[ "$failed" = 0 ]
