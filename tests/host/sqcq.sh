#!/bin/bash
# tests/host/sqcq.sh [--kernel ID] [--timeout S]
#
# The host side of SQ/CQ (docs/protocol.md), driven from userspace in the L1 VM by
# tests/host/vhost-io.c playing the guest driver: setup accepted, every
# malformed setup rejected with its status, sqcq=0 refusing, >= 100000
# verified I/Os in SQ/CQ mode with kicks + calls per I/O < 0.01 from the
# host's debugfs counters, idle -> sleep -> kick wakes, the client killed
# while polled (tests/host/sqcq-inside.sh runs in the VM).
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
. tests/lib/kernels.sh

id=6.1 timeout_s=900
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
ko=$(sqcq_host_ko "$id" sqcq) || { echo "$ko"; exit 1; }
mkdir -p out/tools
if gcc -O2 -Wall -Wextra -Werror -o out/tools/vhost-io tests/host/vhost-io.c; then
	echo "PASS: sqcq vhost-io-builds"
else
	echo "FAIL: sqcq vhost-io-builds"
	exit 1
fi
exec tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
	-- tests/host/sqcq-inside.sh "$ko" "$ROOT/out/tools/vhost-io"
