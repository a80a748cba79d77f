#!/bin/bash
# tests/e2e/virsh-qemu.sh QEMU-ARGUMENTS...
#
# Stands in for qemu-system-x86_64 in tests/vm/run.sh (SQCQ_VM_QEMU) when L1
# starts L2 through libvirt (E2E_L2_VIA=libvirt, tests/e2e/l1.sh): the same
# guest, as a transient libvirt domain that `virsh create` starts, so that
# libvirt, not our rig, builds the vhost-scsi device. Each
#   -device vhost-scsi-pci,wwpn=W[,vhostfd=N],addr=0xSS
# becomes
#   <hostdev mode='subsystem' type='scsi_host'>
#     <source protocol='vhost' wwpn='W'/> <address ... slot='0xSS'/>
#   </hostdev>
# for which libvirt opens /dev/vhost-scsi itself and hands QEMU the fd (our
# host module serves that name with takeover=1). -kernel, -initrd, -append,
# -m, -smp and the first -serial go into the domain; the rest of run.sh's
# arguments (9p shares, QMP socket, qboot) through <qemu:commandline>.
# run.sh's second serial port (its COMMAND's output, "-serial stdio") is a
# file followed on stdout until the domain is gone. SIGTERM (run.sh's
# timeout) destroys the domain. QEMU's own log (libvirt's per-domain file)
# goes to stderr at the end; E2E_VIRSH_PRINT=1 prints the domain instead
# of starting it. The domain is named $E2E_VIRSH_DOMAIN (default
# sqcq-l2); E2E_L2_CPUS (l1.sh) pins its vCPUs and QEMU's other threads.
# Exit status 0 once the domain ended, 1 when it did not start.
set -u
dom=${E2E_VIRSH_DOMAIN:-sqcq-l2}
kernel="" initrd="" cmdline="" mem=256 smp=1 console="" pidfile=""
hostdevs="" extra=""
nserial=0

# xml_escape STRING: STRING for an XML attribute or text.
xml_escape() {
	local s=$1
	s=${s//&/&amp;}
	s=${s//</&lt;}
	s=${s//>/&gt;}
	s=${s//\'/&apos;}
	s=${s//\"/&quot;}
	printf '%s' "$s"
}
qarg() { extra+="    <qemu:arg value='$(xml_escape "$1")'/>"$'\n'; }
# vhost_dev PROPS: the vhost-scsi-pci device's properties as a <hostdev>.
vhost_dev() {
	local p wwpn="" slot=""
	local IFS=,
	for p in $1; do
		case "$p" in
		wwpn=*) wwpn=${p#wwpn=} ;;
		addr=*) slot=${p#addr=} ;;
		vhostfd=* | vhost-scsi-pci) ;;
		*)
			echo "virsh-qemu: vhost-scsi-pci property '$p' has no libvirt form here" >&2
			exit 1
			;;
		esac
	done
	[ -n "$wwpn" ] || { echo "virsh-qemu: vhost-scsi-pci without wwpn" >&2; exit 1; }
	hostdevs+="    <hostdev mode='subsystem' type='scsi_host'>
      <source protocol='vhost' wwpn='$(xml_escape "$wwpn")'/>"
	[ -z "$slot" ] || hostdevs+="
      <address type='pci' domain='0x0000' bus='0x00' slot='$(xml_escape "$slot")' function='0x0'/>"
	hostdevs+="
    </hostdev>
"
}

while [ $# -gt 0 ]; do
	case "$1" in
	-accel | -cpu) shift 2 ;;		# libvirt: type='kvm', host-passthrough
	-nodefaults | -nographic | -no-reboot) shift ;;
	-monitor) shift 2 ;;
	-m) mem=$2; shift 2 ;;
	-smp) smp=$2; shift 2 ;;
	-kernel) kernel=$2; shift 2 ;;
	-initrd) initrd=$2; shift 2 ;;
	-append) cmdline=$2; shift 2 ;;
	-pidfile) pidfile=$2; shift 2 ;;
	-serial)
		nserial=$((nserial + 1))
		case "$nserial:$2" in
		1:file:*) console=${2#file:} ;;
		2:stdio) ;;
		*) echo "virsh-qemu: -serial $2 (serial port $nserial) not handled" >&2; exit 1 ;;
		esac
		shift 2
		;;
	-device)
		case "$2" in
		vhost-scsi-pci,*) vhost_dev "$2" ;;
		*) qarg -device; qarg "$2" ;;
		esac
		shift 2
		;;
	*) qarg "$1"; shift ;;
	esac
done
[ -n "$kernel" ] && [ -n "$console" ] || { echo "virsh-qemu: -kernel and -serial file: are needed" >&2; exit 1; }

work=$(mktemp -d /tmp/virsh-qemu.XXXXXX)
out=$work/ttyS1
: >"$out"
cat >"$work/domain.xml" <<EOF
<domain type='kvm' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$(xml_escape "$dom")</name>
  <memory unit='MiB'>$mem</memory>
  <vcpu placement='static'${E2E_L2_CPUS:+ cpuset='$(xml_escape "$E2E_L2_CPUS")'}>$smp</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$(xml_escape "$kernel")</kernel>
    <initrd>$(xml_escape "$initrd")</initrd>
    <cmdline>$(xml_escape "$cmdline")</cmdline>
  </os>
  <cpu mode='host-passthrough'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <controller type='usb' model='none'/>
    <memballoon model='none'/>
    <serial type='file'>
      <source path='$(xml_escape "$console")'/>
      <target port='0'/>
    </serial>
    <serial type='file'>
      <source path='$(xml_escape "$out")'/>
      <target port='1'/>
    </serial>
$hostdevs  </devices>
  <qemu:commandline>
$extra  </qemu:commandline>
</domain>
EOF

# E2E_VIRSH_PRINT=1: print the domain and stop (a look at what libvirt gets).
if [ "${E2E_VIRSH_PRINT:-0}" = 1 ]; then
	cat "$work/domain.xml"
	rm -rf "$work"
	exit 0
fi
gone() { ! virsh -q domstate "$dom" >/dev/null 2>&1; }
# shellcheck disable=SC2317 # the trap's
stop() {
	virsh -q destroy "$dom" >/dev/null 2>&1
	exit 143
}
trap stop TERM INT
if ! virsh -q create "$work/domain.xml" >"$work/create.log" 2>&1; then
	cat "$work/create.log" >&2
	echo "virsh-qemu: virsh create failed; the domain:" >&2
	cat "$work/domain.xml" >&2
	cat "/var/log/libvirt/qemu/$dom.log" >&2 2>/dev/null
	rm -rf "$work"
	exit 1
fi
[ -z "$pidfile" ] || cp "/run/libvirt/qemu/$dom.pid" "$pidfile" 2>/dev/null
# COMMAND's output, live, until the domain is gone.
tail -n +1 -f "$out" &
tpid=$!
until gone; do
	sleep 1 &
	wait $!
done
sleep 0.5
kill "$tpid" 2>/dev/null
wait "$tpid" 2>/dev/null
cat "/var/log/libvirt/qemu/$dom.log" >&2 2>/dev/null
rm -rf "$work"
exit 0
