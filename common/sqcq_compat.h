/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Kernel API compatibility for 5.10 .. 7.2, force-included ahead of every
 * file of both modules (Kbuild: -include).
 *
 * The modules are written against the newest kernel API, by its upstream
 * names: eventfd_signal(ctx), scsi_done(), scsi_execute_cmd(),
 * virtio_find_vqs() with a virtqueue_info array, and so on.  On an older
 * kernel this header supplies the missing name on top of what that kernel
 * has, so no .c file tests a feature flag.  Where no upstream name can
 * stand in (a return type that changed, a member an older struct lacks),
 * a sqcq_/SQCQ_ name is defined here for every kernel.
 *
 * Every SQCQ_HAVE_* flag comes from scripts/detect-features.sh, which greps
 * the headers of the kernel being built for (Debian backports features, so
 * nothing here tests a version number).  Kbuild defines SQCQ_COMPAT_HOST in
 * host/ and SQCQ_COMPAT_GUEST in guest/, so each module pulls in only the
 * headers its own section needs.
 */
#ifndef SQCQ_COMPAT_H
#define SQCQ_COMPAT_H

/* Every message names the module; set ahead of the first kernel header. */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#ifndef SQCQ_PKG_VERSION
#define SQCQ_PKG_VERSION "unknown"
#endif

/* ================================================================== */
/* Both modules                                                        */
/* ================================================================== */

#include <linux/hrtimer.h>
#include <linux/sched/isolation.h>

/* The housekeeping type enum replaced the flag bits in 5.18. */
#ifndef SQCQ_HAVE_HK_TYPE
#define HK_TYPE_KTHREAD	HK_FLAG_KTHREAD
#endif

/* hrtimer_setup() (6.13+) sets the callback at init time. */
#ifndef SQCQ_HAVE_HRTIMER_SETUP
static inline void hrtimer_setup(struct hrtimer *timer,
				 enum hrtimer_restart (*function)(struct hrtimer *),
				 clockid_t clock_id, enum hrtimer_mode mode)
{
	hrtimer_init(timer, clock_id, mode);
	timer->function = function;
}
#endif

/*
 * system_dfl_wq (6.17+, and Debian's 6.12 stable) is the unbound system
 * workqueue; newer kernels warn about work queued on the old system_wq.
 */
#ifndef SQCQ_HAVE_SYSTEM_DFL_WQ
#define system_dfl_wq	system_unbound_wq
#endif

/* ================================================================== */
/* Host (host/vhost_scsi_sqcq_main.c and the parts it includes)      */
/* ================================================================== */
#ifdef SQCQ_COMPAT_HOST

#include <linux/eventfd.h>
#include <linux/uio.h>
#include <linux/vhost.h>
#include <target/target_core_base.h>
#include <target/target_core_fabric.h>

/* kmap_local_page() came in 5.11; the atomic mapping does as well here. */
#ifndef SQCQ_HAVE_KMAP_LOCAL
#include <linux/highmem.h>
#define kmap_local_page(page)	kmap_atomic(page)
#define kunmap_local(addr)	kunmap_atomic(addr)
#endif

/* eventfd_signal() lost its count argument in 6.8. */
#ifndef SQCQ_HAVE_EVENTFD_SIGNAL_1ARG
#define eventfd_signal(ctx)	eventfd_signal((ctx), 1)
#endif

/* iov_iter direction names (6.1): ITER_SOURCE is data read from the iter. */
#ifndef SQCQ_HAVE_ITER_SOURCE
#define ITER_SOURCE	WRITE
#define ITER_DEST	READ
#endif

/*
 * The worker as a thread of the owner: vhost_task with a kill handler
 * (6.11+).  Elsewhere vhost_task_create() fails with -EOPNOTSUPP and the
 * worker is a kthread attached to the owner's cgroups (host/vhost_core.c);
 * 6.4 .. 6.10 had other signatures and take that path too.
 */
#ifdef SQCQ_HAVE_VHOST_TASK
#include <linux/sched/vhost_task.h>
#else
struct vhost_task;

static inline struct vhost_task *
vhost_task_create(bool (*fn)(void *), void (*handle_kill)(void *), void *arg,
		  const char *name)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static inline void vhost_task_start(struct vhost_task *vtsk)
{
}

static inline void vhost_task_stop(struct vhost_task *vtsk)
{
}

static inline void vhost_task_wake(struct vhost_task *vtsk)
{
}
#endif

/* The vhost ABI values older UAPI headers lack (shared with the tests). */
#include "sqcq_vhost_abi.h"

/*
 * 6.1 .. 6.11: target_submit() runs the backend in the caller, here the
 * vhost worker; target_queue_submission() hands it to the core's
 * workqueue, which 6.12+ does by itself for a fabric that asks for
 * TARGET_QUEUE_SUBMIT (SQCQ_TFO_SUBMIT_TYPE below).
 */
#if defined(SQCQ_HAVE_TARGET_SUBMIT_PREP) && \
	defined(SQCQ_HAVE_TARGET_QUEUE_SUBMISSION)
#define target_submit(se_cmd)	target_queue_submission(se_cmd)
#endif

/*
 * Submitting a command to the target core.  Since 5.13 it takes three
 * calls (target_init_cmd, target_submit_prep, target_submit); 5.10 has one.
 * Where the three exist, sqcq_target_submit() is just them; the fabric
 * uses it so that 5.10 needs no branch in the data path.  @cpu >= 0: the
 * CPU the core's submission and completion work runs on (TARGET_SCF_USE_CPUID;
 * else the submitting one).  Returns < 0 when the session is shutting down
 * (nothing was answered), 0 otherwise (an error found while preparing the
 * command was answered through the fabric's queue_status, as for any other
 * status).
 */
static inline int sqcq_target_submit(struct se_cmd *se, struct se_session *sess,
				     unsigned char *cdb, unsigned char *sense,
				     u64 lun, u32 len, int attr,
				     enum dma_data_direction dir,
				     struct scatterlist *sgl, u32 nsg, int cpu)
{
	int flags = TARGET_SCF_ACK_KREF;
	int ret;

	if (cpu >= 0) {
		se->cpuid = cpu;
		flags |= TARGET_SCF_USE_CPUID;
	}
#ifdef SQCQ_HAVE_TARGET_SUBMIT_PREP
	ret = target_init_cmd(se, sess, sense, lun, len, attr, dir, flags);
	if (ret < 0)
		return ret;
	if (!target_submit_prep(se, cdb, sgl, nsg, NULL, 0, NULL, 0,
				GFP_KERNEL))
		target_submit(se);
	return 0;
#else
	ret = target_submit_cmd_map_sgls(se, sess, cdb, sense, lun, len, attr,
					 dir, flags, sgl, nsg,
					 NULL, 0, NULL, 0);
	return ret < 0 ? ret : 0;
#endif
}

/*
 * 6.12+ asks each fabric how the core should run a submitted command; ours
 * are submitted from the vhost worker, so they go to the core's workqueue.
 * Members of struct target_core_fabric_ops that older kernels lack.
 */
#ifdef SQCQ_HAVE_DIRECT_SUBMIT_SUPP
#define SQCQ_TFO_SUBMIT_TYPE				\
	.default_submit_type	= TARGET_QUEUE_SUBMIT,	\
	.direct_submit_supp	= 1,
#else
#define SQCQ_TFO_SUBMIT_TYPE
#endif

#endif /* SQCQ_COMPAT_HOST */

/* ================================================================== */
/* Guest (guest/virtio_scsi_sqcq_main.c)                             */
/* ================================================================== */
#ifdef SQCQ_COMPAT_GUEST

#include <linux/blk-mq.h>
#include <linux/slab.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <scsi/scsi_cmnd.h>
#include <scsi/scsi_device.h>
#include <scsi/scsi_host.h>

/*
 * Interrupt queues worth having for @max offered: one per CPU that may
 * take a managed interrupt.  Where the block layer has the helper, it
 * leaves out the CPUs of isolcpus=managed_irq, as the in-tree drivers of
 * that kernel do; before it, every possible CPU counts, as it did there.
 */
static inline unsigned int sqcq_possible_queues(unsigned int max)
{
#ifdef SQCQ_HAVE_BLK_MQ_NUM_POSSIBLE_QUEUES
	return blk_mq_num_possible_queues(max);
#else
	return min(max, nr_cpu_ids);
#endif
}

/* queuecommand returns enum scsi_qc_status from 7.x on, int before. */
#ifdef SQCQ_HAVE_SCSI_QC_STATUS
#define sqcq_qc_ret_t		enum scsi_qc_status
#else
#define sqcq_qc_ret_t		int
#endif

/* ->map_queues returns void from 6.0 on, int before. */
#ifdef SQCQ_HAVE_MAP_QUEUES_VOID
#define sqcq_map_queues_ret_t	void
#define SQCQ_MAP_QUEUES_DONE	return
#else
#define sqcq_map_queues_ret_t	int
#define SQCQ_MAP_QUEUES_DONE	return 0
#endif

/* Completing a command: scsi_done() from 5.16, a function pointer before. */
#ifndef SQCQ_HAVE_SCSI_DONE
static inline void scsi_done(struct scsi_cmnd *sc)
{
	sc->scsi_done(sc);
}
#endif

/* The request behind a command: scsi_cmd_to_rq() from 5.15 (backported). */
#ifndef SQCQ_HAVE_SCSI_CMD_TO_RQ
#define scsi_cmd_to_rq(sc)	((sc)->request)
#endif

/* virtio_reset_device() arrived in 5.17; 5.10 only has the config op. */
#ifndef SQCQ_HAVE_VIRTIO_RESET_DEVICE
#define virtio_reset_device(vdev)	((vdev)->config->reset(vdev))
#endif

/* scsi_rescan_device() takes the scsi_device from 6.5 (Debian 6.1 too). */
#ifndef SQCQ_HAVE_RESCAN_DEVICE_SDEV
#define scsi_rescan_device(sdev)	scsi_rescan_device(&(sdev)->sdev_gendev)
#endif

/* ->eh_timed_out returns enum scsi_timeout_action from 6.2 on. */
#ifndef SQCQ_HAVE_EH_TIMEOUT_ENUM
#define scsi_timeout_action	blk_eh_timer_return
#define SCSI_EH_NOT_HANDLED	BLK_EH_DONE
#define SCSI_EH_RESET_TIMER	BLK_EH_RESET_TIMER
#endif

/* The template's per-LUN setup hook was renamed slave_alloc -> sdev_init. */
#ifndef SQCQ_HAVE_SDEV_CONFIGURE
#define sdev_init		slave_alloc
#endif

/*
 * SCSI poll queues (5.13+): ->mq_poll and shost->nr_maps.  Without them
 * the host has the default map only, and poll_queues is refused at load.
 */
#ifdef SQCQ_HAVE_SCSI_MQ_POLL
#define SQCQ_POLL_QUEUES_SUPPORTED	1
#define SQCQ_SHT_MQ_POLL(fn)		.mq_poll = (fn),
static inline unsigned int sqcq_shost_nr_maps(const struct Scsi_Host *shost)
{
	return shost->nr_maps;
}

static inline void sqcq_shost_set_nr_maps(struct Scsi_Host *shost,
					  unsigned int nr_maps)
{
	shost->nr_maps = nr_maps;
}
#else
#define SQCQ_POLL_QUEUES_SUPPORTED	0
#define SQCQ_SHT_MQ_POLL(fn)
static inline unsigned int sqcq_shost_nr_maps(const struct Scsi_Host *shost)
{
	return 1;
}

static inline void sqcq_shost_set_nr_maps(struct Scsi_Host *shost,
					  unsigned int nr_maps)
{
}
#endif

/*
 * The SCSI host's own sysfs files: attribute groups in shost_groups from
 * 5.16, a NULL-terminated device_attribute array in shost_attrs before.
 * The driver lists its DEVICE_ATTR()s once:
 *
 *	static sqcq_shost_attr_t *NAME_attrs[] = { SQCQ_SHOST_ATTR(x), NULL };
 *	SQCQ_SHOST_GROUPS(NAME);
 *	... SQCQ_SHT_SHOST_ATTRS(NAME) in the host template
 */
#ifdef SQCQ_HAVE_SHOST_GROUPS
#define sqcq_shost_attr_t		struct attribute
#define SQCQ_SHOST_ATTR(a)		(&dev_attr_##a.attr)
#define SQCQ_SHOST_GROUPS(name)		ATTRIBUTE_GROUPS(name)
#define SQCQ_SHT_SHOST_ATTRS(name)	.shost_groups = name##_groups,
#else
#define sqcq_shost_attr_t		struct device_attribute
#define SQCQ_SHOST_ATTR(a)		(&dev_attr_##a)
#define SQCQ_SHOST_GROUPS(name)		static_assert(ARRAY_SIZE(name##_attrs) > 1)
#define SQCQ_SHT_SHOST_ATTRS(name)	.shost_attrs = name##_attrs,
#endif

/*
 * blk_mq_map_hw_queues() (6.14+) maps hardware queues by the device's
 * interrupt affinity; before it the virtio bus had its own helper.
 */
#ifndef SQCQ_HAVE_BLK_MQ_MAP_HW_QUEUES
#ifdef SQCQ_HAVE_BLK_MQ_VIRTIO_H
#include <linux/blk-mq-virtio.h>
static inline void blk_mq_map_hw_queues(struct blk_mq_queue_map *map,
					struct device *dev, unsigned int offset)
{
	blk_mq_virtio_map_queues(map, dev_to_virtio(dev), offset);
}
#else
static inline void blk_mq_map_hw_queues(struct blk_mq_queue_map *map,
					struct device *dev, unsigned int offset)
{
	blk_mq_map_queues(map);
}
#endif
#endif

/*
 * virtio_find_vqs() takes a virtqueue_info array from 6.11 on; before it,
 * parallel arrays of callbacks and names.  The stand-in converts.
 */
#ifndef SQCQ_HAVE_VIRTQUEUE_INFO
struct virtqueue_info {
	const char *name;
	vq_callback_t *callback;
	bool ctx;
};

static inline int sqcq_find_vqs_info(struct virtio_device *vdev,
				     unsigned int nvqs, struct virtqueue *vqs[],
				     struct virtqueue_info *info,
				     struct irq_affinity *desc)
{
	vq_callback_t **cbs;
	const char **names;
	unsigned int i;
	int ret = -ENOMEM;

	cbs = kcalloc(nvqs, sizeof(*cbs), GFP_KERNEL);
	names = kcalloc(nvqs, sizeof(*names), GFP_KERNEL);
	if (cbs && names) {
		for (i = 0; i < nvqs; i++) {
			names[i] = info[i].name;
			cbs[i] = info[i].callback;
		}
		ret = virtio_find_vqs(vdev, nvqs, vqs, cbs, names, desc);
	}
	kfree(names);
	kfree(cbs);
	return ret;
}

#define virtio_find_vqs		sqcq_find_vqs_info
#endif

/*
 * virtqueue_dma_dev() (6.6+) names the device the rings are mapped on.
 * Without it the driver cannot know one, and refuses SQ/CQ where the
 * platform restricts DMA (VIRTIO_F_ACCESS_PLATFORM, Xen).
 */
#ifndef SQCQ_HAVE_VIRTQUEUE_DMA_DEV
static inline struct device *virtqueue_dma_dev(struct virtqueue *vq)
{
	return NULL;
}
#endif

/*
 * Internal commands: scsi_execute_cmd() from 6.5; scsi_execute_req()
 * before.  The stand-in serves what the driver sends: no exec args, data
 * in (REQ_OP_DRV_IN) or none.
 */
#ifndef SQCQ_HAVE_SCSI_EXECUTE_CMD
struct scsi_exec_args;

static inline int scsi_execute_cmd(struct scsi_device *sdev,
				   const unsigned char *cmd, unsigned int opf,
				   void *buf, unsigned int len, int timeout,
				   int retries,
				   const struct scsi_exec_args *args)
{
	int dir = opf == REQ_OP_DRV_IN ? DMA_FROM_DEVICE :
		  opf == REQ_OP_DRV_OUT ? DMA_TO_DEVICE : DMA_NONE;

	if (WARN_ON_ONCE(args))
		return -EINVAL;
	return scsi_execute_req(sdev, cmd, dir, buf, len, NULL, timeout,
				retries, NULL);
}
#endif

#endif /* SQCQ_COMPAT_GUEST */

#endif /* SQCQ_COMPAT_H */
