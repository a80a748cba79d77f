# shellcheck shell=bash
# libvirtd in a test VM, where systemd is not PID 1 (sourced): by the e2e
# rig's L1 (tests/e2e/l1.sh, E2E_L2_VIA=libvirt) and the host switch's
# package test (tests/pkg/vm-host-switch.sh).
#
#   sqcq_libvirt_conf      qemu.conf and libvirtd.conf for such a VM: QEMU as
#                          root without a security driver, namespaces,
#                          cgroups, seccomp or virtlogd (its output to a
#                          file); the socket without polkit (no system bus);
#                          the daemon's log in /var/log/libvirt/libvirtd.log
#   sqcq_libvirtd_start    libvirtd -d, then wait (120 s at most) until its
#                          QEMU driver offers KVM domains
#   sqcq_libvirtd_stop     SIGTERM, SIGKILL after 20 s

sqcq_libvirt_conf() {
	cat >/etc/libvirt/qemu.conf <<-EOF || return 1
		user = "root"
		group = "root"
		swtpm_user = "root"
		swtpm_group = "root"
		dynamic_ownership = 0
		remember_owner = 0
		security_driver = "none"
		namespaces = [ ]
		cgroup_controllers = [ ]
		seccomp_sandbox = 0
		stdio_handler = "file"
	EOF
	cat >/etc/libvirt/libvirtd.conf <<-EOF
		auth_unix_rw = "none"
		auth_unix_ro = "none"
		log_outputs = "3:file:/var/log/libvirt/libvirtd.log"
	EOF
}

sqcq_libvirtd_start() {
	local t
	libvirtd -d || return 1
	# The QEMU driver probes the binary at start: slow under TCG.
	for ((t = 0; t < 120; t++)); do
		virsh -q uri >/dev/null 2>&1 && virsh -q capabilities 2>/dev/null | grep -q "domain type='kvm'" &&
			return 0
		sleep 1
	done
	return 1
}

sqcq_libvirtd_stop() {
	local t
	pkill -TERM -x libvirtd 2>/dev/null
	for ((t = 0; t < 40; t++)); do
		pgrep -x libvirtd >/dev/null || return 0
		sleep 0.5
	done
	pkill -KILL -x libvirtd 2>/dev/null
}
