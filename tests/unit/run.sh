#!/bin/bash
# Userspace unit tests of common/sqcq_uapi.h.
#
#   tests/unit/run.sh            build and run everything (~20-40 s, 2 cores)
#
# Prints one line per test, "PASS: unit <name>" or "FAIL: unit <name>",
# then "unit: N passed, N failed", and exits non-zero if anything failed.
# Installs its build dependencies itself (Debian, root) when they are missing.
# Build output goes to $SQCQ_UNIT_BUILD (default tests/unit/build, ignored).
#
# Tests:
#   header_*            the header compiles standalone with -Wall -Wextra
#                       -Werror (and -Wpedantic, -Wconversion)
#   <name>, <name>.asan single-threaded tests of every helper (test_uapi.c),
#                       plain and with -fsanitize=address,undefined
#   stress_{sq,cq}[.asan]
#                       two-thread NEED_WAKEUP handshake stress, 200k items
#                       per direction, with the header's own helpers
#   census_*            the barrier census (test_barriers.c): each helper's
#                       loads, stores and barriers, in order, as the protocol
#                       says; barrier_mutant_line<N>: the census built against
#                       a copy of the header without barrier line N fails
#   mutant_<m>_{sq,cq}  the same stress built with a broken handshake
#                       (-DSQCQ_TEST_BROKEN_<M>); PASS means the stress test
#                       DETECTED the lost wakeup, i.e. it can fail
set -u

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${SQCQ_UNIT_BUILD:-$here/build}
items=${SQCQ_STRESS_ITEMS:-200000}
mutant_items=${SQCQ_MUTANT_ITEMS:-400000}

npass=0
nfail=0
result() {	# result PASS|FAIL name [note]
	echo "$1: unit $2${3:+ ($3)}"
	if [ "$1" = PASS ]; then npass=$((npass + 1)); else nfail=$((nfail + 1)); fi
}

ensure_deps() {
	# shellcheck source=tests/lib/apt.sh
	. "$here/../lib/apt.sh"
	sqcq_install gcc linux-libc-dev libc6-dev coreutils 2>/dev/null
}

# Does gcc link -fsanitize=address,undefined programs here?
san_works() {
	printf 'int main(void){return 0;}\n' >"$out/san.c"
	gcc -fsanitize=address,undefined "$out/san.c" -o "$out/san" 2>/dev/null &&
		"$out/san"
}

ensure_deps
mkdir -p "$out" || exit 1
t_start=$(date +%s%N)

CFLAGS=(-std=gnu11 -O2 -g -Wall -Wextra -Werror -pthread)
# shellcheck disable=SC2054 # the commas belong to one option
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all
	-fno-omit-frame-pointer)
if ! san_works; then
	apt-get install -y -qq libasan8 libubsan1 >/dev/null 2>&1 || true
fi

# ---- the header on its own -------------------------------------------
printf '#include "sqcq_uapi.h"\nint sqcq_header_only(void);\nint sqcq_header_only(void) { return 0; }\n' \
	>"$out/hdr.c"
ok=1
WARN=(-Wall -Wextra -Werror -Wshadow -Wconversion -Wsign-conversion
	-Wstrict-prototypes -Wmissing-prototypes -Wcast-qual)
for std in gnu11 gnu17; do
	gcc -std=$std "${WARN[@]}" -Wpedantic -I"$root/common" \
		-c "$out/hdr.c" -o "$out/hdr.o" ||
		{ echo "  header fails to compile with -std=$std -Wpedantic"; ok=0; }
done
# gnu89 is what kernels before 5.18 (Debian's 5.10) build with.
for std in gnu89 gnu99; do
	gcc -std=$std "${WARN[@]}" -I"$root/common" \
		-c "$out/hdr.c" -o "$out/hdr.o" ||
		{ echo "  header fails to compile with -std=$std"; ok=0; }
done
if [ $ok = 1 ]; then result PASS header_compile; else result FAIL header_compile; fi
# Strict ISO C (no _DEFAULT_SOURCE): the header must not need glibc's
# endian.h extensions.
if gcc -std=c11 -Wall -Wextra -Werror -I"$root/common" -c "$out/hdr.c" \
	-o "$out/hdr.o"; then
	result PASS header_std_c11
else
	result FAIL header_std_c11
fi
if gcc -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -I"$root/common" \
	-c "$out/hdr.c" -o "$out/hdr.o"; then
	result PASS header_std_c11_default_source
else
	result FAIL header_std_c11_default_source
fi

# ---- builds -------------------------------------------------------------
build() {	# build output source [extra flags...]
	local o=$1 src=$2
	shift 2
	gcc "${CFLAGS[@]}" "$@" "$here/$src" -o "$out/$o"
}
# Two at a time (2 cores); the sanitizer builds at -O1 (-O2 + ASan is slow
# to compile and buys nothing here).
builds=(
	"selftest selftest.c"
	"test_uapi test_uapi.c"
	"test_uapi_asan test_uapi.c -O1 ${SAN[*]}"
	"stress test_stress.c"
	"stress_asan test_stress.c -O1 ${SAN[*]}"
)
mutants="RECHECK PRODUCER_MB CONSUMER_MB"
for m in $mutants NOFENCE; do
	builds+=("stress_$m test_stress.c -DSQCQ_TEST_BROKEN_$m")
done
builds_ok=1
running=0
for b in "${builds[@]}"; do
	# shellcheck disable=SC2086 # word splitting intended
	(build $b >"$out/${b%% *}.build.log" 2>&1) &
	running=$((running + 1))
	if [ $running -ge 2 ]; then wait -n || builds_ok=0; running=$((running - 1)); fi
done
while [ $running -gt 0 ]; do wait -n || builds_ok=0; running=$((running - 1)); done
for b in "${builds[@]}"; do
	[ -s "$out/${b%% *}.build.log" ] && cat "$out/${b%% *}.build.log"
done
if [ $builds_ok = 1 ]; then result PASS build; else result FAIL build; fi

# Run a test binary that prints its own PASS/FAIL lines; count them.
run_counted() {
	local log=$out/run.log rc
	timeout 300 "$@" >"$log" 2>&1
	rc=$?
	while IFS= read -r line; do
		case "$line" in
		"PASS: unit "*) npass=$((npass + 1)); echo "$line" ;;
		"FAIL: unit "*) nfail=$((nfail + 1)); echo "$line" ;;
		*) echo "$line" ;;
		esac
	done <"$log"
	if [ $rc -ne 0 ] && ! grep -q '^FAIL: unit ' "$log"; then
		result FAIL "$(basename "$1")" "exit $rc"
	fi
}

# ---- the framework reports failures --------------------------------------
if [ -x "$out/selftest" ]; then
	"$out/selftest" >"$out/selftest.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ] && grep -qx 'PASS: unit selftest_pass' "$out/selftest.log" &&
		grep -qx 'FAIL: unit selftest_fail' "$out/selftest.log" &&
		grep -q 'left 0x2, right 0x3' "$out/selftest.log"; then
		result PASS framework_selftest
	else
		result FAIL framework_selftest "exit $rc"
		sed 's/^/    | /' "$out/selftest.log"
	fi
else
	result FAIL framework_selftest "not built"
fi

# ---- single-threaded tests ---------------------------------------------
if [ -x "$out/test_uapi" ]; then run_counted "$out/test_uapi"; else result FAIL test_uapi "not built"; fi
if [ -x "$out/test_uapi_asan" ]; then run_counted "$out/test_uapi_asan" asan; else result FAIL test_uapi.asan "not built"; fi

# ---- handshake stress -----------------------------------------------------
for dir in sq cq; do
	if [ -x "$out/stress" ]; then run_counted "$out/stress" $dir "$items"; else result FAIL stress_$dir "not built"; fi
done
for dir in sq cq; do
	if [ -x "$out/stress_asan" ]; then run_counted "$out/stress_asan" $dir "$items" asan; else result FAIL stress_$dir.asan "not built"; fi
done

# ---- mutants: the stress test must catch a broken handshake --------------
# Exit status 3 from the stress binary means "LOST WAKEUP detected".
for m in $mutants; do
	lm=${m,,}
	for dir in sq cq; do
		name=mutant_${lm}_$dir
		if [ ! -x "$out/stress_$m" ]; then
			result FAIL "$name" "not built"
			continue
		fi
		timeout 120 "$out/stress_$m" $dir "$mutant_items" >"$out/$name.log" 2>&1
		rc=$?
		grep -v -e '^PASS: ' -e '^FAIL: ' "$out/$name.log"
		if [ $rc -eq 3 ]; then
			result PASS "$name" "lost wakeup detected, as it must be"
		else
			result FAIL "$name" "broken handshake NOT detected (exit $rc)"
		fi
	done
done

# ---- barrier census: every barrier of the header, in its place ----------
# test_barriers.c records each helper's loads, stores and barriers and
# compares them with the protocol.  Built against the real header, it must
# pass; against a copy with one barrier line removed, for every barrier
# line the header has, it must fail.  And the kernel's primitives must be
# the virt_*mb() barriers (a !SMP guest keeps them).
census_build() {	# census_build OUTPUT HEADER
	gcc "${CFLAGS[@]}" -I"$here" -DSQCQ_UAPI_HEADER="\"$2\"" \
		"$here/test_barriers.c" -o "$1"
}
if census_build "$out/census" "$root/common/sqcq_uapi.h" >"$out/census.build.log" 2>&1; then
	run_counted "$out/census"
else
	cat "$out/census.build.log"
	result FAIL census "not built"
fi
barrier_lines=$(grep -nE '^\s*sqcq_[rw]?mb\(\);\s*$' "$root/common/sqcq_uapi.h" | cut -d: -f1)
if [ "$(echo "$barrier_lines" | grep -c .)" -ge 5 ]; then
	result PASS census_finds_barriers "lines $(echo $barrier_lines)"
else
	result FAIL census_finds_barriers "found '$(echo $barrier_lines)', the header has at least 5"
fi
for n in $barrier_lines; do
	d=$out/barrier-mutant-$n
	mkdir -p "$d"
	sed "${n}d" "$root/common/sqcq_uapi.h" >"$d/sqcq_uapi.h"
	what=$(sed -n "${n}s/^[[:space:]]*//p" "$root/common/sqcq_uapi.h")
	if ! census_build "$d/census" "$d/sqcq_uapi.h" >"$d/build.log" 2>&1; then
		result FAIL "barrier_mutant_line$n" "not built: $(tail -1 "$d/build.log")"
	elif "$d/census" >"$d/run.log" 2>&1; then
		result FAIL "barrier_mutant_line$n" "$what removed and the census still passed"
	else
		result PASS "barrier_mutant_line$n" "$what removed: the census failed, as it must"
	fi
done
for b in mb wmb rmb; do
	if grep -qE "^#define sqcq_$b\(\)[[:space:]]+virt_$b\(\)" "$root/common/sqcq_uapi.h"; then
		result PASS "kernel_sqcq_$b"
	else
		result FAIL "kernel_sqcq_$b" "sqcq_$b() is not virt_$b() in the kernel"
	fi
done

# Informational: both barriers deleted and nothing forced.  Real x86
# store->load reordering is possible but its window is tens of
# nanoseconds, so this may or may not bite in one run; never counted.
if [ -x "$out/stress_NOFENCE" ]; then
	timeout 120 "$out/stress_NOFENCE" sq 100000 >"$out/nofence.log" 2>&1
	rc=$?
	if [ $rc -eq 3 ]; then
		echo "INFO: unit nofence_sq: hardware store->load reordering caused a lost wakeup in this run (barriers deleted, nothing forced)"
	else
		echo "INFO: unit nofence_sq: no lost wakeup observed in this run with both barriers deleted and nothing forced (hardware reordering window too small to hit reliably; not counted)"
	fi
fi

ms=$((($(date +%s%N) - t_start) / 1000000))
echo "unit: took $((ms / 1000)).$((ms % 1000 / 100)) s"
echo "unit: $npass passed, $nfail failed"
[ "$nfail" -eq 0 ]
