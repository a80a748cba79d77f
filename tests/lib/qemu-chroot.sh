# shellcheck shell=bash
# Newer Debian QEMUs for the nested rig, without installing them on the
# build machine: a debootstrap chroot per suite holding qemu-system-x86, run
# from outside the chroot through tests/vm/qemu-chroot.sh (L2 keeps the
# build machine's root as its 9p root; nothing is chrooted at run time).
#
#   . tests/lib/qemu-chroot.sh
#   sqcq_qemu_chroot SUITE      make sure $SQCQ_CACHE/chroots/qemu-SUITE
#                               exists (trixie or sid); print its path
#   sqcq_qemu_cmd bookworm|SUITE  the QEMU command (words) for that suite:
#                               bookworm is the machine's own qemu-system-x86_64
#
# The chroot is cached: created once (debootstrap --variant=minbase, a few
# minutes, ~300 MB), in a temporary directory renamed into place when
# complete, so an interrupted run never leaves a half tree that counts.
# Downloaded packages stay in $SQCQ_CACHE/debootstrap/SUITE (outside the
# repository) for the next creation. A sid chroot is not updated: remove
# $SQCQ_CACHE/chroots/qemu-sid to take sid's current QEMU. Needs root
# (debootstrap); inside a test VM only an existing chroot is used.

_sqcq_qc_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/apt.sh
. "$_sqcq_qc_here/apt.sh"

# What a nested guest's QEMU needs besides the binary: the firmware
# (SeaBIOS; qboot, the PVH and linuxboot option ROMs are in
# qemu-system-data), found through -L by the wrapper.
SQCQ_QEMU_CHROOT_PKGS=(qemu-system-x86 qemu-system-data seabios)

# The loader, reached through this symlink so that the process is called
# qemu-system-x86 (the kernel names a process after the file it executes,
# 15 characters): tests/e2e/l1.sh and others find and end QEMU by that name.
SQCQ_QEMU_CHROOT_LINK=sqcq/qemu-system-x86_64

sqcq_qemu_chroot_dir() { echo "$SQCQ_CACHE/chroots/qemu-$1"; }

# _sqcq_qemu_chroot_link ROOT: (re)create ROOT/$SQCQ_QEMU_CHROOT_LINK, a
# relative symlink to the chroot's dynamic loader (relative: the chroot is
# seen at the same path in the test VMs, whose / is not the chroot's).
_sqcq_qemu_chroot_link() {
	local r=$1 ld
	ld=$(cd "$r" && find usr/lib/x86_64-linux-gnu lib/x86_64-linux-gnu usr/lib64 lib64 \
		-maxdepth 1 -name 'ld-linux-x86-64.so.2' 2>/dev/null | head -n 1)
	[ -n "$ld" ] || { echo "no ld-linux-x86-64.so.2 in $r" >&2; return 1; }
	mkdir -p "$r/sqcq"
	ln -sfn "../$ld" "$r/$SQCQ_QEMU_CHROOT_LINK"
}

# sqcq_qemu_chroot SUITE: see above. Output: the chroot's path; progress
# and errors on stderr; status 0 when a complete chroot is there.
sqcq_qemu_chroot() {
	local suite=$1 r tmp st=0 ns=private
	case "$suite" in trixie | sid) ;; *) echo "qemu chroot: suite trixie or sid, not '$suite'" >&2; return 2 ;; esac
	r=$(sqcq_qemu_chroot_dir "$suite")
	if [ -f "$r/.sqcq-complete" ]; then
		[ -L "$r/$SQCQ_QEMU_CHROOT_LINK" ] || [ "${SQCQ_IN_VM:-0}" = 1 ] ||
			_sqcq_qemu_chroot_link "$r" || return 1
		echo "$r"
		return 0
	fi
	if [ "${SQCQ_IN_VM:-0}" = 1 ]; then
		echo "qemu chroot: $r is not there (created by tests/e2e/run.sh on the build machine)" >&2
		return 1
	fi
	[ "$(id -u)" = 0 ] || { echo "qemu chroot: creating $r needs root" >&2; return 1; }
	sqcq_install debootstrap || { echo "qemu chroot: cannot install debootstrap" >&2; return 1; }
	mkdir -p "$SQCQ_CACHE/chroots" "$SQCQ_CACHE/debootstrap/$suite"
	# One creation at a time: a second caller waits and finds it done.
	exec {lockfd}>"$SQCQ_CACHE/chroots/.qemu-$suite.lock"
	flock "$lockfd"
	if [ ! -f "$r/.sqcq-complete" ]; then
		echo "qemu chroot: creating $r (debootstrap $suite, a few minutes)" >&2
		tmp=$(mktemp -d "$SQCQ_CACHE/chroots/.tmp.qemu-$suite.XXXXXX")
		chmod 755 "$tmp"
		# A private mount namespace: what debootstrap mounts in the target
		# (proc, sys) goes with it even if it is killed, so rm -rf below
		# never walks into the machine's /proc or /sys.
		unshare --mount --propagation private true 2>/dev/null || ns=unchanged
		unshare --mount --propagation "$ns" -- \
			debootstrap --variant=minbase --cache-dir="$SQCQ_CACHE/debootstrap/$suite" \
			--include="$(IFS=,; echo "${SQCQ_QEMU_CHROOT_PKGS[*]}")" \
			"$suite" "$tmp" "$SQCQ_MIRROR" >&2 || st=$?
		if [ "$st" = 0 ] && [ -x "$tmp/usr/bin/qemu-system-x86_64" ] &&
			_sqcq_qemu_chroot_link "$tmp"; then
			# apt's lists and caches: nothing runs apt in here.
			find "$tmp/var/lib/apt/lists" "$tmp/var/cache/apt" -xdev -type f \
				\( -name '*_*' -o -name '*.bin' -o -name '*.deb' \) -delete
			dpkg-query --admindir="$tmp/var/lib/dpkg" -W -f='${Version}\n' qemu-system-x86 \
				>"$tmp/.sqcq-complete"
			[ -e "$r" ] && rm -rf --one-file-system -- "$r"	# an incomplete leftover
			mv -T "$tmp" "$r" || st=1
		else
			[ ! -f "$tmp/debootstrap/debootstrap.log" ] ||
				tail -n 30 "$tmp/debootstrap/debootstrap.log" >&2
			echo "qemu chroot: debootstrap $suite failed (status $st)" >&2
			[ "$st" != 0 ] || st=1
		fi
		# Never rm -rf through a mount (possible where / is no mount point
		# and the namespace could not be private).
		if [ -d "$tmp" ] && ! grep -q " $tmp/" /proc/mounts; then
			rm -rf --one-file-system -- "$tmp"
		fi
	fi
	flock -u "$lockfd"
	exec {lockfd}>&-
	[ "$st" = 0 ] || return "$st"
	echo "$r"
}

# sqcq_qemu_cmd SUITE: print the QEMU command for tests/vm/run.sh's
# SQCQ_VM_QEMU (words without blanks): the machine's own for bookworm,
# tests/vm/qemu-chroot.sh with the suite's chroot otherwise.
sqcq_qemu_cmd() {
	local r
	case "$1" in
	bookworm) echo qemu-system-x86_64 ;;
	trixie | sid)
		r=$(sqcq_qemu_chroot "$1") || return 1
		echo "$SQCQ_REPO_QC/tests/vm/qemu-chroot.sh $r"
		;;
	*) echo "qemu: bookworm, trixie or sid, not '$1'" >&2; return 2 ;;
	esac
}
SQCQ_REPO_QC=$(cd "$_sqcq_qc_here/../.." && pwd)
