#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# Installed as /usr/lib/virtio-sqcq/dkms-build by both packages, which run it
# from their install and removal scripts (Debian postinst and prerm, RPM %post
# and %preun); the packaging puts the version in place of @VERSION@.
#
#   dkms-build install [KERNEL...]   add the sources to DKMS, then build and
#                                    install for each KERNEL (default: every
#                                    kernel installed in /lib/modules)
#   dkms-build remove                remove this version from DKMS, all kernels
#
# One kernel's outcome never decides another's, nor the package's: a kernel
# without headers is named with the package that brings them, a failed build
# with its log, and the script still ends with status 0, so that dpkg and rpm
# finish configuring (the modules of the other kernels stay installed).  Only
# a failed `dkms add` (the sources themselves) is an error.  A kernel outside
# the supported range, or without what a module needs (dkms.conf), is skipped
# by DKMS, which says why.
set -u

name=virtio-sqcq
ver=@VERSION@
tag="$name-$ver"

say() { echo "$tag: $*"; }

# The kernels installed here: a /lib/modules entry with modules or headers
# in it (a directory left behind by a removed kernel holds neither).
kernels() {
	for d in /lib/modules/*; do
		[ -d "$d/kernel" ] || [ -e "$d/modules.order" ] || [ -e "$d/build" ] || continue
		echo "${d##*/}"
	done
}

headers_hint() {
	if [ -x /usr/bin/dpkg ]; then
		echo "linux-headers-$1"
	else
		echo "kernel-devel-$1"
	fi
}

# installed KERNEL: this version is installed for KERNEL already.
installed() {
	dkms status -m "$name" -v "$ver" -k "$1" 2>/dev/null | grep -q ': installed'
}

do_install() {
	if [ ! -d "/var/lib/dkms/$name/$ver" ]; then
		dkms add -m "$name" -v "$ver" || { say "dkms add failed"; return 1; }
	fi
	[ $# -gt 0 ] || set -- $(kernels)
	ok=0 failed="" skipped="" nohdr=""
	for k in "$@"; do
		if installed "$k"; then
			ok=$((ok + 1))
			continue
		fi
		if [ ! -e "/lib/modules/$k/build/Makefile" ]; then
			say "kernel $k: not built, its headers are not installed: install $(headers_hint "$k"), then run: dkms install $name/$ver -k $k"
			nohdr="$nohdr $k"
			continue
		fi
		dkms install -m "$name" -v "$ver" -k "$k"
		case $? in
		0) ok=$((ok + 1)) ;;
		77) say "kernel $k: skipped by DKMS (see its line above)"; skipped="$skipped $k" ;;
		*)
			say "kernel $k: the build failed (log: /var/lib/dkms/$name/$ver/build/make.log); the modules of other kernels are not touched"
			failed="$failed $k"
			;;
		esac
	done
	say "installed for $ok kernel(s)${failed:+; FAILED for$failed}${skipped:+; skipped for$skipped}${nohdr:+; no headers for$nohdr}"
	return 0
}

case ${1:-} in
install)
	shift
	do_install "$@"
	;;
remove)
	if [ -d "/var/lib/dkms/$name/$ver" ]; then
		dkms remove -m "$name" -v "$ver" --all ||
			say "dkms remove failed; see 'dkms status -m $name'"
	fi
	exit 0
	;;
*)
	echo "usage: $0 install [KERNEL...] | remove" >&2
	exit 2
	;;
esac
