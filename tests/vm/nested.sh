#!/bin/bash
# tests/vm/nested.sh [OPTIONS] -- COMMAND [ARGS...]
#
# Inside a VM started by run.sh (L1): start a nested guest (L2, QEMU TCG
# inside TCG) with the same interface, kernel and initramfs as run.sh, sharing
# L1's root (itself the host's root over 9p, plus L1's tmpfs mounts) over
# 9p again, and run COMMAND there. Typical use: the L1 test loads the host
# module, opens its device node and passes it on, e.g.
#
#   exec 3<>/dev/vhost-scsi-sqcq
#   tests/vm/nested.sh --qemu-arg -device \
#       --qemu-arg vhost-scsi-pci,wwpn=naa.5001405...,vhostfd=3 -- ./l2-test
#
# Defaults, tuned for boot time under TCG: the kernel L1 runs ($SQCQ_ABI),
# booted as an uncompressed vmlinux through PVH, 256 MiB, 1 vCPU,
# mitigations=off, cryptomgr.notests=1, acpi=off and pci=noearly, with qboot
# instead of SeaBIOS. The options of run.sh apply (--smp, --mem, --timeout,
# --append, --qemu-arg, --results, ...). Exit status, PASS/FAIL protocol and
# the kernel-log check are run.sh's.
#
# Accelerator (SQCQ_VM_NESTED_ACCEL): "auto" (default) runs L2 under KVM when
# L1 has it: run.sh gives L1 a CPU with SVM and nested paging, which QEMU's
# TCG emulates, and this loads kvm_amd in L1. L2 then boots in ~20 s of guest
# time instead of ~200 s under TCG inside TCG (its user space stays slow:
# each process start costs seconds). "tcg" forces TCG inside TCG (the rig's
# first mode, slower but without TCG's SVM emulation underneath); "kvm" fails
# when /dev/kvm cannot be had. run.sh's last line says which one ran.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "${SQCQ_IN_VM:-0}" != 1 ]; then
	echo "${0##*/}: run this inside a VM started by tests/vm/run.sh" >&2
	exit 2
fi
SQCQ_VM_NESTED=1 exec "$here/run.sh" "$@"
