#!/bin/bash
# A system freeze asked for while a TMF is outstanding (#24 finding 9: "a
# freeze with a TMF outstanding offlines the LUN for good after resume"),
# run INSIDE the VM that tests/guest/tmf-freeze.sh boots: one
# virtio-scsi-pci with one disk, the driver's test build
# (tests/faults/guest/) bound.
#
# A LUN reset by ioctl (SG_SCSI_RESET_DEVICE | SG_SCSI_RESET_NO_ESCALATE,
# what sg_reset -d -N sends) is left unanswered (fault_tmf_unanswered=1:
# the device is not told of it), then suspend-to-idle is asked for with
# pm_test=freezer.  The ioctl's caller waits in the kernel, uninterruptible,
# so the freezer refuses and the suspend fails (EBUSY): the driver's freeze
# is never called with the TMF outstanding.  Whatever the freeze attempt
# did, afterwards the LUN must be running, the LUN reset answered once the
# device hears of it, data written and read back equal, nothing offlined,
# and the kernel log clean apart from the freezer's dump of the waiting
# task (which it prints whenever it refuses).
#
# pm_test=freezer and not a real suspend: the test VM's root is 9p over
# virtio, whose driver has no restore callback, so any device suspend
# leaves the VM without its root (and QEMU TCG's RTC alarm did not wake
# an s2idle guest: rtcwake -m freeze never returned).
#
# Usage: tmf-freeze-inside.sh FAULT_KO
set -u
KO=${1:?FAULT_KO}
FMOD=virtio_scsi_sqcq_faults
PREFIX="guest-tmf-freeze $(uname -r)"
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
# shellcheck source=tests/vm/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/../vm/common.sh"	# SQCQ_VM_LOG_BAD

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
modprobe -a scsi_mod sd_mod 2>/dev/null
VDEV=""
for d in /sys/bus/virtio/devices/virtio*; do
	[ "$(cat "$d/device")" = 0x0008 ] && VDEV=${d##*/}
done
[ -n "$VDEV" ] || { fail "no virtio-scsi device in the VM"; exit 1; }
[ ! -e "/sys/bus/virtio/drivers/virtio_scsi/$VDEV" ] ||
	echo "$VDEV" >/sys/bus/virtio/drivers/virtio_scsi/unbind
check "bind the fault build" insmod "$KO" poll_queues=0 || exit 1
disk() {
	local d
	for d in /sys/bus/scsi/devices/*:0:0:0/block/*; do
		[ -e "$d" ] && { echo "$d"; return 0; }
	done
	return 1
}
has_disk() { disk >/dev/null; }
check "disk visible" wait_for 30 has_disk || exit 1
DISK=$(disk)
DISK=${DISK##*/}
check "disk node /dev/$DISK" wait_for 30 test -b "/dev/$DISK" || exit 1
STATE=/sys/block/$DISK/device/state
INFO=/sys/kernel/debug/$FMOD/$VDEV/info
PAR=/sys/module/$FMOD/parameters
info() { awk -v k="$1:" '$1 == k { print $2 }' "$INFO"; }
# Control queue requests the device has not returned.
ctrl_open() {
	awk 'NR > 1 && $2 == "ctrl" { print $4 - $8 }' "/sys/kernel/debug/$FMOD/$VDEV/queues"
}
# rw_verify TAG: 8 MiB of random data written direct and read back equal.
rw_verify() {
	dd if=/dev/urandom of="/tmp/pat-$1" bs=1M count=8 2>/dev/null &&
		dd if="/tmp/pat-$1" of="/dev/$DISK" bs=1M oflag=direct 2>/dev/null &&
		dd if="/dev/$DISK" of="/tmp/back-$1" bs=1M count=8 iflag=direct 2>/dev/null &&
		cmp -s "/tmp/pat-$1" "/tmp/back-$1"
}
check "data verifies before" rw_verify before
if [ ! -e /sys/power/pm_test ] || ! grep -qw freeze /sys/power/state; then
	echo "SKIP: $PREFIX no suspend-to-idle with pm_test on $(uname -r)"
	echo "tmf-freeze tests: $fails failed"
	exit $((fails > 0))
fi
dmesg -C

# The LUN reset, left unanswered (perl-base is Essential; 0x2284 is
# SG_SCSI_RESET, 0x101 SG_SCSI_RESET_DEVICE | SG_SCSI_RESET_NO_ESCALATE).
echo 1 >"$PAR/fault_tmf_unanswered"
rm -f /tmp/lunreset.rc
# shellcheck disable=SC2016 # perl's variables, not the shell's
(perl -e 'open(my $f, "<", $ARGV[0]) or die "$!\n"; my $a = pack("i", 0x101);
	ioctl($f, 0x2284, $a) or die "ioctl: $!\n"' "/dev/$DISK"
	echo $? >/tmp/lunreset.rc) &
lr=$!
outstanding() { [ "$(info ctrl_waiting)" = 1 ] && [ "$(ctrl_open)" = 1 ]; }
check "LUN reset outstanding, unanswered (one control request open)" \
	wait_for 30 outstanding

# Suspend-to-idle, stopped after the freezer stage whatever it does.
echo 2000 >/sys/power/pm_freeze_timeout
echo freezer >/sys/power/pm_test
r=0
echo freeze 2>/dev/null >/sys/power/state || r=1
echo none >/sys/power/pm_test
refused=0
dmesg | grep -q 'Freezing user space processes failed.*refusing to freeze' && refused=1
echo "guest-tmf-freeze: freeze attempt: status $r, freezer refused: $refused" >&2
check "freeze attempt ended; LUN running after it ($(cat "$STATE"))" [ "$(cat "$STATE")" = running ]
if [ "$refused" = 1 ]; then
	# The driver's freeze did not run: the TMF is still the device's.
	check "freezer refused (suspend EBUSY), the TMF still outstanding" \
		bash -c "[ $r != 0 ] && [ '$(ctrl_open)' = 1 ] && [ ! -e /tmp/lunreset.rc ]"
fi

# The device hears of it now: the waiter's next notification (every 5 s).
echo 0 >"$PAR/fault_tmf_unanswered"
if ! check "LUN reset ends once the device hears of it" wait_for 20 test -e /tmp/lunreset.rc; then
	# Its task waits in the kernel for good: nothing after can end.
	echo "tmf-freeze tests: $fails failed"
	exit 1
fi
wait "$lr" 2>/dev/null
lrc=$(cat /tmp/lunreset.rc 2>/dev/null || echo none)
if [ "$refused" = 1 ]; then
	check "LUN reset answered by the device (ioctl status $lrc)" [ "$lrc" = 0 ]
fi
check "LUN running after resume ($(cat "$STATE"))" [ "$(cat "$STATE")" = running ]
check "data verifies after" rw_verify after
check "LUN running after the I/O ($(cat "$STATE"))" [ "$(cat "$STATE")" = running ]
check "nothing offlined" bash -c "! dmesg | grep -Eq 'offline|rejecting I/O'"
check "no control request left open ($(ctrl_open))" [ "$(ctrl_open)" = 0 ]
# The freezer's dump of the task it could not freeze (from its "task:"
# line to "</TASK>") is the one report allowed, declared to the rig
# ($SQCQ_VM_EXPECTED: those exact lines); anything else fails.
dump=$(dmesg | awk '
	/Freezing user space processes failed/ { skip = 1 }
	skip { print }
	skip && /<\/TASK>/ { skip = 0 }')
[ -z "${SQCQ_VM_EXPECTED:-}" ] || [ -z "$dump" ] || printf '%s\n' "$dump" >>"$SQCQ_VM_EXPECTED"
rest=$(dmesg | awk '
	/Freezing user space processes failed/ { print; skip = 1; next }
	skip && /<\/TASK>/ { skip = 0; next }
	!skip' | grep -aE "$SQCQ_VM_LOG_BAD")
check "kernel log clean apart from the freezer's dump" [ -z "$rest" ] ||
	echo "$rest" | head -n 5 >&2
check "rmmod" rmmod $FMOD
echo "tmf-freeze tests: $fails failed"
[ $fails = 0 ]
