#!/bin/bash
# scripts/checkpatch.sh: the kernel's checkpatch.pl --strict over the module
# sources (make checkpatch), and its kernel-doc over the headers whose
# functions carry kernel-doc (the handshake helpers, the poll policy, the
# host's cross-file API).  Prints the findings and a summary; exits 1 when
# anything is left beyond the exceptions below.
#
# checkpatch.pl comes from $CHECKPATCH, else from the kernel tree the debug
# stage builds ($SQCQ_CACHE/debug-kernel/tree, tests/debug/build-kernel.sh),
# else from Debian's linux-source-6.1 package (downloaded once into
# $SQCQ_CACHE/checkpatch through the private apt setup of tests/lib/apt.sh).
#
# Exceptions, each for a reason:
#   everywhere
#     LONG_LINE_STRING     log messages stay whole on one line, so that they
#                          can be grepped (the kernel's coding style says so)
#     CAMELCASE            Scsi_Host and _Static_assert are not our names
#     MACRO_ARG_REUSE      iteration and accessor macros whose arguments are
#                          plain variables (sqcq_for_each_polled, compat)
#   common/sqcq_uapi.h     shared with userspace tests and clients, so none
#                          of the kernel-only helpers exist there:
#     BIT_MACRO, PREFER_DEFINED_ATTRIBUTE_MACRO, ARRAY_SIZE, and
#     MEMORY_BARRIER       the lines that define sqcq_mb()/sqcq_wmb()/...;
#                          every use of them carries its pairing comment
#   common/sqcq_compat.h   MACRO_WITH_FLOW_CONTROL, COMPLEX_MACRO:
#                          SQCQ_MAP_QUEUES_DONE is "return" or "return 0",
#                          as ->map_queues returns void or int;
#                          SQCQ_TFO_SUBMIT_TYPE and SQCQ_SHT_MQ_POLL() are
#                          designated initializers of members that older
#                          kernels lack; DEPRECATED_API: kmap_atomic()
#                          stands in for kmap_local_page() on 5.10, which
#                          lacks it (the host's dirty log)
#   common/sqcq_param.h  YIELD: sqcq_poll_give_cpu() yields to the task
#                          that wants the poller's CPU (the target core's
#                          kworker), which is what yield() does; nothing
#                          relies on it for progress (the poller asks for
#                          notifications before it yields)
#   host/sqcq_vhost.h    PRINTK_WITHOUT_KERN_LEVEL: vhost_lifecycle_log()
#                          passes the level as its first argument
#   host/sqcq_host_trace.h, guest/sqcq_guest_trace.h
#                        OPEN_ENDED_LINE, PARENTHESIS_ALIGNMENT: the layout
#                          of TRACE_EVENT() (TP_STRUCT__entry( on a line of
#                          its own, its fields below), as in the kernel's
#                          own include/trace/events/
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
: "${SQCQ_CACHE:=/var/cache/virtio-sqcq}"

find_checkpatch() {
	local t=$SQCQ_CACHE/debug-kernel/tree/scripts/checkpatch.pl dir deb tmp
	[ -n "${CHECKPATCH:-}" ] && { echo "$CHECKPATCH"; return; }
	[ -f "$t" ] && { echo "$t"; return; }
	dir=$SQCQ_CACHE/checkpatch
	t=$(ls "$dir"/linux-source-*/scripts/checkpatch.pl 2>/dev/null | head -n 1)
	[ -n "$t" ] && { echo "$t"; return; }
	# shellcheck source=tests/lib/apt.sh
	. "$root/tests/lib/apt.sh"
	sqcq_apt_update_cached >&2 || return 1
	tmp=$(mktemp -d)
	(cd "$tmp" && sqcq_apt download -q linux-source-6.1 >&2) || { rm -rf "$tmp"; return 1; }
	deb=$(ls "$tmp"/linux-source-6.1_*.deb | head -n 1)
	mkdir -p "$dir" &&
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" --wildcards '*.tar.xz' &&
		tar -xJf "$tmp"/usr/src/linux-source-*.tar.xz -C "$dir" --wildcards \
			'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
			'*/scripts/const_structs.checkpatch' '*/scripts/kernel-doc' >&2
	rm -rf "$tmp"
	ls "$dir"/linux-source-*/scripts/checkpatch.pl 2>/dev/null | head -n 1
}

cp=$(find_checkpatch) && [ -f "$cp" ] || { echo "checkpatch: cannot find or fetch checkpatch.pl" >&2; exit 2; }
command -v perl >/dev/null || { echo "checkpatch: perl is needed" >&2; exit 2; }
cd "$root" || exit 2
base=LONG_LINE_STRING,CAMELCASE,MACRO_ARG_REUSE
run() {	# run IGNORE FILE...
	local ign=$1
	shift
	perl "$cp" --no-tree --strict --terse --show-types --ignore "$ign" -f "$@" |
		grep -v '^total: 0 errors, 0 warnings, 0 checks' | grep -v '^$'
}
out=$(
	run "$base" host/*.c host/sqcq_scsi.h guest/*.c common/sqcq_poll.h common/sqcq_param.c
	run "$base,YIELD" common/sqcq_param.h
	run "$base,BIT_MACRO,PREFER_DEFINED_ATTRIBUTE_MACRO,ARRAY_SIZE,MEMORY_BARRIER" \
		common/sqcq_uapi.h
	run "$base,MACRO_WITH_FLOW_CONTROL,COMPLEX_MACRO,DEPRECATED_API" common/sqcq_compat.h
	run "$base" common/sqcq_vhost_abi.h
	run "$base,PRINTK_WITHOUT_KERN_LEVEL" host/sqcq_vhost.h
	run "$base,OPEN_ENDED_LINE,PARENTHESIS_ALIGNMENT" host/sqcq_host_trace.h \
		guest/sqcq_guest_trace.h
)
n=$(grep -c '^[^ ]*:[0-9]*: ' <<<"$out")
[ -n "$out" ] && echo "$out"
echo "checkpatch --strict ($cp): $n findings beyond the listed exceptions"
kd=$(perl "${cp%/checkpatch.pl}/kernel-doc" -none common/sqcq_uapi.h \
	common/sqcq_poll.h host/sqcq_vhost.h 2>&1 | grep -v 'Sphinx version')
k=$(grep -c . <<<"$kd")
[ -n "$kd" ] && echo "$kd"
echo "kernel-doc: $k warnings"
[ "$n" = 0 ] && [ "$k" = 0 ]
