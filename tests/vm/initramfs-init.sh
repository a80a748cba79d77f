#!/bin/busybox sh
# /init of the VM test rig's initramfs (busybox, built by common.sh).
#
# Loads the modules needed for virtio-9p, mounts the host's root read-only
# (tag sqcqroot) and, below it, everything a test needs writable or virtual
# (done here with busybox, which is in RAM: running util-linux's mount over
# 9p costs a second or two under TCG):
#   /run /tmp /var/tmp /dev/shm (tmpfs), /dev (devtmpfs), /dev/pts, /proc,
#   /sys, debugfs, tracefs, configfs;
#   /run/sqcq/ctl  the rig's control share (tag sqcqctl: command, env, status)
#   /run/sqcq/out  the tests' results share (tag sqcqout)
#   /lib/modules/$(uname -r)  the VM kernel's modules, bound from the cache
#                  (kernel parameter sqcq.kimage=<cached kernel dir>)
# then switch_root's into the host root and runs stage 2 (guest-stage2.sh)
# there as PID 1 with the host's own bash, so that the kernel's module
# auto-loading (/sbin/modprobe) runs in the same root as the tests.
# shellcheck shell=sh

/bin/busybox --install -s /bin
export PATH=/bin

# Any failure here: say why on the kernel console, then power off; run.sh
# reports the missing exit status and shows the console.
fail() {
	echo "<2>sqcq-init: FATAL: $*" >/dev/kmsg
	# Reboot, not power-off: it works without ACPI too (nested guests boot
	# with acpi=off), and QEMU runs with -no-reboot, so it exits.  /proc
	# may have moved under the new root already.
	echo b >/proc/sysrq-trigger || echo b >/newroot/proc/sysrq-trigger
	sleep 60
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

for m in /lib/sqcq-modules/*.ko; do
	[ -e "$m" ] || continue
	insmod "$m" || fail "insmod $m"
done

# sqcq.rootcache=MODE picks the 9p cache mode of the root (default loose:
# the root is read-only and nothing changes it under a test run; loose caching
# saves most 9p round trips).  sqcq.init=PATH runs PATH of the initramfs
# instead of all that follows, without 9p: a guest that must migrate (QEMU
# refuses to migrate one with a 9p share mounted) brings its init in a
# second cpio archive appended to this one (tests/e2e/l1-migrate.sh).
rootcache=loose kimage="" init=""
# shellcheck disable=SC2013 # words are wanted
for arg in $(cat /proc/cmdline); do
	case "$arg" in
	sqcq.rootcache=*) rootcache=${arg#*=} ;;
	sqcq.kimage=*) kimage=${arg#*=} ;;
	sqcq.init=*) init=${arg#*=} ;;
	esac
done
if [ -n "$init" ]; then
	# shellcheck disable=SC2093 # fail only runs if the exec fails
	exec "$init"
	fail "exec $init"
fi

r=/newroot
p9="trans=virtio,version=9p2000.L,msize=512000"
mount -t 9p -o "$p9,ro,cache=$rootcache" sqcqroot $r || fail "mount root over 9p"
mount -t tmpfs -o mode=755 tmpfs $r/run || fail "tmpfs on /run"
mkdir -p $r/run/sqcq/ctl $r/run/sqcq/out $r/run/lock
mount -t 9p -o "$p9,rw,cache=none" sqcqctl $r/run/sqcq/ctl || fail "mount sqcqctl"
mount -t 9p -o "$p9,rw,cache=none" sqcqout $r/run/sqcq/out || fail "mount sqcqout"
# The VM kernel's modules (the root's own /lib/modules is hidden).  Bound
# before the tmpfs mounts below, which would hide a cache under /var/tmp.
kver=$(uname -r)
[ -d "$r$kimage/lib/modules/$kver" ] || fail "no modules at $kimage for $kver"
mount -t tmpfs -o mode=755 tmpfs $r/lib/modules || fail "tmpfs on /lib/modules"
mkdir -p "$r/lib/modules/$kver"
mount --bind "$r$kimage/lib/modules/$kver" "$r/lib/modules/$kver" || fail "bind modules"

# The guest gets its own /tmp and /var/tmp, but a checkout (or anything a
# test names) may live under the host's: keep the host's view of both under
# /run/sqcq/host/ so stage 2 can bind the working directory back in place.
for d in tmp var/tmp; do
	mkdir -p $r/run/sqcq/host/$d
	mount --bind $r/$d $r/run/sqcq/host/$d || fail "keep host /$d"
	mount -t tmpfs -o mode=1777 tmpfs $r/$d || fail "tmpfs on /$d"
done
for d in dev proc sys; do
	mount --move /$d $r/$d || fail "move /$d"
done
mkdir -p $r/dev/pts $r/dev/shm
# What udev would add: bash process substitution needs /dev/fd.
ln -sf /proc/self/fd $r/dev/fd
ln -sf /proc/self/fd/0 $r/dev/stdin
ln -sf /proc/self/fd/1 $r/dev/stdout
ln -sf /proc/self/fd/2 $r/dev/stderr
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts $r/dev/pts || fail "devpts"
mount -t tmpfs -o mode=1777 tmpfs $r/dev/shm || fail "tmpfs on /dev/shm"
# A VM booted with debugfs=off (tests/smoke/load-fail.sh) has none to mount.
# (/proc is $r/proc by now.)
case " $(cat $r/proc/cmdline) " in
*" debugfs=off "*) ;;
*) mount -t debugfs debugfs $r/sys/kernel/debug || fail "debugfs" ;;
esac
mount -t tracefs tracefs $r/sys/kernel/tracing 2>/dev/null
mount -t configfs configfs $r/sys/kernel/config || fail "configfs"

hostname "sqcq-vm-${kver%%-*}"
# COMMAND's output port: no \n -> \r\n translation, no echo. A serial port
# keeps its termios across closes.
stty -F /dev/ttyS1 -onlcr -echo 2>/dev/null

cp /stage2.sh $r/run/sqcq/stage2.sh
# shellcheck disable=SC2093 # fail only runs if the exec fails
exec switch_root $r /bin/bash /run/sqcq/stage2.sh
fail "switch_root"
