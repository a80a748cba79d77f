#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# dracut module of virtio-sqcq-dkms (/usr/lib/dracut/modules.d/95virtio-sqcq).
# Included while virtio-sqcq-guest is on (the modprobe configuration
# blacklists virtio_scsi): the image gets virtio_scsi_sqcq, which udev then
# loads for the controllers there, root disk included, and the switch file
# with the blacklist, and the options file /etc/modprobe.d/virtio-sqcq.conf
# (dracut copies /etc/modprobe.d only in hostonly mode).
# The in-tree virtio_scsi comes along, and /usr/lib/virtio-sqcq/guest-load,
# which the switch's install line runs: it loads virtio_scsi instead where
# ours cannot drive a controller, or with virtio_sqcq.off=1 on the kernel
# command line.
#
# The image of a kernel DKMS did not build virtio_scsi_sqcq for does not carry
# the switch (the switch file is taken out again), so that its disks get
# virtio_scsi.
#
# shellcheck disable=SC2154 # kernel, initdir: set by dracut

# called by dracut
check() {
	modprobe -c 2>/dev/null | grep -qx 'blacklist virtio_scsi' || return 255
	return 0
}

# called by dracut
depends() {
	return 0
}

# called by dracut
installkernel() {
	hostonly='' instmods virtio_scsi virtio_scsi_sqcq
}

# called by dracut, after 90kernel-modules has copied the modprobe.d files
install() {
	local conf=/etc/modprobe.d/virtio-sqcq-driver.conf
	local opts=/etc/modprobe.d/virtio-sqcq.conf

	if modinfo -k "$kernel" -n virtio_scsi_sqcq >/dev/null 2>&1; then
		[[ -e $conf ]] && inst_simple "$conf"
		# The module's options, so that the root disk's controller is
		# probed with them too (not copied without hostonly either).
		[[ -e $opts ]] && inst_simple "$opts"
		# Run by the switch's install line (fallback, virtio_sqcq.off=1).
		inst_simple /usr/lib/virtio-sqcq/guest-load
		inst_multiple sh cat
	else
		dwarn "virtio-sqcq: no virtio_scsi_sqcq for $kernel (dkms status): this initramfs keeps the in-tree virtio_scsi"
		rm -f "${initdir:?}$conf"
	fi
}
