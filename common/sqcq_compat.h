/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The one place where kernel API drift between 5.10 and 7.2 is absorbed.
 * Every SQCQ_HAVE_* flag comes from scripts/detect-features.sh, which greps
 * the headers of the kernel being built for; nothing here tests a version
 * number.
 */
#ifndef SQCQ_COMPAT_H
#define SQCQ_COMPAT_H

#include <linux/version.h>

#ifndef SQCQ_PKG_VERSION
#define SQCQ_PKG_VERSION "unknown"
#endif

/* ---- both modules ---- */

/* The housekeeping type enum replaced the flag bits in 5.18. */
#ifndef SQCQ_HAVE_HK_TYPE
#define HK_TYPE_KTHREAD	HK_FLAG_KTHREAD
#endif

/* hrtimer_setup() (6.13+) sets the callback at init time. */
#ifndef SQCQ_HAVE_HRTIMER_SETUP
#include <linux/hrtimer.h>
static inline void hrtimer_setup(struct hrtimer *timer,
				 enum hrtimer_restart (*function)(struct hrtimer *),
				 clockid_t clock_id, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
}
#endif

/* ---- eventfd: eventfd_signal(ctx) takes one argument from 6.8 on ---- */
#ifdef SQCQ_HAVE_EVENTFD_SIGNAL_1ARG
#define sqcq_eventfd_signal(ctx)	eventfd_signal(ctx)
#else
#define sqcq_eventfd_signal(ctx)	eventfd_signal((ctx), 1)
#endif

/* ---- iov_iter direction names (ITER_SOURCE: data read from the iter) ---- */
#ifndef SQCQ_HAVE_ITER_SOURCE
#define ITER_SOURCE	WRITE
#define ITER_DEST	READ
#endif

/* ---- SCSI host template poll support (5.13+) ---- */
#ifdef SQCQ_HAVE_SCSI_MQ_POLL
#define SQCQ_POLL_QUEUES_SUPPORTED	1
#else
#define SQCQ_POLL_QUEUES_SUPPORTED	0
#endif

/* ================================================================== */
/* Host section (host/: vhost_scsi_sqcq.c and the parts it includes).  */
/* ================================================================== */

/*
 * The host uses sqcq_eventfd_signal() and ITER_SOURCE/ITER_DEST from above.
 * Workers are kthreads with kthread_use_mm() (exported GPL on 5.10..7.2);
 * vhost_task (6.12+) is not used, so no shim is needed for it.  Kick
 * eventfds are polled with vfs_poll() + init_poll_funcptr(), stable over
 * the whole range.  VHOST_* ioctl numbers newer than a tree's UAPI are
 * never named: unknown commands get -ENOTTY.
 */

/* ---- end of host section ---- */

/* ================================================================== */
/* Guest section (guest/virtio_scsi_sqcq.c).  Macros only, so the     */
/* host module can include this header without the SCSI headers.      */
/* ================================================================== */

/* queuecommand returns enum scsi_qc_status from 7.x on, int before. */
#ifdef SQCQ_HAVE_SCSI_QC_STATUS
#define sqcq_qc_ret_t		enum scsi_qc_status
#else
#define sqcq_qc_ret_t		int
#endif

/* Completing a command: scsi_done() from 5.16, a function pointer before. */
#ifdef SQCQ_HAVE_SCSI_DONE
#define sqcq_scsi_done(sc)	scsi_done(sc)
#else
#define sqcq_scsi_done(sc)	((sc)->scsi_done(sc))
#endif

/* ->map_queues returns void from 6.0 on, int before. */
#ifdef SQCQ_HAVE_MAP_QUEUES_VOID
#define sqcq_map_queues_ret_t	void
#define SQCQ_MAP_QUEUES_DONE	return
#else
#define sqcq_map_queues_ret_t	int
#define SQCQ_MAP_QUEUES_DONE	return 0
#endif

/* virtio_reset_device() arrived in 5.17; 5.10 only has the config op. */
#ifndef SQCQ_HAVE_VIRTIO_RESET_DEVICE
#define virtio_reset_device(vdev)	((vdev)->config->reset(vdev))
#endif

/* scsi_rescan_device() takes the scsi_device from 6.5 (Debian 6.1 too). */
#ifdef SQCQ_HAVE_RESCAN_DEVICE_SDEV
#define sqcq_rescan_sdev(sdev)	((void)scsi_rescan_device(sdev))
#else
#define sqcq_rescan_sdev(sdev)	scsi_rescan_device(&(sdev)->sdev_gendev)
#endif

/* ->eh_timed_out returns enum scsi_timeout_action from 6.2 on. */
#ifdef SQCQ_HAVE_EH_TIMEOUT_ENUM
#define sqcq_eh_timeout_t	enum scsi_timeout_action
#define SQCQ_EH_NOT_HANDLED	SCSI_EH_NOT_HANDLED
#define SQCQ_EH_RESET_TIMER	SCSI_EH_RESET_TIMER
#else
#define sqcq_eh_timeout_t	enum blk_eh_timer_return
#define SQCQ_EH_NOT_HANDLED	BLK_EH_DONE
#define SQCQ_EH_RESET_TIMER	BLK_EH_RESET_TIMER
#endif

/*
 * virtqueue_dma_dev() (6.6+) names the device the rings are mapped on; the
 * guest refuses SQ/CQ under VIRTIO_F_ACCESS_PLATFORM without it
 * (SQCQ_HAVE_VIRTQUEUE_DMA_DEV, nothing to define here).
 */

/* The request behind a command: scsi_cmd_to_rq() from 5.15 (backported). */
#ifndef SQCQ_HAVE_SCSI_CMD_TO_RQ
#define scsi_cmd_to_rq(sc)	((sc)->request)
#endif

/*
 * Internal commands: scsi_execute_cmd() from 6.5, scsi_execute_req() before
 * (SQCQ_HAVE_SCSI_EXECUTE_CMD picks the call in the driver).
 */

/* ---- end of guest section ---- */

#endif /* SQCQ_COMPAT_H */
