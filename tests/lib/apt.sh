# shellcheck shell=bash
# Private apt configuration that sees every Debian suite the project builds
# and tests against, without touching the machine's own apt setup.
#
#   . tests/lib/apt.sh
#   sqcq_apt update                         # refresh the private lists (cached)
#   sqcq_apt download <pkg>=<ver> ...       # into the current directory
#   sqcq_apt_candidate <suite> <pkg>        # version that suite offers
#   sqcq_install <pkg> ...                  # this machine's packages (apt-get)
#
# Everything lives under $SQCQ_CACHE (default /var/cache/virtio-sqcq),
# never in the repository.

: "${SQCQ_CACHE:=/var/cache/virtio-sqcq}"
: "${SQCQ_MIRROR:=http://deb.debian.org/debian}"
: "${SQCQ_SECURITY_MIRROR:=http://deb.debian.org/debian-security}"
SQCQ_APT_DIR="$SQCQ_CACHE/apt"
export SQCQ_CACHE SQCQ_MIRROR SQCQ_SECURITY_MIRROR SQCQ_APT_DIR

sqcq_apt_setup() {
	local d="$SQCQ_APT_DIR"
	mkdir -p "$d/lists/partial" "$d/archives/partial" "$d/etc/preferences.d" \
		"$d/etc/apt.conf.d" "$d/etc/trusted.gpg.d"
	# sid is signed by the keys of the newest releases; trust whatever the
	# machine ships plus the archive keyring.
	cat >"$d/etc/sources.list" <<EOS
deb [arch=amd64] $SQCQ_MIRROR bullseye main
deb [arch=amd64] $SQCQ_MIRROR bookworm main
deb [arch=amd64] $SQCQ_SECURITY_MIRROR bookworm-security main
deb [arch=amd64] $SQCQ_MIRROR bookworm-backports main
deb [arch=amd64] $SQCQ_MIRROR trixie main
deb [arch=amd64] $SQCQ_MIRROR sid main
EOS
	mkdir -p "$d/etc/sources.list.d"
}

sqcq_apt() {
	sqcq_apt_setup
	local d="$SQCQ_APT_DIR"
	local cmd="$1"
	shift
	local opts=(
		-o "Dir::Etc=$d/etc"
		-o "Dir::Etc::SourceList=$d/etc/sources.list"
		-o "Dir::Etc::SourceParts=$d/etc/sources.list.d"
		-o "Dir::Etc::Preferences=$d/etc/preferences"
		-o "Dir::Etc::PreferencesParts=$d/etc/preferences.d"
		-o "Dir::Etc::Parts=$d/etc/apt.conf.d"
		-o "Dir::Etc::Trusted=/etc/apt/trusted.gpg"
		-o "Dir::Etc::TrustedParts=/usr/share/keyrings"
		-o "Dir::State=$d/state"
		-o "Dir::State::Lists=$d/lists"
		-o "Dir::State::status=$d/state/status"
		-o "Dir::Cache=$d/cache"
		-o "Dir::Cache::Archives=$d/archives"
		-o "APT::Architecture=amd64"
		-o "APT::Architectures=amd64"
		-o "Acquire::Languages=none"
		-o "Acquire::Retries=3"
		-o "Acquire::Check-Valid-Until=false"
		-o "APT::Sandbox::User=root"
	)
	mkdir -p "$d/state" "$d/cache"
	[ -f "$d/state/status" ] || : >"$d/state/status"
	# apt reads /etc/apt/apt.conf.d before any -o: a private APT_CONFIG keeps
	# the machine's parts out (e.g. docker-clean, which turns the binary
	# package cache off and makes every apt-cache call re-parse all lists).
	if [ ! -s "$d/apt.conf" ]; then
		# Written aside and renamed: concurrent runs never read half a file.
		cat >"$d/apt.conf.$$" <<EOC
Dir::Etc::Parts "$d/etc/apt.conf.d";
Dir::Cache "$d/cache";
Dir::Cache::pkgcache "$d/cache/pkgcache.bin";
Dir::Cache::srcpkgcache "$d/cache/srcpkgcache.bin";
EOC
		mv -f "$d/apt.conf.$$" "$d/apt.conf"
	fi
	case "$cmd" in
	update | download | install | source)
		APT_CONFIG="$d/apt.conf" apt-get "${opts[@]}" "$cmd" "$@" ;;
	*) APT_CONFIG="$d/apt.conf" apt-cache "${opts[@]}" "$cmd" "$@" ;;
	esac
}

# Refresh the private package lists at most once per SQCQ_APT_MAX_AGE minutes
# (default 12 hours), so repeated runs do not hit the mirror.
sqcq_apt_update_cached() {
	local stamp="$SQCQ_APT_DIR/updated.stamp"
	local age="${SQCQ_APT_MAX_AGE:-720}"
	if [ -f "$stamp" ] && [ -z "$(find "$stamp" -mmin +"$age" 2>/dev/null)" ]; then
		return 0
	fi
	sqcq_apt update -qq >/dev/null || return 1
	touch "$stamp"
}

# sqcq_apt_candidate SUITE PKG: the newest version of PKG in SUITE, or empty.
sqcq_apt_candidate() {
	local suite="$1" pkg="$2"
	sqcq_apt madison "$pkg" 2>/dev/null |
		awk -F'|' -v s="$suite" '{gsub(/ /,"",$2); n = split($3, w, " ");
			for (i = 1; i <= n; i++) if (w[i] == s "/main") print $2}' |
		sort -V | tail -n 1
}

# sqcq_install PKG...: install those of PKG that are not installed yet, with
# this machine's own apt.  A fresh machine may have empty or stale package
# lists: when the install fails, the lists are updated once and the install
# repeated.  apt's output goes to stderr.  Status 0 when all are installed.
sqcq_install() {
	local p missing=()
	# Wait up to 10 minutes for a dpkg lock another apt holds (a freshly
	# booted cloud machine runs its own updates), instead of failing.
	local lock=(-o DPkg::Lock::Timeout=600)
	local inst=(apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "${lock[@]}"
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	for p in "$@"; do
		dpkg-query -W -f='${db:Status-Status}\n' "$p" 2>/dev/null |
			grep -x installed >/dev/null || missing+=("$p")
	done
	[ ${#missing[@]} -gt 0 ] || return 0
	echo "installing ${missing[*]}" >&2
	{
		DEBIAN_FRONTEND=noninteractive "${inst[@]}" "${missing[@]}" ||
			{ apt-get update -q "${lock[@]}" &&
			  DEBIAN_FRONTEND=noninteractive "${inst[@]}" "${missing[@]}"; }
	} </dev/null >&2
}
