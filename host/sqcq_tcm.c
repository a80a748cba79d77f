// SPDX-License-Identifier: GPL-2.0-only
/*
 * vhost_scsi_sqcq: the TCM fabric and the virtio-scsi data path.
 *
 * Fabric: "vhost_sqcq" (or "vhost" with takeover=1) with the configfs
 * layout of in-tree vhost-scsi:
 *   /sys/kernel/config/target/<fabric>/<wwpn>/tpgt_<n>/{nexus,lun/lun_<m>}
 * A WWPN is naa.*, eui.* (SAS), fc.* (FC) or iqn.* (iSCSI); a TPG tag n is
 * the virtio-scsi target number (0..255).  Writing an initiator name of
 * the same protocol to "nexus" creates the I_T nexus (the session commands
 * run in), writing NULL drops it.  VHOST_SCSI_SET_ENDPOINT binds every TPG
 * with a nexus under the given WWPN to one device; a bound TPG cannot be
 * removed (configfs dependency) and its nexus cannot be dropped.
 *
 * Data path (all in the device's worker, with the owner's mm):
 *   request  parse the virtio_scsi_cmd_req (any descriptor layout), look
 *            the target up, pin the data buffers (pin_user_pages_fast) into
 *            a scatterlist (COMPARE AND WRITE: copy its data-out, see
 *            vhost_scsi_cmd_bounce()) and hand the command to the target core;
 *   finish   the core calls queue_data_in/queue_status (or aborted_task)
 *            and then, once nothing refers to the command any more,
 *            release_cmd; release_cmd queues the command on its queue's
 *            done list and wakes the worker, which writes the response,
 *            publishes the used entry, signals, unpins and frees.
 * So each command ends exactly once, in release_cmd, whether it completed,
 * failed, or was aborted by a TMF.
 *
 * Data direction: the target core's emulated commands (INQUIRY, MODE
 * SENSE, REPORT LUNS, ...) fill the scatterlist whatever direction the
 * fabric gave, so a device-readable buffer (pinned without FOLL_WRITE:
 * it may be the zero page, a KSM page or a private file page) is accepted
 * only with an opcode that sends data to the device; anything else is
 * answered CHECK CONDITION before a page is pinned.  Opcodes whose data
 * may go either way (ATA PASS-THROUGH, variable-length CDBs) get their
 * device-readable buffers pinned for writing.
 *
 * Limits: at most the ring size of commands in flight per queue (BUSY
 * beyond); their memory is charged to the owner's memory cgroup (the
 * worker runs in the owner's cgroups).  The worker is the only place that
 * touches a ring; a command whose ring was stopped or restarted since it
 * was popped is freed without touching the ring.
 */
#include <linux/configfs.h>
#include <linux/ctype.h>
#include <linux/list.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/scatterlist.h>
#include <linux/sched/isolation.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <scsi/scsi_common.h>
#include <scsi/scsi_proto.h>
#include <target/target_core_base.h>
#include <target/target_core_fabric.h>

#include "sqcq_scsi.h"

/* Longest WWPN: it must fit vhost_scsi_target.vhost_wwpn with its NUL. */
#define SQCQ_WWPN_MAX		223
/* Pages one command may map (8 MiB of page-aligned data). */
#define SQCQ_MAX_SG_PAGES	2048u
/* Pages a command maps without allocating its arrays (up to 16 KiB). */
#define VHOST_SCSI_INLINE_PAGES	4
/*
 * Longest COMPARE AND WRITE data-out the target core accepts: it allows a
 * NUMBER OF LOGICAL BLOCKS of at most 1, blocks of at most 4 KiB, and the
 * data-out holds the compare block and then the write block.
 */
#define SQCQ_CAW_MAX_BYTES	(2 * 4096u)

/*
 * Requests one device may have handed to the target core at a time, all
 * its request queues together (each queue is also held to its ring size).
 * A guest can reuse buffers, so without it 128 queues of 32768 entries
 * could make the host allocate and pin for millions of requests; what is
 * allocated is charged to the VM's memory cgroup, and this bounds it where
 * no limit is set.  More are answered BUSY, as a full queue is; the
 * default covers 64 queues of QEMU's 256 entries.
 */
#define SQCQ_INFLIGHT_DEFAULT	16384u
#define SQCQ_INFLIGHT_MAX	BIT(22)
static unsigned int max_inflight = SQCQ_INFLIGHT_DEFAULT;

static int vhost_scsi_max_inflight_set(const char *val,
				       const struct kernel_param *kp)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (v < 1 || v > SQCQ_INFLIGHT_MAX)
		return -EINVAL;
	WRITE_ONCE(max_inflight, v);
	return 0;
}

static const struct kernel_param_ops vhost_scsi_max_inflight_ops = {
	.set = vhost_scsi_max_inflight_set,
	.get = param_get_uint,
};
module_param_cb(max_inflight, &vhost_scsi_max_inflight_ops, &max_inflight, 0644);
MODULE_PARM_DESC(max_inflight,
		 "requests one device may have in flight, all queues together; more are answered BUSY (1..4194304, default 16384; rw, checked per request)");

struct vhost_scsi_tport {
	u8 proto_id;			/* SCSI_PROTOCOL_* */
	char name[SQCQ_WWPN_MAX + 1];
	struct se_wwn wwn;
};

struct vhost_scsi_nexus {
	struct se_session *se_sess;
};

struct vhost_scsi_tpg {
	u16 tpgt;
	struct vhost_scsi_tport *tport;
	struct se_portal_group se_tpg;
	struct list_head node;		/* vhost_scsi_tpg_list */
	/* The rest: vhost_scsi_mutex. */
	struct vhost_scsi_nexus *nexus;
	char nexus_name[SQCQ_WWPN_MAX + 1];
	/*
	 * LUN link and unlink run with configfs' directory locks held, and
	 * binding takes those (target_depend_item()) under vhost_scsi_mutex:
	 * so link/unlink take only port_lock, which guards port_count and
	 * is held (inside vhost_scsi_mutex) whenever vs changes.
	 */
	struct mutex port_lock;
	unsigned int port_count;	/* linked LUNs */
	struct vhost_scsi *vs;		/* bound device, NULL: none */
	/*
	 * attrib/poll_cpu (vhost_scsi_mutex): the CPUs the bound device's
	 * pollers use in place of the module's poll_cpu, so that a VM's
	 * poller sits on CPUs of its own; empty: poll_cpu.
	 */
	char poll_cpu[SQCQ_POLL_CPU_MAXLEN];
	cpumask_var_t poll_cpus;
};

struct vhost_scsi_evt {
	struct list_head node;
	struct virtio_scsi_event ev;
};

/* One request handed to the target core (a command or a TMF). */
struct vhost_scsi_cmd {
	struct se_cmd se_cmd;
	struct vhost_scsi *s;
	struct vhost_vq *vq;
	struct llist_node done_node;
	u32 gen;			/* vq->start_gen when popped */
	u16 head;
	bool tmf;
	bool aborted;			/* aborted_task() was called */
	u8 tmf_response;		/* VIRTIO_SCSI_S_* of a TMF */
	bool data_in;			/* device writes the data buffers */
	bool pin_write;			/* pages pinned FOLL_WRITE */
	bool data_sent;			/* queue_data_in: the core read data */
	u32 data_len;
	u32 resp_len;			/* bytes of the response header */
	unsigned int npages;		/* pinned guest pages */
	struct page **pages;
	struct scatterlist *sgl;
	unsigned int nsg;		/* entries of sgl */
	struct page *bounce;		/* COMPARE AND WRITE data-out copy */
	/*
	 * pages and sgl point here when the data spans at most
	 * VHOST_SCSI_INLINE_PAGES pages (a 4 KiB request spans one or two),
	 * and the bounce copy's one entry: most requests then allocate the
	 * command alone, as the in-tree driver's preallocated commands do
	 * none.  Longer data allocates both arrays.
	 */
	struct page *inline_pages[VHOST_SCSI_INLINE_PAGES];
	struct scatterlist inline_sgl[VHOST_SCSI_INLINE_PAGES];
	/*
	 * COMPARE AND WRITE: the target core's execute and completion
	 * handlers, held back by write_pending until the command runs (see
	 * vhost_scsi_write_pending()).
	 */
	sense_reason_t (*caw_execute)(struct se_cmd *se_cmd);
	sense_reason_t (*caw_complete)(struct se_cmd *se_cmd, bool success,
				       int *post_ret);
	u8 cdb[VIRTIO_SCSI_CDB_SIZE];
	unsigned char sense[TRANSPORT_SENSE_BUFFER];
	/*
	 * The whole writable part as guest ranges, for the dirty log at
	 * completion (host/vhost_log.c): kept for every command, as logging
	 * may start while it is in flight.  Points behind resp_iov[].
	 */
	struct vhost_log_range *wlog;
	unsigned int wlog_cnt;
	unsigned int resp_cnt;
	struct iovec resp_iov[];	/* where the response header goes */
};

static DEFINE_MUTEX(vhost_scsi_mutex);
/* A TPG claimed by a SET_ENDPOINT that then failed is free again. */
static DECLARE_WAIT_QUEUE_HEAD(vhost_scsi_unclaim_wq);
static LIST_HEAD(vhost_scsi_tpg_list);
static struct target_core_fabric_ops vhost_scsi_ops;

static struct vhost_scsi *vhost_vq_scsi(struct vhost_vq *vq)
{
	return container_of(vq->dev, struct vhost_scsi, vdev);
}

static struct vhost_scsi_cmd *vhost_scsi_se_cmd(struct se_cmd *se_cmd)
{
	return container_of(se_cmd, struct vhost_scsi_cmd, se_cmd);
}

/* ------------------------------------------------------------------ */
/* Responses written at once (no target core involved)                 */
/* ------------------------------------------------------------------ */

/* A virtio_scsi_cmd_resp with only @response set, cut to what fits. */
static u32 vhost_scsi_cmd_reply(struct vhost_req *req, u8 response)
{
	struct virtio_scsi_cmd_resp resp = { .response = response };

	return vhc_req_copy_to(req, 0, &resp, min(req->in_len, sizeof(resp)));
}

static u32 vhost_scsi_cmd_reject(struct vhost_vq *vq, struct vhost_req *req,
				 u8 response, const char *why)
{
	pr_warn_ratelimited("dev%d vq %u: command rejected: %s\n",
			    vhost_vq_scsi(vq)->id, vq->index, why);
	return vhost_scsi_cmd_reply(req, response);
}

/* CHECK CONDITION, ILLEGAL REQUEST, INVALID FIELD IN CDB (fixed format). */
static u32 vhost_scsi_cmd_invalid_field(struct vhost_req *req)
{
	struct virtio_scsi_cmd_resp resp = {
		.response = VIRTIO_SCSI_S_OK,
		.status = SAM_STAT_CHECK_CONDITION,
		.sense_len = cpu_to_le32(18),
	};

	resp.sense[0] = 0x70;		/* current error, fixed format */
	resp.sense[2] = ILLEGAL_REQUEST;
	resp.sense[7] = 10;		/* additional sense length */
	resp.sense[12] = 0x24;		/* INVALID FIELD IN CDB */
	return vhc_req_copy_to(req, 0, &resp, min(req->in_len, sizeof(resp)));
}

/* The same for a command whose buffers contradict its CDB. */
static u32 vhost_scsi_cmd_bad_cdb(struct vhost_vq *vq, struct vhost_req *req,
				  u8 opcode)
{
	atomic64_inc(&vhost_vq_scsi(vq)->stat_bad_dir);
	pr_warn_ratelimited("dev%d vq %u: opcode 0x%02x with data buffers of the wrong direction, CHECK CONDITION\n",
			    vhost_vq_scsi(vq)->id, vq->index, opcode);
	return vhost_scsi_cmd_invalid_field(req);
}

/* ATA pass-through (SAT): data either way, only for a passthrough backstore. */
#define SQCQ_ATA_12		0xa1
#define SQCQ_ATA_16		0x85

enum vhost_scsi_dir_rule {
	SQCQ_DIR_IN,		/* no data, or device-writable buffers only */
	SQCQ_DIR_OUT,		/* no data, or device-readable buffers only */
	SQCQ_DIR_EITHER,
};

/*
 * Which buffers an opcode may come with.  SQCQ_DIR_OUT lists the commands
 * that send data to the device; the core only reads their buffers.
 * Everything else (the emulated commands above all) may write the data
 * buffers and so must get device-writable ones.
 */
static enum vhost_scsi_dir_rule vhost_scsi_cdb_dir(u8 opcode)
{
	switch (opcode) {
	case WRITE_6:
	case WRITE_10:
	case WRITE_12:
	case WRITE_16:
	case WRITE_VERIFY:
	case WRITE_VERIFY_12:
	case WRITE_VERIFY_16:
	case WRITE_SAME:
	case WRITE_SAME_16:
	case WRITE_LONG:
	case WRITE_LONG_2:
	case WRITE_BUFFER:
	case WRITE_ATTRIBUTE:
	case COMPARE_AND_WRITE:
	case UNMAP:
	case FORMAT_UNIT:
	case REASSIGN_BLOCKS:
	case MODE_SELECT:
	case MODE_SELECT_10:
	case LOG_SELECT:
	case SEND_DIAGNOSTIC:
	case SEND_VOLUME_TAG:
	case PERSISTENT_RESERVE_OUT:
	case ACCESS_CONTROL_OUT:
	case EXTENDED_COPY:
	case MAINTENANCE_OUT:
	case SECURITY_PROTOCOL_OUT:
	case SERVICE_ACTION_OUT_12:
	case SERVICE_ACTION_OUT_16:
		return SQCQ_DIR_OUT;
	case VARIABLE_LENGTH_CMD:	/* the core knows only data-out ones */
	case SQCQ_ATA_12:
	case SQCQ_ATA_16:
		return SQCQ_DIR_EITHER;
	default:
		return SQCQ_DIR_IN;
	}
}

static bool vhost_scsi_cdb_dir_ok(u8 opcode, size_t dout, size_t din)
{
	switch (vhost_scsi_cdb_dir(opcode)) {
	case SQCQ_DIR_IN:
		return !dout;
	case SQCQ_DIR_OUT:
		return !din;
	default:
		return true;
	}
}

/*
 * virtio-scsi single-level LUN: byte 0 is 1, byte 1 the target, bytes 2-3
 * the LUN in flat space (0x40 marker).  Returns the target or -1.
 */
static int vhost_scsi_lun_decode(const u8 lun[8], u64 *unpacked)
{
	if (lun[0] != 1)
		return -1;
	*unpacked = ((lun[2] << 8) | lun[3]) & 0x3fff;
	return lun[1];
}

/*
 * The LUN of an event, as QEMU and the in-tree vhost_scsi encode it and
 * Linux guests read it ((lun[2] << 8) | lun[3], unmasked): single level
 * below 256, flat space addressing (0x40) from 256 on.  Requests may use
 * either form (vhost_scsi_lun_decode() masks the 0x40).
 */
static void vhost_scsi_lun_encode(u8 lun[8], u16 target, u64 unpacked)
{
	memset(lun, 0, 8);
	lun[0] = 1;
	lun[1] = target;
	if (unpacked >= 256)
		lun[2] = 0x40 | ((unpacked >> 8) & 0x3f);
	lun[3] = unpacked & 0xff;
}

/* The session of target @target of @s, or NULL.  ep_rwsem held. */
static struct se_session *vhost_scsi_target_sess(struct vhost_scsi *s, int target)
{
	struct vhost_scsi_tpg *tpg;

	lockdep_assert_held(&s->ep_rwsem);
	if (target < 0 || target >= SQCQ_MAX_TARGETS)
		return NULL;
	tpg = s->tpgs[target];
	if (!tpg)
		return NULL;
	/* A bound TPG keeps its nexus until it is unbound. */
	return tpg->nexus->se_sess;
}

/* ------------------------------------------------------------------ */
/* Commands: mapping guest buffers                                     */
/* ------------------------------------------------------------------ */

/*
 * Visit the segments of @iov[0..cnt) after the first @skip bytes: calls
 * @fn for each (user address, length) piece.
 */
static int vhost_iov_walk(const struct iovec *iov, unsigned int cnt,
			  size_t skip,
			 int (*fn)(void *arg, unsigned long ua, size_t len),
			 void *arg)
{
	unsigned int i;
	int ret;

	for (i = 0; i < cnt; i++) {
		size_t len = iov[i].iov_len;
		unsigned long ua = (unsigned long)iov[i].iov_base;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		ret = fn(arg, ua + skip, len - skip);
		if (ret)
			return ret;
		skip = 0;
	}
	return 0;
}

static int vhost_count_pages(void *arg, unsigned long ua, size_t len)
{
	u64 *n = arg;

	*n += DIV_ROUND_UP((ua & ~PAGE_MASK) + (u64)len, PAGE_SIZE);
	return *n > SQCQ_MAX_SG_PAGES ? -E2BIG : 0;
}

static int vhost_pin_segment(void *arg, unsigned long ua, size_t len)
{
	struct vhost_scsi_cmd *cmd = arg;
	unsigned int off = ua & ~PAGE_MASK;
	int n = DIV_ROUND_UP(off + len, PAGE_SIZE);
	struct page **pages = cmd->pages + cmd->npages;
	int got, i;

	got = pin_user_pages_fast(ua & PAGE_MASK, n,
				  cmd->pin_write ? FOLL_WRITE : 0, pages);
	if (got > 0)
		cmd->npages += got;
	if (got != n)
		return got < 0 ? got : -EFAULT;
	for (i = 0; i < n; i++) {
		unsigned int chunk = min_t(size_t, len, PAGE_SIZE - off);

		sg_set_page(&cmd->sgl[cmd->npages - n + i], pages[i], chunk,
			    off);
		len -= chunk;
		off = 0;
	}
	return 0;
}

/*
 * COMPARE AND WRITE: the target core builds the scatterlist of the write
 * half itself from the first entry of ours, assuming the write block
 * follows the compare block in that entry's pages (target_core_sbc.c,
 * compare_and_write_callback(): the write entry is the first entry's
 * page at its offset plus one block).  Guest buffers split anywhere else
 * -- two descriptors, or one crossing a page boundary, which pinning cuts
 * in two -- would have it write the wrong bytes, or bytes of whatever page
 * follows the pinned one in host memory.  So the data-out (at most two
 * blocks: SQCQ_CAW_MAX_BYTES) is copied into one page-aligned, physically
 * contiguous buffer, handed over as a single entry.
 */
static int vhost_scsi_cmd_bounce(struct vhost_scsi_cmd *cmd, struct vhost_req *req,
				 size_t hdr_len)
{
	struct iov_iter it;

	cmd->bounce = alloc_pages(GFP_KERNEL_ACCOUNT,
				  get_order(cmd->data_len));
	if (!cmd->bounce)
		return -ENOMEM;
	cmd->sgl = cmd->inline_sgl;
	iov_iter_init(&it, ITER_SOURCE, req->iov, req->out_cnt, req->out_len);
	iov_iter_advance(&it, hdr_len);
	if (copy_from_iter(page_address(cmd->bounce), cmd->data_len, &it) !=
	    cmd->data_len)
		return -EFAULT;
	sg_init_table(cmd->sgl, 1);
	sg_set_page(cmd->sgl, cmd->bounce, cmd->data_len, 0);
	cmd->nsg = 1;
	return 0;
}

/* Pin the data part of @req into cmd->sgl. */
static int vhost_scsi_cmd_map(struct vhost_scsi_cmd *cmd, struct vhost_req *req,
			      size_t hdr_len)
{
	const struct iovec *iov = cmd->data_in ? req->iov + req->out_cnt :
						 req->iov;
	unsigned int cnt = cmd->data_in ? req->in_cnt : req->out_cnt;
	u64 npages = 0;
	int ret;

	if (cmd->cdb[0] == COMPARE_AND_WRITE)
		return vhost_scsi_cmd_bounce(cmd, req, hdr_len);
	ret = vhost_iov_walk(iov, cnt, hdr_len, vhost_count_pages, &npages);
	if (ret)
		return ret;
	if (npages <= VHOST_SCSI_INLINE_PAGES) {
		cmd->pages = cmd->inline_pages;
		cmd->sgl = cmd->inline_sgl;
	} else {
		cmd->pages = kvmalloc_array(npages, sizeof(*cmd->pages),
					    GFP_KERNEL_ACCOUNT);
		cmd->sgl = kvmalloc_array(npages, sizeof(*cmd->sgl),
					  GFP_KERNEL_ACCOUNT);
		if (!cmd->pages || !cmd->sgl)
			return -ENOMEM;
	}
	sg_init_table(cmd->sgl, npages);
	ret = vhost_iov_walk(iov, cnt, hdr_len, vhost_pin_segment, cmd);
	cmd->nsg = cmd->npages;
	return ret;
}

/* Free a command the target core no longer knows (worker context). */
static void vhost_scsi_cmd_free(struct vhost_scsi_cmd *cmd)
{
	struct vhost_scsi *s = cmd->s;

	lockdep_assert_held(&cmd->vq->mutex);
	s->vq_inflight[cmd->vq->index]--;
	if (cmd->npages)
		unpin_user_pages_dirty_lock(cmd->pages, cmd->npages,
					    cmd->pin_write);
	if (cmd->pages != cmd->inline_pages)
		kvfree(cmd->pages);
	if (cmd->sgl != cmd->inline_sgl)
		kvfree(cmd->sgl);
	if (cmd->bounce)
		__free_pages(cmd->bounce, get_order(cmd->data_len));
	kfree(cmd);
	/*
	 * Full barrier (atomic RMW with a result) before the wakeup; pairs
	 * with wait_event() in vhost_scsi_drop_endpoint().  The device cannot
	 * go away under us: its release waits for the count and then stops
	 * this worker.
	 */
	if (atomic_dec_and_test(&s->inflight))
		wake_up(&s->inflight_wq);
}

/*
 * A command struct for @req whose response header (@resp_len bytes at the
 * start of the writable part) is remembered for later.
 */
static struct vhost_scsi_cmd *vhost_scsi_cmd_alloc(struct vhost_vq *vq,
						   struct vhost_req *req, size_t resp_len)
{
	const struct iovec *in = req->iov + req->out_cnt;
	struct vhost_scsi *s = vhost_vq_scsi(vq);
	struct vhost_scsi_cmd *cmd;
	unsigned int k;
	size_t have = 0;

	lockdep_assert_held(&vq->mutex);
	/*
	 * A driver cannot have more requests outstanding than ring entries;
	 * one that reuses heads to get there is answered BUSY.
	 */
	if (s->vq_inflight[vq->index] >= vq->num) {
		atomic64_inc(&s->stat_busy);
		pr_warn_ratelimited("dev%d vq %u: %u requests in flight (ring size), BUSY\n",
				    s->id, vq->index, vq->num);
		return NULL;
	}
	/*
	 * The device's bound, for the request queues: task management on
	 * the control queue must still reach the core when they are full.
	 * Workers of other queues test and count apart, so the count may
	 * pass the bound by one request per worker.
	 */
	if (vq->index >= SQCQ_FIRST_REQ_VQ &&
	    atomic_read(&s->inflight) >= READ_ONCE(max_inflight)) {
		atomic64_inc(&s->stat_busy);
		pr_warn_ratelimited("dev%d: %d requests in flight (max_inflight), BUSY\n",
				    s->id, atomic_read(&s->inflight));
		return NULL;
	}
	for (k = 0; k < req->in_cnt && have < resp_len; k++)
		have += in[k].iov_len;
	/* in_cnt <= SQCQ_MAX_IOV: no overflow. */
	cmd = kzalloc(struct_size(cmd, resp_iov, k) +
		      req->in_cnt * sizeof(*cmd->wlog), GFP_KERNEL_ACCOUNT);
	if (!cmd)
		return NULL;
	cmd->wlog = (struct vhost_log_range *)&cmd->resp_iov[k];
	cmd->wlog_cnt = vhc_req_in_ranges(req, cmd->wlog);
	/* High-water mark for debugfs (racy between queues: a statistic). */
	if (++s->vq_inflight[vq->index] > READ_ONCE(s->inflight_max))
		WRITE_ONCE(s->inflight_max, s->vq_inflight[vq->index]);
	memcpy(cmd->resp_iov, in, k * sizeof(*in));
	cmd->resp_cnt = k;
	cmd->resp_len = resp_len;
	cmd->s = vhost_vq_scsi(vq);
	cmd->vq = vq;
	cmd->head = req->head;
	cmd->gen = vq->start_gen;
	atomic_inc(&cmd->s->inflight);
	return cmd;
}

static int vhost_scsi_task_attr(u8 attr)
{
	switch (attr) {
	case VIRTIO_SCSI_S_ORDERED:
		return TCM_ORDERED_TAG;
	case VIRTIO_SCSI_S_HEAD:
		return TCM_HEAD_TAG;
	case VIRTIO_SCSI_S_ACA:
		return TCM_ACA_TAG;
	default:
		return TCM_SIMPLE_TAG;
	}
}

/*
 * Where the target core runs a command's submission and completion work:
 * by default on the submitting CPU.  A request a poll thread took from a
 * CPU of poll_cpu would put that work, a wake-up a request, on the CPU
 * given to polling, and the poller would give way to it each time: off
 * that CPU instead, on an online CPU outside poll_cpu, a housekeeping one
 * where there is one (a nohz_full or isolated CPU runs vCPUs: work queued
 * there interrupts a running guest, a VM exit a request), else any (-1:
 * none, or the submitter is not on a poll CPU).  The mask is read without
 * its lock: a stale view only moves where the work runs.
 */
static bool vhost_scsi_is_poll_cpu(unsigned int cpu)
{
	/* Racy on purpose: a stale view only moves where work runs. */
	return data_race(cpumask_test_cpu(cpu, &sqcq_poll_cpu_mask));
}

static int vhost_scsi_submit_cpu(void)
{
	unsigned int cpu;

	const struct cpumask *hk = housekeeping_cpumask(HK_TYPE_KTHREAD);
	int any = -1;

	if (!vhost_scsi_is_poll_cpu(raw_smp_processor_id()))
		return -1;
	for_each_online_cpu(cpu) {
		if (vhost_scsi_is_poll_cpu(cpu))
			continue;
		if (cpumask_test_cpu(cpu, hk))
			return cpu;
		if (any < 0)
			any = cpu;
	}
	return any;
}

/*
 * Hand @cmd to the target core.  Returns < 0 when the core did not take
 * it (the caller answers and frees it); 0 when it did: from then on it ends
 * in release_cmd, also when the core failed it at once.
 */
static int vhost_scsi_cmd_submit(struct vhost_scsi_cmd *cmd, struct se_session *sess,
				 u64 lun, int attr)
{
	struct se_cmd *se = &cmd->se_cmd;
	enum dma_data_direction dir = DMA_NONE;
	struct scatterlist *sgl = cmd->nsg ? cmd->sgl : NULL;

	if (cmd->data_len)
		dir = cmd->data_in ? DMA_FROM_DEVICE : DMA_TO_DEVICE;
	return sqcq_target_submit(se, sess, cmd->cdb, cmd->sense, lun,
				  cmd->data_len, attr, dir, sgl, cmd->nsg,
				  vhost_scsi_submit_cpu());
}

/*
 * One request from a request queue (worker, vq->mutex and s->ep_rwsem
 * read-held).  Returns the bytes written for a request answered at once,
 * or SQCQ_REQ_ASYNC for one handed to the target core.
 */
u32 vhost_scsi_cmd_one(struct vhost_vq *vq, struct vhost_req *req)
{
	struct vhost_scsi *s = vhost_vq_scsi(vq);
	const size_t hdr = sizeof(struct virtio_scsi_cmd_req);
	const size_t rsp = sizeof(struct virtio_scsi_cmd_resp);
	struct virtio_scsi_cmd_req vreq;
	struct se_session *sess;
	struct vhost_scsi_cmd *cmd;
	size_t dout, din;
	u64 lun = 0;
	int ret;

	lockdep_assert_held(&vq->mutex);
	lockdep_assert_held(&s->ep_rwsem);

	if (req->out_len < hdr || req->in_len < rsp ||
	    vhc_req_copy_from(req, &vreq, hdr) != hdr)
		return vhost_scsi_cmd_reject(vq, req, VIRTIO_SCSI_S_FAILURE,
				       "request or response header too short");
	sess = vhost_scsi_target_sess(s, vhost_scsi_lun_decode(vreq.lun, &lun));
	if (!sess) {
		atomic64_inc(&s->stat_bad_target);
		return vhost_scsi_cmd_reply(req, VIRTIO_SCSI_S_BAD_TARGET);
	}
	if (scsi_command_size(vreq.cdb) > VIRTIO_SCSI_CDB_SIZE)
		return vhost_scsi_cmd_reject(vq, req, VIRTIO_SCSI_S_FAILURE,
				       "CDB longer than 32 bytes");
	dout = req->out_len - hdr;
	din = req->in_len - rsp;
	if (dout && din)
		return vhost_scsi_cmd_reject(vq, req, VIRTIO_SCSI_S_FAILURE,
				       "bidirectional commands are not supported");
	if (dout + din > (size_t)SQCQ_MAX_SG_PAGES * PAGE_SIZE)
		return vhost_scsi_cmd_reject(vq, req, VIRTIO_SCSI_S_OVERRUN,
				       "data longer than the transfer limit");
	if (!vhost_scsi_cdb_dir_ok(vreq.cdb[0], dout, din))
		return vhost_scsi_cmd_bad_cdb(vq, req, vreq.cdb[0]);
	/* More than the core accepts; it is copied (vhost_scsi_cmd_bounce()). */
	if (vreq.cdb[0] == COMPARE_AND_WRITE && dout > SQCQ_CAW_MAX_BYTES) {
		pr_warn_ratelimited("dev%d vq %u: COMPARE AND WRITE with %zu bytes of data-out, CHECK CONDITION\n",
				    s->id, vq->index, dout);
		return vhost_scsi_cmd_invalid_field(req);
	}

	cmd = vhost_scsi_cmd_alloc(vq, req, rsp);
	if (!cmd)
		return vhost_scsi_cmd_reply(req, VIRTIO_SCSI_S_BUSY);
	memcpy(cmd->cdb, vreq.cdb, sizeof(cmd->cdb));
	cmd->data_in = din;
	/*
	 * Data either way: the backstore may write a device-readable buffer
	 * (a passthrough HBA follows the CDB), so it is pinned for writing
	 * as well -- never the zero page, a KSM page or a file's page cache.
	 */
	cmd->pin_write = din ||
			 vhost_scsi_cdb_dir(vreq.cdb[0]) == SQCQ_DIR_EITHER;
	cmd->data_len = dout + din;
	if (cmd->data_len) {
		ret = vhost_scsi_cmd_map(cmd, req, cmd->data_in ? rsp : hdr);
		if (ret) {
			vhost_scsi_cmd_free(cmd);
			if (ret == -ENOMEM)
				return vhost_scsi_cmd_reply(req, VIRTIO_SCSI_S_BUSY);
			return vhost_scsi_cmd_reject(vq, req, ret == -E2BIG ?
					       VIRTIO_SCSI_S_OVERRUN :
					       VIRTIO_SCSI_S_FAILURE,
					       ret == -E2BIG ?
					       "data spans too many pages" :
					       "data buffer not in guest memory");
		}
	}
	/* The guest's tag, so ABORT_TASK can find the command. */
	cmd->se_cmd.tag = le64_to_cpu((__force __le64)vreq.tag);
	ret = vhost_scsi_cmd_submit(cmd, sess, lun,
				    vhost_scsi_task_attr(vreq.task_attr));
	if (ret < 0) {
		vhost_scsi_cmd_free(cmd);
		return vhost_scsi_cmd_reply(req, VIRTIO_SCSI_S_BUSY);
	}
	return SQCQ_REQ_ASYNC;
}

/* ------------------------------------------------------------------ */
/* Task management                                                     */
/* ------------------------------------------------------------------ */

static u32 vhost_scsi_tmf_reply(struct vhost_req *req, u8 response)
{
	struct virtio_scsi_ctrl_tmf_resp resp = { .response = response };

	return vhc_req_copy_to(req, 0, &resp, sizeof(resp));
}

/*
 * A TMF on the control queue (worker, vq->mutex and ep_rwsem read-held;
 * the caller checked the sizes).  LUN reset and abort task go to the
 * target core; the other functions are rejected, as the spec allows.
 */
u32 vhost_scsi_tmf_one(struct vhost_vq *vq, struct vhost_req *req,
		       const struct virtio_scsi_ctrl_tmf_req *tmf)
{
	struct vhost_scsi *s = vhost_vq_scsi(vq);
	struct se_session *sess;
	struct vhost_scsi_cmd *cmd;
	u8 tm_type;
	u64 lun = 0;
	int ret;

	lockdep_assert_held(&vq->mutex);
	lockdep_assert_held(&s->ep_rwsem);
	atomic64_inc(&s->stat_tmfs);
	switch (le32_to_cpu((__force __le32)tmf->subtype)) {
	case VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
		tm_type = TMR_LUN_RESET;
		break;
	case VIRTIO_SCSI_T_TMF_ABORT_TASK:
		tm_type = TMR_ABORT_TASK;
		break;
	default:
		return vhost_scsi_tmf_reply(req, VIRTIO_SCSI_S_FUNCTION_REJECTED);
	}
	sess = vhost_scsi_target_sess(s, vhost_scsi_lun_decode(tmf->lun, &lun));
	if (!sess)
		return vhost_scsi_tmf_reply(req, VIRTIO_SCSI_S_BAD_TARGET);

	cmd = vhost_scsi_cmd_alloc(vq, req, sizeof(struct virtio_scsi_ctrl_tmf_resp));
	if (!cmd)
		return vhost_scsi_tmf_reply(req, VIRTIO_SCSI_S_BUSY);
	cmd->tmf = true;
	cmd->tmf_response = VIRTIO_SCSI_S_FUNCTION_REJECTED;
	ret = target_submit_tmr(&cmd->se_cmd, sess, cmd->sense, lun, NULL,
				tm_type, GFP_KERNEL,
				le64_to_cpu((__force __le64)tmf->tag),
				TARGET_SCF_ACK_KREF);
	if (ret < 0) {
		vhost_scsi_cmd_free(cmd);
		return vhost_scsi_tmf_reply(req, VIRTIO_SCSI_S_FUNCTION_REJECTED);
	}
	return SQCQ_REQ_ASYNC;
}

static u8 vhost_scsi_tmr_to_virtio(u8 tmr_response)
{
	switch (tmr_response) {
	case TMR_FUNCTION_COMPLETE:
	case TMR_TASK_DOES_NOT_EXIST:	/* nothing left to abort */
		return VIRTIO_SCSI_S_OK;	/* FUNCTION COMPLETE in the spec */
	case TMR_LUN_DOES_NOT_EXIST:
		return VIRTIO_SCSI_S_INCORRECT_LUN;
	default:
		return VIRTIO_SCSI_S_FUNCTION_REJECTED;
	}
}

/* ------------------------------------------------------------------ */
/* Completion                                                          */
/* ------------------------------------------------------------------ */

/* Bytes of the used entry: response header plus data actually read. */
static u32 vhost_scsi_cmd_write_resp(struct vhost_scsi_cmd *cmd)
{
	struct vhost_req where = {
		.iov = cmd->resp_iov,
		.in_cnt = cmd->resp_cnt,
		.in_len = cmd->resp_len,
	};
	struct se_cmd *se = &cmd->se_cmd;
	struct virtio_scsi_cmd_resp resp = {};
	u32 resid = 0, len;

	if (cmd->tmf) {
		struct virtio_scsi_ctrl_tmf_resp tr = {
			.response = cmd->tmf_response,
		};

		return vhc_req_copy_to(&where, 0, &tr, sizeof(tr));
	}
	if (cmd->aborted) {
		resp.response = VIRTIO_SCSI_S_ABORTED;
	} else {
		if (se->se_cmd_flags & (SCF_UNDERFLOW_BIT | SCF_OVERFLOW_BIT))
			resid = se->residual_count;
		resp.resid = cpu_to_le32(resid);
		resp.status = se->scsi_status;
		resp.sense_len = cpu_to_le32(min_t(u32, se->scsi_sense_length,
						   sizeof(resp.sense)));
		memcpy(resp.sense, cmd->sense,
		       min_t(size_t, se->scsi_sense_length,
			     min(sizeof(resp.sense), sizeof(cmd->sense))));
		resp.response = VIRTIO_SCSI_S_OK;
	}
	len = vhc_req_copy_to(&where, 0, &resp, sizeof(resp));
	/* Data only when the core sent it (not with a CHECK CONDITION). */
	if (cmd->data_in && cmd->data_sent && !cmd->aborted &&
	    resid < cmd->data_len)
		len += cmd->data_len - resid;
	return len;
}

/*
 * Finish the commands of @vq the target core released (worker, vq->mutex
 * held).  Called for stopped rings too, to free their commands.
 */
static unsigned int vhost_sqcq_complete_one_vq(struct vhost_vq *vq)
{
	struct vhost_scsi *s = vhost_vq_scsi(vq);
	struct llist_node *list = llist_del_all(&s->done[vq->index]);
	struct vhost_scsi_cmd *cmd, *tmp;
	unsigned int pushed = 0, n = 0;

	lockdep_assert_held(&vq->mutex);
	/* llist is LIFO: answer in the order the core finished them. */
	list = llist_reverse_order(list);
	llist_for_each_entry_safe(cmd, tmp, list, done_node) {
		if (vq->running && !vq->broken && cmd->gen == vq->start_gen) {
			u32 len = vhost_scsi_cmd_write_resp(cmd);

			/* Data and response written: log, then publish. */
			if (!vhc_vq_log_ranges(vq, cmd->wlog, cmd->wlog_cnt) &&
			    !vhc_vq_push_used(vq, cmd->head, len))
				pushed++;
		}
		vhost_scsi_cmd_free(cmd);
		/* Up to a ring's worth (32768) of unpinning: take breaks. */
		if (!(++n % SQCQ_VQ_WEIGHT))
			cond_resched();
	}
	if (pushed && !vq->broken)
		vhc_vq_notify(vq);
	return pushed;
}

void vhost_scsi_complete_vq(struct vhost_vq *vq)
{
	struct vhost_scsi *s = vhost_vq_scsi(vq);
	unsigned int i;

	if (vq->index == SQCQ_CTRL_VQ && !llist_empty(&s->done[vq->index])) {
		/*
		 * A TMF answers only after the commands it ended: the core
		 * released those before it released the TMF, so their
		 * entries are on the done lists now; publish them first
		 * (the driver reads them as soon as it sees the TMF answer).
		 * Lock order: the control queue, then each request queue;
		 * nobody else holds two queue mutexes.
		 */
		for (i = SQCQ_FIRST_REQ_VQ; i < s->vdev.nvqs; i++) {
			struct vhost_vq *rq = &s->vdev.vqs[i];

			if (llist_empty(&s->done[i]))
				continue;
			mutex_lock_nested(&rq->mutex, 1);
			vhost_sqcq_complete_one_vq(rq);
			mutex_unlock(&rq->mutex);
		}
	}
	vhost_sqcq_complete_one_vq(vq);
}

/* ---- target core callbacks ---- */

static int vhost_scsi_queue_status(struct se_cmd *se_cmd)
{
	/* The answer is written when the last reference goes (release). */
	transport_generic_free_cmd(se_cmd, 0);
	return 0;
}

static int vhost_scsi_queue_data_in(struct se_cmd *se_cmd)
{
	/* Read data is in the guest's buffers; status follows with it. */
	vhost_scsi_se_cmd(se_cmd)->data_sent = true;
	transport_generic_free_cmd(se_cmd, 0);
	return 0;
}

static void vhost_scsi_queue_tm_rsp(struct se_cmd *se_cmd)
{
	struct vhost_scsi_cmd *cmd = vhost_scsi_se_cmd(se_cmd);

	/* se_tmr_req is freed before release_cmd: keep the answer. */
	cmd->tmf_response = vhost_scsi_tmr_to_virtio(se_cmd->se_tmr_req->response);
	transport_generic_free_cmd(se_cmd, 0);
}

static void vhost_scsi_aborted_task(struct se_cmd *se_cmd)
{
	/* The core drops its references next; release_cmd answers ABORTED. */
	vhost_scsi_se_cmd(se_cmd)->aborted = true;
}

static void vhost_scsi_release_cmd(struct se_cmd *se_cmd)
{
	struct vhost_scsi_cmd *cmd = vhost_scsi_se_cmd(se_cmd);
	struct vhost_scsi *s = cmd->s;
	struct vhost_vq *vq = cmd->vq;

	/*
	 * Any context.  Once llist_add() has published @cmd the worker may
	 * free it, so only the locals are used after it.  The device itself
	 * stays: the RCU read section ends before anyone who saw this
	 * command finished (s->inflight reaching 0) can free the device or
	 * stop its worker -- vhost_scsi_endpoint_release() waits for the count
	 * and then for a grace period.
	 *
	 * llist_add() is a full barrier, so the worker that takes the list
	 * sees every field written above; the wakeup pairs with the bit
	 * test in the worker loop (vhc_vq_queue_work()).
	 */
	rcu_read_lock();
	llist_add(&cmd->done_node, &s->done[vq->index]);
	vhc_vq_queue_work(vq);
	rcu_read_unlock();
}

static int vhost_scsi_check_stop_free(struct se_cmd *se_cmd)
{
	return target_put_sess_cmd(se_cmd);
}

/* COMPARE AND WRITE starts: give the core its completion handler back. */
static sense_reason_t vhost_scsi_caw_execute(struct se_cmd *se_cmd)
{
	struct vhost_scsi_cmd *cmd = vhost_scsi_se_cmd(se_cmd);

	se_cmd->transport_complete_callback = cmd->caw_complete;
	return cmd->caw_execute(se_cmd);
}

static int vhost_scsi_write_pending(struct se_cmd *se_cmd)
{
	struct vhost_scsi_cmd *cmd = vhost_scsi_se_cmd(se_cmd);

	/*
	 * Work around a target core bug.  Its COMPARE AND WRITE completion
	 * handler (compare_and_write_callback()) is also called with
	 * success == false when the command fails or is aborted before it
	 * ran: by transport_generic_request_failure() after the checks of
	 * __target_execute_cmd() (a pending UNIT ATTENTION, e.g. after a
	 * LUN reset or a LUN change; a reservation conflict; ALUA), and by
	 * target_cmd_interrupted() in target_execute_cmd().  By then both
	 * scatterlists exist (the read buffer is allocated by
	 * transport_generic_new_cmd()), so the handler takes the failure for
	 * one after the read: it compares against the never-read buffer, and
	 * on a match submits the write, which writes the block although the
	 * command failed and completes the command a second time (rd_mcp
	 * fails that write with TCM_INCORRECT_AMOUNT_OF_DATA, as the data
	 * length is still two blocks): the failure path that called the
	 * handler then puts references already gone (refcount underflow)
	 * and uses a command whose release_cmd has run.  On a miscompare it
	 * releases dev->caw_sem, which sbc_compare_and_write() never took.
	 *
	 * So the handler is held back until the core calls the execute
	 * handler, i.e. until sbc_compare_and_write() runs and takes
	 * caw_sem; a failure before that finds no handler and just fails
	 * the command.  The core reads these two fields only on the
	 * execution path, which starts with target_execute_cmd() below, so
	 * changing them here races with nothing.
	 */
	if ((se_cmd->se_cmd_flags & SCF_COMPARE_AND_WRITE) &&
	    se_cmd->transport_complete_callback && se_cmd->execute_cmd &&
	    se_cmd->execute_cmd != vhost_scsi_caw_execute) {
		cmd->caw_complete = se_cmd->transport_complete_callback;
		cmd->caw_execute = se_cmd->execute_cmd;
		se_cmd->transport_complete_callback = NULL;
		se_cmd->execute_cmd = vhost_scsi_caw_execute;
	}
	/* Data-out buffers are mapped before submission: run it now. */
	target_execute_cmd(se_cmd);
	return 0;
}

static int vhost_scsi_true(struct se_portal_group *se_tpg)
{
	return 1;
}

static int vhost_scsi_false(struct se_portal_group *se_tpg)
{
	return 0;
}

static u32 vhost_scsi_inst_index(struct se_portal_group *se_tpg)
{
	return 1;
}

static u32 vhost_scsi_sess_index(struct se_session *se_sess)
{
	return 0;
}

static void vhost_scsi_node_attrs(struct se_node_acl *nacl)
{
}

static int vhost_scsi_cmd_state(struct se_cmd *se_cmd)
{
	return 0;
}

/* ------------------------------------------------------------------ */
/* Events (hotplug)                                                    */
/* ------------------------------------------------------------------ */

void vhost_scsi_set_events_missed(struct vhost_scsi *s, bool missed)
{
	spin_lock(&s->evt_lock);
	s->events_missed = missed;
	spin_unlock(&s->evt_lock);
	if (missed)
		vhc_vq_queue_work(&s->vdev.vqs[SQCQ_EVT_VQ]);
}

bool vhost_scsi_get_events_missed(struct vhost_scsi *s)
{
	bool missed;

	spin_lock(&s->evt_lock);
	missed = s->events_missed;
	spin_unlock(&s->evt_lock);
	return missed;
}

static void vhost_scsi_flush_events(struct vhost_scsi *s)
{
	struct vhost_scsi_evt *e, *tmp;
	LIST_HEAD(gone);

	spin_lock(&s->evt_lock);
	list_splice_init(&s->evt_list, &gone);
	s->evt_count = 0;
	spin_unlock(&s->evt_lock);
	list_for_each_entry_safe(e, tmp, &gone, node)
		kfree(e);
}

/* Tell @s that a LUN of @tpg came or went.  tpg->port_lock held. */
static void vhost_scsi_lun_event(struct vhost_scsi *s, struct vhost_scsi_tpg *tpg,
				 u64 unpacked, u32 reason)
{
	struct vhost_scsi_evt *e;

	lockdep_assert_held(&tpg->port_lock);
	if (!vhc_dev_has_feature(&s->vdev, VIRTIO_SCSI_F_HOTPLUG))
		return;
	e = kzalloc(sizeof(*e), GFP_KERNEL_ACCOUNT);
	spin_lock(&s->evt_lock);
	if (!e || s->evt_count >= SQCQ_MAX_PENDING_EVENTS) {
		s->events_missed = true;
		spin_unlock(&s->evt_lock);
		kfree(e);
	} else {
		e->ev.event = cpu_to_le32(VIRTIO_SCSI_T_TRANSPORT_RESET);
		e->ev.reason = cpu_to_le32(reason);
		vhost_scsi_lun_encode(e->ev.lun, tpg->tpgt, unpacked);
		list_add_tail(&e->node, &s->evt_list);
		s->evt_count++;
		spin_unlock(&s->evt_lock);
	}
	vhc_vq_queue_work(&s->vdev.vqs[SQCQ_EVT_VQ]);
}

/*
 * Deliver pending events into the guest's event buffers (worker, event
 * vq->mutex held, ring running).  What finds no buffer stays pending; the
 * driver kicks when it posts buffers.  A lost event (queue full) is
 * reported by VIRTIO_SCSI_T_EVENTS_MISSED on the next one delivered, or on
 * an otherwise empty NO_EVENT.
 */
void vhost_scsi_handle_evt(struct vhost_vq *vq)
{
	struct vhost_scsi *s = vhost_vq_scsi(vq);
	struct virtio_scsi_event ev;
	unsigned int pushed = 0, served = 0;
	struct vhost_scsi_evt *e;
	u32 len;
	struct vhost_req req;
	int ret;

	lockdep_assert_held(&vq->mutex);
	while (!vq->broken) {
		/*
		 * A guest that keeps posting buffers (too small ones are used
		 * up without taking the event) must not keep the worker, and
		 * this queue's mutex, for ever.
		 */
		if (served++ >= SQCQ_VQ_WEIGHT) {
			vhc_vq_queue_work(vq);
			break;
		}
		spin_lock(&s->evt_lock);
		e = list_first_entry_or_null(&s->evt_list, struct vhost_scsi_evt,
					     node);
		if (!e && !s->events_missed) {
			spin_unlock(&s->evt_lock);
			break;
		}
		spin_unlock(&s->evt_lock);

		ret = vhc_vq_pop(vq, &req);
		if (ret < 0)
			break;
		if (!ret) {
			if (vhc_vq_enable_kicks(vq))
				continue;
			break;
		}
		if (req.in_len < sizeof(ev)) {
			pr_warn_ratelimited("dev%d: event buffer of %zu bytes is too small\n",
					    s->id, req.in_len);
			if (!vhc_vq_push_used(vq, req.head, 0))
				pushed++;
			continue;
		}
		spin_lock(&s->evt_lock);
		e = list_first_entry_or_null(&s->evt_list, struct vhost_scsi_evt,
					     node);
		if (e) {
			list_del(&e->node);
			s->evt_count--;
			ev = e->ev;
		} else {
			memset(&ev, 0, sizeof(ev));
			ev.event = cpu_to_le32(VIRTIO_SCSI_T_NO_EVENT);
		}
		if (s->events_missed)
			ev.event |= cpu_to_le32(VIRTIO_SCSI_T_EVENTS_MISSED);
		s->events_missed = false;
		spin_unlock(&s->evt_lock);
		kfree(e);

		len = vhc_req_copy_to(&req, 0, &ev, sizeof(ev));
		if (vhc_vq_log_req(vq, &req) ||
		    vhc_vq_push_used(vq, req.head, len))
			break;
		pushed++;
		atomic64_inc(&s->stat_events);
	}
	if (pushed && !vq->broken)
		vhc_vq_notify(vq);
}

/* ------------------------------------------------------------------ */
/* Endpoints                                                           */
/* ------------------------------------------------------------------ */

/* Bind @tpg to @s (NULL: unbind); vhost_scsi_mutex held. */
static void vhost_scsi_tpg_set_vs(struct vhost_scsi_tpg *tpg, struct vhost_scsi *s)
{
	lockdep_assert_held(&vhost_scsi_mutex);
	/* Link/unlink see the device only while it can take events. */
	mutex_lock(&tpg->port_lock);
	WRITE_ONCE(tpg->vs, s);	/* read locklessly by vhost_scsi_drop_tpg() */
	mutex_unlock(&tpg->port_lock);
}

/*
 * The device's own poll CPUs: those of its lowest bound TPG that names
 * any (attrib/poll_cpu), none while it is unbound.  vhost_scsi_mutex
 * held (it guards s->tpgs for readers and each TPG's poll_cpus).
 */
static void vhost_scsi_apply_poll_cpus(struct vhost_scsi *s)
{
	const struct cpumask *cpus = cpu_none_mask;
	unsigned int i;

	lockdep_assert_held(&vhost_scsi_mutex);
	for (i = 0; s->ep_set && i < SQCQ_MAX_TARGETS; i++) {
		if (s->tpgs[i] && !cpumask_empty(s->tpgs[i]->poll_cpus)) {
			cpus = s->tpgs[i]->poll_cpus;
			break;
		}
	}
	vhost_sqcq_set_cpus(&s->vdev, cpus);
}

/*
 * Unbinding, step 1 (vhost_scsi_ep_lock() held): new requests find no target,
 * or, with @pause (CLEAR_ENDPOINT), stay in the rings (ep_paused).
 * The TPGs stay bound to @s (tpg->vs) until step 2, so neither another
 * device nor configfs can take them while requests still use them.
 */
static void vhost_scsi_endpoint_close(struct vhost_scsi *s, bool pause)
{
	lockdep_assert_held(&s->ep_rwsem);
	lockdep_assert_held(&vhost_scsi_mutex);
	memset(s->tpgs, 0, sizeof(s->tpgs));
	s->ep_set = false;
	s->ep_paused = pause;
	s->ep_wwpn[0] = '\0';
	vhost_scsi_apply_poll_cpus(s);
}

/*
 * The device's endpoint lock, then the global one.  down_write() waits for
 * a worker batch in progress (later batches see the new table), and a
 * batch can wait long: a page fault on guest memory that stalls (FUSE,
 * userfaultfd).  So it is taken first, outside vhost_scsi_mutex, which
 * every other device's endpoint ioctls, release and configfs operations
 * need: one guest's stall stays its own.
 */
static void vhost_scsi_ep_lock(struct vhost_scsi *s)
{
	down_write(&s->ep_rwsem);
	mutex_lock(&vhost_scsi_mutex);
}

static void vhost_scsi_ep_unlock(struct vhost_scsi *s)
{
	mutex_unlock(&vhost_scsi_mutex);
	up_write(&s->ep_rwsem);
}

/*
 * Step 2, without vhost_scsi_mutex (dev->mutex held, so no other endpoint
 * ioctl of @s runs): wait for @s's requests, then release its TPGs.  The
 * wait is for this guest's requests alone and must not stall every other
 * device's endpoint and configfs operations.
 */
static void vhost_scsi_endpoint_release(struct vhost_scsi *s)
{
	struct vhost_scsi_tpg *tpg;

	lockdep_assert_held(&s->vdev.mutex);
	/* Pairs with atomic_dec_and_test() + wake_up() in vhost_scsi_cmd_free(). */
	wait_event(s->inflight_wq, !atomic_read(&s->inflight));
	/* release_cmd callers may still be waking our worker: see there. */
	synchronize_rcu();

	mutex_lock(&vhost_scsi_mutex);
	list_for_each_entry(tpg, &vhost_scsi_tpg_list, node) {
		if (tpg->vs != s)
			continue;
		vhost_scsi_tpg_set_vs(tpg, NULL);
		target_undepend_item(&tpg->se_tpg.tpg_group.cg_item);
	}
	mutex_unlock(&vhost_scsi_mutex);
}

static bool vhost_scsi_tpg_matches(struct vhost_scsi_tpg *tpg, const char *wwpn)
{
	return tpg->nexus && !strcmp(tpg->tport->name, wwpn);
}

/*
 * Claim the TPGs of @wwpn for @s (tpg->vs), at most SQCQ_MAX_TARGETS, into
 * @claimed; vhost_scsi_mutex held.  Returns how many, or a negative errno
 * when one is in use or there is none.
 */
static int vhost_scsi_tpgs_claim(struct vhost_scsi *s, const char *wwpn,
				 struct vhost_scsi_tpg **claimed)
{
	struct vhost_scsi_tpg *tpg;
	int n = 0, i;

	lockdep_assert_held(&vhost_scsi_mutex);
	list_for_each_entry(tpg, &vhost_scsi_tpg_list, node) {
		if (!vhost_scsi_tpg_matches(tpg, wwpn))
			continue;
		if (tpg->vs) {
			pr_warn_ratelimited("dev%d: %s tpgt_%u is in use by dev%d\n",
					    s->id, tpg->tport->name, tpg->tpgt,
					    tpg->vs->id);
			return -EBUSY;
		}
		/* Tags are unique under a port: at most one per target. */
		if (n == SQCQ_MAX_TARGETS)
			return -E2BIG;
		claimed[n++] = tpg;
	}
	if (!n) {
		pr_warn_ratelimited("dev%d: no target port \"%s\" with an I_T nexus\n",
				    s->id, wwpn);
		return -ENODEV;
	}
	for (i = 0; i < n; i++)
		vhost_scsi_tpg_set_vs(claimed[i], s);
	return n;
}

/*
 * Binding takes a configfs dependency on each TPG, so that its directory
 * (and the TPG) cannot go while bound.  target_depend_item() takes
 * configfs directory locks, under which configfs calls make_tpg,
 * drop_tpg and LUN link/unlink; so it runs without vhost_scsi_mutex, on
 * TPGs claimed for @s beforehand (no other device, nexus drop or
 * vhost_scsi_drop_tpg() touches a claimed TPG).
 */
int vhost_scsi_set_endpoint(struct vhost_scsi *s, const struct vhost_scsi_target *t)
{
	struct vhost_scsi_tpg **claimed;
	int n, i, depended = 0, ret = 0;

	lockdep_assert_held(&s->vdev.mutex);
	claimed = kcalloc(SQCQ_MAX_TARGETS, sizeof(*claimed), GFP_KERNEL);
	if (!claimed)
		return -ENOMEM;
	mutex_lock(&vhost_scsi_mutex);
	n = s->ep_set ? -EEXIST : vhost_scsi_tpgs_claim(s, t->vhost_wwpn, claimed);
	mutex_unlock(&vhost_scsi_mutex);
	if (n < 0) {
		kfree(claimed);
		return n;
	}

	for (i = 0; i < n && !ret; i++) {
		ret = target_depend_item(&claimed[i]->se_tpg.tpg_group.cg_item);
		if (!ret)
			depended++;
	}

	vhost_scsi_ep_lock(s);
	for (i = 0; i < n; i++) {
		if (!ret) {
			s->tpgs[claimed[i]->tpgt] = claimed[i];
			continue;
		}
		/* A TPG went meanwhile (rmdir won): give every claim back. */
		if (i < depended)
			target_undepend_item(&claimed[i]->se_tpg.tpg_group.cg_item);
		vhost_scsi_tpg_set_vs(claimed[i], NULL);
	}
	if (!ret) {
		s->ep_set = true;
		s->ep_paused = false;
		strscpy(s->ep_wwpn, t->vhost_wwpn, sizeof(s->ep_wwpn));
		vhost_scsi_apply_poll_cpus(s);
	}
	vhost_scsi_ep_unlock(s);
	kfree(claimed);
	if (ret) {
		/* Pairs with the wait in vhost_scsi_drop_tpg(). */
		wake_up_all(&vhost_scsi_unclaim_wq);
		return ret;
	}
	vhost_dev_log(&s->vdev, KERN_INFO, "dev%d: endpoint %s bound (%d target%s)\n",
		      s->id, s->ep_wwpn, n, n == 1 ? "" : "s");
	/* Requests may have waited for the targets (ep_paused). */
	for (i = SQCQ_CTRL_VQ; i < s->vdev.nvqs; i++)
		if (i != SQCQ_EVT_VQ && READ_ONCE(s->vdev.vqs[i].running))
			vhc_vq_queue_work(&s->vdev.vqs[i]);
	return 0;
}

int vhost_scsi_clear_endpoint(struct vhost_scsi *s, const struct vhost_scsi_target *t)
{
	vhost_scsi_ep_lock(s);
	if (!s->ep_set) {
		/* QEMU clears at every stop, also when nothing was bound. */
		vhost_scsi_ep_unlock(s);
		vhc_dev_stop_doorbells(&s->vdev, "endpoint cleared");
		return 0;
	}
	if (strcmp(s->ep_wwpn, t->vhost_wwpn)) {
		pr_warn_ratelimited("dev%d: CLEAR_ENDPOINT for \"%s\" but \"%s\" is bound\n",
				    s->id, t->vhost_wwpn, s->ep_wwpn);
		vhost_scsi_ep_unlock(s);
		return -EINVAL;
	}
	vhost_scsi_endpoint_close(s, true);
	vhost_scsi_ep_unlock(s);
	/*
	 * SQ/CQ ends after ep_set is clear: a setup request served after
	 * this detach is refused (vhost_scsi_ctrl_sqcq()), one served before is
	 * removed by it.
	 */
	vhc_dev_stop_doorbells(&s->vdev, "endpoint cleared");
	vhost_scsi_endpoint_release(s);
	vhost_dev_log(&s->vdev, KERN_INFO, "dev%d: endpoint %s cleared\n",
		      s->id, t->vhost_wwpn);
	return 0;
}

void vhost_scsi_drop_endpoint(struct vhost_scsi *s)
{
	bool bound;

	vhost_scsi_ep_lock(s);
	bound = s->ep_set;
	/* Also ends a pause (CLEAR_ENDPOINT before the reset). */
	vhost_scsi_endpoint_close(s, false);
	vhost_scsi_ep_unlock(s);
	if (bound)
		vhost_scsi_endpoint_release(s);
	/* Nothing is in flight: no new event can be queued for us. */
	vhost_scsi_flush_events(s);
	vhost_scsi_set_events_missed(s, false);
}

void vhost_scsi_show_targets(struct seq_file *m, struct vhost_scsi *s)
{
	unsigned int i;

	down_read(&s->ep_rwsem);
	seq_printf(m, "endpoint: %s\n", s->ep_set ? s->ep_wwpn : "-");
	for (i = 0; i < SQCQ_MAX_TARGETS; i++)
		if (s->tpgs[i])
			seq_printf(m, "target %u: %s tpgt_%u\n", i,
				   s->tpgs[i]->tport->name, s->tpgs[i]->tpgt);
	up_read(&s->ep_rwsem);
	seq_printf(m, "inflight: %d\ninflight_max: %u\ntmfs: %lld\nevents: %lld\nbad_target: %lld\nbusy: %lld\nbad_direction: %lld\n",
		   atomic_read(&s->inflight), READ_ONCE(s->inflight_max),
		   (long long)atomic64_read(&s->stat_tmfs),
		   (long long)atomic64_read(&s->stat_events),
		   (long long)atomic64_read(&s->stat_bad_target),
		   (long long)atomic64_read(&s->stat_busy),
		   (long long)atomic64_read(&s->stat_bad_dir));
}

int vhost_scsi_tcm_init(struct vhost_scsi *s)
{
	unsigned int i;

	init_rwsem(&s->ep_rwsem);
	init_waitqueue_head(&s->inflight_wq);
	atomic_set(&s->inflight, 0);
	spin_lock_init(&s->evt_lock);
	INIT_LIST_HEAD(&s->evt_list);
	s->done = kcalloc(SQCQ_NVQS, sizeof(*s->done), GFP_KERNEL_ACCOUNT);
	if (!s->done)
		return -ENOMEM;
	for (i = 0; i < SQCQ_NVQS; i++)
		init_llist_head(&s->done[i]);
	return 0;
}

void vhost_scsi_tcm_free(struct vhost_scsi *s)
{
	vhost_scsi_flush_events(s);
	kfree(s->done);
	s->done = NULL;
}

/* ------------------------------------------------------------------ */
/* configfs: nexus                                                     */
/* ------------------------------------------------------------------ */

static struct vhost_scsi_tpg *vhost_scsi_tpg_of(struct se_portal_group *se_tpg)
{
	return container_of(se_tpg, struct vhost_scsi_tpg, se_tpg);
}

static struct se_portal_group *vhost_scsi_item_tpg(struct config_item *item)
{
	return container_of(to_config_group(item), struct se_portal_group,
			    tpg_group);
}

/* SCSI_PROTOCOL_* of a port name by its prefix, or -1. */
static int vhost_scsi_name_proto(const char *name)
{
	if (!strncmp(name, "naa.", 4) || !strncmp(name, "eui.", 4))
		return SCSI_PROTOCOL_SAS;
	if (!strncmp(name, "fc.", 3))
		return SCSI_PROTOCOL_FCP;
	if (!strncmp(name, "iqn.", 4))
		return SCSI_PROTOCOL_ISCSI;
	return -1;
}

static int vhost_scsi_make_nexus(struct vhost_scsi_tpg *tpg, const char *name)
{
	struct vhost_scsi_nexus *nexus;

	lockdep_assert_held(&vhost_scsi_mutex);
	if (tpg->nexus)
		return -EEXIST;
	nexus = kzalloc(sizeof(*nexus), GFP_KERNEL);
	if (!nexus)
		return -ENOMEM;
	/* Demo mode: the core creates the node ACL for this initiator. */
	nexus->se_sess = target_setup_session(&tpg->se_tpg, 0, 0,
					      TARGET_PROT_NORMAL, name, nexus,
					      NULL);
	if (IS_ERR(nexus->se_sess)) {
		int ret = PTR_ERR(nexus->se_sess);

		kfree(nexus);
		return ret;
	}
	tpg->nexus = nexus;
	strscpy(tpg->nexus_name, name, sizeof(tpg->nexus_name));
	return 0;
}

static int vhost_scsi_drop_nexus(struct vhost_scsi_tpg *tpg)
{
	struct vhost_scsi_nexus *nexus = tpg->nexus;
	unsigned int ports;

	lockdep_assert_held(&vhost_scsi_mutex);
	if (!nexus)
		return -ENODEV;
	mutex_lock(&tpg->port_lock);
	ports = tpg->port_count;
	mutex_unlock(&tpg->port_lock);
	if (ports) {
		pr_warn("%s tpgt_%u: unlink the %u LUN(s) before dropping the nexus\n",
			tpg->tport->name, tpg->tpgt, ports);
		return -EBUSY;
	}
	if (tpg->vs) {
		pr_warn("%s tpgt_%u: in use by dev%d (VHOST_SCSI_CLEAR_ENDPOINT first)\n",
			tpg->tport->name, tpg->tpgt, tpg->vs->id);
		return -EBUSY;
	}
	target_remove_session(nexus->se_sess);
	tpg->nexus = NULL;
	tpg->nexus_name[0] = '\0';
	kfree(nexus);
	return 0;
}

static ssize_t vhost_scsi_tpg_nexus_show(struct config_item *item, char *page)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_tpg_of(vhost_scsi_item_tpg(item));
	ssize_t ret;

	mutex_lock(&vhost_scsi_mutex);
	ret = tpg->nexus ? sysfs_emit(page, "%s\n", tpg->nexus_name) : -ENODEV;
	mutex_unlock(&vhost_scsi_mutex);
	return ret;
}

static ssize_t vhost_scsi_tpg_nexus_store(struct config_item *item,
					  const char *page, size_t count)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_tpg_of(vhost_scsi_item_tpg(item));
	char name[SQCQ_WWPN_MAX + 1];
	size_t len = strcspn(page, "\n");
	int ret;

	if (len == 0 || len > SQCQ_WWPN_MAX)
		return -EINVAL;
	memcpy(name, page, len);
	name[len] = '\0';

	mutex_lock(&vhost_scsi_mutex);
	if (!strcmp(name, "NULL")) {
		ret = vhost_scsi_drop_nexus(tpg);
	} else if (vhost_scsi_name_proto(name) != tpg->tport->proto_id) {
		pr_warn("%s tpgt_%u: nexus \"%s\" does not match the port's protocol\n",
			tpg->tport->name, tpg->tpgt, name);
		ret = -EINVAL;
	} else {
		ret = vhost_scsi_make_nexus(tpg, name);
	}
	mutex_unlock(&vhost_scsi_mutex);
	return ret ? ret : count;
}

CONFIGFS_ATTR(vhost_scsi_tpg_, nexus);

/* The bound device's status, after "device:" and "mode:"; see below. */
static ssize_t vhost_scsi_emit_status(struct vhost_scsi *s, char *page,
				      ssize_t len)
{
	struct vhost_dev *vdev = &s->vdev;
	u64 req = 0, kicks = 0, calls = 0, saved = 0, bells = 0;
	unsigned int i, nsqcq = 0;
	const char *poller;
	bool own = false;
	int cpu;

	lockdep_assert_held(&vhost_scsi_mutex);
	/* The racy snapshot debugfs prints too: counters of the request queues. */
	for (i = SQCQ_FIRST_REQ_VQ; i < vdev->nvqs; i++) {
		struct vhost_vq *vq = &vdev->vqs[i];

		req += READ_ONCE(vq->stat_requests);
		kicks += READ_ONCE(vq->stat_kicks);
		calls += READ_ONCE(vq->stat_calls);
		saved += READ_ONCE(vq->stat_calls_saved);
		bells += READ_ONCE(vq->stat_doorbells);
		if (READ_ONCE(vq->cq))
			nsqcq++;
	}
	if (!READ_ONCE(vdev->db))
		poller = "none";
	else if (READ_ONCE(vdev->pg))
		poller = "shared";
	else
		poller = READ_ONCE(vdev->poll_spin) ? "spin" : "serve";
	cpu = vhost_sqcq_poll_cpu(vdev, &own);
	len += sysfs_emit_at(page, len, "owner_pid: %d\nendpoint: %s\n",
			     READ_ONCE(vdev->owner_pid),
			     s->ep_set ? s->ep_wwpn : "none");
	len += sysfs_emit_at(page, len, "queues: %u\nsqcq_queues: %u\npoller: %s\n",
			     vhost_scsi_running_req_vqs(vdev), nsqcq, poller);
	if (cpu >= 0 && cpu < nr_cpu_ids)
		len += sysfs_emit_at(page, len, "poll_cpu: %d\npoll_cpu_from: %s\n",
				     cpu, own ? "tpg" : "module");
	else
		len += sysfs_emit_at(page, len, "poll_cpu: none\npoll_cpu_from: none\n");
	len += sysfs_emit_at(page, len, "requests: %llu\nkicks: %llu\ncalls: %llu\ncalls_saved: %llu\ndoorbells: %llu\n",
			     req, kicks, calls, saved, bells);
	len += sysfs_emit_at(page, len, "poll_sleeps: %llu\npoll_sleeps_idle: %llu\npoll_sleeps_contended: %llu\npoll_wakeups: %llu\n",
			     READ_ONCE(vdev->stat_sleeps),
			     READ_ONCE(vdev->stat_sleep_why[SQCQ_SLEEP_IDLE]),
			     READ_ONCE(vdev->stat_sleep_why[SQCQ_SLEEP_CONTENDED]),
			     READ_ONCE(vdev->stat_wakeups));
	return len;
}

/*
 * sqcq_status (read-only): the device bound to this TPG, "key: value"
 * lines (docs/observability.md).  vhost_scsi_mutex keeps that device: its
 * release unbinds every TPG under this mutex (vhost_scsi_endpoint_release(),
 * from the reset op) before it frees the queues and the device, so a
 * device found in tpg->vs stays whole until we unlock.  Nothing here
 * takes a lock of the device's but poll_own_lock (innermost).
 */
static ssize_t vhost_scsi_tpg_sqcq_status_show(struct config_item *item,
					       char *page)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_tpg_of(vhost_scsi_item_tpg(item));
	struct vhost_scsi *s;
	ssize_t len;

	mutex_lock(&vhost_scsi_mutex);
	s = tpg->vs;
	if (!s) {
		len = sysfs_emit(page, "device: none\nmode: none\n");
	} else {
		len = sysfs_emit(page, "device: %d\nmode: %s\n", s->id,
				 READ_ONCE(s->vdev.db) ? "sqcq" : "classic");
		len = vhost_scsi_emit_status(s, page, len);
	}
	mutex_unlock(&vhost_scsi_mutex);
	return len;
}

CONFIGFS_ATTR_RO(vhost_scsi_tpg_, sqcq_status);

static struct configfs_attribute *vhost_scsi_tpg_attrs[] = {
	&vhost_scsi_tpg_attr_nexus,
	&vhost_scsi_tpg_attr_sqcq_status,
	NULL,
};

static struct vhost_scsi_tpg *vhost_scsi_attrib_tpg(struct config_item *item)
{
	return vhost_scsi_tpg_of(container_of(to_config_group(item),
					      struct se_portal_group,
					      tpg_attrib_group));
}

static ssize_t vhost_scsi_tpg_attrib_poll_cpu_show(struct config_item *item,
						   char *page)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_attrib_tpg(item);
	ssize_t ret;

	mutex_lock(&vhost_scsi_mutex);
	ret = sysfs_emit(page, "%s\n", tpg->poll_cpu);
	mutex_unlock(&vhost_scsi_mutex);
	return ret;
}

/*
 * A CPU list as poll_cpu takes it (online CPUs; empty: the module's
 * poll_cpu again).  The bound device's pollers move at their next pass.
 */
static ssize_t vhost_scsi_tpg_attrib_poll_cpu_store(struct config_item *item,
						    const char *page,
						    size_t count)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_attrib_tpg(item);
	char clean[SQCQ_POLL_CPU_MAXLEN];
	cpumask_var_t mask;
	int ret;

	if (!zalloc_cpumask_var(&mask, GFP_KERNEL))
		return -ENOMEM;
	/* configfs hands a NUL-terminated copy; one line says what is wrong. */
	ret = sqcq_parse_poll_cpu(page, clean, sizeof(clean), mask);
	if (!ret) {
		mutex_lock(&vhost_scsi_mutex);
		strscpy(tpg->poll_cpu, clean, sizeof(tpg->poll_cpu));
		cpumask_copy(tpg->poll_cpus, mask);
		if (tpg->vs)
			vhost_scsi_apply_poll_cpus(tpg->vs);
		mutex_unlock(&vhost_scsi_mutex);
	}
	free_cpumask_var(mask);
	return ret ? ret : count;
}

CONFIGFS_ATTR(vhost_scsi_tpg_attrib_, poll_cpu);

static struct configfs_attribute *vhost_scsi_tpg_attrib_attrs[] = {
	&vhost_scsi_tpg_attrib_attr_poll_cpu,
	NULL,
};

static ssize_t vhost_scsi_wwn_version_show(struct config_item *item, char *page)
{
	return sysfs_emit(page, "%s fabric of vhost_scsi_sqcq %s\n",
			  vhost_scsi_ops.fabric_name, SQCQ_PKG_VERSION);
}

CONFIGFS_ATTR_RO(vhost_scsi_wwn_, version);

static struct configfs_attribute *vhost_scsi_wwn_attrs[] = {
	&vhost_scsi_wwn_attr_version,
	NULL,
};

/* ------------------------------------------------------------------ */
/* configfs: ports, TPGs, LUN links                                    */
/* ------------------------------------------------------------------ */

static int vhost_scsi_port_link(struct se_portal_group *se_tpg,
				struct se_lun *lun)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_tpg_of(se_tpg);

	mutex_lock(&tpg->port_lock);
	tpg->port_count++;
	if (tpg->vs)
		vhost_scsi_lun_event(tpg->vs, tpg, lun->unpacked_lun,
				     VIRTIO_SCSI_EVT_RESET_RESCAN);
	mutex_unlock(&tpg->port_lock);
	return 0;
}

static void vhost_scsi_port_unlink(struct se_portal_group *se_tpg,
				   struct se_lun *lun)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_tpg_of(se_tpg);

	mutex_lock(&tpg->port_lock);
	tpg->port_count--;
	if (tpg->vs)
		vhost_scsi_lun_event(tpg->vs, tpg, lun->unpacked_lun,
				     VIRTIO_SCSI_EVT_RESET_REMOVED);
	mutex_unlock(&tpg->port_lock);
}

static char *vhost_scsi_get_wwn(struct se_portal_group *se_tpg)
{
	return vhost_scsi_tpg_of(se_tpg)->tport->name;
}

static u16 vhost_scsi_get_tag(struct se_portal_group *se_tpg)
{
	return vhost_scsi_tpg_of(se_tpg)->tpgt;
}

static struct se_portal_group *vhost_scsi_make_tpg(struct se_wwn *wwn,
						   const char *name)
{
	struct vhost_scsi_tport *tport = container_of(wwn, struct vhost_scsi_tport, wwn);
	struct vhost_scsi_tpg *tpg;
	char canon[8];
	u16 tpgt;
	int ret;

	/*
	 * One spelling per tag ("tpgt_01" or "tpgt_+1" would be a second
	 * directory for the slot of "tpgt_1").
	 */
	if (strncmp(name, "tpgt_", 5) || kstrtou16(name + 5, 10, &tpgt) ||
	    tpgt >= SQCQ_MAX_TARGETS ||
	    (snprintf(canon, sizeof(canon), "%u", tpgt),
	     strcmp(name + 5, canon))) {
		pr_warn("%s: \"%s\": expected tpgt_N with N in 0..%u\n",
			tport->name, name, SQCQ_MAX_TARGETS - 1);
		return ERR_PTR(-EINVAL);
	}
	tpg = kzalloc(sizeof(*tpg), GFP_KERNEL);
	if (!tpg)
		return ERR_PTR(-ENOMEM);
	if (!zalloc_cpumask_var(&tpg->poll_cpus, GFP_KERNEL)) {
		kfree(tpg);
		return ERR_PTR(-ENOMEM);
	}
	tpg->tport = tport;
	tpg->tpgt = tpgt;
	mutex_init(&tpg->port_lock);
	ret = core_tpg_register(wwn, &tpg->se_tpg, tport->proto_id);
	if (ret) {
		free_cpumask_var(tpg->poll_cpus);
		kfree(tpg);
		return ERR_PTR(ret);
	}
	mutex_lock(&vhost_scsi_mutex);
	list_add_tail(&tpg->node, &vhost_scsi_tpg_list);
	mutex_unlock(&vhost_scsi_mutex);
	return &tpg->se_tpg;
}

static void vhost_scsi_drop_tpg(struct se_portal_group *se_tpg)
{
	struct vhost_scsi_tpg *tpg = vhost_scsi_tpg_of(se_tpg);

	/*
	 * configfs calls this only for a TPG nobody depends on; one that a
	 * SET_ENDPOINT claimed lost its race with this rmdir, and is given
	 * back by it (pairs with wake_up_all() in vhost_scsi_set_endpoint()).
	 */
	wait_event(vhost_scsi_unclaim_wq, !READ_ONCE(tpg->vs));
	mutex_lock(&vhost_scsi_mutex);
	list_del(&tpg->node);
	/* A bound TPG cannot be removed (target_depend_item); LUNs are gone. */
	mutex_lock(&tpg->port_lock);
	tpg->port_count = 0;
	mutex_unlock(&tpg->port_lock);
	if (tpg->nexus)
		WARN_ON_ONCE(vhost_scsi_drop_nexus(tpg));
	mutex_unlock(&vhost_scsi_mutex);
	core_tpg_deregister(se_tpg);
	free_cpumask_var(tpg->poll_cpus);
	kfree(tpg);
}

static struct se_wwn *vhost_scsi_make_wwn(struct target_fabric_configfs *tf,
					  struct config_group *group,
					const char *name)
{
	struct vhost_scsi_tport *tport;
	int proto = vhost_scsi_name_proto(name);
	size_t len = strlen(name);

	if (proto < 0 || len > SQCQ_WWPN_MAX) {
		pr_warn("\"%s\": a port name is naa., eui., fc. or iqn. and at most %u characters\n",
			name, SQCQ_WWPN_MAX);
		return ERR_PTR(-EINVAL);
	}
	tport = kzalloc(sizeof(*tport), GFP_KERNEL);
	if (!tport)
		return ERR_PTR(-ENOMEM);
	tport->proto_id = proto;
	strscpy(tport->name, name, sizeof(tport->name));
	return &tport->wwn;
}

static void vhost_scsi_drop_wwn(struct se_wwn *wwn)
{
	kfree(container_of(wwn, struct vhost_scsi_tport, wwn));
}

static struct target_core_fabric_ops vhost_scsi_ops = {
	.module				= THIS_MODULE,
	.fabric_name			= "vhost_sqcq",
	.max_data_sg_nents		= SQCQ_MAX_SG_PAGES,
	.tpg_get_wwn			= vhost_scsi_get_wwn,
	.tpg_get_tag			= vhost_scsi_get_tag,
	.tpg_check_demo_mode		= vhost_scsi_true,
	.tpg_check_demo_mode_cache	= vhost_scsi_true,
	.tpg_check_demo_mode_write_protect = vhost_scsi_false,
	.tpg_check_prod_mode_write_protect = vhost_scsi_false,
	.tpg_get_inst_index		= vhost_scsi_inst_index,
	.release_cmd			= vhost_scsi_release_cmd,
	.check_stop_free		= vhost_scsi_check_stop_free,
	.sess_get_index			= vhost_scsi_sess_index,
	.write_pending			= vhost_scsi_write_pending,
	.set_default_node_attributes	= vhost_scsi_node_attrs,
	.get_cmd_state			= vhost_scsi_cmd_state,
	.queue_data_in			= vhost_scsi_queue_data_in,
	.queue_status			= vhost_scsi_queue_status,
	.queue_tm_rsp			= vhost_scsi_queue_tm_rsp,
	.aborted_task			= vhost_scsi_aborted_task,
	.fabric_make_wwn		= vhost_scsi_make_wwn,
	.fabric_drop_wwn		= vhost_scsi_drop_wwn,
	.fabric_make_tpg		= vhost_scsi_make_tpg,
	.fabric_drop_tpg		= vhost_scsi_drop_tpg,
	.fabric_post_link		= vhost_scsi_port_link,
	.fabric_pre_unlink		= vhost_scsi_port_unlink,
	.tfc_wwn_attrs			= vhost_scsi_wwn_attrs,
	.tfc_tpg_base_attrs		= vhost_scsi_tpg_attrs,
	.tfc_tpg_attrib_attrs		= vhost_scsi_tpg_attrib_attrs,
	/* Submission from the worker is queued to the core's workqueue. */
	SQCQ_TFO_SUBMIT_TYPE
};

int vhost_scsi_register(bool takeover)
{
	vhost_scsi_ops.fabric_name = takeover ? "vhost" : "vhost_sqcq";
	return target_register_template(&vhost_scsi_ops);
}

void vhost_scsi_unregister(void)
{
	target_unregister_template(&vhost_scsi_ops);
}
