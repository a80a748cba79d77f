#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# One version for the whole project: the VERSION file.  Every other place that
# spells it (dkms.conf, debian/changelog, rpm/virtio-sqcq.spec; modinfo gets it
# through Kbuild) must agree.
#
#   scripts/pkg-version.sh [check] [DIR]   list disagreements, exit 1 if any
#   scripts/pkg-version.sh sync [DIR]      rewrite dkms.conf and the spec from
#                                          VERSION, add a debian/changelog entry
#   scripts/pkg-version.sh show [DIR]      print each place and its version
#
# DIR is the tree to look at (default: this repository).
set -eu

mode=${1:-check}
root=${2:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

ver=$(tr -d ' \n' <VERSION)
case $ver in
'' | *[!A-Za-z0-9.+~]*) echo "VERSION: '$ver' is not a valid version (A-Za-z0-9.+~ only: dkms, dpkg and rpm must all accept it)" >&2; exit 1 ;;
esac

dkms_ver() { sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' dkms.conf; }
deb_ver() { sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' debian/changelog; }
rpm_ver() { sed -n 's/^Version:[[:space:]]*//p' rpm/virtio-sqcq.spec | head -n 1; }

case $mode in
show)
	echo "VERSION $ver"
	echo "dkms.conf $(dkms_ver)"
	echo "debian/changelog $(deb_ver)"
	echo "rpm/virtio-sqcq.spec $(rpm_ver)"
	;;
check)
	bad=0
	for p in "dkms.conf:$(dkms_ver)" "debian/changelog:$(deb_ver)" \
		"rpm/virtio-sqcq.spec:$(rpm_ver)"; do
		if [ "${p#*:}" != "$ver" ]; then
			echo "version mismatch: ${p%%:*} says '${p#*:}', VERSION says '$ver' (run: make pkg-version-sync)" >&2
			bad=1
		fi
	done
	exit $bad
	;;
sync)
	sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$ver\"/" dkms.conf
	sed -i "s/^Version:\([[:space:]]*\).*/Version:\1$ver/" rpm/virtio-sqcq.spec
	if [ "$(deb_ver)" != "$ver" ]; then
		maint=$(sed -n 's/^Maintainer:[[:space:]]*//p' debian/control)
		if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
			date=$(LC_ALL=C date -R -u -d "@$SOURCE_DATE_EPOCH")
		else
			date=$(LC_ALL=C date -R)
		fi
		tmp=$(mktemp)
		{
			printf 'virtio-sqcq (%s) unstable; urgency=medium\n\n' "$ver"
			printf '  * Version %s.\n\n' "$ver"
			printf ' -- %s  %s\n\n' "$maint" "$date"
			cat debian/changelog
		} >"$tmp"
		cat "$tmp" >debian/changelog
		rm -f "$tmp"
	fi
	if ! grep -q -- "- $ver-[^ ]*\$" rpm/virtio-sqcq.spec; then
		maint=$(sed -n 's/^Maintainer:[[:space:]]*//p' debian/control)
		if [ -n "${SOURCE_DATE_EPOCH:-}" ]; then
			day=$(LC_ALL=C date -u -d "@$SOURCE_DATE_EPOCH" '+%a %b %d %Y')
		else
			day=$(LC_ALL=C date '+%a %b %d %Y')
		fi
		sed -i "/^%changelog/a * $day $maint - $ver-1\\n- Version $ver.\\n" rpm/virtio-sqcq.spec
	fi
	exec "$0" check "$root"
	;;
*)
	echo "usage: $0 [check|sync|show] [DIR]" >&2
	exit 2
	;;
esac
