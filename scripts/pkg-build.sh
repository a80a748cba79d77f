#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# Build the distribution packages from a clean copy of this tree, so the build
# never writes into the checkout (dpkg-buildpackage puts its results in ..).
#
#   scripts/pkg-build.sh deb [OUTDIR]     -> OUTDIR/virtio-sqcq-dkms_<v>_all.deb
#   scripts/pkg-build.sh rpm [OUTDIR]     -> OUTDIR/virtio-sqcq-dkms-<v>-1.noarch.rpm
#   scripts/pkg-build.sh stage DIR        copy the packaged files into DIR
#   scripts/pkg-build.sh dkms-src DIR     copy what DKMS needs into DIR
#
# OUTDIR defaults to out/pkg.  The versions of dkms.conf, debian/changelog and
# the spec are checked against VERSION first (scripts/pkg-version.sh).
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:?usage: $0 deb|rpm|stage|dkms-src [DIR]}
out=${2:-$top/out/pkg}
ver=$(tr -d ' \n' <"$top/VERSION")

# What DKMS builds from (the contents of /usr/src/virtio-sqcq-<v>).
dkms_src() {
	d=$1
	mkdir -p "$d/common" "$d/host" "$d/guest" "$d/scripts"
	cp "$top/Kbuild" "$top/VERSION" "$top/dkms.conf" "$d/"
	cp "$top"/common/*.[ch] "$d/common/"
	cp "$top"/host/*.[ch] "$top"/host/Kbuild "$d/host/"
	cp "$top"/guest/*.[ch] "$top"/guest/Kbuild "$d/guest/"
	cp "$top/scripts/detect-features.sh" "$d/scripts/"
}

stage() {
	d=$1
	rm -rf "$d"
	dkms_src "$d"
	cp "$top/scripts/dkms-build.sh" "$d/scripts/"
	mkdir -p "$d/docs" "$d/debian/source" "$d/rpm"
	[ ! -f "$top/README.md" ] || cp "$top/README.md" "$d/"
	cp "$top/docs/INSTALL.md" "$top/docs/guest-switch.md" "$top/docs/host-fabric.md" \
		"$top/docs/quickstart.md" "$top/docs/sqcq.md" "$top/docs/observability.md" "$d/docs/"
	cp -R "$top/switch" "$d/"
	cp "$top/debian/control" "$top/debian/rules" "$top/debian/changelog" \
		"$top/debian/copyright" "$top"/debian/*.conf "$top"/debian/*.lintian-overrides \
		"$top"/debian/*.postinst "$top"/debian/*.prerm "$top"/debian/*.postrm "$d/debian/"
	cp "$top/debian/source/format" "$d/debian/source/"
	cp "$top/rpm/virtio-sqcq.spec" "$d/rpm/"
}

check_versions() {
	"$top/scripts/pkg-version.sh" check "$top"
}

case $mode in
stage) stage "$out" ;;
dkms-src) dkms_src "$out" ;;
deb)
	check_versions
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	b="$out/build/deb"
	rm -rf "$b"
	stage "$b/virtio-sqcq-$ver"
	(cd "$b/virtio-sqcq-$ver" && dpkg-buildpackage -b -us -uc) >"$out/deb-build.log" 2>&1 ||
		{ tail -n 30 "$out/deb-build.log" >&2; echo "dpkg-buildpackage failed, see $out/deb-build.log" >&2; exit 1; }
	rm -f "$out"/virtio-sqcq-dkms_*.deb "$out"/virtio-sqcq_*.changes "$out"/virtio-sqcq_*.buildinfo
	mv "$b"/*.deb "$b"/*.changes "$b"/*.buildinfo "$out/"
	rm -rf "$b"
	ls "$out"/virtio-sqcq-dkms_"$ver"_all.deb
	;;
rpm)
	check_versions
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	b="$out/build/rpm"
	rm -rf "$b"
	mkdir -p "$b/SOURCES"
	stage "$b/virtio-sqcq-$ver"
	tar -C "$b" --owner=0 --group=0 --numeric-owner --sort=name \
		-czf "$b/SOURCES/virtio-sqcq-$ver.tar.gz" "virtio-sqcq-$ver"
	rpmbuild -bb --define "_topdir $b" --define "_tmppath $b/tmp" \
		--define "_build_id_links none" \
		"$b/virtio-sqcq-$ver/rpm/virtio-sqcq.spec" >"$out/rpm-build.log" 2>&1 ||
		{ tail -n 30 "$out/rpm-build.log" >&2; echo "rpmbuild failed, see $out/rpm-build.log" >&2; exit 1; }
	rm -f "$out"/virtio-sqcq-dkms-*.noarch.rpm
	mv "$b"/RPMS/noarch/*.rpm "$out/"
	rm -rf "$b"
	ls "$out"/virtio-sqcq-dkms-"$ver"-*.noarch.rpm
	;;
*) echo "usage: $0 deb|rpm|stage|dkms-src [DIR]" >&2; exit 2 ;;
esac
