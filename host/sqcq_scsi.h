/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * vhost_scsi_sqcq internals shared by the device file (vhost_scsi_sqcq_main.c)
 * and the TCM fabric and SCSI data path (sqcq_tcm.c).
 *
 * Locking, outermost first:
 *   vhost_dev.mutex       ioctls (vhost core, see sqcq_vhost.h)
 *   vhost_vq.mutex        one ring (the worker holds it while serving)
 *   vhost_scsi.ep_rwsem   the device's target table: read by the worker
 *                         while it submits a batch (vq.mutex held),
 *                         written when an endpoint is set or cleared --
 *                         before vhost_scsi_mutex, never inside it: a
 *                         batch stalled in a page fault then holds up its
 *                         own device's ioctl, not every device's
 *   vhost_scsi_mutex      the fabric's TPG list, every TPG's nexus and bound
 *                         device, and every device's endpoint (configfs
 *                         callbacks and SET/CLEAR_ENDPOINT);
 *                         target_depend_item() (configfs directory locks)
 *                         is called under it
 *   vhost_scsi_tpg.port_lock
 *                         a TPG's LUN count and, for LUN link/unlink (which
 *                         run under configfs directory locks and so must
 *                         not take vhost_scsi_mutex), its bound device
 *   vhost_scsi.evt_lock   pending hotplug events (spinlock, innermost)
 */
#ifndef SQCQ_SCSI_H
#define SQCQ_SCSI_H

#include <linux/llist.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/vhost.h>
#include <linux/virtio_scsi.h>

#include "sqcq_vhost.h"

/* Queues: control, event, then up to this many request queues. */
#define SQCQ_CTRL_VQ		0
#define SQCQ_EVT_VQ		1
#define SQCQ_FIRST_REQ_VQ	2
#define SQCQ_MAX_REQ_VQS	128
#define SQCQ_NVQS		(SQCQ_FIRST_REQ_VQ + SQCQ_MAX_REQ_VQS)

/* virtio-scsi addresses a target with one byte: TPG tags 0..255. */
#define SQCQ_MAX_TARGETS	256
/* Hotplug events kept while the guest has no event buffer posted. */
#define SQCQ_MAX_PENDING_EVENTS	64

struct vhost_scsi_tpg;

struct vhost_scsi {
	struct vhost_dev vdev;
	struct dentry *dbg;		/* per-device debugfs directory */
	int id;				/* devN in debugfs and messages */

	/* Endpoint (ep_rwsem written, then vhost_scsi_mutex, to change). */
	struct rw_semaphore ep_rwsem;
	struct vhost_scsi_tpg *tpgs[SQCQ_MAX_TARGETS];
	bool ep_set;
	/*
	 * CLEAR_ENDPOINT unbound the targets: until SET_ENDPOINT binds them
	 * again (or the owner resets the device), the request and control
	 * queues leave what the guest publishes in their rings.  QEMU
	 * clears before it stops the rings at a VM stop and starts them
	 * before it binds again at cont; GET/SET_VRING_BASE then carry
	 * those requests across.  A device never bound answers BAD_TARGET.
	 */
	bool ep_paused;
	char ep_wwpn[224];

	/* Requests handed to the target core and not yet finished. */
	atomic_t inflight;
	wait_queue_head_t inflight_wq;
	/*
	 * The same per queue (each under that queue's vq->mutex): at most
	 * the ring size, so a guest reusing heads cannot pin without end.
	 */
	unsigned int vq_inflight[SQCQ_NVQS];
	unsigned int inflight_max;	/* most on one queue, for debugfs */
	/* Finished requests for the worker, one list per queue. */
	struct llist_head *done;

	/* Hotplug events not yet delivered (evt_lock). */
	spinlock_t evt_lock;
	struct list_head evt_list;
	unsigned int evt_count;
	bool events_missed;

	/* Counters (racy reads from debugfs). */
	atomic64_t stat_tmfs;
	atomic64_t stat_events;
	atomic64_t stat_bad_target;
	atomic64_t stat_busy;		/* refused: queue's in-flight limit */
	atomic64_t stat_bad_dir;	/* refused: direction vs CDB */
};

/* sqcq_tcm.c */
int vhost_scsi_register(bool takeover);
void vhost_scsi_unregister(void);
int vhost_scsi_tcm_init(struct vhost_scsi *s);
void vhost_scsi_tcm_free(struct vhost_scsi *s);
int vhost_scsi_set_endpoint(struct vhost_scsi *s, const struct vhost_scsi_target *t);
int vhost_scsi_clear_endpoint(struct vhost_scsi *s, const struct vhost_scsi_target *t);
/* Unbind every target and wait for every request; dev->mutex held. */
void vhost_scsi_drop_endpoint(struct vhost_scsi *s);
u32 vhost_scsi_cmd_one(struct vhost_vq *vq, struct vhost_req *req);
u32 vhost_scsi_tmf_one(struct vhost_vq *vq, struct vhost_req *req,
		       const struct virtio_scsi_ctrl_tmf_req *tmf);
void vhost_scsi_complete_vq(struct vhost_vq *vq);
void vhost_scsi_handle_evt(struct vhost_vq *vq);
void vhost_scsi_set_events_missed(struct vhost_scsi *s, bool missed);
bool vhost_scsi_get_events_missed(struct vhost_scsi *s);
void vhost_scsi_show_targets(struct seq_file *m, struct vhost_scsi *s);

#endif /* SQCQ_SCSI_H */
