#!/bin/bash
# tests/fuzz/run.sh [--kernel ID] [--seed S] [--seconds N] [--timeout S]
#                   [--ko FILE] [--threads N] [--hang S]
#
# Stage "fuzz": an adversarial fuzzer against the host module.  Compiles
# tests/fuzz/fuzz.c here (gcc -Wall -Wextra -Werror, into out/tools/), boots
# the test VM (tests/vm/run.sh) on kernel ID (default 6.1; the stage runs
# it with --kernel debug, the sanitizer kernel) and runs tests/fuzz/inside.sh
# there: the module is loaded, an LIO target is built on rd_mcp ramdisks,
# and the fuzzer plays a malicious VMM and guest for N seconds in total
# (default 120) in rounds of random length, some of them SIGKILLed at a
# random point, while a second process unlinks and relinks LUNs under it.
# At the end the module must unload (no leaked reference), the MAP_PRIVATE
# file the fuzzer used as guest memory must be unchanged and the zero page
# still zero; the rig fails the run on a dirty kernel log (WARNING, BUG,
# KASAN, UBSAN, lockup, hung task, ...).
#
# Everything random comes from the seed (default: from the clock), printed
# first as "fuzz seed: S"; every FAIL line carries it.  Replay a failure
# with the same --seed, --seconds and --kernel (tests/fuzz/README.md).
#
# The module comes from out/<abi>/host/ (tests/matrix.sh ID builds it) or
# --ko.  --timeout: the whole VM's limit (default: N + 600 s; debug:
# 3 N + 900 s).  --hang: seconds one fuzzer operation may take before it
# counts as a hang (default 90; debug: 240).
# Prints PASS:/FAIL: lines; exit status 0 when all passed.
set -euo pipefail

# shellcheck source=tests/lib/stage.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/stage.sh"
id=6.1 ko="" seed="" seconds=120 timeout_s="" threads=4 hang=""
stage_opt() {
	case "$1" in
	--seed) seed=$2; STAGE_SHIFT=2 ;;
	--seconds) seconds=$2; STAGE_SHIFT=2 ;;
	--threads) threads=$2; STAGE_SHIFT=2 ;;
	--hang) hang=$2; STAGE_SHIFT=2 ;;
	*) return 1 ;;
	esac
}
stage_init fuzz "kernel ko timeout" "$@"
if [ -z "$seed" ]; then
	seed=$(( ($(date +%s%N) / 1000 + $$) % 1000000000 ))
fi
for v in "$seed" "$seconds" "$threads" ${hang:+"$hang"}; do
	[[ "$v" =~ ^[0-9]+$ ]] || { echo "FAIL: fuzz options (not a number: '$v'; seed $seed)"; exit 2; }
done
vmargs=()
if [ "$id" = debug ]; then
	# The sanitizer kernel: its ELF vmlinux does not start under QEMU's
	# PVH loader (seen with the first build), the compressed image does;
	# KASAN and lockdep under TCG make every step several times slower.
	vmargs+=(--bzimage)
	hang=${hang:-240}
	timeout_s=${timeout_s:-$((seconds * 3 + 900))}
fi
hang=${hang:-90}
[ -n "$timeout_s" ] || timeout_s=$((seconds + 600))
replay="tests/fuzz/run.sh --kernel $id --seed $seed --seconds $seconds"
echo "fuzz seed: $seed (replay: $replay)"

STAGE_NOTE="seed $seed"
stage_module host

mkdir -p out/tools
if gcc -O2 -g -Wall -Wextra -Werror -pthread -o out/tools/fuzz tests/fuzz/fuzz.c; then
	echo "PASS: fuzz builds"
else
	echo "FAIL: fuzz builds (seed $seed)"
	exit 1
fi

# The rig's own FAIL lines (kernel log, timeout, boot) get the seed too.
set +e
tests/vm/run.sh --kernel "$id" "${vmargs[@]}" --smp 2 --mem 1536 --timeout "$timeout_s" \
	-- tests/fuzz/inside.sh "$ko" "$ROOT/out/tools/fuzz" "$seed" "$seconds" \
	"$id" "$threads" "$hang" 2>&1 |
	sed -u -e "/^FAIL: /{/seed [0-9]/!s|\$| [fuzz seed $seed; replay: $replay]|}"
st=("${PIPESTATUS[@]}")
set -e
rc=${st[0]}
if [ "$rc" = 0 ]; then
	echo "PASS: fuzz kernel-$id (seed $seed, $seconds s)"
else
	echo "FAIL: fuzz kernel-$id (status $rc; seed $seed; replay: $replay)"
fi
exit "$rc"
