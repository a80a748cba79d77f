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
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
# shellcheck source=tests/lib/kernels.sh
. tests/lib/kernels.sh

id=6.1 timeout_s=300 ko_arg=""
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) id=$2; shift 2 ;;
	--timeout) timeout_s=$2; shift 2 ;;
	--ko) ko_arg=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
done
ko=$(sqcq_host_ko "$id" limits) || { echo "$ko"; exit 1; }
mkdir -p out/tools
gcc -O2 -Wall -Wextra -Werror -o out/tools/vhost-io tests/host/vhost-io.c ||
	{ echo "FAIL: limits vhost-io-builds"; exit 1; }
gcc -O2 -Wall -Wextra -Werror -pthread -o out/tools/host-client tests/host/client.c ||
	{ echo "FAIL: limits client-builds"; exit 1; }
# --ko: another build of the module (the check that failed before a fix).
[ -z "$ko_arg" ] || ko=$(cd "$(dirname "$ko_arg")" && pwd)/$(basename "$ko_arg")
exec tests/vm/run.sh --kernel "$id" --smp 2 --mem 1024 --timeout "$timeout_s" \
	-- tests/host/limits-inside.sh "$ko" "$ROOT/out/tools/vhost-io" \
	"$ROOT/out/tools/host-client"
