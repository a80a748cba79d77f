# shellcheck shell=bash
# The kernel matrix, by id. Each id maps to a Debian suite; the
# ABI (`uname -r` without "-amd64") is resolved from that suite's
# linux-headers-amd64 metapackage, so a new point release is picked up by
# itself.
#
#   . tests/lib/kernels.sh
#   sqcq_kernel_ids                 # all ids, oldest first
#   sqcq_kernel_suite <id>          # Debian suite
#   sqcq_kernel_abi <id>            # e.g. 6.1.0-57 (needs the private apt lists)
#   sqcq_kernel_needs_chroot <id>   # 0 when its kbuild cannot run on bookworm
#   sqcq_kernel_is_local <id>       # 0 for a kernel built here (debug)
#   sqcq_kernel_builder <id>        # the script that builds a local kernel

_sqcq_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/lib/apt.sh
. "$_sqcq_here/apt.sh"

# A flavour other than amd64 (Debian's rt: PREEMPT_RT) is part of the id
# and of the ABI: 6.1-rt -> 6.1.0-57-rt, so that <abi>-amd64 is still the
# kernel release (6.1.0-57-rt-amd64) and the package names follow
# (linux-headers-6.1.0-57-rt-amd64, linux-image-...-rt-amd64-unsigned).
# id           suite               chroot  flavour
SQCQ_KERNELS="
5.10         bullseye            -       -
6.1          bookworm-security   -       -
6.1-rt       bookworm-security   -       rt
6.12-bpo     bookworm-backports  -       -
6.12         trixie              trixie  -
7.2          sid                 sid     -
"
# Kernels the VM tests boot by default: the oldest fully supported one and the
# newest (read by the scripts that source this file).
# shellcheck disable=SC2034
SQCQ_VM_KERNELS="6.1 7.2"

# Kernels built on this machine instead of downloaded, as "id script": not
# in sqcq_kernel_ids (the build matrix does not build them unless named);
# their ABI is what the script last built (it prints its kimage directory;
# <abi> is the last component; the kernel release is <abi>-amd64 as with
# Debian's kernels).
#   debug  the sanitizer kernel (KASAN, lockdep, kmemleak, ...) of the
#          `debug` stage, from Debian's linux-source-6.1
SQCQ_LOCAL_KERNELS="
debug        tests/debug/build-kernel.sh
"

sqcq_kernel_is_local() {
	[ -n "$1" ] && echo "$SQCQ_LOCAL_KERNELS" | awk -v id="$1" '$1 == id { f = 1 } END { exit !f }'
}

sqcq_kernel_builder() {
	echo "$SQCQ_LOCAL_KERNELS" | awk -v id="$1" '$1 == id { print $2 }'
}

sqcq_kernel_ids() { echo "$SQCQ_KERNELS" | awk 'NF { print $1 }'; }

sqcq_kernel_field() {
	echo "$SQCQ_KERNELS" | awk -v id="$1" -v f="$2" '$1 == id { print $f }'
}

sqcq_kernel_suite() { sqcq_kernel_field "$1" 2; }

sqcq_kernel_chroot() {
	local c
	c=$(sqcq_kernel_field "$1" 3)
	[ "$c" = "-" ] || echo "$c"
}

sqcq_kernel_needs_chroot() { [ -n "$(sqcq_kernel_chroot "$1")" ]; }

# Resolve an id (or an ABI given directly) to the ABI string.  The answer
# is cached next to the package lists and recomputed only after they were
# refreshed (apt-cache over six suites costs seconds).
sqcq_kernel_abi() {
	local id="$1" suite ver dep cache stamp meta flav
	if sqcq_kernel_is_local "$id"; then
		# Built here: ask the builder what it last installed.
		"$_sqcq_here/../../$(sqcq_kernel_builder "$id")" --print-abi && return 0
		echo "kernel $id is not built yet: run $(sqcq_kernel_builder "$id")" >&2
		return 1
	fi
	suite=$(sqcq_kernel_suite "$id")
	if [ -z "$suite" ]; then
		echo "$id" # already an ABI
		return 0
	fi
	sqcq_apt_update_cached || return 1
	cache="$SQCQ_APT_DIR/abi.$id"
	stamp="$SQCQ_APT_DIR/updated.stamp"
	if [ -s "$cache" ] && [ "$cache" -nt "$stamp" ]; then
		cat "$cache"
		return 0
	fi
	meta=linux-headers-amd64
	flav=$(sqcq_kernel_field "$id" 4)
	[ "${flav:--}" = - ] || meta=linux-headers-$flav-amd64
	ver=$(sqcq_apt_candidate "$suite" "$meta")
	[ -n "$ver" ] || return 1
	dep=$(sqcq_apt show "$meta=$ver" 2>/dev/null |
		sed -n 's/^Depends: *//p' | head -n 1 | tr ',' '\n' |
		sed -n 's/^ *linux-headers-\(.*\)-amd64.*/\1/p' | head -n 1)
	[ -n "$dep" ] || return 1
	echo "$dep" >"$cache.tmp.$$" && mv -f "$cache.tmp.$$" "$cache"
	echo "$dep"
}
