#!/bin/bash
# tests/vm/qemu-chroot.sh ROOT [QEMU ARGS...]
#
# Run the qemu-system-x86_64 of the Debian chroot ROOT (tests/lib/qemu-chroot.sh,
# e.g. $SQCQ_CACHE/chroots/qemu-trixie) on this machine's root, without
# chrooting: the chroot's own dynamic loader loads the binary with the
# chroot's libraries first (--library-path), QEMU's modules come from the
# chroot (QEMU_MODULE_DIR) and its firmware too (-L before the machine's
# /usr/share/qemu). The guest's 9p root, the kernel images, vhost file
# descriptors and paths stay the caller's, so tests/vm/run.sh takes this
# script as its QEMU (SQCQ_VM_QEMU="tests/vm/qemu-chroot.sh ROOT").
#
# The loader is executed through ROOT/sqcq/qemu-system-x86_64, a symlink:
# the process is then named qemu-system-x86 like a QEMU started from PATH
# (tests/e2e/l1.sh ends L2 with pkill -x qemu-system-x86).
set -u
root=${1:?usage: qemu-chroot.sh ROOT [QEMU ARGS...]}
shift
ld=$root/sqcq/qemu-system-x86_64
bin=$root/usr/bin/qemu-system-x86_64
for f in "$ld" "$bin"; do
	[ -x "$f" ] || { echo "${0##*/}: $f missing (tests/lib/qemu-chroot.sh)" >&2; exit 127; }
done
arch=x86_64-linux-gnu
# Modules (block, ui, audio drivers) of this QEMU's own build: the machine's
# /usr/lib/$arch/qemu belongs to another version and would be refused.
export QEMU_MODULE_DIR=$root/usr/lib/$arch/qemu
# GLib's GIO modules of the chroot's GLib, not the machine's.
export GIO_MODULE_DIR=$root/usr/lib/$arch/gio/modules
# Firmware: Debian's QEMU searches its firmware path (qemu, seabios, ipxe
# directories); -L puts the chroot's in front of the machine's. QEMU still
# looks at the machine's module directory after QEMU_MODULE_DIR and warns
# "Only modules from the same build can be loaded" about what it finds there
# and refuses to load: noise, not a fault.
fw=()
for d in usr/share/qemu usr/share/seabios usr/lib/ipxe/qemu; do
	[ -d "$root/$d" ] && fw+=(-L "$root/$d")
done
exec "$ld" --library-path "$root/usr/lib/$arch:$root/lib/$arch" --argv0 qemu-system-x86_64 \
	"$bin" "${fw[@]}" "$@"
