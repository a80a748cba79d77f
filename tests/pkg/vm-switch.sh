#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# tests/pkg/vm-switch.sh CHROOT  -- runs INSIDE a test VM (tests/vm/run.sh)
# that has one virtio-scsi controller (QEMU's) with one disk.
#
# CHROOT is the package test's bookworm chroot: virtio-sqcq-dkms installed,
# the switch off, and the VM kernel's modules there (depmod'ed with ours
# under updates/dkms).  It becomes a writable system here (an overlay with a
# tmpfs on top, /proc, /sys, /dev of the VM), whose own udevd, kmod,
# modprobe.d and /usr/sbin/virtio-sqcq-guest do what they do on an installed
# guest:
#
#   default     udev coldplug of the controller: virtio_scsi takes it,
#               virtio_scsi_sqcq is not even loaded (the package's default
#               blacklist; without it udev would load both); I/O
#   bad-option  `on` while ours cannot load (a failing install command):
#               not switched, nothing left
#   in-use      `on --now` while the disk is open: refused, controller unchanged
#   on-now      `on --now`: virtio_scsi_sqcq takes the controller; the data
#               written through virtio_scsi reads back; I/O
#   hotplug-on  the controller leaves (PCI remove), no driver is loaded, it
#               comes back (rescan): udev loads virtio_scsi_sqcq by its alias
#   off-now     `off --now`: virtio_scsi again; data reads back; I/O
#   hotplug-off as hotplug-on: udev loads virtio_scsi
#
# `status` must agree with sysfs each time.  The initramfs is not rebuilt
# here (--no-initramfs; under TCG that takes minutes): tests/pkg/switch.sh
# builds and boots the images natively.  Prints "ok: ..." / "not ok: ...";
# exit status 1 on any failure.
set -u

if [ "${1:-}" != --inside ]; then
	root=${1:?usage: vm-switch.sh CHROOT}
	k=$(uname -r)
	sys=/run/sqcq-sys
	mkdir -p /run/sqcq-ovl/u /run/sqcq-ovl/w "$sys"
	mount -t overlay overlay -o "lowerdir=$root,upperdir=/run/sqcq-ovl/u,workdir=/run/sqcq-ovl/w" \
		"$sys" || { echo "not ok: overlay on $root"; exit 1; }
	for d in proc sys dev; do
		mount --rbind "/$d" "$sys/$d" || { echo "not ok: bind /$d"; exit 1; }
	done
	mount -t tmpfs tmpfs "$sys/run" && mount -t tmpfs tmpfs "$sys/tmp" &&
		mount --bind "/lib/modules/$k/kernel" "$sys/lib/modules/$k/kernel" ||
		{ echo "not ok: mounts in $sys"; exit 1; }
	cp "$0" "$sys/tmp/vm-switch.sh"
	# udevadm ignores requests in a chroot unless told otherwise.
	exec chroot "$sys" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 SYSTEMD_IGNORE_CHROOT=1 /bin/bash /tmp/vm-switch.sh --inside
fi

ours=virtio_scsi_sqcq
intree=virtio_scsi
fails=0
# Guest uptime, for the log.
up() { cut -d' ' -f1 /proc/uptime; }
ok() { echo "ok: $* [$(up)s]"; }
bad() {
	echo "not ok: $*"
	fails=$((fails + 1))
}

controllers() {
	local d
	for d in /sys/bus/virtio/devices/*; do
		[ "$(cat "$d/device")" = 0x0008 ] && echo "${d##*/}"
	done
}
driver_of() {
	local l
	l=$(readlink "/sys/bus/virtio/devices/$1/driver") && echo "${l##*/}" || echo none
}
loaded() { grep -q "^$1 " /proc/modules; }
settle() { udevadm settle --timeout=120 || echo "udevadm settle timed out"; }

# The disk of the controller, once its SCSI scan has found it.
disk() {
	local i b
	for i in $(seq 1 240); do
		for b in /sys/bus/virtio/devices/virtio*/host*/target*/*/block/*; do
			[ -b "/dev/${b##*/}" ] && { echo "/dev/${b##*/}"; return 0; }
		done
		sleep 0.5
	done
	return 1
}

# expect WANT OTHER WHAT: the one controller is driven by WANT (within a
# minute), OTHER is not loaded, and `virtio-sqcq-guest status` says the same
# and exits with 0.
expect() {
	local want=$1 other=$2 what=$3 c d st rc
	settle
	for _ in $(seq 1 120); do
		c=$(controllers)
		[ -n "$c" ] && [ "$(driver_of "$c")" != none ] && break
		sleep 0.5
	done
	[ "$(echo "$c" | wc -w)" = 1 ] || { bad "$what: virtio-scsi controllers: '$c'"; return 1; }
	d=$(driver_of "$c")
	[ "$d" = "$want" ] && [ -e "/sys/bus/virtio/drivers/$want/$c" ] ||
		{ bad "$what: $c is driven by $d, not $want"; return 1; }
	loaded "$other" && { bad "$what: $other is loaded too"; return 1; }
	# Status reads the controller's SQ/CQ mode from debugfs.
	mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
	st=$(virtio-sqcq-guest status)
	rc=$?
	echo "$st" | sed 's/^/  status| /'
	if [ $rc != 0 ] || ! grep -q "^selected: $want " <<<"$st" ||
		! grep -q "^controller $c (.*): $want, disks: sd" <<<"$st"; then
		bad "$what: status (exit $rc) does not say $want"
		return 1
	fi
	# QEMU's own virtio-scsi offers no SQ/CQ: ours says classic, and why.
	if [ "$want" = virtio_scsi_sqcq ] && ! grep -q "^controller $c (.*): $want, disks: sd.*, classic ([^)]" <<<"$st"; then
		bad "$what: status does not give the controller's mode (classic, and why)"
		return 1
	fi
	ok "$what: $c on $want (/sys/bus/virtio/drivers/$want/$c), $other not loaded, status agrees"
}

# io WHAT READ WRITE: the disk holds pattern READ (written through the other
# driver, or empty), then takes WRITE and gives it back, with O_DIRECT.
io() {
	local what=$1 rd=$2 wr=$3 dev
	dev=$(disk) || { bad "$what: no disk below the controller"; return 1; }
	if [ -n "$rd" ]; then
		dd if="$dev" of=/tmp/back bs=1M count=4 iflag=direct status=none &&
			cmp -s "$rd" /tmp/back || { bad "$what: $dev does not hold ${rd##*/}"; return 1; }
	fi
	dd if="$wr" of="$dev" bs=1M oflag=direct conv=fsync status=none &&
		dd if="$dev" of=/tmp/back bs=1M count=4 iflag=direct status=none &&
		cmp -s "$wr" /tmp/back || { bad "$what: $dev: ${wr##*/} written, read back differs"; return 1; }
	ok "$what: I/O on $dev${rd:+ (${rd##*/} still there)}, ${wr##*/} written and read back (O_DIRECT)"
}

# replug DRIVER WHAT: the controller leaves (PCI remove), DRIVER is unloaded
# so that no virtio-scsi driver is loaded, and it comes back (PCI rescan):
# udev has to load a driver by the device's alias.
replug() {
	local c pci
	c=$(controllers)
	pci=$(readlink -f "/sys/bus/virtio/devices/$c/..")
	echo 1 >"$pci/remove" && settle && rmmod "$1" && echo 1 >/sys/bus/pci/rescan ||
		{ bad "$2: remove, rmmod $1, rescan"; return 1; }
	settle
}

# sw ARGS...: virtio-sqcq-guest ARGS; its output in the log (indented) and
# in $out, its exit status in $rc.
sw() {
	local t0
	t0=$(up)
	out=$(virtio-sqcq-guest "$@" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed "s/^/  $*| /"
	echo "  ($* exited $rc: ${t0}s..$(up)s)"
}

state=/etc/modprobe.d/virtio-sqcq-driver.conf
for i in 1 2 3 4; do
	dd if=/dev/urandom of=/tmp/pattern$i bs=1M count=4 status=none
done

echo "vm-switch: kernel $(uname -r); $(dpkg-query -W virtio-sqcq-dkms)"
t0=$(up)
modprobe -c >/dev/null
echo "  (modprobe -c: ${t0}s..$(up)s)"
/lib/systemd/systemd-udevd --daemon --resolve-names=never || bad "udevd does not start"
# Coldplug of the virtio bus, as at boot: the controller gets a driver by alias.
udevadm trigger --action=add --subsystem-match=virtio
expect $intree $ours "default" && io "default" "" /tmp/pattern1

# A module that cannot load must not be switched to: after a reboot the
# controllers would have no driver.  Here an install command that fails
# stands for it (no option keeps ours from loading: a bad value given at
# load is ignored with a log line).
echo "install $ours /bin/false" >/etc/modprobe.d/zz-test-bad.conf
sw on --no-initramfs
rm -f /etc/modprobe.d/zz-test-bad.conf
if [ $rc = 1 ] && grep -q "does not load" <<<"$out" && [ ! -e $state ] && ! loaded $ours; then
	ok "bad-option: on refused ($ours does not load), nothing switched"
else
	bad "bad-option: on exited $rc, state file $([ -e $state ] && echo written || echo absent)"
	rm -f $state
fi

# --now while a disk is open: refused, the controller stays where it is.
dev=$(disk) || dev=/dev/null
exec 3<"$dev"
sw on --now --no-initramfs
exec 3<&-
if [ $rc = 1 ] && grep -q "in use" <<<"$out" && grep -q "not yet switched" <<<"$out" &&
	[ "$(driver_of "$(controllers)")" = $intree ]; then
	ok "in-use: on --now refused while $dev is open, $intree kept it"
else
	bad "in-use: on --now exited $rc with $dev open, controller on $(driver_of "$(controllers)")"
fi

sw on --now --no-initramfs
[ $rc = 0 ] || bad "on-now: exit $rc"
grep -qx "blacklist $intree" $state || bad "on-now: $state does not blacklist $intree"
expect $ours $intree "on-now" && io "on-now" /tmp/pattern1 /tmp/pattern2

replug $ours "hotplug-on" && expect $ours $intree "hotplug-on" && io "hotplug-on" /tmp/pattern2 /tmp/pattern3

sw off --now --no-initramfs
[ $rc = 0 ] || bad "off-now: exit $rc"
[ -e $state ] && bad "off-now: $state still there"
expect $intree $ours "off-now" && io "off-now" /tmp/pattern3 /tmp/pattern4

replug $intree "hotplug-off" && expect $intree $ours "hotplug-off" && io "hotplug-off" /tmp/pattern4 /tmp/pattern1

udevadm control --exit
dmesg | grep -E 'virtio_scsi_sqcq|virtio_scsi' | tail -n 8
[ $fails -eq 0 ]
