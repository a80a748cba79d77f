#!/bin/bash
# tests/matrix.sh [ID...] - the build matrix (README, tests/lib/kernels.sh).
#
# Builds both modules (host/vhost_scsi_sqcq.ko, guest/virtio_scsi_sqcq.ko)
# with W=1 and -Werror against the Debian headers of every kernel id of
# tests/lib/kernels.sh (default: all of them), each in its own copy of the
# source tree under out/<abi>/, where the VM tests pick the .ko files up.
#
# Per kernel it
#   1. resolves the id to an ABI (e.g. 6.1 -> 6.1.0-57; the answer is kept
#      in $SQCQ_CACHE/matrix/abi.<id> until the package lists are refreshed),
#   2. makes sure $SQCQ_CACHE/kheaders/<abi>/ holds the unpacked
#      linux-headers-<abi>-{amd64,common} and linux-kbuild-* packages, with
#      the absolute /usr/src paths of the -amd64 Makefile pointed at the
#      unpacked tree; <abi>/build is the directory to `make -C`. (sid's
#      headers also depend on linux-base-<abi>-amd64, with System.map and a
#      copy of .config; building needs none of it.)
#   3. for kernels whose kbuild tools need a newer libc/compiler than
#      bookworm's (trixie, sid), makes sure a debootstrap chroot
#      $SQCQ_CACHE/chroots/<suite>/ exists, holding the compiler named by
#      the headers (installed into an existing chroot when sid moves on)
#      and that suite's pahole (7.2 refuses modules whose BTF it cannot
#      match; a pahole other than the kernel's is noted on stderr),
#   4. copies the sources (git's tracked and untracked-not-ignored files) to
#      out/<abi>/, runs `make -C <headers> M=out/<abi> W=1 KCFLAGS=-Werror
#      modules` (in the chroot where needed; with CC=gcc-12 where the
#      headers name a compiler bookworm lacks: 5.10's gcc-10) and checks
#      that both .ko files exist, that their vermagic names this kernel and
#      that the build log holds no warning at all (-Werror covers only the
#      compiler, not modpost, objtool or pahole).
#
# A kernel built on this machine (tests/lib/kernels.sh, SQCQ_LOCAL_KERNELS:
# `debug`, the sanitizer kernel) is built only when named (tests/matrix.sh
# debug): its script builds it unless cached, and its build tree stands in
# for the headers ($SQCQ_CACHE/kheaders/<abi>/build links to it).
#
# Output: one line per kernel on stdout,
#     PASS: build <id> (<abi>) <seconds>s
#     FAIL: build <id> (<abi>) <reason>      followed by the log's last lines
# and exit status 0 only when every kernel passed. Full logs: out/logs/.
# Progress and the cache size go to stderr.
#
# Everything downloaded is cached under $SQCQ_CACHE (default
# /var/cache/virtio-sqcq): package lists (tests/lib/apt.sh), kheaders/,
# chroots/. Cached entries only ever appear by renaming a finished temporary
# directory, so an interrupted run never leaves a half tree that later counts
# as cached. Needs root (apt-get, debootstrap, chroot, mount); runs
# unattended on a fresh Debian 12 machine, installing what it needs. One run
# at a time per cache and per out/ (flock).
#
# Environment:
#   MATRIX_FETCH_ONLY=1  only download and prepare (headers, chroots); the
#                        per-kernel line then reads "PASS: fetch ...".
#   MATRIX_SRC=DIR       build the tree in DIR instead of this repository
#                        (for testing the matrix itself); out/ stays here.
#   MATRIX_MODULES="a.ko b.ko"  modules expected, relative to the tree
#                        (default: the two of this project).
#   MATRIX_JOBS=N        make -j (default: number of CPUs).
#   SQCQ_CACHE, SQCQ_MIRROR  see tests/lib/apt.sh.
#
# Bind mounts: a chroot build runs in its own mount namespace
# (unshare --mount), where the headers cache (read-only), the build
# directory and /proc are mounted into the chroot. They are unmounted by a
# trap there and, whatever happens (even SIGKILL), vanish with the namespace;
# the rest of the machine never sees them, so no rm -rf can walk into the
# cache through them. safe_rm below additionally refuses to delete anything
# that has a mount point below it.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tests/lib/kernels.sh
. "$ROOT/tests/lib/kernels.sh"

SRC=${MATRIX_SRC:-$ROOT}
SRC=$(cd "$SRC" && pwd)
OUT=$ROOT/out
LOGS=$OUT/logs
KH=$SQCQ_CACHE/kheaders
CHROOTS=$SQCQ_CACHE/chroots
JOBS=${MATRIX_JOBS:-$(nproc)}
FETCH_ONLY=${MATRIX_FETCH_ONLY:-0}
read -r -a MODULES <<<"${MATRIX_MODULES:-host/vhost_scsi_sqcq.ko guest/virtio_scsi_sqcq.ko}"
LOG_TAIL=40

# Host packages: debootstrap for the chroots, pahole for BTF of the
# bookworm-backports kernel, gcc-12 for the bookworm-native trees (and 5.10,
# whose gcc-10 bookworm lacks), kmod for modinfo, libelf1 for objtool and
# resolve_btfids, perl (not just perl-base: W=1 runs scripts/kernel-doc,
# which needs Pod::Usage), util-linux for unshare/flock.
HOST_PKGS=(debootstrap pahole make gcc-12 libc6-dev libelf1 perl kmod dpkg tar util-linux)
# Packages of a build chroot besides the compiler (added per kernel).
CHROOT_PKGS=(make libc6-dev libelf1t64 pahole libssl3t64 kmod perl)

log() { printf 'matrix: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 2
}
now() { date +%s; }

# ---------------------------------------------------------------- helpers --

# mounted_below PATH: true when a mount point (in this mount namespace) is
# PATH itself or lies below it.
mounted_below() {
	awk -v p="$1" '{
		m = $5; gsub(/\\040/, " ", m)
		if (m == p || index(m, p "/") == 1) found = 1
	} END { exit !found }' /proc/self/mountinfo
}

# safe_rm PATH: rm -rf, but never through a mount point.
safe_rm() {
	local p
	p=$(realpath -m -- "$1")
	[ -e "$p" ] || [ -L "$p" ] || return 0
	case "$p" in / | "$SQCQ_CACHE" | "$ROOT" | "$OUT") die "refusing to delete $p" ;; esac
	if mounted_below "$p"; then
		die "refusing to delete $p: something is mounted there"
	fi
	rm -rf --one-file-system -- "$p"
}

# tail_log FILE: the last lines of a log, indented so that they can never be
# mistaken for a summary line.
tail_log() {
	[ -f "$1" ] || return 0
	echo "  --- last $LOG_TAIL lines of ${1#"$ROOT"/} ---"
	tail -n "$LOG_TAIL" "$1" | sed 's/^/  | /'
}

install_host_deps() {
	sqcq_install "${HOST_PKGS[@]}" 2>"$LOGS/host-deps.log" || {
		tail_log "$LOGS/host-deps.log" >&2
		die "could not install ${HOST_PKGS[*]}"
	}
}

# abi_of ID: the ABI of a kernel id. Resolving reads the big private package
# lists (~10 s per id), so the answer is cached until the lists are
# refreshed.
abi_of() {
	local id=$1 f abi
	if sqcq_kernel_is_local "$id"; then
		# A kernel built here (tests/lib/kernels.sh): build it unless
		# cached (the builder says when it is), then take its ABI.
		"$ROOT/$(sqcq_kernel_builder "$id")" >/dev/null || return 1
		sqcq_kernel_abi "$id"
		return
	fi
	f=$SQCQ_CACHE/matrix/abi.$id
	sqcq_apt_update_cached || return 1
	if [ -s "$f" ] && [ "$f" -nt "$SQCQ_APT_DIR/updated.stamp" ]; then
		cat "$f"
		return 0
	fi
	abi=$(sqcq_kernel_abi "$id") && [ -n "$abi" ] || return 1
	mkdir -p "${f%/*}"
	printf '%s\n' "$abi" >"$f.tmp.$$"
	mv -f "$f.tmp.$$" "$f"
	echo "$abi"
}

# kconfig ABI NAME: the value of CONFIG_NAME in that kernel's auto.conf.
kconfig() {
	sed -n "s/^CONFIG_$2=//p" "$KH/$1/build/include/config/auto.conf" |
		tr -d '"'
}

# kernel_cc ABI: the compiler the kernel was built with (as named in its
# headers), e.g. gcc-12 or x86_64-linux-gnu-gcc-16.
kernel_cc() { kconfig "$1" CC_VERSION_TEXT | awk '{ print $1 }'; }

# ------------------------------------------------------------ the headers --

# fix_paths TREE FINAL: the -amd64 Makefile includes
# /usr/src/linux-headers-<abi>-common/Makefile (and 7.x sets
# KBUILD_OUTPUT=/usr/src/...); point those at FINAL, the name TREE has (or
# will have once renamed into place). Redone when the cache was moved.
fix_paths() {
	local mk=$1/build/Makefile want
	want=$(sed "s|/usr/src/|$2/usr/src/|g" "$mk.orig")
	[ "$want" = "$(cat "$mk")" ] && return 0
	printf '%s\n' "$want" >"$mk.tmp.$$"
	mv -f "$mk.tmp.$$" "$mk"
}

# download DIR PKG...: apt-get download into DIR (all or nothing: apt
# resolves every name before it downloads anything).
download() {
	local dir=$1
	shift
	echo "downloading $*"
	(cd "$dir" && sqcq_apt download -q -o APT::Sandbox::User=root "$@")
}

# fetch_headers ABI: make sure $KH/ABI is a complete, usable headers tree.
# A tree is complete when it holds .sqcq-complete, which is written before
# the temporary directory is renamed into place.
fetch_headers() {
	local abi=$1 dest=$KH/$1 tmp hdr ver deps kbuild common pkgs p deb
	if [ -f "$dest/.sqcq-complete" ]; then
		fix_paths "$dest" "$dest"
		return 0
	fi
	log "$abi: downloading headers"
	mkdir -p "$KH"
	# Leftovers of an interrupted run (or of an older tool): start over.
	for p in "$KH/.tmp.$abi".* "$dest"; do safe_rm "$p"; done
	tmp=$(mktemp -d "$KH/.tmp.$abi.XXXXXX")
	chmod 755 "$tmp"
	# Gone once renamed into place; otherwise (failure) remove it.
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "safe_rm '$tmp'" EXIT

	hdr=linux-headers-$abi-amd64
	# One apt-cache call (each one parses ~80 MB of package lists): every
	# version of the headers package with its Depends; take the newest.
	read -r ver deps < <(sqcq_apt show "$hdr" 2>/dev/null | awk '
		/^Version: / { v = $2 }
		/^Depends: / { d = substr($0, 10) }
		/^$/ && v != "" { print v, d; v = d = "" }
		END { if (v != "") print v, d }' | sort -V | tail -n 1) || true
	[ -n "${ver:-}" ] || {
		echo "no package $hdr"
		return 1
	}
	kbuild=$(awk '{ print $1 }' <<<"${deps//[,|]/$'\n'}" |
		grep -m1 '^linux-kbuild-') || {
		echo "$hdr=$ver depends on no linux-kbuild-*"
		return 1
	}
	# Its common part: linux-headers-<abi>-common, or -common-<flavour>
	# (6.1.0-57-rt-amd64 needs linux-headers-6.1.0-57-common-rt).
	common=$(awk '{ print $1 }' <<<"${deps//[,|]/$'\n'}" |
		grep -m1 '^linux-headers-.*-common') || {
		echo "$hdr=$ver depends on no linux-headers-*-common*"
		return 1
	}
	pkgs=("$hdr=$ver" "$common=$ver")
	mkdir -p "$tmp/debs"
	# The kbuild package of the same source version, else the newest.
	if download "$tmp/debs" "${pkgs[@]}" "$kbuild=$ver"; then
		pkgs+=("$kbuild=$ver")
	elif download "$tmp/debs" "${pkgs[@]}" "$kbuild"; then
		pkgs+=("$kbuild")
	else
		echo "cannot download ${pkgs[*]} $kbuild"
		return 1
	fi
	for p in "${pkgs[@]}"; do
		deb=$(find "$tmp/debs" -name "${p%%=*}_*.deb" | head -n 1)
		[ -n "$deb" ] || {
			echo "download of $p failed"
			return 1
		}
		dpkg-deb -x "$deb" "$tmp" || return 1
	done
	rm -rf "$tmp/debs"

	ln -s "usr/src/$hdr" "$tmp/build"
	[ -f "$tmp/build/Makefile" ] || {
		echo "$hdr has no Makefile"
		return 1
	}
	cp -p "$tmp/build/Makefile" "$tmp/build/Makefile.orig"
	fix_paths "$tmp" "$dest"
	[ -f "$tmp/build/include/config/auto.conf" ] || {
		echo "$hdr has no include/config/auto.conf"
		return 1
	}
	printf '%s\n' "${pkgs[@]}" >"$tmp/.sqcq-complete"
	mv -T "$tmp" "$dest"
	du -sh "$dest"
}

# ------------------------------------------------------------ the chroots --

# new_mount_ns CMD...: run CMD in a new, private mount namespace: what it
# mounts is seen by nobody else and disappears with it. Where / is no mount
# point (this script itself running in a chroot) its propagation cannot be
# made private; the namespace is then only new, and mounts below a shared
# mount may show outside while CMD runs (in_chroot's trap removes them).
NS_PROPAGATION=
new_mount_ns() {
	if [ -z "$NS_PROPAGATION" ]; then
		NS_PROPAGATION=private
		unshare --mount --propagation private true 2>/dev/null || {
			NS_PROPAGATION=unchanged
			log "note: / is no mount point here; mounts may show outside"
		}
	fi
	unshare --mount --propagation "$NS_PROPAGATION" -- "$@"
}

# in_chroot ROOTDIR CMD...: run CMD in the chroot, in a private mount
# namespace where /proc, the headers cache (read-only) and, when BIND is
# set, the directory $BIND are mounted at the same paths as outside.
in_chroot() {
	local r=$1
	shift
	# shellcheck disable=SC2016 # expanded by the inner shell
	new_mount_ns /bin/bash -euo pipefail -c '
		r=$1 kh=$2 bind=$3
		shift 3
		mounted=()
		cleanup() {
			local i
			for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
				umount "${mounted[i]}" 2>/dev/null ||
					umount -l "${mounted[i]}"
			done
		}
		trap cleanup EXIT
		mnt() { mkdir -p "${@: -1}"; mount "$@"; mounted+=("${@: -1}"); }
		mnt -t proc proc "$r/proc"
		if [ -d "$kh" ]; then
			mnt --bind "$kh" "$r$kh"
			mount -o remount,bind,ro "$r$kh"
		fi
		[ -z "$bind" ] || mnt --bind "$bind" "$r$bind"
		chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
			HOME=/root LC_ALL=C DEBIAN_FRONTEND=noninteractive "$@"
	' in_chroot "$r" "$KH" "${BIND:-}" "$@"
}

# slim_chroot ROOTDIR: drop apt's package lists, caches and downloaded
# packages (~200 MB); apt-get update runs before anything is installed.
slim_chroot() {
	find "$1/var/lib/apt/lists" "$1/var/cache/apt" -xdev -type f \
		\( -name '*_*' -o -name '*.bin' -o -name '*.deb' \) -delete
}

# ensure_chroot SUITE CC: make sure $CHROOTS/SUITE exists and has the
# compiler CC (as the kernel's headers name it, e.g.
# x86_64-linux-gnu-gcc-16) and CHROOT_PKGS. A sid chroot outlives sid's
# compiler moves, so what is missing is installed into an existing chroot.
ensure_chroot() {
	local suite=$1 cc=$2 r=$CHROOTS/$1 gccpkg tmp p pkgs missing apt
	gccpkg=${cc##*-linux-gnu-}
	case "$gccpkg" in gcc-[0-9]*) ;; *) gccpkg=gcc ;; esac
	pkgs=("${CHROOT_PKGS[@]}" "$gccpkg")
	if [ ! -f "$r/.sqcq-complete" ]; then
		log "$suite: creating chroot (debootstrap, a few minutes)"
		mkdir -p "$CHROOTS"
		for p in "$CHROOTS/.tmp.$suite".* "$r"; do safe_rm "$p"; done
		tmp=$(mktemp -d "$CHROOTS/.tmp.$suite.XXXXXX")
		chmod 755 "$tmp"
		# shellcheck disable=SC2064 # expand now: tmp is local
		trap "safe_rm '$tmp'" EXIT
		# In its own mount namespace, so that whatever debootstrap mounts
		# inside the target goes away with it even if it is killed.
		if ! new_mount_ns debootstrap --variant=minbase --include="$(IFS=,; echo "${pkgs[*]}")" \
			"$suite" "$tmp" "$SQCQ_MIRROR"; then
			[ ! -f "$tmp/debootstrap/debootstrap.log" ] ||
				tail -n "$LOG_TAIL" "$tmp/debootstrap/debootstrap.log"
			echo "debootstrap $suite failed"
			return 1
		fi
		slim_chroot "$tmp"
		date -u +%FT%TZ >"$tmp/.sqcq-complete"
		mv -T "$tmp" "$r"
		du -sh "$r"
	fi
	# shellcheck disable=SC2016 # expanded in the chroot
	mapfile -t missing < <(in_chroot "$r" sh -c 'for p; do
		dpkg-query -W -f="\${db:Status-Status}\n" "$p" 2>/dev/null |
			grep -x installed >/dev/null || echo "$p"; done' sh "${pkgs[@]}")
	if [ ${#missing[@]} -gt 0 ]; then
		log "$suite: installing into the chroot: ${missing[*]}"
		# sid's Release may be past its Valid-Until on a mirror snapshot.
		apt=(apt-get -q -o Acquire::Check-Valid-Until=false
			-o Acquire::Check-Date=false -o APT::Sandbox::User=root)
		if ! { in_chroot "$r" "${apt[@]}" update &&
			in_chroot "$r" "${apt[@]}" install -y --no-install-recommends "${missing[@]}"; }; then
			echo "cannot install ${missing[*]} into the $suite chroot"
			return 1
		fi
		slim_chroot "$r"
	fi
	in_chroot "$r" sh -c "command -v '$cc'" >/dev/null || {
		echo "$cc is not in the $suite chroot"
		return 1
	}
}

# --------------------------------------------------------------- building --

# stage DIR: a fresh copy of the source tree (git's tracked and untracked,
# not ignored, files; everything but out/ and .git when it is no checkout).
stage() {
	local dir=$1
	safe_rm "$dir"
	mkdir -p "$dir"
	(
		cd "$SRC"
		if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
			git ls-files -z -co --exclude-standard
		else
			find . \( -path ./out -o -path ./.git \) -prune -o \
				\( -type f -o -type l \) -print0
		fi |
			while IFS= read -r -d '' f; do
				# tracked but deleted files are listed too
				if [ -e "$f" ] || [ -L "$f" ]; then
					case "$f" in out/* | ./out/*) ;; *) printf '%s\0' "$f" ;; esac
				fi
			done |
			tar -c --null -T - -f -
	) | tar -x -C "$dir" -f -
}

# check_build ABI DIR: the build's products are all right, else print why
# not.
check_build() {
	local abi=$1 dir=$2 m want got
	want=$(sed -n 's/.*UTS_RELEASE "\(.*\)".*/\1/p' \
		"$KH/$abi/build/include/generated/utsrelease.h")
	[ "$want" = "$abi-amd64" ] || {
		echo "headers say UTS_RELEASE '$want', expected '$abi-amd64'"
		return 1
	}
	for m in "${MODULES[@]}"; do
		[ -f "$dir/$m" ] || {
			echo "no $m"
			return 1
		}
		got=$(modinfo -F vermagic "$dir/$m" 2>/dev/null | awk '{ print $1 }')
		[ "$got" = "$want" ] || {
			echo "$m has vermagic '$got', expected '$want'"
			return 1
		}
	done
}

# warnings LOG: the warnings in a build log. -Werror covers the compiler;
# modpost, objtool, pahole and the like only warn.
warnings() { grep -iE '(^|[^a-z])warning[: ]' "$1" || true; }

# check_pahole ABI VERSION: note (not fail) when the pahole that writes the
# modules' BTF is not the one the kernel was built with: 7.x refuses modules
# whose BTF it cannot reconcile with its own (no MODULE_ALLOW_BTF_MISMATCH).
check_pahole() {
	local want have btf
	want=$(kconfig "$1" PAHOLE_VERSION)
	have=$(awk -F'[v.]' '{ print $2 * 100 + $3 }' <<<"$2")
	btf=$(kconfig "$1" DEBUG_INFO_BTF_MODULES)
	echo "# pahole $2 ($have), kernel built with ${want:-none}," \
		"module BTF: ${btf:-n}"
	if [ "$btf" = y ] && [ "$have" != "$want" ]; then
		log "$1: note: pahole $have builds the BTF, the kernel used $want"
	fi
}

# build_one ID ABI SUITE: build the tree for one kernel (SUITE: the chroot
# to build in, or empty), all output on stdout; on failure the last line
# says why.
build_one() {
	local id=$1 abi=$2 suite=$3 dir=$OUT/$2 cc args rc=0
	stage "$dir"
	[ -f "$dir/Kbuild" ] || {
		echo "no Kbuild in $SRC"
		return 1
	}
	cc=$(kernel_cc "$abi")
	# Frames of at most 1 KiB: what kernels built with FRAME_WARN=1024
	# (32-bit, many embedded configs) demand with -Werror.
	args=(-C "$KH/$abi/build" M="$dir" W=1 "KCFLAGS=-Werror -Wframe-larger-than=1024"
		SQCQ_TEST_MODULES=m
		-j"$JOBS")
	if [ -z "$suite" ] && ! command -v "$cc" >/dev/null; then
		# bullseye's 5.10 names gcc-10, which bookworm lacks; its headers
		# build fine with bookworm's gcc-12.
		args+=(CC=gcc-12)
	fi
	echo "# kernel $id ($abi), compiler in headers: $cc"
	echo "# make ${args[*]} modules${suite:+  (in the $suite chroot)}"
	if [ -n "$suite" ]; then
		check_pahole "$abi" "$(in_chroot "$CHROOTS/$suite" pahole --version)"
		BIND=$dir in_chroot "$CHROOTS/$suite" make "${args[@]}" modules 2>&1 || rc=$?
	else
		check_pahole "$abi" "$(pahole --version)"
		LC_ALL=C make "${args[@]}" modules 2>&1 || rc=$?
	fi
	[ "$rc" -eq 0 ] || {
		echo "make failed (exit $rc)"
		return 1
	}
	check_build "$abi" "$dir"
}

# prepare ABI SUITE [ID]: download the headers and create the chroot. A
# kernel built here (ID local) has its tree as the headers: $KH/ABI/build
# links to it.
prepare() {
	local abi=$1 suite=$2 id=${3:-} tree
	if [ -n "$id" ] && sqcq_kernel_is_local "$id"; then
		tree=$(readlink -f "$SQCQ_CACHE/kimage/$abi/lib/modules/$abi-amd64/build")
		[ -f "$tree/Module.symvers" ] || {
			echo "no built tree for $id ($abi) at $tree"
			return 1
		}
		mkdir -p "$KH/$abi"
		ln -sfn "$tree" "$KH/$abi/build"
		return 0
	fi
	fetch_headers "$abi"
	[ -z "$suite" ] || ensure_chroot "$suite" "$(kernel_cc "$abi")"
}

# step LOG FUNCTION ARGS...: run FUNCTION in a new shell, output to LOG.
# A new process, because bash ignores `set -e` inside any function that is
# called as a condition (if, ||), subshells included.
step() {
	local logf=$1
	shift
	bash "$ROOT/tests/matrix.sh" __step "$@" >"$logf" 2>&1 </dev/null
}

# ------------------------------------------------------------------- main --

main() {
	local ids=("$@") id abi suite t0 t1 logf what n failed=0 start
	start=$(now)
	what=build
	[ "$FETCH_ONLY" != 1 ] || what=fetch
	[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, debootstrap, chroot, mount)"
	[ ${#ids[@]} -gt 0 ] || mapfile -t ids < <(sqcq_kernel_ids)
	mkdir -p "$LOGS" "$SQCQ_CACHE"
	# One matrix run at a time per cache and per out/ (two runs with
	# different caches still share out/<abi>).
	exec 8>"$OUT/.matrix.lock" 9>"$SQCQ_CACHE/matrix.lock"
	flock -w 3600 8 || die "another tests/matrix.sh holds $OUT/.matrix.lock"
	flock -w 3600 9 || die "another tests/matrix.sh holds $SQCQ_CACHE/matrix.lock"
	install_host_deps

	for id in "${ids[@]}"; do
		t0=$(now)
		suite=$(sqcq_kernel_chroot "$id")
		if ! abi=$(abi_of "$id"); then
			echo "FAIL: $what $id (?) cannot resolve its ABI (unknown id, or no package lists)"
			failed=1
			continue
		fi
		logf=$LOGS/$id.prepare.log
		if ! step "$logf" prepare "$abi" "$suite" "$id"; then
			echo "FAIL: $what $id ($abi) preparing: $(tail -n 1 "$logf")"
			tail_log "$logf"
			failed=1
			continue
		fi
		t1=$(now)
		log "$id ($abi): prepared in $((t1 - t0))s"
		if [ "$FETCH_ONLY" = 1 ]; then
			echo "PASS: fetch $id ($abi) $((t1 - t0))s"
			continue
		fi
		logf=$LOGS/$id.build.log
		log "$id ($abi): building${suite:+ in the $suite chroot}"
		if step "$logf" build_one "$id" "$abi" "$suite"; then
			n=$(warnings "$logf" | wc -l)
			if [ "$n" -eq 0 ]; then
				echo "PASS: build $id ($abi) $(($(now) - t1))s"
			else
				echo "FAIL: build $id ($abi) $n warning(s) in the build log"
				# || true: under pipefail a grep that head cut off
				# (SIGPIPE) would end the script, and the kernels
				# after this one would not be built.
				{ warnings "$logf" | head -n "$LOG_TAIL" | sed 's/^/  | /'; } || true
				failed=1
			fi
		else
			echo "FAIL: build $id ($abi) $(tail -n 1 "$logf")"
			tail_log "$logf"
			failed=1
		fi
	done

	log "total $(($(now) - start))s; cache $(du -sh "$SQCQ_CACHE" 2>/dev/null | cut -f1) in $SQCQ_CACHE"
	return "$failed"
}

if [ "${1:-}" = __step ]; then
	case "${2:-}" in prepare | build_one) ;; *) die "unknown step ${2:-}" ;; esac
	shift
	"$@"
else
	main "$@"
fi
