#!/bin/bash
# tests/smoke/run.sh [--kernel ID]: the vm stage's smoke tests on one
# kernel (default 6.1), each in a VM of its own: tests/smoke/params.sh
# (both modules' parameters, the ioctl probe) and tests/smoke/load-fail.sh
# (a kernel booted with debugfs=off, loads that fail on purpose).  The
# modules come from out/<abi>/, built here by tests/matrix.sh.
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -u
# shellcheck source=tests/lib/stage.sh
. "$(dirname "$0")/../lib/stage.sh"

id=6.1 ko=""
stage_init vm kernel "$@"
stage_module host
mkdir -p out/tools
gcc -O2 -Wall -Wextra -Werror -o out/tools/ioctl-probe tests/smoke/ioctl-probe.c ||
	{ echo "FAIL: vm $id: ioctl-probe does not build"; exit 1; }
rc=0
tests/vm/run.sh --kernel "$id" --smp 2 --timeout 600 -- \
	tests/smoke/params.sh "$ROOT/out/$abi" "$ROOT/out/tools/ioctl-probe" || rc=1
# debugfs=off, and loads that fail on purpose (a VM of its own: the
# kernel's command line says it).
tests/vm/run.sh --kernel "$id" --smp 2 --timeout 300 --append debugfs=off -- \
	tests/smoke/load-fail.sh "$ROOT/out/$abi" || rc=1
exit $rc
