# shellcheck shell=bash
# The guest driver switch (virtio-sqcq-guest) in the package tests. Sourced by
# tests/pkg/run.sh, whose chroot ($work, the package installed), kernels
# ($kvers), helpers (ok, bad, in_chroot, kmods_of) and $out it uses.
#
#   t_switch_chroot    the VM kernel (6.1) installed into the chroot, its
#                      initramfs made by initramfs-tools (MODULES=list, see
#                      sw_kernel_into_chroot); `status`, `on`, `off` there,
#                      and what each image holds: default and off: in-tree
#                      driver only; on: virtio_scsi_sqcq and the blacklist of
#                      virtio_scsi; on for a kernel DKMS has no module for:
#                      not the switch
#   t_switch_dracut    the dracut module: included only while on (check()),
#                      an image made while on holds virtio_scsi_sqcq and the
#                      blacklist; for a kernel without the module (hostonly,
#                      where dracut copies /etc/modprobe.d itself) not the
#                      switch
#   t_vm_boot_*        each image boots the 6.1 kernel with its root file
#                      system on a virtio-scsi disk (QEMU's virtio-scsi-pci):
#                      the expected driver drives the controller of the root
#                      disk, the other is not loaded, I/O verified
#                      (tests/pkg/boot-init.sh is the root's /sbin/init); the
#                      rescues of docs/guest-switch.md when virtio_scsi_sqcq
#                      cannot load (module_blacklist=): typed at the
#                      initramfs-tools shell, rd.driver.pre= with dracut
#   t_vm_switch_now    tests/pkg/vm-switch.sh: the installed chroot run as
#                      the system of a VM, with udev: coldplug, on/off --now,
#                      hot-added controllers, refusals
#   sw_upgrade_pre, sw_upgrade_post, sw_purge_post
#                      the switch stays on across an upgrade; a purge turns
#                      it off first and rebuilds the initramfs without it

# shellcheck disable=SC2154 # work, kvers, out, log: run.sh
# shellcheck source=tests/vm/common.sh
. "$PKG_REPO/tests/vm/common.sh"

sw_dir=$out/switch
sw_state=/etc/modprobe.d/virtio-sqcq-driver.conf
sw_uuid=5a1b2c3d-0000-4000-8000-00000000c0de
sw_k=""
sw_kdir=""

# sw_kernel_into_chroot: the 6.1 kernel installed into the chroot the way its
# package would be, for mkinitramfs, dracut and the VM that runs the chroot:
# its modules (bound from the kernel cache; the chroot excludes kernel/*),
# modules.builtin and .order, /boot/config and vmlinuz, depmod; and the real
# update-initramfs instead of the base chroot's /bin/true. initramfs-tools
# with MODULES=list and the drivers the VM's root needs: the default,
# MODULES=most, takes ~20 s a build here (~1500 modules, 2 busy cores)
# against ~2 s, and is the same towards the switch: neither takes modules
# from updates/dkms by itself, both put virtio_scsi into the image (here
# from the list, which initramfs-tools also loads explicitly, with -b).
sw_kernel_into_chroot() {
	local src m
	sw_k=${kvers[0]}
	src=$(kmods_of "$sw_k") || return 1
	sw_kdir=${src%/lib/modules/*}
	m=$work/lib/modules/$sw_k
	mkdir -p "$m/kernel" "$work/boot"
	mountpoint -q "$m/kernel" || mount --bind "$src/kernel" "$m/kernel" || return 1
	cp "$src"/modules.builtin* "$src/modules.order" "$m/" &&
		cp "$sw_kdir/config" "$work/boot/config-$sw_k" &&
		cp "$sw_kdir/vmlinuz" "$work/boot/vmlinuz-$sw_k" &&
		in_chroot depmod "$sw_k" || return 1
	if [ -L "$work/usr/sbin/update-initramfs" ]; then
		rm -f "$work/usr/sbin/update-initramfs"
		in_chroot dpkg-divert --local --rename --remove /usr/sbin/update-initramfs || return 1
	fi
	sed -i 's/^MODULES=.*/MODULES=list/' "$work/etc/initramfs-tools/initramfs.conf" &&
		printf '%s\n' virtio_pci virtio_scsi sd_mod ext4 >>"$work/etc/initramfs-tools/modules" || return 1
	mkdir -p "$sw_dir"
}

# sw_facts IMAGE (a path in the chroot): what an initramfs holds, as words:
#   ours intree        virtio_scsi_sqcq.ko, virtio_scsi.ko
#   bl-intree          etc/modprobe.d/virtio-sqcq-driver.conf blacklists virtio_scsi
#   bl-ours            lib/modprobe.d/virtio-sqcq-driver.conf blacklists ours
#   loader             usr/lib/virtio-sqcq/guest-load, and the switch file's
#                      install line that runs it
sw_facts() {
	local d=$work/tmp/sw-unpacked f facts=""
	rm -rf "$d"
	in_chroot unmkinitramfs "$1" /tmp/sw-unpacked || { echo "cannot unpack $1" >&2; return 1; }
	find "$d" -path '*/updates/dkms/virtio_scsi_sqcq.ko*' | grep . >/dev/null && facts+=" ours"
	find "$d" -path '*/kernel/drivers/scsi/virtio_scsi.ko*' | grep . >/dev/null && facts+=" intree"
	f=$(find "$d" -path '*/etc/modprobe.d/virtio-sqcq-driver.conf')
	[ -n "$f" ] && grep -qx 'blacklist virtio_scsi' "$f" && facts+=" bl-intree"
	f=$(find "$d" -path '*/lib/modprobe.d/virtio-sqcq-driver.conf')
	[ -n "$f" ] && grep -qx 'blacklist virtio_scsi_sqcq' "$f" && facts+=" bl-ours"
	f=$(find "$d" -path '*/etc/modprobe.d/virtio-sqcq-driver.conf')
	[ -n "$f" ] && grep -q '^install virtio_scsi_sqcq /bin/sh /usr/lib/virtio-sqcq/guest-load' "$f" &&
		find "$d" -path '*/usr/lib/virtio-sqcq/guest-load' -perm -u+x | grep . >/dev/null && facts+=" loader"
	rm -rf "$d"
	echo "${facts# }"
}

# sw_expect_image WHAT IMAGE FACTS [COPY]: IMAGE holds exactly FACTS; COPY:
# keep it for a boot test.
sw_expect_image() {
	local got
	got=$(sw_facts "$2") || { bad "$1: $2 unreadable"; return 1; }
	if [ "$got" = "$3" ]; then
		ok "$1: $2 holds: $got"
	else
		bad "$1: $2 holds '$got', want '$3'"
	fi
	[ -z "${4:-}" ] || cp "$work$2" "$sw_dir/$4"
}

# sw_run WHAT ARGS...: virtio-sqcq-guest ARGS in the chroot; must exit 0.
sw_run() {
	local what=$1
	shift
	in_chroot virtio-sqcq-guest "$@" || { bad "$what: virtio-sqcq-guest $* exited $?"; return 1; }
}

# sw_expect_selected WHAT DRIVER OTHER: the chroot's modprobe configuration
# blacklists OTHER, not DRIVER, and status says DRIVER is selected.
sw_expect_selected() {
	local st c
	st=$(in_chroot virtio-sqcq-guest status)
	echo "$st"
	grep -q "^selected: $2 " <<<"$st" || bad "$1: status does not say 'selected: $2'"
	c=$(in_chroot modprobe -c)
	grep -qx "blacklist $3" <<<"$c" || bad "$1: modprobe -c does not blacklist $3"
	grep -qx "blacklist $2" <<<"$c" && bad "$1: modprobe -c blacklists $2"
	true
}

t_switch_chroot() {
	local img ko
	sw_kernel_into_chroot || return 1
	img=/boot/initrd.img-$sw_k
	# The package's default: switch off.
	in_chroot update-initramfs -c -k "$sw_k" || return 1
	sw_expect_selected default virtio_scsi virtio_scsi_sqcq
	sw_expect_image default "$img" "intree bl-ours"

	sw_run on on || return 1
	grep -qx 'blacklist virtio_scsi' "$work$sw_state" || bad "on: $sw_state does not blacklist virtio_scsi"
	sw_expect_selected on virtio_scsi_sqcq virtio_scsi
	sw_expect_image on "$img" "ours intree bl-intree bl-ours loader" initrd-on

	# A kernel DKMS did not build the module for (here: it is taken away).
	ko=$(installed_ko "$sw_k" virtio_scsi_sqcq) || return 1
	mv "$work$ko" "$work/tmp/" && in_chroot depmod "$sw_k" &&
		in_chroot update-initramfs -u -k "$sw_k" || return 1
	grep -qx "kernel $sw_k: no virtio_scsi_sqcq" <<<"$(in_chroot virtio-sqcq-guest status)" ||
		bad "nomodule: status does not name $sw_k as without the module"
	sw_expect_image nomodule "$img" "intree bl-ours" initrd-nomodule
	mv "$work/tmp/${ko##*/}" "$work$ko" && in_chroot depmod "$sw_k" || return 1

	sw_run off off || return 1
	[ -e "$work$sw_state" ] && bad "off: $sw_state still there"
	sw_expect_selected off virtio_scsi virtio_scsi_sqcq
	sw_expect_image off "$img" "intree bl-ours" initrd-off
}

# The generator the switch runs on a dracut system is `dracut -f
# --regenerate-all`; here dracut builds one image directly (the chroot's
# active generator is initramfs-tools), without hostonly (this build machine's
# devices are not the VM's) and with only the kernel drivers the VM needs
# beside what the dracut modules, ours among them, add themselves.
sw_dracut() {
	in_chroot dracut -q --no-hostonly --drivers "sd_mod ext4 virtio_pci" --compress=zstd -f "$@" "$sw_k"
}

t_switch_dracut() {
	local m=/usr/lib/dracut/modules.d/95virtio-sqcq/module-setup.sh rc ko
	local opts=/etc/modprobe.d/virtio-sqcq.conf opt="options virtio_scsi_sqcq poll_queues=1"
	[ -x "$work$m" ] || { bad "no $m"; return 1; }
	in_chroot bash -c ". $m; check"
	rc=$?
	[ $rc = 255 ] || bad "check() with the switch off: $rc, want 255 (only if asked for)"
	sw_run on on --no-initramfs || return 1
	in_chroot bash -c ". $m; check" || bad "check() with the switch on: $?, want 0"
	# An option set for the root disk's controller travels in the image.
	cp "$work$opts" "$work/tmp/opts.saved" && echo "$opt" >>"$work$opts" || return 1
	sw_dracut /tmp/dracut-on.img || { bad "dracut failed"; return 1; }
	mv "$work/tmp/opts.saved" "$work$opts"
	sw_expect_image dracut-on /tmp/dracut-on.img "ours intree bl-intree bl-ours loader" dracut-on
	# (unmkinitramfs puts the main archive under main/ after an early one.)
	if in_chroot unmkinitramfs /tmp/dracut-on.img /tmp/sw-opts &&
		find "$work/tmp/sw-opts" -path "*$opts" -exec grep -qx "$opt" {} \; -print | grep . >/dev/null; then
		ok "dracut-on: the image has the options file ($opt)"
	else
		bad "dracut-on: the image lacks $opts with '$opt'"
	fi
	rm -rf "$work/tmp/sw-opts"
	ko=$(installed_ko "$sw_k" virtio_scsi_sqcq) || return 1
	mv "$work$ko" "$work/tmp/" && in_chroot depmod "$sw_k" || return 1
	# hostonly: dracut copies /etc/modprobe.d, switch file included, and
	# the module must take it out again.
	sw_dracut --hostonly /tmp/dracut-nomodule.img || bad "dracut failed without the module"
	mv "$work/tmp/${ko##*/}" "$work$ko" && in_chroot depmod "$sw_k" || return 1
	sw_expect_image dracut-nomodule /tmp/dracut-nomodule.img "intree bl-ours"
	sw_run off off --no-initramfs
	rm -f "$work"/tmp/dracut-*.img
}

# sw_root_image: the root file system the boot tests give the VM (ext4, a
# fixed UUID): busybox and tests/pkg/boot-init.sh as /sbin/init.
sw_root_image() {
	local st=$sw_dir/root.stage a
	rm -rf "$st"
	mkdir -p "$st/bin" "$st/sbin" "$st/proc" "$st/sys" "$st/dev" "$st/run" "$st/tmp"
	cp /bin/busybox "$st/bin/" || return 1
	for a in $(/bin/busybox --list); do
		[ -e "$st/bin/$a" ] || ln -s busybox "$st/bin/$a"
	done
	install -m 755 "$PKG_REPO/tests/pkg/boot-init.sh" "$st/sbin/init"
	# An OS tree to systemd: a dracut image built where systemd is
	# installed switches only into a root with an os-release file.
	mkdir -p "$st/etc" && echo "ID=sqcq-test-root" >"$st/etc/os-release" || return 1
	rm -f "$sw_dir/root.img"
	truncate -s 32M "$sw_dir/root.img" &&
		mkfs.ext4 -q -F -U "$sw_uuid" -d "$st" "$sw_dir/root.img" || return 1
	rm -rf "$st"
}

# sw_boot NAME INITRD DRIVER OTHER [APPEND [TYPE]]: boot the 6.1 kernel with
# INITRD (a file in $sw_dir), the root disk (LUN 0) and a data disk (LUN 1)
# on one virtio-scsi controller; DRIVER must drive it and the root disk,
# OTHER must not be loaded. APPEND: more kernel parameters (then without
# panic=, so that initramfs-tools gives a shell); TYPE: what a user types
# at the first "(initramfs)" prompt.
sw_boot() {
	local name=$1 initrd=$sw_dir/$2 want=$3 other=$4 append=${5:-panic=5} type=${6:-}
	local d=$sw_dir/boot-$1 r c t0 qpid rc
	[ -f "$initrd" ] || { bad "$name: no $initrd"; return 1; }
	(sqcq_vm_install_deps) || return 1
	rm -rf "$d"
	mkdir -p "$d"
	sw_root_image && truncate -s 16M "$d/data.img" && mkfifo "$d/console.in" || return 1
	# The console's input: held open here, so that QEMU never reads an end.
	exec 7<>"$d/console.in"
	t0=$(date +%s)
	# shellcheck disable=SC2054 # commas belong to QEMU option values
	timeout -k 5 240 qemu-system-x86_64 -accel tcg -nodefaults -nographic -monitor none \
		-no-reboot -smp 2 -m 1024 -kernel "$sw_kdir/vmlinux" -initrd "$initrd" \
		-append "root=UUID=$sw_uuid rw console=ttyS0 mitigations=off cryptomgr.notests=1 tsc=unstable no_timer_check $append" \
		-serial stdio -serial "file:$d/result.log" \
		-device virtio-scsi-pci,id=scsi0 \
		-drive "file=$sw_dir/root.img,if=none,format=raw,id=root" \
		-device scsi-hd,bus=scsi0.0,drive=root,scsi-id=0,lun=0 \
		-drive "file=$d/data.img,if=none,format=raw,id=data" \
		-device scsi-hd,bus=scsi0.0,drive=data,scsi-id=0,lun=1 \
		<"$d/console.in" >"$d/console.log" 2>&1 &
	qpid=$!
	if [ -n "$type" ]; then
		for _ in $(seq 1 200); do
			grep -q '(initramfs)' "$d/console.log" && break
			kill -0 $qpid 2>/dev/null || break
			sleep 1
		done
		printf '%s\n' "$type" >&7
	fi
	wait $qpid
	rc=$?
	exec 7>&-
	echo "$name: QEMU exited $rc after $(($(date +%s) - t0))s"
	# The serial port ends its lines with CR LF.
	r=$(tr -d '\r' <"$d/result.log" 2>/dev/null)
	echo "$r" | sed 's/^/  guest| /'
	if ! grep -qx 'done=1' <<<"$r"; then
		bad "$name: the root's init did not finish (boot failed?)"
		tail -n 25 "$d/console.log"
		return 1
	fi
	c=$(sed -n 's/^rootctl=//p' <<<"$r")
	grep -qx "controller=$c driver=$want" <<<"$r" ||
		bad "$name: the root disk's controller ($c) is not driven by $want"
	[ "$(grep -c '^controller=' <<<"$r")" = 1 ] || bad "$name: not one virtio-scsi controller"
	grep -q "^modules=.*\\b$other," <<<"$r" && bad "$name: $other is loaded"
	grep -qx 'io-raw=ok' <<<"$r" || bad "$name: data disk I/O"
	grep -qx 'io-root=ok' <<<"$r" || bad "$name: root file system I/O"
	c=$(sqcq_vm_log_problems "$d/console.log")
	[ -z "$c" ] || bad "$name: kernel log: $c"
	ok "$name: root on virtio-scsi via $want${append:+ ($append)}"
}

t_vm_boot_on() { sw_boot boot-on initrd-on virtio_scsi_sqcq virtio_scsi; }
t_vm_boot_off() { sw_boot boot-off initrd-off virtio_scsi virtio_scsi_sqcq; }
t_vm_boot_nomodule() { sw_boot boot-nomodule initrd-nomodule virtio_scsi virtio_scsi_sqcq; }
t_vm_boot_dracut() { sw_boot boot-dracut dracut-on virtio_scsi_sqcq virtio_scsi; }

# A boot after `on` where virtio_scsi_sqcq cannot load (here the kernel
# refuses it: module_blacklist=) needs no rescue: the switch's install line
# (switch/guest-load) loads the in-tree virtio_scsi instead, in
# initramfs-tools' image (whose init runs modprobe with -b) and dracut's.
# sw_said NAME TEXT: boot NAME's kernel log has guest-load's line TEXT.
sw_said() {
	grep -aq "virtio-sqcq: $2" "$sw_dir/boot-$1/console.log" ||
		bad "$1: no kernel log line 'virtio-sqcq: $2' (guest-load did not decide)"
}
t_vm_fallback_initramfs() {
	sw_boot fallback-initramfs initrd-on virtio_scsi virtio_scsi_sqcq \
		"module_blacklist=virtio_scsi_sqcq panic=5" &&
		sw_said fallback-initramfs "virtio_scsi_sqcq did not load"
}
t_vm_fallback_dracut() {
	sw_boot fallback-dracut dracut-on virtio_scsi virtio_scsi_sqcq \
		"module_blacklist=virtio_scsi_sqcq panic=5" &&
		sw_said fallback-dracut "virtio_scsi_sqcq did not load"
}
# The way back without a console: virtio_sqcq.off=1 for one boot.
t_vm_optout_initramfs() {
	sw_boot optout-initramfs initrd-on virtio_scsi virtio_scsi_sqcq "virtio_sqcq.off=1 panic=5" &&
		sw_said optout-initramfs "virtio_sqcq.off=1 on the kernel command line"
}
t_vm_optout_dracut() {
	sw_boot optout-dracut dracut-on virtio_scsi virtio_scsi_sqcq "virtio_sqcq.off=1 panic=5" &&
		sw_said optout-dracut "virtio_sqcq.off=1 on the kernel command line"
}

t_vm_switch_now() {
	truncate -s 64M "$sw_dir/now.img" || return 1
	# shellcheck disable=SC2054 # commas belong to QEMU option values
	"$PKG_REPO/tests/vm/run.sh" --kernel 6.1 --timeout 400 \
		--qemu-arg -device --qemu-arg virtio-scsi-pci,id=scsi0 \
		--qemu-arg -drive --qemu-arg "file=$sw_dir/now.img,if=none,format=raw,id=d0" \
		--qemu-arg -device --qemu-arg scsi-hd,bus=scsi0.0,drive=d0,scsi-id=0,lun=0 \
		-- "$PKG_REPO/tests/pkg/vm-switch.sh" "$work"
}

# Around chroot-upgrade and chroot-purge (when t_switch_chroot passed): on
# before the upgrade, still on after it; the purge turns it off and rebuilds
# the initramfs without virtio_scsi_sqcq.
sw_upgrade_pre() { sw_run upgrade on --no-initramfs; }
sw_upgrade_post() {
	grep -qx 'blacklist virtio_scsi' "$work$sw_state" || bad "upgrade: the switch did not stay on"
	[ -x "$work/usr/share/initramfs-tools/hooks/virtio-sqcq" ] || bad "upgrade: no initramfs-tools hook"
	sw_expect_selected upgrade virtio_scsi_sqcq virtio_scsi
}
# The purge rebuilt the initramfs twice: prerm's `virtio-sqcq-guest off`,
# then initramfs-tools' trigger on its hooks directory, after the files went.
sw_purge_post() {
	[ -e "$work$sw_state" ] && bad "purge: $sw_state left behind"
	sed -n '/^--- chroot-purge$/,$p' "$log" | grep '^virtio-sqcq-guest: off:' >/dev/null ||
		bad "purge: prerm did not run virtio-sqcq-guest off"
	sw_expect_image purge "/boot/initrd.img-$sw_k" "intree"
}
