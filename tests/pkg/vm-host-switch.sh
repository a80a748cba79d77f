#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# tests/pkg/vm-host-switch.sh CHROOT CLIENT BOOT  -- runs INSIDE a test VM
# (tests/vm/run.sh), which the package test boots three times with the same
# disk (/dev/vda, ext4): each boot is a real one (a fresh kernel, nothing
# loaded), and what the system wrote survives it.
#
# CHROOT is the package test's bookworm chroot (virtio-sqcq-dkms, targetcli-fb
# and python3-rtslib-fb installed, the VM kernel's modules depmod'ed with ours
# under updates/dkms).  Here it becomes the system: an overlay whose upper
# layer is on the disk, /proc, /sys, /dev of the VM, and the kernel's own
# module requests sent to its modprobe (/proc/sys/kernel/modprobe).  CLIENT
# is tests/host/client.c (with client-lib.c and phase-*.c), built static:
# it plays QEMU on /dev/vhost-scsi.
# BOOT (1, 2, 3) is the boot the caller starts; the disk must agree.
#
#   boot 1  the switch off by default; `virtio-sqcq-host on`; with it,
#           modprobe vhost_scsi, modprobe tcm_vhost and the configfs mkdir
#           of fabric "vhost" end in vhost_scsi_sqcq takeover=1 (and
#           /dev/vhost-scsi, once there, is ours); with nothing loaded
#           opening /dev/vhost-scsi loads nothing (no devname alias, either
#           module); targetcli builds a target on fabric "vhost" and saves
#           it (targetcli saveconfig); virsh defines a domain on its WWPN
#           (<hostdev> with <source protocol='vhost'>) and marks it autostart
#   boot 2  the boot-time restore (rtslib-fb-targetctl.service's ExecStart,
#           run as systemd would: systemd is not PID 1 here) restores the
#           target into vhost_scsi_sqcq; I/O on its TPG through
#           /dev/vhost-scsi; libvirtd, started after it, autostarts the
#           domain, whose guest does verified I/O with SQ/CQ negotiated
#           (tests/pkg/l2-autostart.sh); modprobe vhost_scsi and tcm_vhost load nothing
#           else; `status` names the module and the VM of the TPG; `off
#           --now` is refused while a VM holds the TPG (the switch goes off)
#   boot 3  the same restore lands on the in-tree vhost_scsi, the domain
#           autostarts on it (verified I/O, classic), its TPG binds
#           through the in-tree /dev/vhost-scsi; `on
#           --now` refused while the TPG holds it; with the target cleared
#           `on --now` and `off --now` swap the loaded module
#
# One "PASS: pkg host-switch ..." / "FAIL: ..." line per step; exit status 1
# on any FAIL.  SQCQ_HOST_SWITCH_BREAK=1 removes the file `on` writes right
# after it (`on` made a no-op): boots 1 and 2 must then fail.
set -u

if [ "${1:-}" != --inside ]; then
	root=${1:?usage: vm-host-switch.sh CHROOT CLIENT}
	client=${2:?usage: vm-host-switch.sh CHROOT CLIENT BOOT}
	boot=${3:?usage: vm-host-switch.sh CHROOT CLIENT BOOT}
	k=$(uname -r)
	st=/run/hs-state sys=/run/hs-sys
	modprobe -a virtio_blk ext4 2>/dev/null
	for _ in $(seq 1 100); do
		[ -b /dev/vda ] && break
		sleep 0.2
	done
	mkdir -p "$st" "$sys"
	mount /dev/vda "$st" || { echo "FAIL: pkg host-switch state disk (mount /dev/vda)"; exit 1; }
	mkdir -p "$st/upper" "$st/work"
	mount -t overlay overlay -o "lowerdir=$root,upperdir=$st/upper,workdir=$st/work" "$sys" ||
		{ echo "FAIL: pkg host-switch overlay on $root"; exit 1; }
	for d in proc sys dev; do
		mount --rbind "/$d" "$sys/$d" || { echo "FAIL: pkg host-switch bind /$d"; exit 1; }
	done
	mount -t tmpfs tmpfs "$sys/run" && mount -t tmpfs tmpfs "$sys/tmp" &&
		mount --bind "/lib/modules/$k/kernel" "$sys/lib/modules/$k/kernel" ||
		{ echo "FAIL: pkg host-switch mounts in $sys"; exit 1; }
	cp "$0" "$sys/tmp/vm-host-switch.sh" && cp "$client" "$sys/tmp/host-client" &&
		cp "$(dirname "$0")/../lib/libvirt.sh" "$sys/tmp/libvirt.sh" &&
		cp "$(dirname "$0")/../lib/kvm.sh" "$sys/tmp/kvm.sh" || exit 1
	# A module the kernel asks for (request_module) comes from the
	# system's modprobe and its modprobe.d, as on an installed host.
	printf '#!/bin/sh\nexec chroot %s /sbin/modprobe "$@"\n' "$sys" >/run/hs-modprobe
	chmod 755 /run/hs-modprobe
	echo /run/hs-modprobe >/proc/sys/kernel/modprobe
	chroot "$sys" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
		SQCQ_HOST_SWITCH_BREAK="${SQCQ_HOST_SWITCH_BREAK:-0}" /bin/bash /tmp/vm-host-switch.sh --inside "$boot"
	rc=$?
	# The VM that kept KVM's static key still (tests/lib/kvm.sh) lives in
	# the chroot: it goes before the unmount.
	pkill -x sqcq-kvm-hold && sleep 1
	echo /sbin/modprobe >/proc/sys/kernel/modprobe
	sync
	umount -R "$sys" 2>/dev/null || umount -R -l "$sys"
	umount "$st" || sync
	exit $rc
fi

# shellcheck source=tests/lib/libvirt.sh
. /tmp/libvirt.sh
# shellcheck source=tests/lib/kvm.sh
. /tmp/kvm.sh
ours=vhost_scsi_sqcq
intree=vhost_scsi
conf=/etc/modprobe.d/virtio-sqcq-host.conf
cfs=/sys/kernel/config/target
dbg=/sys/kernel/debug/$ours
TW=naa.5001405000000e51
phasef=/var/lib/sqcq-host-switch/phase
fails=0

up() { cut -d' ' -f1 /proc/uptime; }
pass() { echo "PASS: pkg host-switch $*"; echo "  (uptime $(up)s)"; }
fail() {
	echo "FAIL: pkg host-switch $*"
	echo "  (uptime $(up)s)"
	fails=$((fails + 1))
}
# check NAME CMD...: one line for CMD's outcome.
check() {
	local n=$1
	shift
	if "$@"; then pass "$n"; else fail "$n"; fi
}
loaded() { [ -d "/sys/module/$1" ]; }
takeover() { cat "/sys/module/$ours/parameters/takeover" 2>/dev/null; }
unload_all() { rmmod $ours 2>/dev/null; rmmod $intree 2>/dev/null; ! loaded $ours && ! loaded $intree; }

# sw ARGS...: virtio-sqcq-host ARGS; output in the log and $out, status in $rc.
sw() {
	out=$(virtio-sqcq-host "$@" 2>&1)
	rc=$?
	printf '%s\n' "$out" | sed "s/^/  $*| /"
	echo "  ($* exited $rc)"
}

# Opening /dev/vhost-scsi reaches vhost_scsi_sqcq: the open makes one
# device in its debugfs.
node_is_ours() {
	local n0 n1
	[ -c /dev/vhost-scsi ] || return 1
	n0=$(find "$dbg" -maxdepth 1 -name 'dev*' 2>/dev/null | wc -l)
	exec 4<>/dev/vhost-scsi || return 1
	n1=$(find "$dbg" -maxdepth 1 -name 'dev*' 2>/dev/null | wc -l)
	exec 4>&-
	[ "$n1" = $((n0 + 1)) ]
}
# The in-tree names belong to ours: loaded with takeover=1, the in-tree
# module not loaded, /dev/vhost-scsi ours.
serves_ours() {
	loaded $ours && [ "$(takeover)" = Y ] && ! loaded $intree && node_is_ours
}
serves_intree() {
	loaded $intree && ! loaded $ours && [ -c /dev/vhost-scsi ]
}
what_loaded() {
	echo "loaded: $(grep -Eo '^(vhost_scsi|vhost_scsi_sqcq) ' /proc/modules | tr -d '\n'), takeover=$(takeover)"
}

# The target service at boot.  systemd is not PID 1 in this VM (the rig's
# init runs the test): its ExecStart lines run here in order, as systemd
# runs a Type=oneshot unit's.
unit=/lib/systemd/system/rtslib-fb-targetctl.service
restore_at_boot() {
	local l n=0
	mountpoint -q /sys/kernel/config || { fail "boot $1: /sys/kernel/config mounted"; return 1; }
	echo "INFO: pkg host-switch boot $1: systemd is not PID 1 in the test VM: running $unit's ExecStart lines as systemd would"
	while IFS= read -r l; do
		echo "  ExecStart: $l"
		/bin/sh -c "$l" || { fail "boot $1: ExecStart $l"; return 1; }
		n=$((n + 1))
	done < <(sed -n 's/^ExecStart=//p' "$unit")
	[ "$n" -gt 0 ] && grep -q 'targetctl restore' "$unit"
}

# targetcli asks a system D-Bus for tcmu-runner's handlers: a private bus.
bus_start() {
	mkdir -p /tmp/targetcli-home
	dbus-daemon --session --address=unix:path=/tmp/targetcli-bus --fork --print-pid >/tmp/bus.pid
	export HOME=/tmp/targetcli-home DBUS_SYSTEM_BUS_ADDRESS=unix:path=/tmp/targetcli-bus
}
bus_stop() { kill "$(cat /tmp/bus.pid)" 2>/dev/null; }

# io NAME: the client (as QEMU would) binds the WWPN through
# /dev/vhost-scsi and does verified I/O on tpgt_1 LUN 0.
io() {
	local o r
	o=$(timeout -k 10 300 /tmp/host-client io /dev/vhost-scsi vhost $TW "$1-" 2>&1)
	r=$?
	printf '%s\n' "$o" | grep -v '^PASS: ' | sed 's/^/  client| /'
	check "$1: verified I/O on $TW tpgt_1 LUN 0 through /dev/vhost-scsi ($(grep -c '^PASS: ' <<<"$o") client checks)" \
		[ $r = 0 ]
}

# ---- The libvirt domain --------------------------------------------------
# Boot 1 defines a persistent domain with <hostdev ... protocol='vhost'
# wwpn=$TW> and marks it autostart; libvirtd starts it by itself in boots 2
# and 3, after the target's restore (the package's drop-in orders
# libvirtd.service after rtslib-fb-targetctl.service: without it both start
# in parallel at boot and the domain finds no /dev/vhost-scsi or no WWPN).
# Its guest (tests/pkg/l2-autostart.sh, as its init) does verified I/O with
# the package's guest driver and prints the mode: SQ/CQ on our module,
# classic on the in-tree one.
dom=sqcq-autostart
con=/var/log/sqcq-l2-console.log
dropins="/etc/systemd/system /run/systemd/system /lib/systemd/system /usr/lib/systemd/system"

# after UNIT OTHER: UNIT's After= (its file and its drop-ins, where systemd
# reads them) names OTHER.
after() {
	local d
	for d in $dropins; do
		cat "$d/$1" "$d/$1.d"/*.conf 2>/dev/null
	done | sed -n 's/^After=//p' | tr ' ' '\n' | grep -qx "$2"
}

# libvirtd_up: libvirtd as its unit starts it (Type=notify; here daemonized,
# systemd not being PID 1), configured as tests/lib/libvirt.sh says a VM
# without systemd needs it.
libvirtd_up() {
	sqcq_kvm_load >/dev/null
	mkdir -p /run/libvirt /var/log/libvirt/qemu
	sqcq_libvirt_conf || return 1
	echo "INFO: pkg host-switch boot $phase: libvirtd started as libvirtd.service would (daemonized; qemu.conf without cgroups, namespaces, virtlogd, security driver: systemd is not PID 1 here)"
	sqcq_libvirtd_start && return 0
	tail -n 20 /var/log/libvirt/libvirtd.log
	return 1
}

# l2_line: the guest's result line, once there.
l2_line() { l2=$(tr -d '\r' <$con 2>/dev/null | grep -a -m1 '^autostart-l2: verify='); [ -n "$l2" ]; }
wait_for() {	# wait_for SECONDS CMD...
	local t=$1
	shift
	for ((; t > 0; t--)); do
		"$@" && return 0
		sleep 1
	done
	"$@"
}

define_domain() {
	local x=/tmp/$dom.xml k
	k=/boot/vmlinuz-$(uname -r)
	check "boot 1: libvirtd.service enabled (multi-user.target.wants)" \
		[ -L /etc/systemd/system/multi-user.target.wants/libvirtd.service ]
	libvirtd_up || { fail "boot 1: libvirtd up"; return; }
	cat >$x <<-EOF
		<domain type='kvm'>
		  <name>$dom</name>
		  <memory unit='MiB'>256</memory>
		  <vcpu>1</vcpu>
		  <os>
		    <type arch='x86_64' machine='pc'>hvm</type>
		    <kernel>$k</kernel>
		    <initrd>/var/lib/libvirt/images/sqcq-l2.initrd</initrd>
		    <cmdline>console=ttyS0 panic=-1 mitigations=off cryptomgr.notests=1 tsc=unstable no_timer_check rdinit=/init acpi=off pci=noearly scsi_mod.scan=manual sqcq.init=/l2-autostart.sh</cmdline>
		  </os>
		  <cpu mode='host-passthrough'/>
		  <on_poweroff>destroy</on_poweroff>
		  <on_reboot>destroy</on_reboot>
		  <on_crash>destroy</on_crash>
		  <devices>
		    <emulator>/usr/bin/qemu-system-x86_64</emulator>
		    <controller type='usb' model='none'/>
		    <memballoon model='none'/>
		    <serial type='file'>
		      <source path='$con'/>
		      <target port='0'/>
		    </serial>
		    <hostdev mode='subsystem' type='scsi_host'>
		      <source protocol='vhost' wwpn='$TW'/>
		    </hostdev>
		  </devices>
		</domain>
	EOF
	check "boot 1: virsh define $dom (a <hostdev> with <source protocol='vhost' wwpn='$TW'/>)" \
		virsh -q define $x
	check "boot 1: virsh autostart $dom" virsh -q autostart $dom
	saved() { [ -e /etc/libvirt/qemu/$dom.xml ] && [ -L /etc/libvirt/qemu/autostart/$dom.xml ]; }
	check "boot 1: $dom is persistent and marked autostart (/etc/libvirt/qemu)" saved
	check "boot 1: $dom is not running" [ "$(virsh -q domstate $dom 2>/dev/null)" = "shut off" ]
	sqcq_libvirtd_stop
}

# autostart_domain MODULE MODE: boots 2 and 3.  libvirtd starts after the
# restore (its drop-in); it starts $dom by itself, whose guest does verified
# I/O in MODE (sqcq or classic) on the TPG that MODULE serves.
autostart_domain() {
	local m=$1 mode=$2 b="boot $phase" pid s
	check "$b: libvirtd.service starts after rtslib-fb-targetctl.service (the package's drop-in)" \
		after libvirtd.service rtslib-fb-targetctl.service
	rm -f $con
	libvirtd_up || { fail "$b: libvirtd up"; return; }
	running() { [ "$(virsh -q domstate $dom 2>/dev/null)" = running ]; }
	if ! wait_for 60 running; then
		fail "$b: libvirtd autostarted $dom (state: $(virsh -q domstate $dom 2>&1))"
		tail -n 20 /var/log/libvirt/qemu/$dom.log /var/log/libvirt/libvirtd.log 2>/dev/null | sed 's/^/  /'
		sqcq_libvirtd_stop
		return
	fi
	pid=$(cat /run/libvirt/qemu/$dom.pid 2>/dev/null)
	pass "$b: libvirtd autostarted $dom (QEMU pid $pid)"
	# The guest's line comes after its I/O; it waits there for the
	# destroy, its device still bound.
	wait_for 240 l2_line
	sed 's/^/  l2| /' $con 2>/dev/null | tr -d '\r' | grep -a -E 'autostart-l2|virtio|sqcq|scsi' | tail -n 12
	check "$b: the domain's guest: verified I/O, mode $mode (${l2:-no result line})" \
		grep -q "verify=ok mode=$mode " <<<"${l2:-}"
	sw status
	if [ "$m" = $ours ]; then
		check "$b: status names the VM of the TPG ($m, pid $pid, $dom)" \
			grep -q "^tpg vhost/$TW/tpgt_1: $m, VM: pid $pid ($dom)" <<<"$out"
		s=$(cat $cfs/vhost/$TW/tpgt_1/sqcq_status 2>/dev/null)
		printf '%s\n' "$s" | sed 's/^/  sqcq_status| /'
		s_ok() { grep -qx "mode: sqcq" <<<"$s" && grep -qx "owner_pid: $pid" <<<"$s"; }
		check "$b: the TPG's sqcq_status: mode sqcq, owner_pid $pid" s_ok
	else
		# The in-tree module does not say which device holds a TPG.
		check "$b: status names the VM that opened /dev/vhost-scsi ($m, pid $pid, $dom)" \
			grep -q "^tpg vhost/$TW/tpgt_1: $m, .*/dev/vhost-scsi open by $pid ($dom)" <<<"$out"
	fi
	virsh -q destroy $dom >/dev/null 2>&1
	gone() { [ "$(virsh -q domstate $dom 2>/dev/null)" = "shut off" ]; }
	check "$b: virsh destroy $dom" wait_for 30 gone
	sqcq_libvirtd_stop
	[ "$fails" = 0 ] || tail -n 20 /var/log/libvirt/qemu/$dom.log 2>/dev/null | sed 's/^/  qemu-log| /'
}

mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug
mkdir -p "${phasef%/*}"
phase=$(cat $phasef 2>/dev/null || echo 1)
if [ "$phase" != "$2" ]; then
	fail "boot $2: the disk says boot $phase (an earlier boot did not finish)"
	exit 1
fi
echo "host-switch: boot $phase, kernel $(uname -r) (uptime $(up)s)"

case $phase in
1)
	check "boot 1: nothing of vhost-scsi loaded at boot" unload_all
	sw status
	check "boot 1: status: off by default (exit 0)" [ "$rc" = 0 ]
	grep -q '^switch: off' <<<"$out" || fail "boot 1: status says 'switch: off'"
	no_devname() { ! modinfo -F alias $intree $ours | grep devname >/dev/null && [ ! -e /dev/vhost-scsi ]; }
	check "boot 1: neither module has a devname alias: opening /dev/vhost-scsi loads nothing" no_devname
	sw on
	check "boot 1: on (exit 0)" [ "$rc" = 0 ]
	if [ "$SQCQ_HOST_SWITCH_BREAK" = 1 ]; then
		rm -f $conf
		echo "INFO: pkg host-switch SQCQ_HOST_SWITCH_BREAK=1: $conf removed ('on' made a no-op)"
	fi
	sed 's/^/  conf| /' $conf 2>/dev/null
	rules() {
		local c
		c=$(modprobe -c)
		grep -qx "install $intree /bin/sh /usr/lib/virtio-sqcq/host-load" <<<"$c" &&
			grep -qx "options $ours takeover=1" <<<"$c"
	}
	check "boot 1: modprobe -c has the switch's install line and takeover=1" rules
	modprobe $intree
	what_loaded
	check "boot 1: modprobe $intree loads $ours takeover=1; /dev/vhost-scsi is ours" serves_ours
	unload_all
	modprobe tcm_vhost
	what_loaded
	check "boot 1: modprobe tcm_vhost loads $ours takeover=1" serves_ours
	unload_all
	# The target core's configfs: mkdir of a fabric it does not know.
	# 6.1 loads a module for iscsi and loopback only (-EINVAL, nothing
	# loaded; rtslib then runs modprobe tcm_vhost); a kernel that asks
	# modprobe must get ours.
	modprobe target_core_mod && mountpoint -q /sys/kernel/config
	if mkdir $cfs/vhost 2>/dev/null; then
		what_loaded
		check "boot 1: configfs mkdir $cfs/vhost (the kernel's module request) loads $ours" serves_ours
		rmdir $cfs/vhost
	else
		what_loaded
		none() { ! loaded $ours && ! loaded $intree; }
		check "boot 1: configfs mkdir $cfs/vhost fails and loads no module by itself (rtslib then modprobes tcm_vhost)" none
	fi
	unload_all
	bus_start
	# One targetcli session (its start costs seconds under TCG), commands
	# on its standard input as an operator types them.
	targetcli >>/tmp/targetcli.log 2>&1 <<EOF
/backstores/ramdisk create name=rd0 size=16M
/vhost create $TW
/vhost/$TW/tpg1/luns create /backstores/ramdisk/rd0
saveconfig
exit
EOF
	check "boot 1: targetcli: ramdisk, /vhost $TW, tpg1 with a nexus and LUN 0" \
		[ -e $cfs/vhost/$TW/tpgt_1/lun/lun_0 ]
	what_loaded
	check "boot 1: targetcli's fabric vhost is $ours" grep -q "$ours" $cfs/vhost/version
	check "boot 1: targetcli saveconfig wrote $TW to /etc/rtslib-fb-target/saveconfig.json" \
		grep -q "$TW" /etc/rtslib-fb-target/saveconfig.json
	bus_stop
	[ "$fails" = 0 ] || tail -n 20 /tmp/targetcli.log
	check "boot 1: rtslib-fb-targetctl.service enabled (multi-user.target.wants)" \
		[ -L /etc/systemd/system/multi-user.target.wants/rtslib-fb-targetctl.service ]
	define_domain
	echo 2 >$phasef
	;;
2)
	restore_at_boot 2
	what_loaded
	check "boot 2: restore: $TW tpgt_1 LUN 0 back" [ -e $cfs/vhost/$TW/tpgt_1/lun/lun_0 ]
	restored_ours() { grep -q $ours $cfs/vhost/version && serves_ours; }
	check "boot 2: the restored fabric vhost is $ours (takeover=1, in-tree not loaded, /dev/vhost-scsi ours)" restored_ours
	sw status
	st_on() {
		[ "$rc" = 0 ] && grep -q '^switch: on' <<<"$out" && grep -qx "fabric vhost: $ours" <<<"$out" &&
			grep -qx "tpg vhost/$TW/tpgt_1: $ours, no VM" <<<"$out"
	}
	check "boot 2: status: on, fabric vhost and the TPG on $ours, no VM (exit 0)" st_on
	autostart_domain $ours sqcq
	io "boot 2"
	modprobe $intree && modprobe tcm_vhost
	check "boot 2: modprobe $intree and tcm_vhost succeed and load nothing else" serves_ours
	# A VM bound to the TPG: status names it, off --now is refused.
	rm -f /tmp/ready
	/tmp/host-client hold /dev/vhost-scsi vhost $TW /tmp/ready idle >/tmp/hold.log 2>&1 &
	hp=$!
	for _ in $(seq 1 240); do
		[ -e /tmp/ready ] && break
		kill -0 $hp 2>/dev/null || break
		sleep 0.5
	done
	if [ -e /tmp/ready ]; then
		sw status
		check "boot 2: status names the VM of the TPG (pid $hp)" \
			grep -q "^tpg vhost/$TW/tpgt_1: $ours, VM: pid $hp (" <<<"$out"
		sw off --now
		off_refused() {
			[ "$rc" = 1 ] && grep -q 'in use' <<<"$out" && grep -q "$TW/tpgt_1" <<<"$out" &&
				grep -q "/dev/vhost-scsi open by $hp" <<<"$out" && loaded $ours
		}
		check "boot 2: off --now refused while a VM holds the TPG (exit 1, TPG and opener named, $ours kept)" off_refused
	else
		fail "boot 2: a VM (the client's hold) bound to the TPG: $(cat /tmp/hold.log)"
		sw off
	fi
	kill $hp 2>/dev/null
	wait $hp 2>/dev/null
	check "boot 2: off removed $conf" [ ! -e $conf ]
	sw status
	st_pending() { [ "$rc" = 1 ] && grep -q '^switch: off' <<<"$out" && grep -q 'not yet switched' <<<"$out"; }
	check "boot 2: status after off: 'not yet switched' (exit 1)" st_pending
	echo 3 >$phasef
	;;
3)
	restore_at_boot 3
	what_loaded
	check "boot 3: restore: $TW tpgt_1 LUN 0 back" [ -e $cfs/vhost/$TW/tpgt_1/lun/lun_0 ]
	restored_intree() { serves_intree && ! grep -q $ours $cfs/vhost/version; }
	check "boot 3: the restored fabric vhost is the in-tree $intree ($ours not loaded)" restored_intree
	sw status
	st_off() {
		[ "$rc" = 0 ] && grep -q '^switch: off' <<<"$out" && grep -qx "fabric vhost: $intree" <<<"$out" &&
			grep -qx "tpg vhost/$TW/tpgt_1: $intree, no VM" <<<"$out"
	}
	check "boot 3: status: off, fabric vhost and the TPG on $intree (exit 0)" st_off
	autostart_domain $intree classic
	# QEMU's binding of the TPG through the in-tree node (the client's
	# SCSI I/O itself is written against vhost_scsi_sqcq and is not run
	# here).
	o=$(timeout -k 10 120 /tmp/host-client io /dev/vhost-scsi vhost $TW "boot3-" 2>&1)
	printf '%s\n' "$o" | sed 's/^/  client| /'
	check "boot 3: the restored TPG binds (SET_ENDPOINT) through the in-tree /dev/vhost-scsi" \
		grep -q '^PASS: host boot3-set-endpoint' <<<"$o"
	sw on --now
	on_refused() { [ "$rc" = 1 ] && grep -q 'in use' <<<"$out" && grep -q "$TW/tpgt_1" <<<"$out" && loaded $intree; }
	check "boot 3: on --now refused while the TPG holds $intree (exit 1, $intree kept)" on_refused
	targetctl clear && rmdir $cfs/vhost
	sw on --now
	what_loaded
	swapped_on() { [ "$rc" = 0 ] && serves_ours; }
	check "boot 3: on --now with the target cleared: $intree unloaded, $ours takeover=1" swapped_on
	sw off --now
	what_loaded
	swapped_off() { [ "$rc" = 0 ] && serves_intree; }
	check "boot 3: off --now: $ours unloaded, $intree loaded" swapped_off
	echo 4 >$phasef
	;;
*)
	fail "no boot $phase"
	;;
esac
dmesg | grep -E 'vhost_scsi|virtio-sqcq|TCM_VHOST' | tail -n 6 | sed 's/^/  dmesg| /'
[ "$fails" = 0 ]
