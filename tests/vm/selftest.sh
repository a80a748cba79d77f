#!/bin/bash
# tests/vm/selftest.sh [TEST...]: the VM rig's own tests. Prints one
# "PASS: name (N s)" / "FAIL: name (N s)" line per test and a summary
# "N passed, N failed"; exits non-zero if any failed.
#
# Tests (default: all, in this order):
#   log-parser    unit test of the kernel-log and taint checks (no VM), and
#                 of the lines a command declared expected ($SQCQ_VM_EXPECTED)
#   boot-6.1      6.1 VM: uname -r is the ABI, modprobe vhost_scsi works,
#                 configfs/debugfs are mounted, a file comes back through
#                 $SQCQ_RESULTS, SQCQ_* of the caller are passed in
#   boot-7.2      the same on sid's 7.2 (split packages, .ko.xz modules)
#   exit-status   a command exiting 3 makes run.sh exit 3
#   dirty-log     a WARNING in the guest kernel log (injected through
#                 /dev/kmsg), and separately a W taint (set through
#                 /proc/sys/kernel/tainted), make run.sh fail with
#                 "FAIL: vm-kernel-log" although the command succeeded
#   timeout       a command that hangs is killed after --timeout: status 124
#   boot-retry    a kernel that panics while booting (no init), untainted,
#                 before COMMAND: booted twice more (a line each says so),
#                 then "FAIL: vm-boot", status 125
#   boot-stall    a VM whose console stays silent before COMMAND (QEMU
#                 started paused) is ended after SQCQ_VM_BOOT_STALL_S,
#                 booted twice more, then "FAIL: vm-boot (stalled ...)", 125
#   nested        a 6.1 L1 runs tests/vm/nested.sh: an L2 guest boots, runs a
#                 command, returns its status (5) and a file via L1 to here
#
# SQCQ_SELFTEST_NESTED_TIMEOUT (default 900) bounds the nested test: TCG
# inside TCG on a busy 2-core machine takes minutes to boot.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"
run="$here/run.sh"

passed=0 failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check NAME FUNCTION: run FUNCTION, its output into $tmp/NAME.log (shown on
# failure), and print the verdict with the wall time.
check() {
	local name="$1" fn="$2" t0 t1 st
	t0=$(date +%s.%N)
	set +e
	# set -e again inside: the first failed expectation ends the test.
	(set -e; "$fn") >"$tmp/$name.log" 2>&1
	st=$?
	set -e
	t1=$(date +%s.%N)
	local dt
	dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	if [ "$st" = 0 ]; then
		echo "PASS: vm-selftest-$name (${dt} s)"
		passed=$((passed + 1))
	else
		echo "FAIL: vm-selftest-$name (${dt} s)"
		sed 's/^/    | /' "$tmp/$name.log" | tail -n 60
		failed=$((failed + 1))
	fi
	grep -h 'run.sh: kernel' "$tmp/$name.log" | sed 's/^/    /' || true
}

# expect WHAT COND: fail the current test with a message unless COND.
expect() {
	local what="$1"
	shift
	if ! "$@"; then
		echo "expectation failed: $what"
		return 1
	fi
}

t_log_parser() {
	local f="$tmp/fake-dmesg"
	printf '%s\n' '[    1.0] virtio_scsi_sqcq: SQ/CQ negotiated' '[    2.0] hello' >"$f"
	expect "clean log is clean" [ -z "$(sqcq_vm_log_problems "$f")" ]
	local bad
	for bad in \
		'[ 3.1] WARNING: CPU: 1 PID: 42 at drivers/vhost/scsi.c:123 foo+0x1/0x2' \
		'[ 3.1] BUG: kernel NULL pointer dereference, address: 0000000000000008' \
		'[ 3.1] Oops: 0002 [#1] PREEMPT SMP NOPTI' \
		'[ 3.1] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [vhost-123:99]' \
		'[ 3.1] INFO: task fio:77 blocked for more than 120 seconds.' \
		'[ 3.1] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:' \
		'[ 3.1] rcu: INFO: rcu_sched self-detected stall on CPU' \
		'[ 3.1] Kernel panic - not syncing: Fatal exception' \
		'[ 3.1] NMI watchdog: Watchdog detected hard LOCKUP on cpu 1'; do
		printf '%s\n' '[ 1.0] ok' "$bad" '[ 4.0] ok' >"$f"
		expect "flagged: $bad" [ -n "$(sqcq_vm_log_problems "$f")" ]
	done
	# Lines a test declared expected are not counted; no other line is.
	local exp="$tmp/fake-expected"
	printf '%s\r\n' '[ 1.0] ok' '[ 2.0] sysfs: cannot create duplicate filename' \
		'[ 2.0] Call Trace:' '[ 2.1] ok' >"$f"
	printf '%s\n' '[ 2.0] sysfs: cannot create duplicate filename' '[ 2.0] Call Trace:' >"$exp"
	expect "expected report not counted" [ -z "$(sqcq_vm_log_problems "$f" "$exp")" ]
	printf '%s\n' '[ 1.0] ok' '[ 2.0] Call Trace:' '[ 3.0] Call Trace:' >"$f"
	expect "an undeclared report still counted" \
		[ "$(sqcq_vm_log_problems "$f" "$exp")" = '[ 3.0] Call Trace:' ]
	printf '%s\n' 'Call Trace:' >"$exp"
	expect "only whole lines declared" [ -n "$(sqcq_vm_log_problems "$f" "$exp")" ]
	expect "no declaration file: all counted" \
		[ -n "$(sqcq_vm_log_problems "$f" "$tmp/none")" ]
	expect "taint 0 ok" [ -z "$(sqcq_vm_taint_problems 0)" ]
	expect "taint O+E ok" [ -z "$(sqcq_vm_taint_problems $((4096 + 8192)))" ]
	expect "taint W flagged" [ "$(sqcq_vm_taint_problems 512)" = "tainted 512 (W)" ]
	expect "taint O+W flagged" [ "$(sqcq_vm_taint_problems 4608)" = "tainted 4608 (W)" ]
	expect "taint D flagged" [ -n "$(sqcq_vm_taint_problems 128)" ]
}

# The command every boot test runs in the guest.
# shellcheck disable=SC2016 # expanded in the guest
boot_probe='set -e
test "$SQCQ_IN_VM" = 1
test "$(uname -r)" = "$SQCQ_KVER"
test "$SQCQ_KVER" = "$SQCQ_ABI-amd64"
test "$SQCQ_SELFTEST_TOKEN" = passed-through
test "$(pwd)" = "$SQCQ_REPO_EXPECTED"
modprobe vhost_scsi
grep -q "^vhost_scsi " /proc/modules
test -c /dev/vhost-scsi
test -d /sys/kernel/config/target
grep -q " /sys/kernel/debug debugfs " /proc/mounts
touch /tmp/writable /run/writable /var/tmp/writable
uname -r >"$SQCQ_RESULTS/uname"
echo "PASS: in-guest-probe"'

boot_test() {
	local id="$1" abi out
	out="$tmp/out-$id"
	abi=$(sqcq_vm_resolve_abi "$id")
	SQCQ_SELFTEST_TOKEN=passed-through "$run" --kernel "$id" --timeout 300 \
		--results "$out" --env SQCQ_REPO_EXPECTED="$SQCQ_REPO" -- bash -c "$boot_probe"
	expect "uname came back" [ "$(cat "$out/uname")" = "$abi-amd64" ]
}
t_boot_61() { boot_test 6.1; }
t_boot_72() { boot_test 7.2; }

t_exit_status() {
	local st=0
	"$run" --timeout 300 -- sh -c 'echo "about to exit 3"; exit 3' || st=$?
	expect "status 3 (got $st)" [ "$st" = 3 ]
}

t_dirty_log() {
	local st=0 out
	out=$("$run" --timeout 300 -- sh -c \
		'echo "<4>WARNING: CPU: 0 PID: 1 at selftest-injected (not a real bug)" >/dev/kmsg') || st=$?
	echo "$out"
	expect "injected WARNING fails the run (got $st)" [ "$st" != 0 ]
	expect "FAIL: vm-kernel-log printed" grep -q '^FAIL: vm-kernel-log (WARNING' <<<"$out"
	st=0
	out=$("$run" --timeout 300 -- sh -c 'echo 512 >/proc/sys/kernel/tainted') || st=$?
	echo "$out"
	expect "W taint fails the run (got $st)" [ "$st" != 0 ]
	expect "taint reported" grep -q '^FAIL: vm-kernel-log (tainted 512 (W))' <<<"$out"
}

t_timeout() {
	local st=0 out
	out=$("$run" --timeout 40 -- sleep 1000) || st=$?
	echo "$out"
	expect "status 124 (got $st)" [ "$st" = 124 ]
	expect "FAIL: vm-timeout printed" grep -q '^FAIL: vm-timeout' <<<"$out"
}

t_boot_retry() {
	local st=0 out
	out=$("$run" --timeout 120 --append "rdinit=/sqcq-no-such-init" -- true 2>&1) || st=$?
	echo "$out"
	expect "status 125 (got $st)" [ "$st" = 125 ]
	expect "exactly two more boots" [ "$(grep -c 'died while booting, before COMMAND, untainted' <<<"$out")" = 2 ]
	expect "FAIL: vm-boot printed once" [ "$(grep -c '^FAIL: vm-boot' <<<"$out")" = 1 ]
}

t_boot_stall() {
	local st=0 out
	out=$(SQCQ_VM_BOOT_STALL_S=15 "$run" --timeout 120 --qemu-arg -S -- true 2>&1) || st=$?
	echo "$out"
	expect "status 125 (got $st)" [ "$st" = 125 ]
	expect "exactly two more boots" [ "$(grep -c 'stalled while booting, before COMMAND' <<<"$out")" = 2 ]
	expect "FAIL: vm-boot (stalled ...) printed once" [ "$(grep -c '^FAIL: vm-boot (stalled while booting' <<<"$out")" = 1 ]
}

# A working directory under the host's /tmp (CI may clone there) must stay
# visible although the guest mounts its own tmpfs on /tmp.
t_cwd_tmp() {
	local st=0 d out
	d=$(mktemp -d /tmp/sqcq-cwd.XXXXXX)
	echo "marker $$" >"$d/marker"
	out=$("$run" --timeout 300 --cwd "$d" -- cat marker) || st=$?
	rm -rf "$d"
	echo "$out"
	expect "status 0 (got $st)" [ "$st" = 0 ]
	expect "host file read from a /tmp cwd" grep -q "marker $$" <<<"$out"
}

t_nested() {
	local st=0 out="$tmp/out-nested" limit="${SQCQ_SELFTEST_NESTED_TIMEOUT:-900}"
	# shellcheck disable=SC2016 # expanded in L1
	# In L1: boot L2 with its results share inside L1's results share, so the
	# file L2 writes travels L2 -> L1 -> here.
	"$run" --kernel 6.1 --timeout "$limit" --results "$out" -- bash -c '
		st=0
		tests/vm/nested.sh --timeout '"$((limit - 60))"' --results "$SQCQ_RESULTS/l2" -- \
			sh -c "test \"\$SQCQ_VM_DEPTH\" = 2 && uname -r >\$SQCQ_RESULTS/uname && \
				echo PASS: l2-command; exit 5" || st=$?
		echo "nested.sh exited $st"
		test "$st" = 5' || st=$?
	expect "L1 command succeeded (got $st)" [ "$st" = 0 ]
	expect "L2 file came back" [ "$(cat "$out/l2/uname" 2>/dev/null)" = "$(cat "$SQCQ_CACHE/kimage/$(sqcq_vm_resolve_abi 6.1)/kver")" ]
}

all="log-parser boot-6.1 boot-7.2 exit-status dirty-log timeout boot-retry boot-stall cwd-tmp nested"
sqcq_vm_install_deps
# shellcheck disable=SC2086 # a list of names
[ $# -gt 0 ] || set -- $all
for t in "$@"; do
	case "$t" in
	log-parser) check "$t" t_log_parser ;;
	boot-6.1) check "$t" t_boot_61 ;;
	boot-7.2) check "$t" t_boot_72 ;;
	exit-status) check "$t" t_exit_status ;;
	dirty-log) check "$t" t_dirty_log ;;
	timeout) check "$t" t_timeout ;;
	boot-retry) check "$t" t_boot_retry ;;
	boot-stall) check "$t" t_boot_stall ;;
	cwd-tmp) check "$t" t_cwd_tmp ;;
	nested) check "$t" t_nested ;;
	*) sqcq_die "unknown test $t (known: $all)" ;;
	esac
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
