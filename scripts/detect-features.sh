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
has SQCQ_HAVE_SYSTEM_DFL_WQ linux/workqueue.h '\*system_dfl_wq;'

# Host side
has SQCQ_HAVE_EVENTFD_SIGNAL_1ARG linux/eventfd.h \
	'void eventfd_signal\(struct eventfd_ctx \*ctx\)'
has SQCQ_HAVE_ITER_SOURCE linux/uio.h 'ITER_SOURCE'
# vhost_task with a kill handler (6.11+), and built (CONFIG_VHOST_TASK:
# selected by CONFIG_VHOST, which Debian builds as a module).
case $(has X linux/sched/vhost_task.h 'handle_kill')$(has X generated/autoconf.h \
	'define CONFIG_VHOST_TASK 1') in
' -DX -DX') printf ' -D%s' SQCQ_HAVE_VHOST_TASK ;;
esac
has SQCQ_HAVE_TARGET_SUBMIT_PREP target/target_core_fabric.h \
	'target_submit_prep\('
has SQCQ_HAVE_TARGET_QUEUE_SUBMISSION target/target_core_fabric.h \
	'target_queue_submission\('
has SQCQ_HAVE_DIRECT_SUBMIT_SUPP target/target_core_fabric.h \
	'direct_submit_supp'

has SQCQ_HAVE_KMAP_LOCAL linux/highmem-internal.h 'void \*kmap_local_page\('

# Guest side
has SQCQ_HAVE_SCSI_MQ_POLL scsi/scsi_host.h 'int \(\* ?mq_poll\)'
has SQCQ_HAVE_SCSI_DONE scsi/scsi_cmnd.h 'void scsi_done\(struct scsi_cmnd'
has SQCQ_HAVE_MAP_QUEUES_VOID scsi/scsi_host.h 'void \(\* ?map_queues\)'
has SQCQ_HAVE_SCSI_QC_STATUS scsi/scsi_host.h 'enum scsi_qc_status'
has SQCQ_HAVE_SHOST_GROUPS scsi/scsi_host.h 'attribute_group \*\*shost_groups;'
has SQCQ_HAVE_SDEV_CONFIGURE scsi/scsi_host.h 'sdev_configure'
has SQCQ_HAVE_EH_TIMEOUT_ENUM scsi/scsi_host.h \
	'enum scsi_timeout_action \(\* ?eh_timed_out\)'
exists SQCQ_HAVE_BLK_MQ_VIRTIO_H linux/blk-mq-virtio.h
has SQCQ_HAVE_BLK_MQ_MAP_HW_QUEUES linux/blk-mq.h 'blk_mq_map_hw_queues\('
has SQCQ_HAVE_BLK_MQ_NUM_POSSIBLE_QUEUES linux/blk-mq.h 'blk_mq_num_possible_queues\('
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
