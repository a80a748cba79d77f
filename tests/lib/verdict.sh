# shellcheck shell=bash
# One judgement shared by the stages that boot a VM and may repeat it
# (sourced by tests/pkg/run.sh and tests/guest/run.sh).
#
# sqcq_emulator_break OUT: the VM whose tests/vm/run.sh output is OUT ended
# without COMMAND's status (killed at its timeout, or gone) with nothing of
# ours failed and no kernel report (tests/vm/run.sh prints "FAIL:
# vm-kernel-log" for one): the emulator froze or reset it, as it does now
# and then (docs/testing-notes.md). Status 0 then, with the reason in
# sqcq_break_why; 1 for anything else, a clean pass included.
sqcq_emulator_break() {
	local fails
	fails=$(tr -d '\r' <"$1" | grep -E '^FAIL: ')
	grep -qE '^FAIL: (vm-timeout|vm-boot) ' <<<"$fails" || return 1
	! grep -vqE '^FAIL: (vm-timeout|vm-boot) ' <<<"$fails" || return 1
	sqcq_break_why="the VM froze or reset with a clean console ($(grep -E -m 1 '^FAIL: ' <<<"$fails" | cut -c7-))"
}
