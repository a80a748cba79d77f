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
#                      vhost_scsi, --now swaps and refusals
#   hs_report          its PASS/FAIL/INFO lines, one per step, on stdout
#   hs_removal_pre, hs_removal_post OUTPUT
#                      around a package removal (apt purge, rpm -e): the
#                      switch on before, off after, its file gone

# shellcheck disable=SC2154 # work, out, log: run.sh
hs_dir=$out/host-switch
hs_conf=/etc/modprobe.d/virtio-sqcq-host.conf

t_vm_host_switch() {
	local b st rc=0
	rm -rf "$hs_dir"
	mkdir -p "$hs_dir"
	# The client plays QEMU in the VM's chroot: static, whatever its libc.
	gcc -static -O2 -Wall -Wextra -Werror -pthread -o "$hs_dir/host-client" \
		"$PKG_REPO/tests/host/client.c" || { bad "host client does not build"; return 1; }
	truncate -s 256M "$hs_dir/state.img" && mkfs.ext4 -q -F "$hs_dir/state.img" || return 1
	for b in 1 2 3; do
		echo "[$(date +%T)] host switch: boot $b"
		# shellcheck disable=SC2054 # commas belong to QEMU option values
		"$PKG_REPO/tests/vm/run.sh" --kernel 6.1 --timeout 300 \
			--qemu-arg -drive --qemu-arg "file=$hs_dir/state.img,if=virtio,format=raw" \
			-- "$PKG_REPO/tests/pkg/vm-host-switch.sh" "$work" "$hs_dir/host-client" "$b" \
			>"$hs_dir/boot$b.out" 2>&1
		st=$?
		cat "$hs_dir/boot$b.out"
		[ "$st" = 0 ] || { rc=1; echo "boot $b: exit $st"; }
		grep -q '^PASS: pkg host-switch ' "$hs_dir/boot$b.out" || { bad "boot $b: no step passed"; rc=1; }
	done
	grep -q '^FAIL: ' "$hs_dir"/boot*.out && rc=1
	return $rc
}

hs_report() {
	[ -d "$hs_dir" ] || return 0
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
