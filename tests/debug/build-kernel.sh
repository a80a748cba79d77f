#!/bin/bash
# tests/debug/build-kernel.sh [--print-abi]
#
# Build the sanitizer kernel of the `debug` stage from Debian's linux-source
# package (bookworm, 6.1) with the config fragment tests/debug/debug.config
# (KASAN, lockdep, DEBUG_ATOMIC_SLEEP, UBSAN, kmemleak, DEBUG_OBJECTS,
# SLUB_DEBUG, KFENCE, and what the VM rig needs built in), and install it
# where the VM rig finds Debian's kernels (tests/vm/fetch-kernel.sh):
#
#   $SQCQ_CACHE/kimage/<abi>/{vmlinuz,kver,config,cmdline,key,
#                             lib/modules/<kver>/}
#   $SQCQ_CACHE/debug-kernel/tree/    the built tree: KDIR for
#                                     `make -C ... M=... modules`
#   $SQCQ_CACHE/debug-kernel/build    -> tree
#   $SQCQ_CACHE/debug-kernel/abi      <abi>, e.g. 6.1.192-debug
#
# No vmlinux in the kimage (the rig then boots the bzImage): this kernel does
# not come up through QEMU's PVH entry (the VM resets at once; KASAN's early
# shadow is the suspect, not confirmed). The ELF stays in the tree.
#
# <kver> (uname -r) is <abi>-amd64, as with Debian's kernels. `cmdline` holds
# kernel parameters tests/vm/run.sh appends for this kernel (a copy of
# tests/debug/cmdline, refreshed on every call).
#
# Cache key: the linux-source package version + this script + the fragment.
# Nothing is rebuilt while the key is unchanged. The tree is built where it
# stays (objtool records absolute paths: a renamed tree rebuilds itself
# whole at the next `make` there); the kimage is assembled in a temporary
# directory and renamed into place last, with the key inside, so an
# interrupted build never counts as cached. One build at a time (flock).
#
# Environment: SQCQ_CACHE (default /var/cache/virtio-sqcq), DEBUG_JOBS
# (make -j, default: number of CPUs), DEBUG_NICE (nice level, default 10).
# Prints the kimage directory on stdout; progress and timing on stderr.
# --print-abi: only print the ABI the cached kernel has (exit 1 if none).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/apt.sh
. "$here/../lib/apt.sh"

DK=$SQCQ_CACHE/debug-kernel
FRAG=$here/debug.config
JOBS=${DEBUG_JOBS:-$(nproc)}
NICE=${DEBUG_NICE:-10}
# Kernel parameters for the VM runs (tests/vm/run.sh appends them): kept in a
# file of their own, copied into the kimage on every call, so that changing
# them needs no rebuild.
CMDLINE=$here/cmdline

log() { echo "debug-kernel: $*" >&2; }
die() {
	log "error: $*"
	exit 2
}

if [ "${1:-}" = --print-abi ]; then
	[ -s "$DK/abi" ] && [ -f "$SQCQ_CACHE/kimage/$(cat "$DK/abi")/kver" ] || exit 1
	cat "$DK/abi"
	exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [--print-abi]"
[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get)"

# ---- build dependencies (install, or update the lists and retry) ------------
BUILD_PKGS=(make gcc bc bison flex libelf-dev libssl-dev dwarves kmod cpio xz-utils
	dpkg tar util-linux perl)
install_deps() {
	local missing=() p
	for p in "${BUILD_PKGS[@]}"; do
		dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null |
			grep -x installed >/dev/null || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	local inst=(apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0)
	{ "${inst[@]}" "${missing[@]}" ||
		{ apt-get update -q && "${inst[@]}" "${missing[@]}"; }; } </dev/null >&2 ||
		die "cannot install ${missing[*]}"
}

# ---- the source package ------------------------------------------------------
# source_version: the newest linux-source-6.1 of bookworm and its security
# updates, from the project's private package lists.
source_version() {
	local s v
	sqcq_apt_update_cached || die "apt update failed"
	for s in bookworm bookworm-security; do
		v=$(sqcq_apt_candidate "$s" linux-source-6.1)
		[ -z "$v" ] || echo "$v"
	done | sort -V | tail -n 1
}

# fetch_source VERSION: the source tarball of that version, downloaded once
# into $DK/src/; prints its path.
fetch_source() {
	local ver=$1 dir=$DK/src tar tmp deb
	tar=$dir/linux-source-$ver.tar.xz
	if [ -f "$tar" ]; then
		echo "$tar"
		return 0
	fi
	mkdir -p "$dir"
	tmp=$(mktemp -d "$dir/.tmp.XXXXXX")
	log "downloading linux-source-6.1=$ver"
	(cd "$tmp" && sqcq_apt download -q "linux-source-6.1=$ver" 2>&1) |
		{ grep -v 'unsandboxed as root' >&2 || true; }
	deb=$(find "$tmp" -name 'linux-source-6.1_*.deb' | head -n 1)
	[ -n "$deb" ] || die "download of linux-source-6.1=$ver failed"
	dpkg-deb --fsys-tarfile "$deb" |
		tar -x -O -f - ./usr/src/linux-source-6.1.tar.xz >"$tmp/src.tar.xz" ||
		die "no linux-source-6.1.tar.xz in $deb"
	mv "$tmp/src.tar.xz" "$tar"
	rm -rf "$tmp"
	# Older versions are of no further use.
	find "$dir" -maxdepth 1 -name 'linux-source-*.tar.xz' ! -name "${tar##*/}" -delete
	echo "$tar"
}

# ---- configuration -----------------------------------------------------------
# check_config CONFIG: every line of the fragment holds in CONFIG; prints the
# ones that do not.
check_config() {
	awk '
		FNR == NR {
			if (/^CONFIG_[A-Za-z0-9_]+=/) { n = $0; sub(/=.*/, "", n); have[n] = $0 }
			next
		}
		/^CONFIG_[A-Za-z0-9_]+=/ {
			n = $0; sub(/=.*/, "", n)
			if (have[n] != $0) printf "want %s, have %s\n", $0, (n in have) ? have[n] : "unset"
		}
		/^# CONFIG_[A-Za-z0-9_]+ is not set/ {
			n = $2
			if (n in have) printf "want %s unset, have %s\n", n, have[n]
		}' "$1" "$FRAG"
}

# install_cmdline KIMAGE: the kernel parameters of tests/debug/cmdline (one
# or more lines, # comments) as one line in KIMAGE/cmdline.
install_cmdline() {
	local want
	want=$(sed 's/#.*//' "$CMDLINE" | xargs)
	[ "$want" = "$(cat "$1/cmdline" 2>/dev/null)" ] && return 0
	echo "$want" >"$1/cmdline.tmp.$$"
	mv -f "$1/cmdline.tmp.$$" "$1/cmdline"
}

# ---- main --------------------------------------------------------------------
install_deps
mkdir -p "$DK" "$SQCQ_CACHE/kimage"
exec 9>"$DK/.lock"
flock -w 7200 9 || die "another build holds $DK/.lock"

ver=$(source_version)
[ -n "$ver" ] || die "no linux-source-6.1 in the package lists"
key=$({ echo "$ver"; sha256sum <"$0"; sha256sum <"$FRAG"; } | sha256sum | cut -c1-16)
tree=$DK/tree

if [ -s "$DK/abi" ]; then
	abi=$(cat "$DK/abi")
	kimage=$SQCQ_CACHE/kimage/$abi
	if [ "$(cat "$tree/.sqcq-key" 2>/dev/null)" = "$key" ] && [ -f "$kimage/kver" ] &&
		[ "$(cat "$kimage/key" 2>/dev/null)" = "$key" ]; then
		log "cached: $abi (key $key)"
		install_cmdline "$kimage"
		echo "$kimage"
		exit 0
	fi
fi

t0=$(date +%s)
tarball=$(fetch_source "$ver")
for old in "$DK"/.tmp.*; do [ -e "$old" ] && rm -rf "$old"; done
tmp=$(mktemp -d "$DK/.tmp.$key.XXXXXX")
# shellcheck disable=SC2064 # expand now
trap "rm -rf '$tmp'" EXIT
log "unpacking linux-source-6.1 $ver"
# Trees of other keys (and half-built ones) go; so does the link to it.
rm -f "$DK/build"
rm -rf "$tree" "$DK"/tree-*
mkdir -p "$tree"
tar -x -f "$tarball" -C "$tree" --strip-components=1

mk() { nice -n "$NICE" make -C "$tree" -j"$JOBS" "$@"; }
log "configuring (defconfig + kvm_guest.config + ${FRAG##*/})"
mk -s defconfig >&2
cat "$tree/kernel/configs/kvm_guest.config" "$FRAG" >>"$tree/.config"
mk -s olddefconfig >"$tmp/config.log" 2>&1 || { cat "$tmp/config.log" >&2; die "olddefconfig failed"; }
bad=$(check_config "$tree/.config")
[ -z "$bad" ] || die "the fragment does not hold after olddefconfig:
$bad"

log "building with make -j$JOBS (nice $NICE)"
t1=$(date +%s)
mk KBUILD_BUILD_TIMESTAMP="linux-source $ver" KBUILD_BUILD_USER=sqcq \
	KBUILD_BUILD_HOST=debug bzImage modules >"$tmp/build.log" 2>&1 || {
	cp "$tmp/build.log" "$DK/build-failed.log"
	tail -n 40 "$tmp/build.log" >&2
	die "kernel build failed (log: $DK/build-failed.log)"
}
t2=$(date +%s)
log "built in $((t2 - t1))s"
kver=$(cat "$tree/include/config/kernel.release")
abi=${kver%-amd64}
[ "$abi-amd64" = "$kver" ] || die "kernel release '$kver' does not end in -amd64"

echo "$key" >"$tree/.sqcq-key"
mkdir -p "$tmp/kimage"
make -C "$tree" -s INSTALL_MOD_PATH="$tmp/kimage" modules_install >&2
ln -sfn "$tree" "$tmp/kimage/lib/modules/$kver/build"
rm -f "$tmp/kimage/lib/modules/$kver/source"
cp "$tree/arch/x86/boot/bzImage" "$tmp/kimage/vmlinuz"
cp "$tree/.config" "$tmp/kimage/config"
install_cmdline "$tmp/kimage"
echo "$key" >"$tmp/kimage/key"
echo "$kver" >"$tmp/kimage/kver"
chmod 755 "$tmp/kimage"

# Swap the kimage in: the old one (another key) aside first, then removed.
kimage=$SQCQ_CACHE/kimage/$abi
if [ -e "$kimage" ]; then
	mv -T "$kimage" "$tmp/old-kimage"
fi
mv -T "$tmp/kimage" "$kimage"
ln -sfn tree "$DK/build.tmp"
mv -T "$DK/build.tmp" "$DK/build"
echo "$abi" >"$DK/abi.tmp" && mv -f "$DK/abi.tmp" "$DK/abi"
rm -rf "$tmp"
trap - EXIT
log "installed $kimage ($(du -sh "$tree" | cut -f1) tree); total $(($(date +%s) - t0))s," \
	"of which make $((t2 - t1))s"
echo "$kimage"
