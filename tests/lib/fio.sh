# shellcheck shell=bash
# A lean fio for the test VMs.
#
#   . tests/lib/fio.sh
#   sqcq_fio_setup || exit 1      # Debian's fio installed, SQCQ_FIO exported
#   SQCQ_FIO=$(sqcq_fio_lean)     # path of the fio binary the VMs run
#
# Debian's fio links 64 shared libraries (Ceph's, GlusterFS's, RDMA's,
# PMEM's, ICU, Boost, ...) for engines the tests never use.  Loading them
# is what a run of fio costs in a slow VM: 11-18 s before the first I/O on
# the sanitizer kernel (tests/debug/), where the guest run starts fio some
# twenty times, against 3.6 s for a build with only libaio, zlib and libc
# (2026-12-03).  So the same upstream release Debian 12 ships (3.33) is
# built once from Debian's source tarball, checked against the hash below,
# with the optional engines off, and cached under $SQCQ_CACHE.  The tests
# use its libaio and io_uring engines and verify=crc32c, all built in.
#
# If it cannot be built (no network, a compiler error), sqcq_fio_lean says
# why on stderr and prints "fio": the tests then run Debian's, slower but
# the same checks.

# shellcheck source=tests/lib/apt.sh
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

SQCQ_FIO_VERSION=3.33
SQCQ_FIO_SHA256=d2410e13e0f379d061d077cc5ae325835bb7c6186aa7bafc1df954cbc9b014fc
SQCQ_FIO_CONFIGURE=(--disable-numa --disable-rdma --disable-rados --disable-rbd
	--disable-http --disable-gfapi --disable-libnfs --disable-pmem --disable-native
	--disable-xnvme --disable-libzbc --disable-tcmalloc --disable-dfs)

sqcq_fio_lean() {
	local dir=$SQCQ_CACHE/fio-lean/$SQCQ_FIO_VERSION tmp tar url engines
	if [ -x "$dir/fio" ]; then
		echo "$dir/fio"
		return 0
	fi
	tar=fio_$SQCQ_FIO_VERSION.orig.tar.gz
	url=$SQCQ_MIRROR/pool/main/f/fio/$tar
	mkdir -p "$SQCQ_CACHE/fio-lean"
	tmp=$(mktemp -d "$SQCQ_CACHE/fio-lean/build.XXXXXX")
	# Built aside and renamed into place: a half build never counts, and
	# two runs at once each build their own.
	if sqcq_install curl make libaio-dev zlib1g-dev >&2 &&
		curl -fsSL --retry 3 -o "$tmp/$tar" "$url" &&
		echo "$SQCQ_FIO_SHA256  $tmp/$tar" | sha256sum -c --quiet - &&
		tar -xzf "$tmp/$tar" -C "$tmp" &&
		(cd "$tmp/fio-$SQCQ_FIO_VERSION" &&
			./configure "${SQCQ_FIO_CONFIGURE[@]}" &&
			make -j"$(nproc)") >"$tmp/build.log" 2>&1 &&
		engines=$("$tmp/fio-$SQCQ_FIO_VERSION/fio" --enghelp) &&
		grep -qw libaio <<<"$engines" && grep -qw io_uring <<<"$engines"; then
		mkdir -p "$tmp/out"
		cp "$tmp/fio-$SQCQ_FIO_VERSION/fio" "$tmp/out/fio"
		if mv -T "$tmp/out" "$dir" 2>/dev/null || [ -x "$dir/fio" ]; then
			rm -rf "$tmp"
			echo "$dir/fio"
			return 0
		fi
	fi
	echo "fio.sh: no lean fio $SQCQ_FIO_VERSION (from $url; log: $tmp/build.log): the tests run Debian's fio" >&2
	tail -n 5 "$tmp/build.log" >&2 2>/dev/null
	echo fio
}

# sqcq_fio_setup: Debian's fio on this machine (the fallback, and what the
# VMs' root offers), then SQCQ_FIO, the lean one, exported for the VMs
# (tests/vm/run.sh passes SQCQ_* on, nested guests too).  Fails only when
# Debian's cannot be installed.
sqcq_fio_setup() {
	sqcq_install fio || return 1
	SQCQ_FIO=$(sqcq_fio_lean)
	export SQCQ_FIO
}
