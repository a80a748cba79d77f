#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
#
# Print -DSQCQ_HAVE_* flags for the kernel tree in $1 (its srctree: the
# directory that holds include/linux).  Kbuild calls this once per build, so
# the modules adapt to what the headers declare rather than to a version
# number (Debian backports features into older series).
#
# Each probe is a fixed-string or extended-regex grep in one header.
# Usage: detect-features.sh SRCTREE [OBJTREE]

src=${1:?usage: detect-features.sh SRCTREE [OBJTREE]}
obj=${2:-$1}

# has FLAG HEADER PATTERN: emit -DFLAG when HEADER (under include/) matches.
has() {
	flag=$1 hdr=$2 pat=$3
	for root in "$src" "$obj"; do
		if [ -f "$root/include/$hdr" ] &&
		   grep -Eq -- "$pat" "$root/include/$hdr"; then
			printf ' -D%s' "$flag"
			return 0
		fi
	done
	return 0
}

# exists FLAG HEADER: emit -DFLAG when the header exists at all.
exists() {
	for root in "$src" "$obj"; do
		if [ -f "$root/include/$2" ]; then
			printf ' -D%s' "$1"
			return 0
		fi
	done
	return 0
}

# Both modules
has SQCQ_HAVE_HK_TYPE linux/sched/isolation.h 'enum hk_type'
has SQCQ_HAVE_HRTIMER_SETUP linux/hrtimer.h 'void hrtimer_setup\('

# Host side
has SQCQ_HAVE_EVENTFD_SIGNAL_1ARG linux/eventfd.h \
	'void eventfd_signal\(struct eventfd_ctx \*ctx\)'
exists SQCQ_HAVE_VHOST_TASK_H linux/sched/vhost_task.h
has SQCQ_HAVE_VHOST_TASK_KILL linux/sched/vhost_task.h 'handle_kill'
has SQCQ_HAVE_IOV_ITER_GET_PAGES2 linux/uio.h 'iov_iter_get_pages2\('
has SQCQ_HAVE_ITER_SOURCE linux/uio.h 'ITER_SOURCE'
has SQCQ_HAVE_SBITMAP_GET_1ARG linux/sbitmap.h \
	'int sbitmap_get\(struct sbitmap \*sb\);'
has SQCQ_HAVE_TARGET_SUBMIT_PREP target/target_core_fabric.h \
	'target_submit_prep\('
has SQCQ_HAVE_TARGET_SUBMIT_INT target/target_core_fabric.h \
	'int[[:space:]]+target_submit\(struct se_cmd'
has SQCQ_HAVE_TARGET_QUEUE_SUBMISSION target/target_core_fabric.h \
	'target_queue_submission\('
has SQCQ_HAVE_FABRIC_ENABLE_TPG target/target_core_fabric.h \
	'fabric_enable_tpg'
has SQCQ_HAVE_DIRECT_SUBMIT_SUPP target/target_core_fabric.h \
	'direct_submit_supp'
has SQCQ_HAVE_DIRECT_COMPL_SUPP target/target_core_fabric.h \
	'direct_compl_supp'
has SQCQ_HAVE_TARGET_STOP_SESSION target/target_core_fabric.h \
	'target_stop_session\('

# Guest side
has SQCQ_HAVE_SCSI_MQ_POLL scsi/scsi_host.h 'int \(\* ?mq_poll\)'
has SQCQ_HAVE_SCSI_DONE scsi/scsi_cmnd.h 'void scsi_done\(struct scsi_cmnd'
has SQCQ_HAVE_MAP_QUEUES_VOID scsi/scsi_host.h 'void \(\* ?map_queues\)'
has SQCQ_HAVE_SCSI_QC_STATUS scsi/scsi_host.h 'enum scsi_qc_status'
has SQCQ_HAVE_SDEV_CONFIGURE scsi/scsi_host.h 'sdev_configure'
has SQCQ_HAVE_EH_TIMEOUT_ENUM scsi/scsi_host.h \
	'enum scsi_timeout_action \(\* ?eh_timed_out\)'
has SQCQ_HAVE_HOST_ALLOC_CONST scsi/scsi_host.h \
	'scsi_host_alloc\(const struct scsi_host_template'
exists SQCQ_HAVE_BLK_MQ_VIRTIO_H linux/blk-mq-virtio.h
has SQCQ_HAVE_BLK_MQ_MAP_HW_QUEUES linux/blk-mq.h 'blk_mq_map_hw_queues\('
has SQCQ_HAVE_VIRTQUEUE_INFO linux/virtio_config.h 'struct virtqueue_info \{'
has SQCQ_HAVE_VIRTIO_RESET_DEVICE linux/virtio.h 'virtio_reset_device\('
has SQCQ_HAVE_SCSI_CMD_TO_RQ scsi/scsi_cmnd.h 'scsi_cmd_to_rq\(struct scsi_cmnd'
has SQCQ_HAVE_SCSI_EXECUTE_CMD scsi/scsi_device.h 'int scsi_execute_cmd\('
has SQCQ_HAVE_VIRTQUEUE_DMA_DEV linux/virtio.h \
	'struct device \*virtqueue_dma_dev\(struct virtqueue'
has SQCQ_HAVE_RESCAN_DEVICE_SDEV scsi/scsi_host.h \
	'scsi_rescan_device\(struct scsi_device'
has SQCQ_HAVE_RESCAN_DEVICE_SDEV scsi/scsi_device.h \
	'scsi_rescan_device\(struct scsi_device'
echo
