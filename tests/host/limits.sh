#!/bin/bash
# tests/host/limits.sh [--kernel ID] [--timeout S] [--ko FILE]
#
# What one owner (a VMM) can make the host module hold
# (tests/host/limits-inside.sh runs in the VM): the worker's allocations
# for requests in flight are charged to the owner's memory cgroup (vhost-io
# in a cgroup of its own against a LUN that answers after 3 s),
# max_inflight bounds a device's requests, and kthread workers are bounded
# per owner (the host client's worker checks).  The host stage runs it on
# 6.1, whose workers are kthreads; on 7.2 they are threads of the owner,
# charged and counted by the kernel itself.
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail
# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
id=6.1 timeout_s=300 ko=""
# --ko: another build of the module (the check that failed before a fix).
stage_init limits "kernel timeout ko" "$@"
stage_module host
mkdir -p out/tools
gcc -O2 -Wall -Wextra -Werror -o out/tools/vhost-io tests/host/vhost-io.c ||
	{ echo "FAIL: limits vhost-io-builds"; exit 1; }
stage_host_client out/tools/host-client ||
	{ echo "FAIL: limits client-builds"; exit 1; }
exec tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
	-- tests/host/limits-inside.sh "$ko" "$ROOT/out/tools/vhost-io" \
	"$ROOT/out/tools/host-client"
