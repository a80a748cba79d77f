#!/bin/bash
# bench/l1-exits.sh [--selftest]
#
# Runs in L1 as root (tests/e2e/l1.sh, on bench/compare-l2.sh's request
# hotplug-exits.req) and prints one line: the VM exits of every VM here,
# by reason, counted since the first call, "reason=count ...", e.g.
# "intr=12 vintr=3 msr=89 hlt=67 io=123 npf=45".  Names are the exit codes
# of the CPU's virtualization (SVM under QEMU's emulated AMD, VMX on
# Intel) in short lowercase: arch/x86/include/uapi/asm/svm.h, vmx.h.
#
# Source: the kvm:kvm_exit tracepoint with a hist trigger keyed on
# exit_reason, installed by the first call (it counts from then on; it
# stays until the trigger is removed or L1 reboots).  Without it (no
# tracefs, no hist triggers): KVM's debugfs statistics, names prefixed
# "stat:" (io_exits, halt_exits, ... and exits, their total).  Prints
# nothing and exits 1 when neither is there.
#
# --selftest: the parsers on synthetic hist text and stat files; PASS:/FAIL:
# lines, exit status 0 when all passed.  Bash builtins only when counting:
# L1 under TCG answers this between two fio points.
set -uo pipefail

# Our trigger, and what the kernel prints of it (trigger file, hist header).
TRIGGER='hist:keys=exit_reason:sort=exit_reason'
TRIGGER_SHOWN='hist:keys=exit_reason:vals=hitcount:sort=exit_reason:size='
STATS="exits io_exits mmio_exits halt_exits irq_window_exits irq_exits request_irq_exits signal_exits nmi_window_exits"

# The name tables, built in a function: "set --" would take the arguments.
declare -a SVM_NAME VMX_NAME
names_init() {
	local i excp
	# SVM exit codes (AMD APM vol. 2, appendix C; svm.h).
	for ((i = 0; i < 16; i++)); do
		SVM_NAME[i]=read_cr$i
		SVM_NAME[0x10 + i]=write_cr$i
		SVM_NAME[0x20 + i]=read_dr$i
		SVM_NAME[0x30 + i]=write_dr$i
		SVM_NAME[0x90 + i]=cr${i}_write_trap
	done
	# Intercepted exceptions, 0x40 + vector.
	excp=(de db nmi bp of br ud nm df 9 ts np ss gp pf 15 mf ac mc xm ve cp)
	for ((i = 0; i < 32; i++)); do
		SVM_NAME[0x40 + i]=excp_${excp[i]:-$i}
	done
	set -- \
		0x60 intr 0x61 nmi 0x62 smi 0x63 init 0x64 vintr 0x65 cr0_sel_write \
		0x66 idtr_read 0x67 gdtr_read 0x68 ldtr_read 0x69 tr_read \
		0x6a idtr_write 0x6b gdtr_write 0x6c ldtr_write 0x6d tr_write \
		0x6e rdtsc 0x6f rdpmc 0x70 pushf 0x71 popf 0x72 cpuid 0x73 rsm \
		0x74 iret 0x75 swint 0x76 invd 0x77 pause 0x78 hlt 0x79 invlpg \
		0x7a invlpga 0x7b io 0x7c msr 0x7d task_switch 0x7e ferr_freeze \
		0x7f shutdown 0x80 vmrun 0x81 vmmcall 0x82 vmload 0x83 vmsave \
		0x84 stgi 0x85 clgi 0x86 skinit 0x87 rdtscp 0x88 icebp 0x89 wbinvd \
		0x8a monitor 0x8b mwait 0x8c mwait_cond 0x8d xsetbv 0x8e rdpru \
		0x8f efer_write_trap 0xa2 invpcid 0xa5 bus_lock 0xa6 idle_hlt \
		0x400 npf 0x401 avic_incomplete_ipi 0x402 avic_unaccelerated \
		0x403 vmgexit 0xf0000000 sw 0xffffffff err
	while [ $# -ge 2 ]; do SVM_NAME[$1]=$2; shift 2; done
	# VMX basic exit reasons (Intel SDM vol. 3, appendix C; vmx.h).
	set -- \
		0 excp_nmi 1 intr 2 triple_fault 3 init 4 sipi 5 io_smi 6 other_smi \
		7 irq_window 8 nmi_window 9 task_switch 10 cpuid 11 getsec 12 hlt \
		13 invd 14 invlpg 15 rdpmc 16 rdtsc 17 rsm 18 vmcall 19 vmclear \
		20 vmlaunch 21 vmptrld 22 vmptrst 23 vmread 24 vmresume 25 vmwrite \
		26 vmoff 27 vmon 28 cr 29 dr 30 io 31 msr_read 32 msr_write \
		33 invalid_state 34 msr_load_fail 36 mwait 37 mtf 39 monitor \
		40 pause 41 mce_during_vmentry 43 tpr_below_threshold 44 apic_access \
		45 eoi_induced 46 gdtr_idtr 47 ldtr_tr 48 ept_violation \
		49 ept_misconfig 50 invept 51 rdtscp 52 preemption_timer 53 invvpid \
		54 wbinvd 55 xsetbv 56 apic_write 57 rdrand 58 invpcid 59 vmfunc \
		60 encls 61 rdseed 62 pml_full 63 xsaves 64 xrstors 67 umwait \
		68 tpause 74 bus_lock 75 notify 76 seamcall 77 tdcall \
		84 msr_read_imm 85 msr_write_imm
	while [ $# -ge 2 ]; do VMX_NAME[$1]=$2; shift 2; done
}
names_init

# reason_name VENDOR CODE: REPLY = the short name of exit CODE (a number).
# VMX: bit 31 is a failed VM entry, bits 16-30 flags; the name is the basic
# reason's.  Codes without a name keep their number.
reason_name() {
	local code=$2 fail=""
	REPLY=""
	case $1 in
	svm)
		REPLY=${SVM_NAME[code]:-}
		[ -n "$REPLY" ] || printf -v REPLY 'svm_%#x' "$code"
		;;
	vmx)
		((code & 0x80000000)) && fail=entry_fail_
		code=$((code & 0xffff))
		REPLY=${VMX_NAME[code]:-vmx_$code}
		REPLY=$fail$REPLY
		;;
	*) REPLY=reason_$code ;;
	esac
}

# exits_from_hist VENDOR: the exit counts of the first histogram on stdin
# (kvm_exit's hist file) keyed on exit_reason alone (plain, .hex or .sym),
# without a filter and not paused, as "name=count ..." (in the order of the
# file); status 1 when there is no such histogram.
exits_from_hist() {
	local vendor=$1 line spec mod="" found=0 code n name sym key
	local -a order=()
	local -A count=()
	while IFS= read -r line; do
		if [[ "$line" == "# trigger info: "* ]]; then
			# The next histogram: ours was the one before.
			[ "$found" = 1 ] && break
			spec=${line#"# trigger info: "}
			mod=""
			if [[ "$spec" =~ ^hist:([A-Za-z0-9_]+:)?keys=exit_reason(\.hex|\.sym|\.sym-offset)?:vals=hitcount:[^\ ]*\ \[active\]$ ]]; then
				found=1
				mod=${BASH_REMATCH[2]:-.dec}
			fi
			continue
		fi
		[ "$found" = 1 ] || continue
		# "{ exit_reason:        120 } hitcount:         45": decimal;
		# .hex: "exit_reason: 78"; .sym: "exit_reason: [78] symbol".
		[[ "$line" =~ ^\{\ exit_reason:\ +(\[([0-9a-f]+)\]|([0-9a-f]+))[^}]*\}\ hitcount:\ +([0-9]+) ]] || continue
		sym=${BASH_REMATCH[2]:-} key=${BASH_REMATCH[3]:-} n=${BASH_REMATCH[4]}
		case $mod in
		.dec) [[ "$key" =~ ^[0-9]+$ ]] || continue; code=$((10#$key)) ;;
		.hex) [ -n "$key" ] || continue; code=$((16#$key)) ;;
		*) [ -n "$sym" ] || continue; code=$((16#$sym)) ;;
		esac
		reason_name "$vendor" "$code"
		name=$REPLY
		[ -n "${count[$name]:-}" ] || { order+=("$name"); count[$name]=0; }
		count[$name]=$((count[$name] + n))
	done
	[ "$found" = 1 ] || return 1
	REPLY=""
	for name in "${order[@]}"; do
		REPLY+="${REPLY:+ }$name=${count[$name]}"
	done
	echo "$REPLY"
}

# exits_from_stats DIR: "stat:NAME=N ..." from KVM's debugfs statistics in
# DIR (sums over all VMs); status 1 when none is readable.
exits_from_stats() {
	local s v out=""
	for s in $STATS; do
		v=""
		[ -r "$1/$s" ] && read -r v <"$1/$s" 2>/dev/null
		[[ "$v" =~ ^[0-9]+$ ]] && out+="${out:+ }stat:$s=$v"
	done
	[ -n "$out" ] || return 1
	echo "$out"
}

# vendor: REPLY = svm or vmx, from the KVM module loaded (else the CPU's
# flags), or "" when neither.
vendor() {
	local k rest
	REPLY=""
	if [ -d /sys/module/kvm_amd ]; then
		REPLY=svm
	elif [ -d /sys/module/kvm_intel ]; then
		REPLY=vmx
	else
		while read -r k rest; do
			[ "$k" = flags ] || continue
			[[ " $rest " == *" svm "* ]] && REPLY=svm
			[[ " $rest " == *" vmx "* ]] && REPLY=vmx
			break
		done </proc/cpuinfo
	fi
}

# mounted FSTYPE DIR: a file system of FSTYPE is mounted on DIR.
mounted() {
	local dir type rest
	while read -r _ dir type rest; do
		[ "$dir" = "$2" ] && [ "$type" = "$1" ] && return 0
	done </proc/mounts
	return 1
}
# kvm_exit_event: REPLY = the kvm_exit event's tracefs directory; tracefs
# and debugfs (the statistics) mounted first where they are not.
kvm_exit_event() {
	local t
	REPLY=""
	mounted tracefs /sys/kernel/tracing ||
		mount -t tracefs nodev /sys/kernel/tracing 2>/dev/null
	mounted debugfs /sys/kernel/debug ||
		mount -t debugfs none /sys/kernel/debug 2>/dev/null
	for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		[ -e "$t/events/kvm/kvm_exit/hist" ] && { REPLY=$t/events/kvm/kvm_exit; return 0; }
	done
	return 1
}

# trigger_set DIR: our hist trigger on the event in DIR, installed if
# missing; status 1 when it is not there afterwards.
trigger_set() {
	local l try
	for try in 1 2; do
		while IFS= read -r l; do
			[[ "$l" == "$TRIGGER_SHOWN"* ]] && return 0
		done <"$1/trigger"
		[ "$try" = 1 ] || return 1
		echo "$TRIGGER" >"$1/trigger" 2>/dev/null
	done
}

selftest() {
	local out pass=0 failed=0 tmp
	# expect NAME WANT: compare $out (output, or status) with WANT.
	expect() {
		if [ "$out" = "$2" ]; then
			echo "PASS: l1-exits $1"; pass=$((pass + 1))
		else
			echo "FAIL: l1-exits $1 (got \"$out\", want \"$2\")"; failed=$((failed + 1))
		fi
	}
	# The kernel's layout: header, entries sorted by key, totals.
	out=$(exits_from_hist svm <<'EOF'
# event histogram
#
# trigger info: hist:keys=exit_reason:vals=hitcount:sort=exit_reason:size=2048 [active]
#

{ exit_reason:         96 } hitcount:       1210
{ exit_reason:        100 } hitcount:         31
{ exit_reason:        120 } hitcount:       4410
{ exit_reason:        123 } hitcount:          7
{ exit_reason:        124 } hitcount:       9088
{ exit_reason:       1024 } hitcount:      12001
{ exit_reason:       1028 } hitcount:          2
{ exit_reason: 4294967295 } hitcount:          1

Totals:
    Hits: 26770
    Entries: 8
    Dropped: 0
EOF
	)
	expect "svm decimal keys" "intr=1210 vintr=31 hlt=4410 io=7 msr=9088 npf=12001 svm_0x404=2 err=1"
	# An empty histogram (the trigger just installed): an empty line.
	out=$(exits_from_hist svm <<'EOF'
# event histogram
#
# trigger info: hist:keys=exit_reason:vals=hitcount:sort=exit_reason:size=2048 [active]
#


Totals:
    Hits: 0
    Entries: 0
    Dropped: 0
EOF
	)$?
	expect "empty histogram" "0"
	# Someone else's histograms first: two keys, a filter, paused; then a
	# .hex one; the histogram after it is not added.
	out=$(exits_from_hist svm <<'EOF'
# event histogram
#
# trigger info: hist:keys=exit_reason,vcpu_id:vals=hitcount:sort=hitcount:size=2048 [active]
#

{ exit_reason:        120, vcpu_id:          0 } hitcount:        500

Totals:
    Hits: 500
    Entries: 1
    Dropped: 0


# event histogram
#
# trigger info: hist:keys=exit_reason:vals=hitcount:sort=hitcount:size=2048 if vcpu_id == 1 [active]
#

{ exit_reason:        124 } hitcount:        300

Totals:
    Hits: 300
    Entries: 1
    Dropped: 0


# event histogram
#
# trigger info: hist:keys=exit_reason:vals=hitcount:sort=exit_reason:size=2048 [paused]
#

{ exit_reason:        124 } hitcount:        200

Totals:
    Hits: 200
    Entries: 1
    Dropped: 0


# event histogram
#
# trigger info: hist:keys=exit_reason.hex:vals=hitcount:sort=hitcount.descending:size=2048 [active]
#

{ exit_reason: 400 } hitcount:         90
{ exit_reason: 7c } hitcount:         10
{ exit_reason: 61 } hitcount:          1

Totals:
    Hits: 101
    Entries: 3
    Dropped: 0


# event histogram
#
# trigger info: hist:keys=exit_reason:vals=hitcount:sort=exit_reason:size=2048 [active]
#

{ exit_reason:         96 } hitcount:          5

Totals:
    Hits: 5
    Entries: 1
    Dropped: 0
EOF
	)
	expect "first plain histogram only, hex keys" "npf=90 msr=10 nmi=1"
	# .sym keys print the number in brackets, then a (useless) symbol.
	out=$(exits_from_hist svm <<'EOF'
# trigger info: hist:keys=exit_reason.sym:vals=hitcount:sort=exit_reason.sym:size=2048 [active]
{ exit_reason: [7b] 0x7b                                          } hitcount:         42
{ exit_reason: [4e] 0x4e                                          } hitcount:          3
EOF
	)
	expect "sym keys, exception intercept" "io=42 excp_pf=3"
	# VMX: basic reasons, a failed entry (bit 31), an unknown one.
	out=$(exits_from_hist vmx <<'EOF'
# trigger info: hist:keys=exit_reason:vals=hitcount:sort=exit_reason:size=2048 [active]
{ exit_reason:          1 } hitcount:        100
{ exit_reason:         12 } hitcount:         50
{ exit_reason:         30 } hitcount:         20
{ exit_reason:         32 } hitcount:        700
{ exit_reason:         49 } hitcount:        800
{ exit_reason:         99 } hitcount:          3
{ exit_reason: 2147483681 } hitcount:          1
EOF
	)
	expect "vmx reasons" "intr=100 hlt=50 io=20 msr_write=700 ept_misconfig=800 vmx_99=3 entry_fail_invalid_state=1"
	# No histogram keyed on exit_reason at all: status 1.
	out=$(exits_from_hist svm <<'EOF'
# trigger info: hist:keys=vcpu_id:vals=hitcount:sort=vcpu_id:size=2048 [active]
{ vcpu_id:          0 } hitcount:        100
EOF
	)$?
	expect "no exit_reason histogram" "1"
	# The statistics fallback: what is there, in a fixed order.
	tmp=$(mktemp -d)
	echo 1234 >"$tmp/exits"
	echo 56 >"$tmp/halt_exits"
	echo 7 >"$tmp/io_exits"
	echo junk >"$tmp/mmio_exits"
	out=$(exits_from_stats "$tmp")
	expect "stat files" "stat:exits=1234 stat:io_exits=7 stat:halt_exits=56"
	rm -f "$tmp"/*
	out=$(exits_from_stats "$tmp")$?
	expect "no stat files" "1"
	rm -rf "$tmp"
	echo "l1-exits selftest: $pass passed, $failed failed"
	[ "$failed" = 0 ]
}

if [ "${1:-}" = --selftest ]; then
	selftest
	exit
elif [ $# -gt 0 ]; then
	sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
fi
vendor
v=$REPLY
if kvm_exit_event && ev=$REPLY && trigger_set "$ev" && exits_from_hist "$v" <"$ev/hist"; then
	exit 0
fi
echo "l1-exits: no kvm_exit hist trigger, KVM's debugfs statistics instead" >&2
exits_from_stats /sys/kernel/debug/kvm && exit 0
echo "l1-exits: neither a kvm_exit histogram nor /sys/kernel/debug/kvm" >&2
exit 1
