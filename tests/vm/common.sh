# shellcheck shell=bash
# Shared helpers of the VM test rig (tests/vm/*.sh). Sourced, not run.
#
#   sqcq_vm_install_deps          install qemu, busybox-static, ... (host only)
#   sqcq_vm_fetch_kernel ID|ABI   cached kernel under $SQCQ_CACHE/kimage/<abi>
#   sqcq_vm_initramfs KDIR        cached busybox initramfs for that kernel
#   sqcq_vm_log_problems FILE [EXPECTED]  kernel-log problems found in FILE,
#                                 one a line (less EXPECTED's lines)
#   sqcq_vm_taint_problems N      taint bits other than O and E, as text

_sqcq_vm_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SQCQ_REPO=$(cd "$_sqcq_vm_here/../.." && pwd)
# shellcheck source=tests/lib/kernels.sh
. "$SQCQ_REPO/tests/lib/kernels.sh"
# shellcheck source=tests/lib/kvm.sh
. "$SQCQ_REPO/tests/lib/kvm.sh"

sqcq_die() {
	echo "${0##*/}: $*" >&2
	exit 2
}

sqcq_log() { echo "${0##*/}: $*" >&2; }

# Inside a test VM the root is a read-only 9p share: nothing can be installed
# and the cache is read-only.
sqcq_in_vm() { [ "${SQCQ_IN_VM:-0}" = 1 ]; }

# Host tools the rig needs, as "command:package" pairs.
SQCQ_VM_DEPS="qemu-system-x86_64:qemu-system-x86 cpio:cpio xz:xz-utils
zstd:zstd depmod:kmod lz4:lz4 gzip:gzip timeout:coreutils"

# Install what is missing (idempotent, non-interactive). busybox-static is
# checked by package: a dynamic busybox would not run in the initramfs.
sqcq_vm_install_deps() {
	local pair cmd pkg missing=()
	for pair in $SQCQ_VM_DEPS; do
		cmd=${pair%%:*} pkg=${pair#*:}
		command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
	done
	dpkg-query -W -f='${Status}\n' busybox-static 2>/dev/null |
		grep 'install ok installed' >/dev/null || missing+=(busybox-static)
	[ ${#missing[@]} -eq 0 ] && return 0
	sqcq_in_vm && sqcq_die "missing inside the VM: ${missing[*]}"
	sqcq_install "${missing[@]}" 2>/dev/null ||
		sqcq_die "apt-get install ${missing[*]} failed"
}

# qboot: a minimal BIOS that boots the kernel straight from fw_cfg (Debian's
# qemu-system-data); nested guests use it when present. A QEMU of another
# suite (SQCQ_VM_QEMU) comes with its own (tests/e2e/l1.sh sets both).
: "${SQCQ_VM_QBOOT:=/usr/share/qemu/qboot.rom}"

# The QEMU that run.sh starts, as words (no blanks inside one): the
# machine's qemu-system-x86_64 by default, or e.g. "tests/vm/qemu-chroot.sh
# $SQCQ_CACHE/chroots/qemu-trixie" for trixie's (tests/lib/qemu-chroot.sh).
: "${SQCQ_VM_QEMU:=qemu-system-x86_64}"

# sqcq_vm_kvm_ready: /dev/kvm is usable, after loading the KVM module for this
# CPU if needed (inside a test VM: L1's CPU model has SVM with NPT), with the
# VM that keeps the scheduler's text still (tests/lib/kvm.sh).
sqcq_vm_kvm_ready() { sqcq_kvm_load >/dev/null; }

# The cache directory of a kernel ABI.
sqcq_vm_kdir() { echo "$SQCQ_CACHE/kimage/$1"; }

# sqcq_vm_resolve_abi ID|ABI: an id of tests/lib/kernels.sh or an ABI. Inside
# the VM (no apt lists needed) an ABI whose kernel is cached is taken as is.
sqcq_vm_resolve_abi() {
	local want="$1"
	if [ -f "$(sqcq_vm_kdir "$want")/kver" ]; then
		echo "$want"
		return 0
	fi
	sqcq_in_vm && sqcq_die "kernel $want is not in the cache ($SQCQ_CACHE)"
	if sqcq_kernel_is_local "$want"; then
		sqcq_kernel_abi "$want" || sqcq_die "kernel '$want' is not built"
		return 0
	fi
	# Resolving an id costs seconds of apt-cache; remember the answer until
	# the private apt lists are refreshed (tests/lib/apt.sh, every 12 h).
	local map="$SQCQ_CACHE/kimage/id-$want" stamp="$SQCQ_APT_DIR/updated.stamp"
	sqcq_apt_update_cached || sqcq_die "apt update failed"
	if [ -s "$map" ] && [ "$map" -nt "$stamp" ]; then
		cat "$map"
		return 0
	fi
	local abi
	abi=$(sqcq_kernel_abi "$want") || sqcq_die "cannot resolve kernel '$want' (apt lists?)"
	mkdir -p "$SQCQ_CACHE/kimage"
	echo "$abi" >"$map.tmp" && mv "$map.tmp" "$map"
	echo "$abi"
}

# sqcq_vm_extract_vmlinux VMLINUZ OUT: find the compressed payload inside a
# bzImage (like the kernel's scripts/extract-vmlinux) and decompress it to an
# ELF. Returns non-zero if no known compression yields an ELF.
sqcq_vm_extract_vmlinux() {
	local in="$1" out="$2" sig tool off
	# signature (as a grep -P pattern)      decompressor
	local table='\x28\xb5\x2f\xfd zstd
\xfd\x37\x7a\x58\x5a\x00 xz
\x1f\x8b\x08 gzip
\x02\x21\x4c\x18 lz4'
	while read -r sig tool; do
		# shellcheck disable=SC2013 # one offset a line
		for off in $(LC_ALL=C grep -obUaP "$sig" "$in" 2>/dev/null | cut -d: -f1); do
			tail -c +"$((off + 1))" "$in" | "$tool" -dc 2>/dev/null >"$out" || true
			if [ "$(head -c 4 "$out" | od -An -tx1 | tr -d ' ')" = 7f454c46 ]; then
				return 0
			fi
		done
	done <<<"$table"
	rm -f "$out"
	return 1
}

# sqcq_vm_fetch_kernel ID|ABI: make sure $SQCQ_CACHE/kimage/<abi> holds a
# complete kernel (see fetch-kernel.sh) and print its directory.
sqcq_vm_fetch_kernel() {
	local abi kdir tmp kver pkgs p deb m
	abi=$(sqcq_vm_resolve_abi "$1")
	kdir=$(sqcq_vm_kdir "$abi")
	if [ -f "$kdir/kver" ]; then
		echo "$kdir"
		return 0
	fi
	sqcq_in_vm && sqcq_die "kernel $abi is not in the cache"
	sqcq_kernel_is_local "$1" &&
		sqcq_die "kernel $1 ($abi) is not in the cache: run $(sqcq_kernel_builder "$1")"
	sqcq_vm_install_deps
	sqcq_apt_update_cached || sqcq_die "apt update failed"
	# bookworm and older: one linux-image-*-unsigned package. sid (7.x):
	# split into linux-base (config, modules.*), linux-binary-unsigned
	# (vmlinuz) and linux-modules. The unsigned image avoids shim/sbsign
	# specifics; the kernel and modules are otherwise the same.
	if sqcq_apt show "linux-image-$abi-amd64-unsigned" >/dev/null 2>&1 &&
		! sqcq_apt show "linux-binary-unsigned-$abi-amd64" >/dev/null 2>&1; then
		pkgs=("linux-image-$abi-amd64-unsigned")
	else
		pkgs=("linux-base-$abi-amd64" "linux-binary-unsigned-$abi-amd64"
			"linux-modules-$abi-amd64")
	fi
	mkdir -p "$SQCQ_CACHE/kimage"
	tmp=$(mktemp -d "$SQCQ_CACHE/kimage/.tmp.$abi.XXXXXX")
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" EXIT
	sqcq_log "downloading ${pkgs[*]}"
	mkdir -p "$tmp/debs"
	# apt warns that root downloads unsandboxed into a root-owned dir: noise.
	(cd "$tmp/debs" && sqcq_apt download -q "${pkgs[@]}" 2>&1) |
		{ grep -v 'unsandboxed as root' >&2 || true; }
	for p in "${pkgs[@]}"; do
		deb=$(find "$tmp/debs" -name "${p}_*.deb" | head -n 1)
		[ -n "$deb" ] || sqcq_die "download of $p failed"
		dpkg-deb -x "$deb" "$tmp/root"
	done
	rm -rf "$tmp/debs"
	# Modules live in /lib/modules (bookworm) or /usr/lib/modules (sid).
	for m in "$tmp"/root/lib/modules/* "$tmp"/root/usr/lib/modules/*; do
		[ -d "$m/kernel" ] && kver=${m##*/}
	done
	[ -n "${kver:-}" ] || sqcq_die "no modules tree in ${pkgs[*]}"
	mkdir -p "$tmp/lib/modules"
	if [ -d "$tmp/root/usr/lib/modules/$kver" ]; then
		mv "$tmp/root/usr/lib/modules/$kver" "$tmp/lib/modules/"
	else
		mv "$tmp/root/lib/modules/$kver" "$tmp/lib/modules/"
	fi
	m="$tmp/lib/modules/$kver"
	if [ -f "$tmp/root/boot/vmlinuz-$kver" ]; then
		mv "$tmp/root/boot/vmlinuz-$kver" "$tmp/vmlinuz"
		mv "$tmp/root/boot/config-$kver" "$tmp/config"
	else
		mv "$m/vmlinuz.unsigned" "$tmp/vmlinuz" 2>/dev/null ||
			mv "$m/vmlinuz" "$tmp/vmlinuz"
		cp "$m/config" "$tmp/config"
	fi
	rm -rf "$tmp/root"
	# Debian generates modules.dep in postinst; do it here (kmod reads .ko.xz).
	depmod -b "$tmp" "$kver"
	sqcq_vm_extract_vmlinux "$tmp/vmlinuz" "$tmp/vmlinux" ||
		sqcq_log "warning: could not extract vmlinux from $abi's vmlinuz (will boot vmlinuz)"
	echo "$kver" >"$tmp/kver"
	chmod 755 "$tmp"
	# An incomplete leftover goes; a complete one a concurrent run just made
	# wins (mv -T refuses to replace a non-empty directory).
	[ -f "$kdir/kver" ] || rm -rf "$kdir"
	mv -T "$tmp" "$kdir" 2>/dev/null || { [ -f "$kdir/kver" ] && rm -rf "$tmp"; } ||
		sqcq_die "cannot store $kdir"
	trap - EXIT
	echo "$kdir"
}

# sqcq_vm_module_closure KDIR KVER NAME...: the module files (relative to the
# modules tree) needed to load NAMEs, dependencies first. Built-in modules
# yield nothing.
sqcq_vm_module_closure() {
	local kdir="$1" kver="$2"
	shift 2
	awk -v want="$*" '
		function base(p,   b) { b = p; sub(/.*\//, "", b); sub(/\.ko.*$/, "", b);
			gsub(/-/, "_", b); return b }
		function visit(p,   n, i, d) {
			if (p in seen) return
			seen[p] = 1
			n = split(deps[p], d, " ")
			for (i = n; i >= 1; i--) visit(d[i])
			print p
		}
		{ p = $1; sub(/:$/, "", p); deps[p] = ""; for (i = 2; i <= NF; i++) deps[p] = deps[p] " " $i
		  path[base(p)] = p }
		END { n = split(want, w, " "); for (i = 1; i <= n; i++) {
			m = w[i]; gsub(/-/, "_", m); if (m in path) visit(path[m]) } }
	' "$kdir/lib/modules/$kver/modules.dep"
}

# Modules the initramfs loads to mount the root over virtio-9p, and configfs
# (mounted there too); whatever of them is built in is skipped.
# SQCQ_VM_INITRD_EXTRA adds more (with their dependencies): the busybox
# insmod of an uncompressed module from RAM takes a fraction of what kmod
# needs in a nested guest (tens of seconds for scsi_mod and sd_mod).
SQCQ_VM_INITRD_MODULES="virtio_pci 9pnet_virtio 9p configfs"

# sqcq_vm_initramfs KDIR: print the path of the cached initramfs for that
# kernel, building it if its inputs (busybox, the init scripts, the module
# files) changed. Uncompressed newc cpio: nothing to decompress under TCG.
sqcq_vm_initramfs() {
	local kdir="$1" kver bb mods m key out tmp i=0 f
	kver=$(cat "$kdir/kver")
	bb=/bin/busybox
	# shellcheck disable=SC2086 # a list of names
	mapfile -t mods < <(sqcq_vm_module_closure "$kdir" "$kver" $SQCQ_VM_INITRD_MODULES \
		${SQCQ_VM_INITRD_EXTRA:-})
	key=$( {
		echo "$kver"
		sha256sum "$bb" "$_sqcq_vm_here/initramfs-init.sh" "$_sqcq_vm_here/guest-stage2.sh"
		for m in "${mods[@]}"; do sha256sum "$kdir/lib/modules/$kver/$m"; done
	} | sed "s|$kdir||" | sha256sum | cut -c1-16)
	out="$SQCQ_CACHE/initramfs/$kver-$key.cpio"
	if [ -f "$out" ]; then
		echo "$out"
		return 0
	fi
	if sqcq_in_vm; then
		# Read-only cache in the VM: build a private copy in /tmp.
		out="/tmp/sqcq-initramfs-$kver-$key.cpio"
		[ -f "$out" ] && { echo "$out"; return 0; }
	fi
	file "$bb" 2>/dev/null | grep 'dynamically linked' >/dev/null &&
		sqcq_die "$bb is dynamically linked (install busybox-static)"
	mkdir -p "$(dirname "$out")"
	tmp=$(mktemp -d "$(dirname "$out")/.tmp.XXXXXX")
	mkdir -p "$tmp"/{bin,dev,proc,sys,newroot,lib/sqcq-modules}
	cp "$bb" "$tmp/bin/busybox"
	cp "$_sqcq_vm_here/initramfs-init.sh" "$tmp/init"
	cp "$_sqcq_vm_here/guest-stage2.sh" "$tmp/stage2.sh"
	chmod 755 "$tmp/init" "$tmp/stage2.sh"
	# Busybox insmod cannot read compressed modules: store them plain, in
	# load order.
	for m in "${mods[@]}"; do
		f="$tmp/lib/sqcq-modules/$(printf %02d "$i")-${m##*/}"
		f=${f%.xz}
		f=${f%.zst}
		case "$m" in
		*.xz) xz -dc "$kdir/lib/modules/$kver/$m" >"$f" ;;
		*.zst) zstd -qdc "$kdir/lib/modules/$kver/$m" >"$f" ;;
		*) cp "$kdir/lib/modules/$kver/$m" "$f" ;;
		esac
		i=$((i + 1))
	done
	local part
	part=$(mktemp "$out.XXXXXX")
	(cd "$tmp" && find . -mindepth 1 | LC_ALL=C sort |
		cpio -o -H newc -R 0:0 --quiet >"$part")
	chmod 644 "$part"
	mv "$part" "$out"
	# Older initramfs images of this kernel (QEMU reads it at start, so a
	# running VM does not mind).
	find "$(dirname "$out")" -maxdepth 1 -name "$kver-*.cpio" ! -name "${out##*/}" \
		-mmin +10 -delete 2>/dev/null || true
	rm -rf "$tmp"
	echo "$out"
}

# Kernel-log lines that make a run dirty (extended regexp). Besides oopses,
# warnings and stalls: the reports of the sanitizer kernel (tests/debug/):
# KASAN, KFENCE, UBSAN, lockdep, DEBUG_ATOMIC_SLEEP, DEBUG_OBJECTS (ODEBUG),
# SLUB debug ("BUG <cache> (Not tainted): ..."), DEBUG_LIST, kmemleak.
SQCQ_VM_LOG_BAD='WARNING:|BUG:|Oops|general protection fault|Kernel panic|kernel BUG|soft lockup|hard LOCKUP|hung_task|blocked for more than [0-9]+ seconds|rcu_(sched|preempt|bh)? ?(self-)?detected (stall|stalls)|rcu: INFO:|detected stalls on CPUs|Call Trace:|UBSAN:|KASAN:|KFENCE:|ODEBUG:|DEBUG_LOCKS_WARN_ON|INFO: trying to register non-static key|list_(add|del) corruption|refcount_t:|BUG [A-Za-z0-9_:.-]+ \((Not tainted|Tainted)|unreferenced object|kmemleak: .*(suspected memory leak|disabled)|\[(vhost|virtio)_scsi_sqcq\] enqueued on deprecated workqueue'

# The classes of problem a log can show, most specific first, as
# "name<TAB>extended regexp"; sqcq_vm_log_classes names them in FAIL lines.
SQCQ_VM_LOG_CLASSES="KASAN	KASAN:
KFENCE	KFENCE:
UBSAN	UBSAN:
wait-context	BUG: Invalid wait context
lockdep	WARNING: (possible circular locking|possible recursive locking|inconsistent lock state|possible irq lock inversion|suspicious RCU usage|bad unlock balance|held lock freed|lock held when returning|Nested lock was not taken|bad contention)|DEBUG_LOCKS_WARN_ON|INFO: trying to register non-static key|BUG: MAX_LOCKDEP
sleeping-in-atomic	BUG: sleeping function called from invalid context
scheduling-while-atomic	BUG: scheduling while atomic
ODEBUG	ODEBUG:
kmemleak	unreferenced object|kmemleak: .*(suspected memory leak|disabled)|kmemleak scan
SLUB	BUG [A-Za-z0-9_:.-]+ \((Not tainted|Tainted)
list-corruption	list_(add|del) corruption
refcount	refcount_t:
deprecated-wq	\[(vhost|virtio)_scsi_sqcq\] enqueued on deprecated workqueue
hung-task	hung_task|blocked for more than [0-9]+ seconds
lockup	soft lockup|hard LOCKUP
RCU-stall	rcu_(sched|preempt|bh)? ?(self-)?detected (stall|stalls)|rcu: INFO:|detected stalls on CPUs
Oops	Oops|general protection fault|kernel BUG
lockdep-off	lockdep turned itself off
panic	Kernel panic
BUG	BUG:
WARNING	WARNING:"

# sqcq_vm_log_problems FILE [EXPECTED]: print the offending lines of a kernel
# log (empty output = clean). Lines that only echo a test's own log marker
# are kept: a test must not print these words into the kernel log unless it
# means it. EXPECTED, where given and present, lists whole lines (time stamp
# included) of a report a test caused on purpose and identified
# ($SQCQ_VM_EXPECTED in the guest): those exact lines, and no others, are
# not counted.
sqcq_vm_log_problems() {
	if [ -s "${2:-}" ]; then
		tr -d '\r' <"$1" 2>/dev/null | grep -avxF -f "$2" |
			grep -aE "$SQCQ_VM_LOG_BAD" | head -n 20 || true
	else
		grep -aE "$SQCQ_VM_LOG_BAD" "$1" 2>/dev/null | head -n 20 || true
	fi
}

# sqcq_vm_log_classes: read problem lines (sqcq_vm_log_problems' output) on
# stdin; print "CLASS[, CLASS...]: FIRST LINE", the classes found, most
# specific first, and the first line of the most specific one (without its
# timestamp). Empty input, empty output.
sqcq_vm_log_classes() {
	local lines names="" first="" name re l
	lines=$(cat)
	[ -n "$lines" ] || return 0
	while IFS='	' read -r name re; do
		# The generic classes only when nothing more specific matched.
		case "$name" in BUG | WARNING) [ -z "$names" ] || continue ;; esac
		l=$(grep -aE -m 1 "$re" <<<"$lines") || continue
		names+="${names:+, }$name"
		[ -n "$first" ] || first=$l
	done <<<"$SQCQ_VM_LOG_CLASSES"
	[ -n "$first" ] || { names=other; first=$(head -n 1 <<<"$lines"); }
	printf '%s: %s\n' "$names" "$(printf '%s\n' "$first" | sed 's/^\[[ 0-9.]*\] *//')"
}

# sqcq_vm_kmemleak_problems FILE: FILE is /sys/kernel/debug/kmemleak as read
# after the scans at the end of a run (guest-stage2.sh). Print one line
# naming the leaks (count, first object, the first frames of its
# backtrace), or nothing when there are none.
sqcq_vm_kmemleak_problems() {
	[ -s "$1" ] || return 0
	awk '
		/^unreferenced object/ { n++; if (n == 1) { first = $0; sub(/:$/, "", first) } ; inbt = 0; next }
		n == 1 && /backtrace:/ { inbt = 1; next }
		n == 1 && inbt && nf < 4 { f = $0; sub(/^ *(\[<[0-9a-f]+>\] )?/, "", f); frames = frames (nf ? " < " : "") f; nf++ }
		END { if (n) printf "kmemleak: %d unreferenced object(s); first: %s; backtrace: %s\n", n, first, frames }
	' "$1"
}

# sqcq_vm_taint_problems TAINT: describe taint bits other than O (12,
# out-of-tree) and E (13, unsigned module); empty when fine.
sqcq_vm_taint_problems() {
	local t="$1" letters="PFSRMBUDAWCIOELKXTNJ" bad="" i
	[[ "$t" =~ ^[0-9]+$ ]] || { echo "unreadable taint '$t'"; return 0; }
	for ((i = 0; i < ${#letters}; i++)); do
		((i == 12 || i == 13)) && continue
		((t >> i & 1)) && bad+="${letters:i:1}"
	done
	((t >> ${#letters})) && bad+="+unknown"
	[ -z "$bad" ] || echo "tainted $t ($bad)"
}
