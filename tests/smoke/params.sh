#!/bin/bash
# VM smoke test of both modules (runs INSIDE the test VM, as root):
# load, parameters with their defaults, runtime writes that take effect
# (seen in debugfs), rejected bad values (load time and runtime), the host
# device node, unload.  Prints one PASS:/FAIL: line per check.
#
# Usage: params.sh KO_DIR PROBE
#   KO_DIR: holds host/vhost_scsi_sqcq.ko and guest/virtio_scsi_sqcq.ko
#   PROBE:  the ioctl-probe binary (tests/smoke/ioctl-probe.c)
set -u
KO=${1:?KO_DIR}
PROBE=${2:?PROBE}
HOST=vhost_scsi_sqcq
GUEST=virtio_scsi_sqcq
PREFIX=smoke
# shellcheck source=tests/lib/check.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/check.sh"
param() { cat "/sys/module/$1/parameters/$2" 2>/dev/null; }
# set_param MOD NAME VALUE: returns the write's status.  echo, not printf:
# an empty printf performs no write(2) at all, so the setter never runs.
set_param() { echo "$3" 2>/dev/null >"/sys/module/$1/parameters/$2"; }
# shellcheck source=tests/lib/modules.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/modules.sh"
# load_with KO PARAMS...: insmod, and the module is there.
load_with() {
	local ko=$1 mod
	mod=$(basename "$ko" .ko)
	shift
	insmod "$ko" "$@" && [ -d "/sys/module/$mod" ]
}
# log_count TEXT: kernel log lines holding TEXT.
log_count() { dmesg | grep -cF -- "$1"; }
# effective MOD LINE / effective_not MOD LINE: the debugfs params file
# has / has not that line.
effective() { grep -qxF -- "$2" "/sys/kernel/debug/$1/params"; }
effective_not() { [ -n "$2" ] && ! effective "$@"; }
k=$(uname -r)

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug

for mod in $HOST $GUEST; do
	case $mod in
	"$HOST") ko=$KO/host/$HOST.ko ;;
	*) ko=$KO/guest/$GUEST.ko ;;
	esac
	tag="$k $mod"
	check "$tag dependencies" load_deps "$ko"
	# No value given at load keeps the module out (it may drive the root
	# disk): a CPU this VM lacks or has offline is accepted with one log
	# line, its poller unbound until the CPU comes online; a value that
	# cannot be used is ignored with one line.  Runtime writes stay strict
	# (below).
	dmesg -C
	check "$tag load-accepts-absent-poll_cpu" load_with "$ko" poll_cpu=0,4096
	check "$tag absent-cpu-logged-once" \
		[ "$(log_count 'poll_cpu: CPU 4096 of "0,4096" not online at load')" = 1 ]
	check "$tag absent-cpu-value-kept" [ "$(param $mod poll_cpu)" = 0,4096 ]
	check "$tag absent-cpu-left-out" effective $mod 'poll_cpu_effective: 0'
	rmmod $mod
	check "$tag load-accepts-only-absent-poll_cpu" load_with "$ko" poll_cpu=7
	check "$tag only-absent-cpu-unbound" effective $mod 'poll_cpu_effective: unbound'
	rmmod $mod
	if echo 0 >/sys/devices/system/cpu/cpu1/online; then
		check "$tag load-accepts-offline-poll_cpu" load_with "$ko" poll_cpu=1
		g0=$(sed -n 's/^poll_cpu_generation: //p' /sys/kernel/debug/$mod/params)
		echo 1 >/sys/devices/system/cpu/cpu1/online
		check "$tag offline-cpu-kept" effective $mod 'poll_cpu_effective: 1'
		check "$tag onlined-cpu-moves-generation (was $g0)" \
			effective_not $mod "poll_cpu_generation: $g0"
		rmmod $mod
	else
		fail "$tag load-accepts-offline-poll_cpu (cannot offline cpu1; needs -smp 2)"
	fi
	dmesg -C
	check "$tag load-ignores-bad-values" load_with "$ko" poll_cpu=banana \
		poll_idle_us=2000000 poll_adaptive=maybe
	check "$tag bad-load-values-left-at-defaults" \
		[ "$(param $mod poll_cpu)/$(param $mod poll_idle_us)/$(param $mod poll_adaptive)" = /1000/Y ]
	check "$tag bad-load-values-logged" [ "$(log_count ': ignored at load')" = 3 ]
	rmmod $mod
	# Load-time values are honoured.
	if insmod "$ko" poll_idle_us=5 poll_cpu=0; then
		pass "$tag insmod-with-params"
	else
		fail "$tag insmod-with-params"
		continue
	fi
	check "$tag load-time-values" bash -c \
		"[ \"\$(cat /sys/module/$mod/parameters/poll_idle_us)\" = 5 ] &&
		 [ \"\$(cat /sys/module/$mod/parameters/poll_cpu)\" = 0 ]"
	check "$tag version" [ "$(cat /sys/module/$mod/version)" = "$(cat VERSION)" ]
	rmmod $mod
	check "$tag rmmod" bash -c "! [ -d /sys/module/$mod ]"

	# Defaults.
	check "$tag insmod" insmod "$ko"
	check "$tag defaults" bash -c \
		"[ \"\$(cat /sys/module/$mod/parameters/sqcq)\" = Y ] &&
		 [ -z \"\$(cat /sys/module/$mod/parameters/poll_cpu)\" ] &&
		 [ \"\$(cat /sys/module/$mod/parameters/poll_idle_us)\" = 1000 ] &&
		 [ \"\$(cat /sys/module/$mod/parameters/poll_adaptive)\" = Y ]"
	check "$tag debugfs-defaults" bash -c \
		"grep -qx 'poll_cpu_effective: unbound' /sys/kernel/debug/$mod/params &&
		 grep -qx 'poll_idle_us_effective: 1000' /sys/kernel/debug/$mod/params &&
		 grep -qx 'poll_adaptive: 1' /sys/kernel/debug/$mod/params"
	check "$tag write-poll_adaptive" set_param $mod poll_adaptive 0
	check "$tag effective-poll_adaptive" bash -c \
		"grep -qx 'poll_adaptive: 0' /sys/kernel/debug/$mod/params"
	check "$tag reject-poll_adaptive=maybe" bash -c \
		"! printf maybe 2>/dev/null >/sys/module/$mod/parameters/poll_adaptive &&
		 [ \"\$(cat /sys/module/$mod/parameters/poll_adaptive)\" = N ]"
	set_param $mod poll_adaptive 1
	# poll_idle_us is read at every pass: writing it is no rebind.
	g0=$(sed -n 's/^poll_cpu_generation: //p' /sys/kernel/debug/$mod/params)
	set_param $mod poll_idle_us 700
	set_param $mod poll_idle_us 1000
	check "$tag poll_idle_us-write-no-rebind (generation $g0)" bash -c \
		"[ -n '$g0' ] && grep -qx 'poll_cpu_generation: $g0' /sys/kernel/debug/$mod/params"

	# Runtime writes take effect.
	check "$tag write-poll_idle_us" set_param $mod poll_idle_us 250
	check "$tag effective-poll_idle_us" bash -c \
		"[ \"\$(cat /sys/module/$mod/parameters/poll_idle_us)\" = 250 ] &&
		 grep -qx 'poll_idle_us_effective: 250' /sys/kernel/debug/$mod/params"
	check "$tag write-poll_cpu" set_param $mod poll_cpu "0-1"
	check "$tag effective-poll_cpu" bash -c \
		"[ \"\$(cat /sys/module/$mod/parameters/poll_cpu)\" = 0-1 ] &&
		 grep -qx 'poll_cpu_effective: 0-1' /sys/kernel/debug/$mod/params"
	check "$tag write-poll_cpu-unbind" set_param $mod poll_cpu ""
	check "$tag effective-poll_cpu-unbind" bash -c \
		"grep -qx 'poll_cpu_effective: unbound' /sys/kernel/debug/$mod/params"
	check "$tag write-sqcq" set_param $mod sqcq 0
	check "$tag effective-sqcq" bash -c \
		"[ \"\$(cat /sys/module/$mod/parameters/sqcq)\" = N ] &&
		 grep -qx 'sqcq: 0' /sys/kernel/debug/$mod/params"
	set_param $mod sqcq 1

	# Bad runtime writes fail and leave the value alone.
	set_param $mod poll_idle_us 300
	for bad in abc -1 1000001 ""; do
		check "$tag reject-poll_idle_us=${bad:-empty}" bash -c \
			"! echo '$bad' 2>/dev/null >/sys/module/$mod/parameters/poll_idle_us &&
			 [ \"\$(cat /sys/module/$mod/parameters/poll_idle_us)\" = 300 ]"
	done
	set_param $mod poll_cpu 0
	for bad in 4096 0-x "1,,2" "banana"; do
		check "$tag reject-poll_cpu=$bad" bash -c \
			"! echo '$bad' 2>/dev/null >/sys/module/$mod/parameters/poll_cpu &&
			 [ \"\$(cat /sys/module/$mod/parameters/poll_cpu)\" = 0 ]"
	done
	check "$tag reject-sqcq=maybe" bash -c \
		"! printf maybe 2>/dev/null >/sys/module/$mod/parameters/sqcq"
	if [ $mod = $HOST ]; then
		# poll_shared: on by default; a write makes every poller choose
		# again (the generation moves); a bad value is refused.
		check "$tag poll_shared-default" [ "$(param $mod poll_shared)" = Y ]
		g0=$(sed -n 's/^poll_cpu_generation: //p' /sys/kernel/debug/$mod/params)
		check "$tag write-poll_shared" set_param $mod poll_shared 0
		check "$tag poll_shared-write-moves-generation ($g0)" bash -c \
			"[ -n '$g0' ] && [ \"\$(cat /sys/module/$mod/parameters/poll_shared)\" = N ] &&
			 ! grep -qx 'poll_cpu_generation: $g0' /sys/kernel/debug/$mod/params"
		check "$tag reject-poll_shared=maybe" bash -c \
			"! printf maybe 2>/dev/null >/sys/module/$mod/parameters/poll_shared &&
			 [ \"\$(cat /sys/module/$mod/parameters/poll_shared)\" = N ]"
		set_param $mod poll_shared 1
	fi
	check "$tag reject-message-logged" bash -c \
		"dmesg | grep -q '$mod: poll_cpu: \"banana\" is not a valid CPU list'"
	check "$tag reject-nonexistent-cpu-message" bash -c \
		"dmesg | grep -q '$mod: poll_cpu: \"4096\" names a CPU that does not exist'"

	# An offline CPU is refused with a clear message.
	if [ -w /sys/devices/system/cpu/cpu1/online ] &&
		echo 0 >/sys/devices/system/cpu/cpu1/online; then
		check "$tag reject-offline-cpu" bash -c \
			"! printf 1 2>/dev/null >/sys/module/$mod/parameters/poll_cpu &&
			 dmesg | grep -q '$mod: poll_cpu: CPU 1 in \"1\" is offline'"
		echo 1 >/sys/devices/system/cpu/cpu1/online
		check "$tag accept-onlined-cpu" set_param $mod poll_cpu 1
	else
		fail "$tag reject-offline-cpu (cannot offline cpu1; needs -smp 2)"
	fi

	if [ $mod = $HOST ]; then
		check "$tag devnode" [ -c /dev/vhost-scsi-sqcq ]
		# The vhost ioctls are implemented (tests/host/ covers them);
		# queries work before SET_OWNER, unknown ioctls are ENOTTY.
		check "$tag ioctl-get-features-ok" \
			[ "$("$PROBE" /dev/vhost-scsi-sqcq 0x8008af00)" = OK0 ]
		check "$tag ioctl-set-mem-table-needs-owner" \
			[ "$("$PROBE" /dev/vhost-scsi-sqcq 0x4008af03)" = EPERM ]
		check "$tag ioctl-get-features-array-ok" \
			[ "$("$PROBE" /dev/vhost-scsi-sqcq 0x8008af83)" = OK0 ]
		# The worker ioctls exist; before SET_OWNER, as upstream,
		# they answer EINVAL (tests/host/client.c covers the rest).
		check "$tag ioctl-new-worker-needs-owner" \
			[ "$("$PROBE" /dev/vhost-scsi-sqcq 0x8004af08)" = EINVAL ]
		check "$tag ioctl-random-enotty" \
			[ "$("$PROBE" /dev/vhost-scsi-sqcq 0xdeadbeef)" = ENOTTY ]
	else
		check "$tag poll_queues-default" [ "$(param $mod poll_queues)" = 0 ]
		check "$tag virtscsi_poll_queues-alias" bash -c \
			"printf 2 >/sys/module/$mod/parameters/virtscsi_poll_queues &&
			 [ \"\$(cat /sys/module/$mod/parameters/poll_queues)\" = 2 ] &&
			 grep -qx 'poll_queues: 2' /sys/kernel/debug/$mod/params"
		check "$tag reject-poll_queues=100000" bash -c \
			"! printf 100000 2>/dev/null >/sys/module/$mod/parameters/poll_queues &&
			 [ \"\$(cat /sys/module/$mod/parameters/poll_queues)\" = 2 ]"
	fi

	check "$tag rmmod-clean" rmmod $mod
	check "$tag unloaded" bash -c "! [ -d /sys/module/$mod ] && ! [ -e /sys/kernel/debug/$mod ]"
done
check "$k devnode-gone" bash -c "! [ -e /dev/vhost-scsi-sqcq ]"
exit $((fails > 0))
