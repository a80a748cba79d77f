#!/bin/bash
# Stage 2 of the VM test rig: PID 1 inside the guest, running from the host's
# root (read-only 9p) after initramfs-init.sh has mounted everything. Runs the
# command that run.sh wrote into /run/sqcq/ctl/cmd.sh, with its output on
# /dev/ttyS1 (run.sh's stdout), then stores its exit status, the kernel log
# and the taint in the control share and powers off.
#
# Deliberately no `set -e`: PID 1 must always reach the power-off.
set -u
ctl=/run/sqcq/ctl

note() { echo "sqcq-stage2: $*" >/dev/kmsg; }

# run.sh's settings: SQCQ_CWD, SQCQ_ABI, SQCQ_KIMAGE, ... and --env ones.
# shellcheck source=/dev/null
. "$ctl/env.sh"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SQCQ_KVER=$(uname -r)
export SQCQ_IN_VM=1 SQCQ_KVER SQCQ_RESULTS=/run/sqcq/out HOME=/tmp
export TERM=dumb LANG=C.UTF-8 SHELL=/bin/bash

# A working directory or a download cache under the host's /tmp or /var/tmp
# is hidden by the guest's own tmpfs there: bind the host's copy of its top
# directory back (nested guests read their kernel from the cache).
for p in "$SQCQ_CWD" "${SQCQ_CACHE:-}"; do
	for d in /tmp /var/tmp; do
		case "$p" in
		"$d"/*)
			rel=${p#"$d"/}
			top=${rel%%/*}
			mountpoint -q "$d/$top" && continue
			mkdir -p "$d/$top"
			mount --bind "/run/sqcq/host$d/$top" "$d/$top" ||
				note "cannot bind host $d/$top"
			;;
		esac
	done
done

# From here the console shows warnings as well as errors (quiet let errors
# only through): an oops' call trace, a lockup's frames and the NMI
# backtraces of an RCU stall reach run.sh's console.log even when the VM
# dies before this script saves the kernel log (an L1 whose CPU stalled in
# CI showed the stall's header lines only, 2026-12-06).  Not on a lockdep
# kernel (the sanitizer's): a warning printed from a hard interrupt
# ("hrtimer: interrupt took N ns") would take the serial port's spinlock_t
# there, which PROVE_RAW_LOCK_NESTING reports as an invalid wait context.
if [ -e /proc/lockdep ]; then
	:
elif echo 5 >/proc/sys/kernel/printk; then
	# A warning itself: the e2e verdict reads it from the console.
	echo "<4>sqcq-stage2: console shows warnings" >/dev/kmsg
else
	note "cannot raise the console log level"
fi
note "running command"
read -r up _ </proc/uptime
echo "$up" >"$ctl/uptime-start"
(cd "$SQCQ_CWD" && exec /bin/bash "$ctl/cmd.sh") </dev/null >/dev/ttyS1 2>&1
rc=$?
note "command exited with status $rc"

# Sanitizer kernels (tests/debug/): an explicit kmemleak scan (the kernel's
# automatic one is off). Scanned twice: an object is listed only if it was
# unreferenced in both, which filters out pointers that were in flight. And
# lockdep's state: it switches itself off after its first report.
kml=/sys/kernel/debug/kmemleak
if [ -e "$kml" ]; then
	# kmemleak reports no object younger than 5 s: without this wait the
	# leaks of the command's last seconds (the final teardown, rmmod) would
	# never be seen.  The debug self-test waits the same (tests/debug/).
	sleep 6
	note "kmemleak scan"
	if echo scan >"$kml" && echo scan >"$kml" && cat "$kml" >"$ctl/kmemleak.part"; then
		mv "$ctl/kmemleak.part" "$ctl/kmemleak"
		echo scanned >"$ctl/kmemleak-status"
	else
		echo "kmemleak scan failed (kmemleak disabled?)" >"$ctl/kmemleak-status"
	fi
fi
if [ -r /proc/lockdep_stats ]; then
	awk '$1 == "debug_locks:" { print $2 }' /proc/lockdep_stats >"$ctl/debug_locks"
fi

dmesg >"$ctl/dmesg.part" 2>&1 && mv "$ctl/dmesg.part" "$ctl/dmesg"
cat /proc/sys/kernel/tainted >"$ctl/tainted"
echo "$rc" >"$ctl/rc"
sync
# Reboot (QEMU runs with -no-reboot and exits): unlike power-off, it needs no
# ACPI, which nested guests boot without.
echo b >/proc/sysrq-trigger
sleep 60
