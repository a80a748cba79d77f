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
# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
id=6.1 timeout_s=900
stage_init sqcq "kernel timeout" "$@"
stage_module host
mkdir -p out/tools
if gcc -O2 -Wall -Wextra -Werror -o out/tools/vhost-io tests/host/vhost-io.c; then
	echo "PASS: sqcq vhost-io-builds"
else
	echo "FAIL: sqcq vhost-io-builds"
	exit 1
fi
exec tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
	-- tests/host/sqcq-inside.sh "$ko" "$ROOT/out/tools/vhost-io"
