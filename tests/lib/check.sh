# shellcheck shell=bash
# Result lines and waiting, for the test scripts (sourced).  The caller
# sets PREFIX, the words after "PASS:"/"FAIL:" that name its test group.
# Bash builtins only: nested guests pay seconds for every process start.
fails=0

pass() { echo "PASS: $PREFIX $*"; }
fail() { echo "FAIL: $PREFIX $*"; fails=$((fails + 1)); }
# check NAME CMD...: PASS when CMD succeeds, else FAIL and status 1.
check() {
	local name=$1
	shift
	if "$@"; then
		pass "$name"
	else
		fail "$name"
		return 1
	fi
}
# nap SECONDS: sleep without starting a process (a read that times out on
# a pipe whose writing end this shell holds itself).
exec {nap_fd}<> <(:)
nap() { read -r -t "$1" -u "$nap_fd" _; }
# wait_for SECONDS CMD...: run CMD every 0.2 s until it succeeds, for at
# most SECONDS; its status.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	while :; do
		"$@" && return 0
		[ "$SECONDS" -lt "$end" ] || return 1
		nap 0.2
	done
}
