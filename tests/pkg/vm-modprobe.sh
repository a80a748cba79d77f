#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# tests/pkg/vm-modprobe.sh MODDIR [VERSION [MODROOT [LABEL]]] [MODDIR VERSION MODROOT LABEL]...
#   -- runs INSIDE a test VM (tests/vm/run.sh), as root.
#
# Each set of four is checked in turn; LABEL (deb, rpm) names the package
# that built the modules in the result lines.
# Loads the DKMS-built modules found in MODDIR (a copy of
# /lib/modules/<kver>/updates/dkms of the package test's chroot) with
# parameters, reads them back from /sys/module, changes a runtime-writable
# one, and unloads them.  Prints PASS:/FAIL: lines; exit status 1 on failure.
#
# With MODROOT (a module root whose lib/modules/<kver> holds the kernel's
# modules plus ours under updates/dkms, depmod'ed on the build machine:
# tests/pkg/run.sh makes it), the modules are loaded with
# `modprobe -d MODROOT`, which resolves them and their dependencies the way
# an installed system does, and nothing else is tried.  Without MODROOT the
# VM's own tree is tried, then modprobe of each dependency and insmod of the
# .ko; the PASS line says which.
set -u

[ $# -ge 1 ] || { echo "usage: vm-modprobe.sh MODDIR [VERSION [MODROOT [LABEL]]]..." >&2; exit 2; }
kver=$(uname -r)
fails=0
idle=4321
label=""

pass() { echo "PASS: pkg vm-modprobe$label $*"; }
fail() {
	echo "FAIL: pkg vm-modprobe$label $*"
	fails=$((fails + 1))
}

ko_of() {
	for f in "$moddir/$1.ko" "$moddir/$1.ko.xz" "$moddir/$1.ko.zst" "$moddir/$1.ko.gz"; do
		[ -f "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}

# load MODULE PARAMS...: echoes the method used.
load() {
	m=$1
	shift
	if [ -n "$modroot" ]; then
		modprobe -d "$modroot" "$m" "$@" 2>/tmp/modprobe.err || return 1
		echo "modprobe -d $modroot (updates/dkms)"
		return 0
	fi
	if modprobe -q "$m" "$@" 2>/dev/null; then
		echo "modprobe"
		return 0
	fi
	ko=$(ko_of "$m") || return 1
	for d in $(modinfo -F depends "$ko" | tr ',' ' '); do
		modprobe "$d" || echo "cannot modprobe dependency $d" >&2
	done
	insmod "$ko" "$@" 2>/tmp/modprobe.err && echo "insmod $ko (not in the VM's module tree; dependencies by modprobe)"
}

# check MODULE PARAM=VALUE...
check_module() {
	m=$1
	shift
	ko=$(ko_of "$m") || { fail "$m (no $m.ko in $moddir)"; return; }
	vm=$(modinfo -F vermagic "$ko" | cut -d' ' -f1)
	[ "$vm" = "$kver" ] || { fail "$m (built for $vm, VM runs $kver)"; return; }
	how=$(load "$m" "$@") || {
		fail "$m (load failed: $(cat /tmp/modprobe.err 2>/dev/null); dmesg: $(dmesg | tail -n 3 | tr '\n' ' '))"
		return
	}
	ok=1
	# The module running is the one DKMS built, not some other copy.
	[ "$(cat "/sys/module/$m/srcversion" 2>/dev/null)" = "$(modinfo -F srcversion "$ko")" ] ||
		{ fail "$m: loaded module is not $ko (srcversion differs)"; ok=0; }
	for pv in "$@"; do
		p=${pv%%=*} v=${pv#*=}
		got=$(cat "/sys/module/$m/parameters/$p" 2>/dev/null)
		[ "$got" = "$v" ] || { fail "$m $p: /sys says '$got', loaded with '$v'"; ok=0; }
	done
	if [ -n "$want_ver" ]; then
		got=$(cat "/sys/module/$m/version" 2>/dev/null)
		[ "$got" = "$want_ver" ] || { fail "$m version: /sys says '$got', want $want_ver"; ok=0; }
	fi
	# poll_idle_us is writable at runtime.
	if echo 77 >"/sys/module/$m/parameters/poll_idle_us" 2>/dev/null &&
		[ "$(cat "/sys/module/$m/parameters/poll_idle_us")" = 77 ]; then :; else
		fail "$m poll_idle_us not writable at runtime"
		ok=0
	fi
	grep -q "^$m " /proc/modules || { fail "$m not in /proc/modules"; ok=0; }
	if ! rmmod "$m"; then
		fail "$m rmmod"
		ok=0
	fi
	[ $ok = 1 ] && pass "$m ($how; $* read back from /sys/module)"
}

while [ $# -gt 0 ]; do
	moddir=$1 want_ver=${2:-} modroot=${3:-} label=${4:+ ($4)}
	shift $(($# < 4 ? $# : 4))
	echo "vm-modprobe: kernel $kver, modules from $moddir"
	check_module vhost_scsi_sqcq poll_idle_us=$idle sqcq=N
	check_module virtio_scsi_sqcq poll_idle_us=$idle poll_queues=1
done
dmesg | grep -E 'vhost_scsi_sqcq|virtio_scsi_sqcq' | tail -n 6
[ $fails -eq 0 ]
