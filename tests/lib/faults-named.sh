# shellcheck shell=bash
# The guest driver's test build (tests/faults/guest/: the fault hooks of
# common/sqcq_faults.h) under the driver's own name, for an L2 whose
# scripts know the driver as virtio_scsi_sqcq (sourced; needs ROOT and
# tests/lib/kernels.sh).
#
#   sqcq_faults_named_guest ID   build it for kernel ID into
#       out/faults-named/<abi>/guest/virtio_scsi_sqcq.ko (W=1 -Werror) and
#       print that path; on failure the build log's tail on stderr and
#       status 1.  Not under out/<abi>: the matrix build that
#       tests/e2e/run.sh starts makes that anew.
sqcq_faults_named_guest() {
	local abi dir
	abi=$(sqcq_kernel_abi "$1") || return 1
	tests/matrix.sh "$1" >&2 || return 1
	dir=$ROOT/out/faults-named/$abi
	rm -rf "$dir"
	mkdir -p "$dir/guest" "$dir/common" "$dir/scripts"
	# Only the guest, built from the test build's source.
	sed -e '/^obj-m += host\//d' -e '/SQCQ_TEST_MODULES/d' Kbuild >"$dir/Kbuild"
	cp VERSION "$dir/" && cp common/*.[ch] "$dir/common/" &&
		cp scripts/detect-features.sh "$dir/scripts/" &&
		cp guest/virtio_scsi_sqcq_main.c guest/sqcq_param.c guest/sqcq_guest_trace.h \
			tests/faults/guest/virtio_scsi_sqcq_faults_main.c "$dir/guest/" ||
		return 1
	printf '%s\n' 'obj-m += virtio_scsi_sqcq.o' \
		'virtio_scsi_sqcq-y := virtio_scsi_sqcq_faults_main.o sqcq_param.o' \
		'ccflags-y += -DSQCQ_COMPAT_GUEST -DSQCQ_TEST_FAULTS -I$(src)' >"$dir/guest/Kbuild"
	if ! make -C "$SQCQ_CACHE/kheaders/$abi/build" M="$dir" W=1 KCFLAGS=-Werror modules \
		>"$dir/build.log" 2>&1; then
		tail -n 20 "$dir/build.log" >&2
		return 1
	fi
	echo "$dir/guest/virtio_scsi_sqcq.ko"
}
