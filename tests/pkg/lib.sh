# shellcheck shell=bash
# Helpers of the packaging tests (tests/pkg/*.sh). Sourced, not run.
#
#   pkg_install_deps                  host tools: dpkg-dev, debhelper, dkms,
#                                     lintian, rpm, cpio, debootstrap (idempotent)
#   pkg_abis                          "6.1.0-57 6.12.95+deb12": the kernels the
#                                     chroot test builds for (6.1 + bookworm-backports)
#   pkg_chroot_base                   cached pristine bookworm chroot with dkms,
#                                     the initramfs generators ($PKG_CHROOT_EXTRA)
#                                     and the headers of pkg_abis; prints its path
#   pkg_chroot_fresh DIR              DIR := a throw-away copy of the base
#   pkg_chroot DIR CMD...             run CMD in DIR with /proc, /sys, /dev mounted
#   pkg_chroot_umount DIR             undo every mount below DIR (also on exit)

_pkg_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PKG_REPO=$(cd "$_pkg_here/../.." && pwd)
# shellcheck source=tests/lib/kernels.sh
. "$PKG_REPO/tests/lib/kernels.sh"

PKG_CHROOT_BASE="$SQCQ_CACHE/chroots/pkg-bookworm"
# initramfs-tools is bookworm's generator; dracut-core (dracut without the
# package that conflicts with initramfs-tools) lets the same chroot build a
# dracut image too; rpm installs the .rpm in a copy; targetcli-fb (with
# python3-rtslib-fb and its boot-time restore service) and dbus are what a
# host has for the host switch's test, with libvirt-daemon-system and
# qemu-system-x86 for its libvirt domain.  update-initramfs stays
# diverted to /bin/true in the base (the 6.12 image the headers pull in is
# never booted); a test that wants it removes the diversion in its copy.
PKG_CHROOT_EXTRA="initramfs-tools dracut-core zstd rpm targetcli-fb dbus libvirt-daemon-system qemu-system-x86"
export DEBIAN_FRONTEND=noninteractive

pkg_log() { echo "pkg: $*" >&2; }

PKG_APT_OPTS=(-y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold
	--no-install-recommends)

pkg_install_deps() {
	sqcq_install dpkg-dev debhelper dkms lintian rpm debootstrap kmod \
		fakeroot ca-certificates cpio 2>/dev/null
}

# The ABIs, resolved once per refresh of the private apt lists (each lookup
# walks all of them, ~20 s): cached next to the chroot, keyed on the lists'
# stamp.
pkg_abis() {
	local cache="$SQCQ_CACHE/chroots/pkg-bookworm.abis" a b
	if [ -z "${PKG_ABIS:-}" ]; then
		sqcq_apt_update_cached || return 1
		if [ -s "$cache" ] && [ "$cache" -nt "$SQCQ_APT_DIR/updated.stamp" ]; then
			PKG_ABIS=$(cat "$cache")
		else
			a=$(sqcq_kernel_abi 6.1) || return 1
			b=$(sqcq_kernel_abi 6.12-bpo) || return 1
			PKG_ABIS="$a $b"
			mkdir -p "${cache%/*}" && echo "$PKG_ABIS" >"$cache"
		fi
		export PKG_ABIS
	fi
	echo "$PKG_ABIS"
}

_pkg_mounted=()

pkg_chroot_mount() {
	local d=$1 m
	for m in proc sys dev; do
		mountpoint -q "$d/$m" && continue
		case $m in
		proc) mount -t proc proc "$d/proc" ;;
		sys) mount -t sysfs sys "$d/sys" 2>/dev/null || mount --rbind /sys "$d/sys" ;;
		dev) mount --rbind /dev "$d/dev" && mount --make-rslave "$d/dev" ;;
		esac
		_pkg_mounted+=("$d/$m")
	done
}

# Everything mounted below DIR: /proc, /sys, /dev, and whatever a test bound
# in (a kernel's modules); the deepest first.
pkg_chroot_umount() {
	local d=$1 m
	for m in $(awk -v d="$d/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r); do
		mountpoint -q "$m" && umount -R -l "$m"
	done
	return 0
}

pkg_chroot() {
	local d=$1
	shift
	pkg_chroot_mount "$d"
	chroot "$d" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@" </dev/null
}

_pkg_chroot_sources() {
	cat <<EOS
deb $SQCQ_MIRROR bookworm main
deb $SQCQ_MIRROR bookworm-updates main
deb $SQCQ_SECURITY_MIRROR bookworm-security main
deb $SQCQ_MIRROR bookworm-backports main
EOS
}

# Build or refresh the pristine chroot. The debootstrap + dkms part is made in
# a temporary directory and renamed into place; the headers are then made to
# match pkg_abis (a new point release installs the new ones and purges the old).
pkg_chroot_base() {
	local base=$PKG_CHROOT_BASE abis want=() have stale=() a
	abis=$(pkg_abis) || { pkg_log "cannot resolve kernel ABIs"; return 1; }
	mkdir -p "$(dirname "$base")"
	if [ ! -f "$base/.sqcq-base-ok" ]; then
		local tmp="$base.tmp.$$"
		rm -rf "$tmp"
		pkg_log "debootstrap bookworm into $tmp (first use, a few minutes)"
		debootstrap --variant=minbase --include=ca-certificates bookworm "$tmp" \
			"$SQCQ_MIRROR" >"$tmp.log" 2>&1 ||
			{ pkg_log "debootstrap failed, see $tmp.log"; tail -5 "$tmp.log" >&2; return 1; }
		_pkg_chroot_sources >"$tmp/etc/apt/sources.list"
		printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d"
		chmod 755 "$tmp/usr/sbin/policy-rc.d"
		# No docs, and none of the kernel image's own modules: the 6.12
		# headers depend on the image, nothing here boots it, and depmod
		# over its 4000 modules would cost seconds on every dkms step.
		printf 'path-exclude %s\n' '/usr/share/man/*' '/usr/share/locale/*' \
			'/lib/modules/*/kernel/*' '/usr/lib/modules/*/kernel/*' \
			>"$tmp/etc/dpkg/dpkg.cfg.d/01-sqcq-nodoc"
		# The 6.12 headers pull in the image; nothing here boots it, so
		# skip the slow initramfs generation.
		pkg_chroot "$tmp" dpkg-divert --local --rename --add /usr/sbin/update-initramfs \
			>>"$tmp.log" 2>&1 && ln -sf /bin/true "$tmp/usr/sbin/update-initramfs"
		{ pkg_chroot "$tmp" apt-get update -q &&
			pkg_chroot "$tmp" apt-get install "${PKG_APT_OPTS[@]}" dkms kmod; } \
			>>"$tmp.log" 2>&1
		local rc=$?
		pkg_chroot_umount "$tmp"
		[ $rc -eq 0 ] || { pkg_log "chroot setup failed, see $tmp.log"; return 1; }
		rm -rf "$base"
		touch "$tmp/.sqcq-base-ok"
		mv "$tmp" "$base"
		mv "$tmp.log" "$base.log"
	fi
	for a in $abis; do want+=("linux-headers-$a-amd64"); done
	have=$(pkg_chroot "$base" dpkg-query -W -f='${Package} ${Status}\n' 'linux-headers-*-amd64' \
		2>/dev/null | awk '/install ok installed/ { print $1 }')
	for a in $have; do
		[[ " ${want[*]} " == *" $a "* ]] || stale+=("$a")
	done
	# shellcheck disable=SC2086,SC2206 # a list
	have+=$'\n'$(pkg_chroot "$base" dpkg-query -W -f='${Package} ${Status}\n' $PKG_CHROOT_EXTRA \
		2>/dev/null | awk '/install ok installed/ { print $1 }')
	# shellcheck disable=SC2206 # a list
	want+=($PKG_CHROOT_EXTRA)
	pkg_chroot_umount "$base"
	local missing=()
	for a in "${want[@]}"; do
		grep -qx "$a" <<<"$have" || missing+=("$a")
	done
	if [ ${#missing[@]} -gt 0 ] || [ ${#stale[@]} -gt 0 ]; then
		pkg_log "chroot: installing ${missing[*]:-nothing}, purging ${stale[*]:-nothing}"
		{
			pkg_chroot "$base" apt-get update -q &&
				pkg_chroot "$base" apt-get install "${PKG_APT_OPTS[@]}" "${missing[@]}" &&
				{ [ ${#stale[@]} -eq 0 ] ||
					pkg_chroot "$base" apt-get purge -y -q --autoremove "${stale[@]}"; } &&
				pkg_chroot "$base" apt-get clean
		} >>"$base.log" 2>&1
		local rc=$?
		pkg_chroot_umount "$base"
		[ $rc -eq 0 ] || { pkg_log "package install failed, see $base.log"; return 1; }
	fi
	echo "$base"
}

# A throw-away copy of the base for one test run. overlayfs when the machine
# allows it (instant), else a plain copy.
pkg_chroot_fresh() {
	local dst=$1 base
	base=$(pkg_chroot_base) || return 1
	pkg_chroot_discard "$dst"
	mkdir -p "$dst.ovl/upper" "$dst.ovl/work" "$dst"
	if mount -t overlay overlay -o "lowerdir=$base,upperdir=$dst.ovl/upper,workdir=$dst.ovl/work" \
		"$dst" 2>/dev/null; then
		return 0
	fi
	rm -rf "$dst.ovl"
	rmdir "$dst"
	cp -a "$base" "$dst"
}

pkg_chroot_discard() {
	local dst=$1
	[ -e "$dst" ] || [ -e "$dst.ovl" ] || return 0
	pkg_chroot_umount "$dst"
	mountpoint -q "$dst" && umount -l "$dst"
	# Never rm -rf through a bind mount of the host's /dev or /sys.
	if awk -v d="$dst/" 'index($2, d) == 1 { f = 1 } END { exit !f }' /proc/self/mounts; then
		pkg_log "refusing to delete $dst: something is still mounted below it"
		return 1
	fi
	rm -rf "$dst" "$dst.ovl"
}
