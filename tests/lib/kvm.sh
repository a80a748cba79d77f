# shellcheck shell=bash
# tests/lib/kvm.sh: KVM inside a test VM (L1), for the nested guests that
# tests/vm/nested.sh, libvirt (tests/lib/libvirt.sh) and the package test's
# domain start there. Sourced by tests/vm/common.sh and copied into the
# package test's VM beside libvirt.sh.
#
# sqcq_kvm_load: load the KVM module of L1's CPU (SVM with nested paging:
# kvm_amd) and, once per boot, start a process that holds one empty KVM VM
# (no vCPU, no memory) until L1 powers off. KVM turns the scheduler's
# preempt-notifier static key on when the first VM is made and off when the
# last one goes, and each flip rewrites a jump inside __schedule on a live
# system (an int3 first, then the new bytes, with IPIs between). Under the
# emulator a CPU of L1 once stayed 44 s in that int3 at __schedule as the
# nested guest's QEMU exited, the new nop already in memory (soft lockup of
# l1.sh, then no heartbeat: a CI run of 2026-12-07, docs/testing-notes.md).
# With the held VM the key is flipped once, before any nested guest, and
# never while one runs or ends. Prints the holder's pid; fails without a
# usable /dev/kvm.
sqcq_kvm_load() {
	local pidf=/run/sqcq-kvm-hold.pid pid t
	if ! [ -c /dev/kvm ]; then
		modprobe -q kvm_amd 2>/dev/null || modprobe -q kvm_intel 2>/dev/null
	fi
	[ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ] || return 1
	if [ -s "$pidf" ] && pid=$(cat "$pidf") && [ -e "/proc/$pid/fd" ] &&
		[ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sqcq-kvm-hold ]; then
		echo "$pid"
		return 0
	fi
	# KVM_CREATE_VM is _IO(0xAE, 0x01), its argument the VM type (0). The
	# holder first closes what it inherited (a caller's vhost file must not
	# stay open), says "PID held" once its VM exists, then sleeps.
	t=$(perl -e '
		use POSIX ();
		POSIX::close($_) for 3 .. 1023;
		$0 = "sqcq-kvm-hold";
		open(my $kvm, "+<", "/dev/kvm") or die "/dev/kvm: $!\n";
		defined(ioctl($kvm, 0xAE01, 0)) or die "KVM_CREATE_VM: $!\n";
		$| = 1;
		print "$$ held\n";
		close(STDOUT);
		sleep;' </dev/null 2>/dev/null &)
	[[ "$t" =~ ^([0-9]+)\ held$ ]] || return 1
	pid=${BASH_REMATCH[1]}
	echo "$pid" >"$pidf"
	echo "$pid"
}
