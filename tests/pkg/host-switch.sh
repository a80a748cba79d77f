# shellcheck shell=bash
# The host switch (virtio-sqcq-host) in the package tests. Sourced by
# tests/pkg/run.sh, whose chroot ($work: the package, targetcli-fb, the VM
# kernel's modules from t_switch_chroot), helpers (ok, bad, in_chroot) and
# $out it uses.
#
#   t_vm_host_switch   tests/pkg/vm-host-switch.sh in a 6.1 VM booted three
#                      times on one state disk: on, modprobe of the in-tree
#                      names and a target saved by targetcli; reboot: the
#                      boot-time restore lands in vhost_scsi_sqcq, I/O,
#                      status, off; reboot: the restore lands in the in-tree
#                      vhost_scsi, --now swaps and refusals; a libvirt
#                      domain defined in boot 1 autostarts in boots 2 and 3
#                      and does verified I/O, SQ/CQ on our module, classic
#                      on the in-tree one
#                      (a boot the emulator broke: the three again, once)
#   hs_report          its PASS/FAIL/INFO lines, one per step, on stdout,
#                      after a REPEAT line where it ran twice
#   hs_removal_pre, hs_removal_post OUTPUT
#                      around a package removal (apt purge, rpm -e): the
#                      switch on before, off after, its file gone

# shellcheck disable=SC2154 # work, out, log: run.sh
hs_dir=$out/host-switch
hs_conf=/etc/modprobe.d/virtio-sqcq-host.conf

t_vm_host_switch() {
	local attempt rc
	rm -rf "$hs_dir"
	mkdir -p "$hs_dir"
	# The client plays QEMU in the VM's chroot: static, whatever its libc.
	# (Its files as stage_host_client of tests/lib/stage.sh lists them.)
	gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$hs_dir/host-client" \
		"$PKG_REPO"/tests/host/client.c "$PKG_REPO"/tests/host/client-lib.c \
		"$PKG_REPO"/tests/host/phase-*.c || { bad "host client does not build"; return 1; }
	hs_l2_initrd || { bad "host switch: the libvirt guest's initramfs"; return 1; }
	# A boot the emulator broke (sqcq_emulator_break) runs the three boots
	# again on a fresh disk, once; its output stays in attempt1/, out of
	# the report, and a REPEAT line says why.
	for attempt in 1 2; do
		hs_boots
		rc=$?
		if [ "$rc" != 2 ] || [ "$attempt" = 2 ]; then
			break
		fi
		mkdir -p "$hs_dir/attempt1"
		mv "$hs_dir"/boot*.out "$hs_dir/attempt1/"
		echo "REPEAT: pkg host-switch: boot $hs_broken: $sqcq_break_why; the three boots again on a fresh disk" |
			tee -a "$hs_dir/repeat.txt"
	done
	[ "$rc" = 0 ]
}

# t_hs_verdict: sqcq_emulator_break (tests/lib/verdict.sh) on made-up
# boot outputs: a timeout or a silent exit with a clean console is the
# emulator's; beside a failed check of ours or a kernel report, or with
# the boot's status there, not.
t_hs_verdict() {
	local t=/tmp/hs-verdict.$$ n=0 c got
	local -a w
	# CASE EXPECT LINES...
	for c in \
		"timeout|yes|PASS: pkg host-switch boot 2: restore|FAIL: vm-timeout (QEMU killed after 300s, kernel 6.1.0-57)" \
		"reset|yes|FAIL: vm-boot (VM exited (QEMU status 0) without COMMAND's status, kernel 6.1.0-57)" \
		"ours|no|FAIL: pkg host-switch boot 2: the domain's guest: verified I/O|FAIL: vm-timeout (QEMU killed after 300s, kernel 6.1.0-57)" \
		"report|no|FAIL: vm-timeout (QEMU killed after 300s, kernel 6.1.0-57)|FAIL: vm-kernel-log (lockup: watchdog: BUG: soft lockup - CPU#1 stuck for 26s!)" \
		"check|no|FAIL: pkg host-switch boot 3: restore"; do
		IFS='|' read -r -a w <<<"$c"
		printf '%s\r\n' "${w[@]:2}" >"$t"
		if sqcq_emulator_break "$t"; then got=yes; else got=no; fi
		if [ "$got" = "${w[1]}" ]; then n=$((n + 1)); else bad "sqcq_emulator_break ${w[0]}: $got, want ${w[1]}"; fi
	done
	rm -f "$t"
	[ "$n" = 5 ] || return 1
	ok "sqcq_emulator_break: 5 made-up boots judged as they must be"
}

# hs_boots: the three boots on a fresh state disk.  Status 0: all passed;
# 1: a check failed; 2: the emulator broke boot $hs_broken (the later
# boots not run).
hs_boots() {
	local b st rc=0
	rm -f "$hs_dir"/boot*.out
	truncate -s 0 "$hs_dir/state.img" && truncate -s 256M "$hs_dir/state.img" &&
		mkfs.ext4 -q -F "$hs_dir/state.img" || return 1
	for b in 1 2 3; do
		echo "[$(date +%T)] host switch: boot $b"
		# shellcheck disable=SC2054 # commas belong to QEMU option values
		"$PKG_REPO/tests/vm/run.sh" --kernel 6.1 --timeout 300 \
			--qemu-arg -drive --qemu-arg "file=$hs_dir/state.img,if=virtio,format=raw" \
			-- "$PKG_REPO/tests/pkg/vm-host-switch.sh" "$work" "$hs_dir/host-client" "$b" \
			>"$hs_dir/boot$b.out" 2>&1
		st=$?
		cat "$hs_dir/boot$b.out"
		if [ "$st" != 0 ] && sqcq_emulator_break "$hs_dir/boot$b.out"; then
			hs_broken=$b
			return 2
		fi
		[ "$st" = 0 ] || { rc=1; echo "boot $b: exit $st"; }
		grep -q '^PASS: pkg host-switch ' "$hs_dir/boot$b.out" || { bad "boot $b: no step passed"; rc=1; }
	done
	grep -q '^FAIL: ' "$hs_dir"/boot*.out && rc=1
	return $rc
}

# hs_l2_initrd: the initramfs of the libvirt domain's guest (boots 2 and 3
# of vm-host-switch.sh), into the chroot's /var/lib/libvirt/images: the
# rig's busybox initramfs of the VM kernel with scsi_mod and sd_mod, and a
# second archive with the guest module as DKMS built it in the chroot and
# the guest's init (tests/pkg/l2-autostart.sh, kernel parameter sqcq.init).
# The guest boots the chroot's /boot/vmlinuz of the same kernel.
hs_l2_initrd() {
	local base x ko img=$work/var/lib/libvirt/images
	# shellcheck disable=SC2154 # sw_kdir, sw_k: switch.sh
	base=$(. "$PKG_REPO/tests/vm/common.sh" &&
		SQCQ_VM_INITRD_EXTRA="scsi_mod sd_mod" sqcq_vm_initramfs "$sw_kdir") || return 1
	ko=$(installed_ko "$sw_k" virtio_scsi_sqcq) || return 1
	x=$hs_dir/l2-extra
	mkdir -p "$x/lib/sqcq-modules" "$img" || return 1
	# After the rig's modules (their names start with a number); plain,
	# as busybox's insmod wants it.
	case "$ko" in
	*.xz) xz -dc "$work$ko" ;;
	*.zst) zstd -qdc "$work$ko" ;;
	*.gz) gzip -dc "$work$ko" ;;
	*) cat "$work$ko" ;;
	esac >"$x/lib/sqcq-modules/zz-virtio_scsi_sqcq.ko" || return 1
	install -m 755 "$PKG_REPO/tests/pkg/l2-autostart.sh" "$x/l2-autostart.sh" || return 1
	{
		cat "$base" &&
			(cd "$x" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet)
	} >"$img/sqcq-l2.initrd"
}

hs_report() {
	[ -d "$hs_dir" ] || return 0
	cat "$hs_dir/repeat.txt" 2>/dev/null
	cat "$hs_dir"/boot*.out 2>/dev/null | tr -d '\r' | grep -E '^(PASS|FAIL|SKIP|INFO): pkg host-switch '
}

# A removal turns the switch off (Debian's prerm, the rpm's %preun): on
# before it, in the root R (a chroot directory) with the runner RUN.
hs_removal_pre() {
	"$@" virtio-sqcq-host on >/dev/null || { bad "host switch: on before the removal"; return 1; }
}
hs_removal_post() {	# hs_removal_post ROOT OUTPUT
	[ -e "$1$hs_conf" ] && bad "removal: $hs_conf left behind"
	grep -q '^virtio-sqcq-host: off:' "$2" || bad "removal: virtio-sqcq-host off did not run"
	true
}
