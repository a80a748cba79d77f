#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only
#
# tests/pkg/run.sh [TEST...] - packaging tests.  One line per test,
# "PASS: pkg <name>" or "FAIL: pkg <name>", timings at the end; exit status 1
# if any test failed.  Installs its own tools; downloads and the bookworm
# chroot are cached under $SQCQ_CACHE (default /var/cache/virtio-sqcq).
#
# Tests, in order (later ones need earlier ones):
#   versions       VERSION == dkms.conf == debian/changelog == spec
#   dkms-conf      dkms.conf: $kernelver only, BUILD_EXCLUSIVE_KERNEL range,
#                  AUTOINSTALL, updates/dkms
#   build-deb      make deb
#   build-rpm      make rpm
#   pkg-versions   the built .deb and .rpm carry VERSION
#   lintian        no errors (warnings and infos are listed)
#   rpm-sanity     rpm -qpl / -qpR / --scripts
#   chroot-install apt install the .deb in a bookworm chroot with headers of
#                  6.1 and bookworm-backports 6.12: its postinst alone builds
#                  and installs for both (dkms status); modinfo version and
#                  parameters
#   modprobe-conf  /etc/modprobe.d/virtio-sqcq.conf names every parameter;
#                  the default driver file blacklists virtio_scsi_sqcq only
#   switch-chroot  virtio-sqcq-guest status/on/off with the 6.1 kernel and
#                  initramfs-tools in the chroot: what each initramfs holds
#                  (tests/pkg/switch.sh)
#   switch-dracut  the dracut module: included only while on; what it adds
#   vm-boot-on, vm-boot-off, vm-boot-nomodule, vm-boot-dracut
#                  those images boot a 6.1 VM whose root disk is on
#                  virtio-scsi: the chosen driver drives it, I/O verified
#   vm-fallback-initramfs, vm-fallback-dracut
#                  virtio_scsi_sqcq cannot load: the in-tree driver takes the
#                  root disk by itself (switch/guest-load)
#   vm-optout-initramfs, vm-optout-dracut
#                  virtio_sqcq.off=1 on the kernel command line: the in-tree
#                  driver for that boot
#                  boots with virtio_scsi
#   vm-switch-now  the chroot as a VM's system with udev: coldplug, on/off
#                  --now, hot-added controllers, refusals (tests/pkg/vm-switch.sh)
#   vm-host-switch the host switch (virtio-sqcq-host): the chroot as the
#                  system of a 6.1 VM booted three times on one disk: on,
#                  modprobe vhost_scsi / tcm_vhost and a targetcli target
#                  saved; reboot: the boot-time restore (targetctl restore,
#                  as rtslib-fb-targetctl.service runs it) lands in
#                  vhost_scsi_sqcq, I/O through /dev/vhost-scsi, status
#                  names the VM, off; reboot: the restore lands in the
#                  in-tree vhost_scsi, --now swaps and refusals
#                  (tests/pkg/host-switch.sh, tests/pkg/vm-host-switch.sh);
#                  one PASS/FAIL line per step
#   chroot-upgrade install VERSION+test1 over it: modules rebuilt and replaced;
#                  the switch (turned on before) stays on; beside the real
#                  kernels, one without CONFIG_TARGET_CORE (the guest driver
#                  alone, the host module's absence explained), one whose
#                  build fails (named with its log; dpkg still configures the
#                  package, the other kernels keep their modules) and one
#                  without headers (the package to install named)
#   chroot-purge   apt purge leaves nothing behind; it turned the switch off
#                  and rebuilt the initramfs without virtio_scsi_sqcq; the
#                  host switch, on before, is off
#   rpm-chroot     the .rpm installed for real with rpm (Debian's) in a fresh
#                  copy of the chroot: %post builds for both kernels, rpm -U
#                  to VERSION+test1 replaces them, rpm -e removes everything
#                  and turns the host switch off
#   vm-modprobe    modprobe the modules DKMS built from the .deb, and those
#                  it built from the .rpm, in one 6.1 VM (tests/vm/run.sh)
#
# The vm-* tests are skipped with SQCQ_PKG_VM=0.
#
# Environment: SQCQ_PKG_KEEP=1 keeps the chroot copy for debugging.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/pkg/lib.sh
. "$here/lib.sh"
# shellcheck source=tests/lib/verdict.sh
. "$here/../lib/verdict.sh"
top=$PKG_REPO
out="$top/out/pkg"
ver=$(tr -d ' \n' <"$top/VERSION")
ver2="$ver+test1"
work="$SQCQ_CACHE/chroots/pkg-bookworm.run"
log="$out/test.log"
mkdir -p "$out"
: >"$log"

declare -A result
timings=()
failed=0

# run_test NAME FUNC [NEEDS...]: FUNC's output goes to the log; a test whose
# prerequisite failed fails too, saying so.
run_test() {
	local name=$1 fn=$2 need t0 rc
	shift 2
	if [ -n "${only:-}" ] && [[ " $only " != *" $name "* ]]; then
		return 0
	fi
	for need in "$@"; do
		if [ "${result[$need]:-}" != PASS ]; then
			echo "FAIL: pkg $name (needs $need)"
			result[$name]=FAIL
			failed=$((failed + 1))
			return 0
		fi
	done
	t0=$(date +%s)
	echo "--- $name" >>"$log"
	"$fn" >>"$log" 2>&1
	rc=$?
	echo "[$(date +%T)] $name: exit $rc after $(($(date +%s) - t0))s" >>"$log"
	# A test also fails when it logged a "not ok:" line.
	sed -n "/^--- $name\$/,\$p" "$log" | grep '^not ok: ' >/dev/null && rc=1
	timings+=("$name=$(($(date +%s) - t0))s")
	if [ $rc -eq 0 ]; then
		result[$name]=PASS
		echo "PASS: pkg $name"
	else
		result[$name]=FAIL
		failed=$((failed + 1))
		echo "FAIL: pkg $name"
		sed -n "/^--- $name\$/,\$p" "$log" | tail -n 15 | sed 's/^/  | /'
	fi
}

# Checks log "ok: ..." / "not ok: ..."; any "not ok" fails the test.
ok() { echo "ok: $*"; }
bad() { echo "not ok: $*"; }

deb="$out/virtio-sqcq-dkms_${ver}_all.deb"
# shellcheck source=tests/pkg/switch.sh
. "$here/switch.sh"
# shellcheck source=tests/pkg/host-switch.sh
. "$here/host-switch.sh"
rpmf="$out/virtio-sqcq-dkms-$ver-1.noarch.rpm"

t_versions() {
	"$top/scripts/pkg-version.sh" show "$top"
	"$top/scripts/pkg-version.sh" check "$top" && ok "all agree on $ver"
}

t_dkms_conf() {
	local f="$top/dkms.conf" k re
	(
		# shellcheck disable=SC1090
		. "$f"
		[ "$PACKAGE_NAME" = virtio-sqcq ] || bad "PACKAGE_NAME=$PACKAGE_NAME"
		[ "$AUTOINSTALL" = yes ] || bad "AUTOINSTALL=$AUTOINSTALL"
		[ "${BUILT_MODULE_NAME[0]} ${BUILT_MODULE_NAME[1]}" = "vhost_scsi_sqcq virtio_scsi_sqcq" ] ||
			bad "BUILT_MODULE_NAME: ${BUILT_MODULE_NAME[*]}"
		[ "${DEST_MODULE_LOCATION[0]} ${DEST_MODULE_LOCATION[1]}" = "/updates/dkms /updates/dkms" ] ||
			bad "DEST_MODULE_LOCATION: ${DEST_MODULE_LOCATION[*]}"
		re=$BUILD_EXCLUSIVE_KERNEL
		for k in 5.10.0-35-amd64 5.19.0 6.1.0-57-amd64 6.12.95+deb12-amd64 6.12.57-amd64 \
			7.2.13-amd64 7.0.0-rc1 6.18.2-200.fc43.x86_64 5.14.0-570.el9.x86_64; do
			[[ $k =~ $re ]] || bad "BUILD_EXCLUSIVE_KERNEL rejects $k"
		done
		for k in 5.4.0-216-generic 5.9.16 4.19.0-27-amd64 8.0.0 3.10.0-1160.el7.x86_64 5.1.0; do
			[[ $k =~ $re ]] && bad "BUILD_EXCLUSIVE_KERNEL accepts $k"
		done
		true
	)
	grep -n 'uname' "$f" | grep -v '^[0-9]*:#' && bad "dkms.conf uses uname"
	grep -q '^MAKE\[0\]=.*\${kernel_source_dir}' "$f" || bad "MAKE[0] not against \${kernel_source_dir}"
	ok "dkms.conf checked"
}

t_build_deb() { make -C "$top" -f scripts/pkg.mk deb && [ -f "$deb" ]; }
t_build_rpm() { make -C "$top" -f scripts/pkg.mk rpm && [ -f "$rpmf" ]; }

t_pkg_versions() {
	local d r
	d=$(dpkg-deb -f "$deb" Version)
	r=$(rpm -qp --qf '%{VERSION}' "$rpmf" 2>/dev/null)
	echo "deb $d rpm $r VERSION $ver"
	[ "$d" = "$ver" ] || bad "deb version $d"
	[ "$r" = "$ver" ] || bad "rpm version $r"
	local c
	c=$(dpkg-deb -c "$deb")
	grep -q "/usr/src/virtio-sqcq-$ver/dkms.conf" <<<"$c" || bad "deb: no /usr/src/virtio-sqcq-$ver"
	for f in usr/sbin/virtio-sqcq-stat usr/share/man/man8/virtio-sqcq-stat.8.gz usr/sbin/virtio-sqcq-host \
		usr/share/man/man8/virtio-sqcq-host.8.gz usr/lib/virtio-sqcq/host-load; do
		grep -q " \./$f\$" <<<"$c" || bad "deb: no /$f"
	done
	c=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/virtio-sqcq-$ver/dkms.conf")
	grep -qx "PACKAGE_VERSION=\"$ver\"" <<<"$c" || bad "deb: dkms.conf version"
	c=$(dpkg-deb --fsys-tarfile "$deb" | tar -xO "./usr/src/virtio-sqcq-$ver/VERSION")
	[ "$c" = "$ver" ] || bad "deb: VERSION says $c"
	ok "package versions"
}

t_lintian() {
	local l e w
	# lintian refuses nothing as root but says it is not recommended; quiet that.
	l=$(lintian --pedantic -I --no-tag-display-limit "$out"/virtio-sqcq_"$ver"_*.changes 2>&1 |
		grep -v 'running with root privileges')
	echo "$l"
	e=$(grep -c '^E: ' <<<"$l")
	w=$(grep -c '^W: ' <<<"$l")
	echo "lintian: $e errors, $w warnings, $(grep -c '^[IPX]: ' <<<"$l") info/pedantic"
	[ "$e" -eq 0 ]
}

t_rpm_sanity() {
	local l R s
	l=$(rpm -qpl "$rpmf" 2>/dev/null) R=$(rpm -qpR "$rpmf" 2>/dev/null)
	s=$(rpm -qp --scripts "$rpmf" 2>/dev/null)
	echo "$R"
	[ "$(rpm -qp --qf '%{NAME} %{ARCH}' "$rpmf" 2>/dev/null)" = "virtio-sqcq-dkms noarch" ] ||
		bad "name/arch"
	for f in Kbuild VERSION dkms.conf scripts/detect-features.sh \
		$(cd "$top" && ls host/*.[ch] host/Kbuild guest/*.[ch] guest/Kbuild common/*.[ch] 2>/dev/null); do
		grep -qx "/usr/src/virtio-sqcq-$ver/$f" <<<"$l" || bad "missing /usr/src/virtio-sqcq-$ver/$f"
	done
	grep -qx /etc/modprobe.d/virtio-sqcq.conf <<<"$l" || bad "no modprobe.d file"
	for f in /usr/sbin/virtio-sqcq-guest /usr/sbin/virtio-sqcq-stat /usr/lib/modprobe.d/virtio-sqcq-driver.conf \
		/usr/lib/dracut/modules.d/95virtio-sqcq/module-setup.sh /etc/modprobe.d/virtio-sqcq-driver.conf; do
		grep -qx "$f" <<<"$l" || bad "rpm lacks $f"
	done
	grep -q '^/usr/share/man/man8/virtio-sqcq-guest\.8' <<<"$l" || bad "rpm lacks the man page"
	grep -q '^/usr/share/man/man8/virtio-sqcq-stat\.8' <<<"$l" || bad "rpm lacks virtio-sqcq-stat's man page"
	rpm -qp --qf '[%{FILENAMES} %{FILEFLAGS:fflags}\n]' "$rpmf" 2>/dev/null |
		grep -x '/etc/modprobe.d/virtio-sqcq-driver.conf g' >/dev/null || bad "the switch file is not a %ghost"
	rpm -qp --configfiles "$rpmf" 2>/dev/null | grep -x /etc/modprobe.d/virtio-sqcq.conf >/dev/null ||
		bad "modprobe.d file not %config"
	grep -qx dkms <<<"$R" || bad "no Requires: dkms"
	grep -qx kernel-devel <<<"$R" || bad "no Requires: kernel-devel"
	grep -q '/usr/lib/virtio-sqcq/dkms-build install' <<<"$s" || bad "%post does not run dkms-build install"
	grep -q 'dkms remove -m virtio-sqcq' <<<"$s" || bad "%post does not remove the versions it replaces"
	awk '/^preuninstall scriptlet/ { p = 1; next } /scriptlet/ { p = 0 } p' <<<"$s" |
		grep '/usr/lib/virtio-sqcq/dkms-build remove' >/dev/null || bad "%preun does not run dkms-build remove"
	grep -qx /usr/lib/virtio-sqcq/dkms-build <<<"$l" || bad "rpm lacks /usr/lib/virtio-sqcq/dkms-build"
	rpm2cpio "$rpmf" | (cd "$out" && rm -rf rpmx && mkdir rpmx && cd rpmx &&
		cpio -idm --quiet ./usr/lib/virtio-sqcq/dkms-build)
	grep -qx "ver=$ver" "$out/rpmx/usr/lib/virtio-sqcq/dkms-build" || bad "rpm: dkms-build does not carry $ver"
	rm -rf "$out/rpmx"
	# %preun removes only when $1 == 0, and every scriptlet parses.
	awk '/^preuninstall scriptlet/ { p = 1; next } /scriptlet/ { p = 0 } p' <<<"$s" |
		grep 'if \[ "\$1" -eq 0 \]' >/dev/null || bad "%preun not conditional on \$1 == 0"
	awk '/^preuninstall scriptlet/ { p = 1; next } /scriptlet/ { p = 0 } p' <<<"$s" |
		grep 'virtio-sqcq-guest off' >/dev/null || bad "%preun does not turn the switch off"
	awk '/scriptlet \(using \/bin\/sh\):$/ { n++; f = "'"$out"'/scriptlet." n; next } { print > f }' <<<"$s"
	for f in "$out"/scriptlet.*; do sh -n "$f" || bad "syntax: $f"; done
	rm -f "$out"/scriptlet.*
	ok "rpm checked"
}

# ---- chroot ------------------------------------------------------------------
abis=""
kvers=()

chroot_cleanup() {
	[ "${SQCQ_PKG_KEEP:-0}" = 1 ] && { pkg_chroot_umount "$work"; return 0; }
	pkg_chroot_discard "$work"
}
trap chroot_cleanup EXIT

in_chroot() { pkg_chroot "$work" "$@"; }

# modinfo FIELD of MODULE installed for KVER, via the chroot's own kmod.
# DKMS compresses modules like the kernel does (6.12: .ko.xz).
installed_ko() {
	local f
	for f in "/lib/modules/$1/updates/dkms/$2".ko{,.xz,.zst,.gz}; do
		[ -f "$work$f" ] && { echo "$f"; return 0; }
	done
	echo "/lib/modules/$1/updates/dkms/$2.ko"
	return 1
}
ko_field() { in_chroot modinfo -F "$3" "$(installed_ko "$1" "$2")"; }

# check_installed VERSION: both modules of VERSION installed for every kernel,
# by the package's own scripts (postinst builds for every installed kernel).
check_installed() {
	local v=$1 k m st
	for k in "${kvers[@]}"; do
		st=$(in_chroot dkms status -m virtio-sqcq -k "$k")
		echo "$st"
		grep -q "virtio-sqcq/$v, $k, x86_64: installed" <<<"$st" || bad "dkms status for $k: $st"
		for m in vhost_scsi_sqcq virtio_scsi_sqcq; do
			installed_ko "$k" $m >/dev/null || { bad "no $(installed_ko "$k" $m)"; continue; }
			[ "$(ko_field "$k" $m version)" = "$v" ] ||
				bad "$m for $k: modinfo version '$(ko_field "$k" $m version)' != $v"
			[ "$(ko_field "$k" $m vermagic | cut -d' ' -f1)" = "$k" ] || bad "$m vermagic for $k"
			ko_field "$k" $m parm | grep '^poll_idle_us:' >/dev/null || bad "$m: no poll_idle_us parameter"
			in_chroot modinfo -k "$k" -n $m 2>/dev/null | grep "/updates/dkms/$m\.ko" >/dev/null ||
				bad "modinfo -k $k $m does not resolve to updates/dkms (depmod)"
		done
	done
}

t_chroot_install() {
	abis=$(pkg_abis) || return 1
	local a
	for a in $abis; do kvers+=("$a-amd64"); done
	echo "kernels: ${kvers[*]}"
	pkg_chroot_fresh "$work" || return 1
	cp "$deb" "$work/tmp/"
	echo "[$(date +%T)] chroot ready"
	in_chroot apt-get install -y -q --no-install-recommends "/tmp/${deb##*/}" || return 1
	echo "[$(date +%T)] installed"
	check_installed "$ver"
	grep -qx "ver=$ver" "$work/usr/lib/virtio-sqcq/dkms-build" || bad "dkms-build does not carry $ver"
	for a in "${kvers[@]}"; do
		in_chroot modinfo "$(installed_ko "$a" vhost_scsi_sqcq)" | grep -E '^(version|vermagic|parm):'
	done
	# Keep the installed tree for the VM check (the VM sees this machine's root).
	rm -rf "$out/vm-modules"
	for a in "${kvers[@]}"; do
		mkdir -p "$out/vm-modules/$a"
		cp "$work/lib/modules/$a/updates/dkms/"*.ko* "$out/vm-modules/$a/"
	done
	ok "installed for ${kvers[*]}"
}

t_modprobe_conf() {
	local c="$work/etc/modprobe.d/virtio-sqcq.conf" m p mc k=${kvers[0]}
	[ -f "$c" ] || bad "no /etc/modprobe.d/virtio-sqcq.conf"
	grep -v '^#' "$c" | grep . >/dev/null && bad "uncommented lines in the example conf"
	for m in vhost_scsi_sqcq virtio_scsi_sqcq; do
		for p in $(ko_field "$k" $m parm | cut -d: -f1); do
			grep -Eq "^#options $m .*\\b$p=|^# +$p |^#.*\\b$p\\b.*alias" "$c" ||
				bad "$m parameter $p not in the example conf"
		done
	done
	grep -q 'virtio-sqcq-guest' "$c" || bad "the conf does not point to virtio-sqcq-guest"
	# Exactly one of the two drivers of a virtio-scsi controller may load by
	# alias; by default the in-tree one.
	grep -qx 'virtio:d00000008v\*' <<<"$(in_chroot modinfo -k "$k" -F alias virtio_scsi_sqcq)" ||
		bad "virtio_scsi_sqcq has no alias virtio:d00000008v*"
	grep -qx 'blacklist virtio_scsi_sqcq' "$work/lib/modprobe.d/virtio-sqcq-driver.conf" ||
		bad "/lib/modprobe.d/virtio-sqcq-driver.conf does not blacklist virtio_scsi_sqcq"
	mc=$(in_chroot modprobe -c)
	grep -qx 'blacklist virtio_scsi_sqcq' <<<"$mc" || bad "modprobe -c: virtio_scsi_sqcq not blacklisted"
	grep -qx 'blacklist virtio_scsi' <<<"$mc" && bad "modprobe -c: virtio_scsi blacklisted"
	in_chroot dpkg-query -W -f='${Conffiles}\n' virtio-sqcq-dkms | grep /etc/modprobe.d/virtio-sqcq.conf >/dev/null ||
		bad "not a conffile"
	ok "conf checked"
}

# Kernels DKMS must not trip over, beside the real ones during the upgrade
# (the package's postinst builds for every installed kernel):
#   <6.1>-nolio   headers of 6.1 without CONFIG_TARGET_CORE (a slim kernel):
#                 the guest driver alone, and a line saying why
#   <6.1>-broken  headers on which every build fails: named with its log;
#                 the package still configures, the other kernels keep theirs
#   <6.1>-nohdr   modules but no headers: named with the package to install
fake_nolio="" fake_broken="" fake_nohdr=""
fake_kernels_add() {
	local base src k
	base=${kvers[0]%-amd64}
	fake_nolio=$base-nolio fake_broken=$base-broken fake_nohdr=$base-nohdr
	src=$work$(in_chroot readlink -f "/lib/modules/${kvers[0]}/build") && [ -f "$src/.config" ] ||
		{ echo "no header tree for ${kvers[0]}"; return 1; }
	for k in "$fake_nolio" "$fake_broken" "$fake_nohdr"; do
		rm -rf "$work/lib/modules/$k" "$work/usr/src/linux-headers-$k"
		mkdir -p "$work/lib/modules/$k/kernel"
		: >"$work/lib/modules/$k/modules.order"
		[ "$k" = "$fake_nohdr" ] && continue
		cp -a "$src" "$work/usr/src/linux-headers-$k"
		ln -s "/usr/src/linux-headers-$k" "$work/lib/modules/$k/build"
	done
	k=$work/usr/src/linux-headers-$fake_nolio
	sed -i 's/^CONFIG_TARGET_CORE=.*/# CONFIG_TARGET_CORE is not set/' "$k/.config"
	sed -i '/^CONFIG_TARGET_CORE=/d' "$k/include/config/auto.conf"
	sed -i '/^#define CONFIG_TARGET_CORE_MODULE 1$/d' "$k/include/generated/autoconf.h"
	# ... and, as in such a kernel, no exports of the target core.
	sed -i '\|\tdrivers/target/|d' "$k/Module.symvers"
	grep -q 'drivers/target/' "$k/Module.symvers" && { echo "nolio: Module.symvers kept LIO"; return 1; }
	grep -q TARGET_CORE= "$k/include/config/auto.conf" && { echo "nolio: auto.conf kept it"; return 1; }
	echo '#error a header tree broken on purpose (tests/pkg/run.sh)' \
		>>"$work/usr/src/linux-headers-$fake_broken/include/generated/autoconf.h"
	echo "fake kernels: $fake_nolio $fake_broken $fake_nohdr"
}

# fake_kernels_check VERSION OUTPUT: what the install said and did for them;
# then they go.
fake_kernels_check() {
	local v=$1 o=$2 st k n
	st=$(in_chroot dpkg-query -W -f='${Status} ${Version}' virtio-sqcq-dkms)
	[ "$st" = "install ok installed $v" ] || bad "dpkg state after a failed build: $st"
	st=$(in_chroot dkms status -m virtio-sqcq -k "$fake_nolio")
	grep -q "virtio-sqcq/$v, $fake_nolio, x86_64: installed" <<<"$st" || bad "nolio: dkms status: $st"
	n=$(cd "$work/lib/modules/$fake_nolio" && find . -name '*_scsi_sqcq.ko*' | sort | tr '\n' ' ')
	[[ $n == "./updates/dkms/virtio_scsi_sqcq.ko"*" " && $n != *vhost* ]] ||
		bad "nolio: want the guest driver alone, found: $n"
	grep -q "vhost_scsi_sqcq is not built for $fake_nolio: its kernel has no CONFIG_TARGET_CORE" "$o" ||
		bad "nolio: no line saying why the host module is not built"
	grep -q "kernel $fake_broken: the build failed (log: /var/lib/dkms/virtio-sqcq/$v/build/make.log)" "$o" ||
		bad "broken: the failed build is not named"
	find "$work/lib/modules/$fake_broken" -name '*sqcq*' | grep . >/dev/null && bad "broken: modules installed"
	grep -q "kernel $fake_nohdr: not built, its headers are not installed: install linux-headers-$fake_nohdr" "$o" ||
		bad "nohdr: no line naming linux-headers-$fake_nohdr"
	grep -q "installed for 3 kernel(s); FAILED for $fake_broken; no headers for $fake_nohdr" "$o" ||
		bad "summary line: $(grep "virtio-sqcq-$v: installed for" "$o")"
	for k in "${kvers[@]}"; do
		[ "$(find "$work/lib/modules/$k" -name 'v*_scsi_sqcq.ko*' | wc -l)" -eq 2 ] ||
			bad "$k lost a module beside the failed build"
	done
	in_chroot dkms remove -m virtio-sqcq -v "$v" -k "$fake_nolio" >/dev/null
	in_chroot dkms remove -m virtio-sqcq -v "$v" -k "$fake_broken" >/dev/null 2>&1
	for k in "$fake_nolio" "$fake_broken" "$fake_nohdr"; do
		rm -rf "$work/lib/modules/$k" "$work/usr/src/linux-headers-$k"
	done
	ok "kernels without LIO, with a broken build, without headers"
}

t_chroot_upgrade() {
	local tmp st k
	tmp=$(mktemp -d)
	"$top/scripts/pkg-build.sh" stage "$tmp/tree" &&
		mkdir -p "$tmp/tree/scripts" && cp "$top"/scripts/pkg-*.sh "$tmp/tree/scripts/" &&
		echo "$ver2" >"$tmp/tree/VERSION" &&
		SOURCE_DATE_EPOCH=$(date +%s) "$tmp/tree/scripts/pkg-version.sh" sync "$tmp/tree" &&
		"$tmp/tree/scripts/pkg-build.sh" deb "$tmp/out" &&
		"$tmp/tree/scripts/pkg-build.sh" rpm "$tmp/out" || { rm -rf "$tmp"; return 1; }
	cp "$tmp/out/virtio-sqcq-dkms_${ver2}_all.deb" "$work/tmp/"
	# The rpm test upgrades to the same version.
	rm -rf "$out/upgrade" && mkdir -p "$out/upgrade" &&
		cp "$tmp/out/virtio-sqcq-dkms-$ver2-1.noarch.rpm" "$out/upgrade/"
	rm -rf "$tmp"
	[ "${result[switch-chroot]:-}" != PASS ] || sw_upgrade_pre || return 1
	fake_kernels_add || return 1
	in_chroot apt-get install -y -q --no-install-recommends "/tmp/virtio-sqcq-dkms_${ver2}_all.deb" \
		>"$out/upgrade.out" 2>&1
	st=$?
	cat "$out/upgrade.out"
	[ "$st" = 0 ] || return 1
	check_installed "$ver2"
	fake_kernels_check "$ver2" "$out/upgrade.out"
	st=$(in_chroot dkms status -m virtio-sqcq)
	grep -q "virtio-sqcq/$ver," <<<"$st" && bad "old version still in dkms: $st"
	[ -e "$work/usr/src/virtio-sqcq-$ver" ] && bad "old /usr/src/virtio-sqcq-$ver left"
	[ -e "$work/var/lib/dkms/virtio-sqcq/$ver" ] && bad "old /var/lib/dkms/virtio-sqcq/$ver left"
	for k in "${kvers[@]}"; do
		[ "$(find "$work/lib/modules/$k" -name 'v*_scsi_sqcq.ko*' | wc -l)" -eq 2 ] ||
			bad "$k: not exactly 2 modules: $(find "$work/lib/modules/$k" -name '*sqcq*')"
	done
	[ "${result[switch-chroot]:-}" != PASS ] || sw_upgrade_post
	ok "upgrade checked"
}

t_chroot_purge() {
	local left
	hs_removal_pre in_chroot || return 1
	in_chroot apt-get purge -y -q virtio-sqcq-dkms >"$out/purge.out" 2>&1
	left=$?
	cat "$out/purge.out"
	[ $left = 0 ] || return 1
	hs_removal_post "$work" "$out/purge.out"
	left=$(cd "$work" && ls -d lib/modules/*/updates/dkms/*sqcq* usr/src/virtio-sqcq* \
		var/lib/dkms/virtio-sqcq etc/modprobe.d/virtio-sqcq*.conf lib/modprobe.d/virtio-sqcq* \
		usr/sbin/virtio-sqcq-guest usr/sbin/virtio-sqcq-stat usr/sbin/virtio-sqcq-host usr/lib/virtio-sqcq \
		usr/share/initramfs-tools/hooks/virtio-sqcq \
		usr/lib/dracut/modules.d/95virtio-sqcq 2>/dev/null)
	left+=$(cd "$work" && find lib/modules -name '*sqcq*' 2>/dev/null)
	[ -z "$left" ] || bad "left after purge: $left"
	in_chroot dkms status | grep virtio-sqcq >/dev/null && bad "dkms status still lists virtio-sqcq"
	[ "${result[switch-chroot]:-}" != PASS ] || sw_purge_post
	ok "purged"
}

# The .rpm installed for real: rpm (Debian's) in a fresh copy of the chroot,
# whose dkms and headers are Debian's (no Fedora repository is reachable
# here, so the rpm database knows neither dkms nor kernel-devel: --nodeps;
# Debian's rpm also wants --force-debian).  Its scriptlets run as on Fedora:
# %post builds for every kernel, an upgrade replaces the modules, an erase
# removes them.  The 6.1 modules it built are loaded in the VM of
# vm-modprobe.
rpm_ko() {	# rpm_ko ROOT KVER MODULE: the installed module's path in ROOT
	local f
	for f in "$1/lib/modules/$2/updates/dkms/$3".ko{,.xz,.zst,.gz}; do
		[ -f "$f" ] && { echo "$f"; return 0; }
	done
	return 1
}
t_rpm_chroot() {
	local w="$SQCQ_CACHE/chroots/pkg-bookworm.rpm" up="$out/upgrade/virtio-sqcq-dkms-$ver2-1.noarch.rpm"
	local o="$out/rpm-chroot.out" st k m v f left
	[ -f "$up" ] || { echo "no $up (chroot-upgrade builds it)"; return 1; }
	pkg_chroot_fresh "$w" || return 1
	rin() { pkg_chroot "$w" "$@"; }
	cp "$rpmf" "$up" "$w/tmp/"
	for v in "$ver" "$ver2"; do
		f=/tmp/virtio-sqcq-dkms-$v-1.noarch.rpm
		if [ "$v" = "$ver" ]; then
			rin rpm -i --nodeps --force-debian "$f" >"$o" 2>&1
		else
			rin rpm -U --nodeps --force-debian "$f" >"$o" 2>&1
		fi
		st=$?
		sed "s/^/rpm $v: /" "$o"
		[ "$st" = 0 ] || bad "rpm ${v/$ver2/-U} $f: status $st"
		grep -q "^virtio-sqcq-$v: installed for ${#kvers[@]} kernel(s)\$" "$o" ||
			bad "$v: %post did not install for the ${#kvers[@]} kernels"
		[ "$(rin rpm -q --qf '%{VERSION}' virtio-sqcq-dkms)" = "$v" ] || bad "rpm -q after $v"
		st=$(rin dkms status -m virtio-sqcq)
		echo "$st"
		for k in "${kvers[@]}"; do
			grep -q "virtio-sqcq/$v, $k, x86_64: installed" <<<"$st" || bad "$v not installed for $k"
			for m in vhost_scsi_sqcq virtio_scsi_sqcq; do
				f=$(rpm_ko "$w" "$k" $m) || { bad "$v: no $m for $k"; continue; }
				[ "$(rin modinfo -F version "${f#"$w"}")" = "$v" ] || bad "$v: $m for $k has another version"
			done
		done
		if [ "$v" = "$ver" ]; then
			# The first install's 6.1 modules are the ones the VM loads.
			rm -rf "$out/vm-modules-rpm" && mkdir -p "$out/vm-modules-rpm/${kvers[0]}" &&
				cp "$w/lib/modules/${kvers[0]}/updates/dkms/"*.ko* "$out/vm-modules-rpm/${kvers[0]}/"
			continue
		fi
		grep -q "virtio-sqcq/$ver," <<<"$st" && bad "the upgrade left $ver in dkms"
		[ -e "$w/usr/src/virtio-sqcq-$ver" ] && bad "the upgrade left /usr/src/virtio-sqcq-$ver"
	done
	hs_removal_pre rin || return 1
	rin rpm -e --force-debian virtio-sqcq-dkms >"$o" 2>&1 || bad "rpm -e: $(tail -n 3 "$o")"
	cat "$o"
	hs_removal_post "$w" "$o"
	rin dkms status | grep virtio-sqcq >/dev/null && bad "rpm -e: dkms status still lists virtio-sqcq"
	left=$(cd "$w" && ls -d lib/modules/*/updates/dkms/*sqcq* usr/src/virtio-sqcq* var/lib/dkms/virtio-sqcq \
		usr/lib/virtio-sqcq usr/sbin/virtio-sqcq-guest usr/sbin/virtio-sqcq-stat usr/sbin/virtio-sqcq-host \
		etc/modprobe.d/virtio-sqcq-host.conf 2>/dev/null)
	[ -z "$left" ] || bad "left after rpm -e: $left"
	pkg_chroot_discard "$w"
	ok "rpm installed, upgraded and erased"
}

# kmods_of KVER: the cached module tree of the 6.1 kernel KVER (fetched if
# needed): <kimage>/lib/modules/KVER.
kmods_of() {
	local src
	src=$(ls -d "$SQCQ_CACHE"/kimage/*/lib/modules/"$1" 2>/dev/null | head -n 1)
	[ -d "$src" ] || "$top/tests/vm/fetch-kernel.sh" 6.1 >/dev/null || return 1
	src=$(ls -d "$SQCQ_CACHE"/kimage/*/lib/modules/"$1" 2>/dev/null | head -n 1)
	[ -d "$src" ] || { echo "no cached kernel modules for $1" >&2; return 1; }
	echo "$src"
}

# A private module root for the VM: the 6.1 kernel's own modules (hard links
# into the kernel cache) plus the DKMS-installed ones under updates/dkms,
# indexed by depmod here (natively; depmod over 9p under TCG is far too
# slow), so the VM runs a real `modprobe -d ROOT vhost_scsi_sqcq ...` that
# resolves our modules and their dependencies.
make_modroot() {	# make_modroot KVER MODULES_DIR ROOT
	local k=$1 mods=$2 root=$3 src
	src=$(kmods_of "$k") || return 1
	rm -rf "$root"
	mkdir -p "$root/lib/modules/$k/updates/dkms"
	cp -al "$src/kernel" "$root/lib/modules/$k/" 2>/dev/null ||
		cp -a "$src/kernel" "$root/lib/modules/$k/"
	cp "$src"/modules.builtin* "$src"/modules.order "$root/lib/modules/$k/" 2>/dev/null
	cp "$mods/$k/"*.ko* "$root/lib/modules/$k/updates/dkms/"
	depmod -b "$root" "$k" || { echo "depmod failed"; return 1; }
	echo "$root"
}

t_vm_modprobe() {
	local k=${kvers[0]} root rroot sets=()
	[ -x "$top/tests/vm/run.sh" ] || { echo "tests/vm/run.sh missing"; return 1; }
	root=$(make_modroot "$k" "$out/vm-modules" "$out/vm-modroot" | tail -n 1) && [ -d "$root" ] ||
		{ echo "cannot build the module root: $root"; return 1; }
	sets=("$out/vm-modules/$k" "$ver" "$root" deb)
	# What the .rpm built (rpm-chroot), in the same VM.
	if [ "${result[rpm-chroot]:-}" = PASS ]; then
		rroot=$(make_modroot "$k" "$out/vm-modules-rpm" "$out/vm-modroot-rpm" | tail -n 1) &&
			[ -d "$rroot" ] || { echo "cannot build the rpm module root: $rroot"; return 1; }
		sets+=("$out/vm-modules-rpm/$k" "$ver" "$rroot" rpm)
	fi
	"$top/tests/vm/run.sh" --kernel 6.1 --timeout 300 -- \
		"$top/tests/pkg/vm-modprobe.sh" "${sets[@]}"
}

only="$*"
t00=$(date +%s)
pkg_install_deps || { echo "FAIL: pkg deps (apt-get install failed)"; exit 1; }
run_test versions t_versions
run_test dkms-conf t_dkms_conf
run_test build-deb t_build_deb
run_test build-rpm t_build_rpm
run_test pkg-versions t_pkg_versions build-deb build-rpm
run_test lintian t_lintian build-deb
run_test rpm-sanity t_rpm_sanity build-rpm
run_test chroot-install t_chroot_install build-deb
run_test modprobe-conf t_modprobe_conf chroot-install
run_test switch-chroot t_switch_chroot chroot-install
run_test switch-dracut t_switch_dracut switch-chroot
if [ "${SQCQ_PKG_VM:-1}" != 0 ]; then
	run_test vm-boot-on t_vm_boot_on switch-chroot
	run_test vm-boot-off t_vm_boot_off switch-chroot
	run_test vm-boot-nomodule t_vm_boot_nomodule switch-chroot
	run_test vm-boot-dracut t_vm_boot_dracut switch-dracut
	run_test vm-fallback-initramfs t_vm_fallback_initramfs switch-chroot
	run_test vm-fallback-dracut t_vm_fallback_dracut switch-dracut
	run_test vm-optout-initramfs t_vm_optout_initramfs switch-chroot
	run_test vm-optout-dracut t_vm_optout_dracut switch-dracut
	run_test vm-switch-now t_vm_switch_now switch-chroot
	rm -rf "$hs_dir"	# no report of an earlier run's boots
	run_test hs-verdict t_hs_verdict
	run_test vm-host-switch t_vm_host_switch switch-chroot
	[ -z "${result[vm-host-switch]:-}" ] || hs_report
fi
run_test chroot-upgrade t_chroot_upgrade chroot-install
run_test chroot-purge t_chroot_purge chroot-install
run_test rpm-chroot t_rpm_chroot build-rpm chroot-upgrade
if [ "${SQCQ_PKG_VM:-1}" != 0 ]; then
	run_test vm-modprobe t_vm_modprobe chroot-install
fi
sed -n '/^--- lintian$/,/^--- /p' "$log" | grep -E '^(E|W): ' | sed 's/^/lintian: /'
echo "pkg: timings: ${timings[*]} total=$(($(date +%s) - t00))s (log: $log)"
[ $failed -eq 0 ]
