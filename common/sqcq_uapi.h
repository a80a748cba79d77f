/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause */
/*
 * virtio-sqcq wire protocol: the shared doorbell area, the in-band setup
 * request carried on the virtio-scsi control queue, and the NEED_WAKEUP
 * handshake helpers used by both modules and by the userspace tests.
 *
 * Everything on the wire is little-endian.  This header is self-contained:
 * it builds in the kernel (vhost_scsi_sqcq, virtio_scsi_sqcq) and in
 * userspace C (tests, the L1 client) without any other project header.
 *
 * docs/protocol.md is the normative text of the protocol this file encodes.
 */
#ifndef SQCQ_UAPI_H
#define SQCQ_UAPI_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/compiler.h>
#include <asm/byteorder.h>
#include <asm/barrier.h>
#else
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include <asm/byteorder.h>

/* The uapi byte-order helpers work in any C mode (no _DEFAULT_SOURCE). */
#ifndef le16_to_cpu
#define le16_to_cpu(x)	__le16_to_cpu(x)
#define le32_to_cpu(x)	__le32_to_cpu(x)
#define le64_to_cpu(x)	__le64_to_cpu(x)
#define cpu_to_le16(x)	__cpu_to_le16(x)
#define cpu_to_le32(x)	__cpu_to_le32(x)
#define cpu_to_le64(x)	__cpu_to_le64(x)
#endif
#endif

/* ------------------------------------------------------------------ */
/* Constants                                                           */
/* ------------------------------------------------------------------ */

/* "SQCQ" as bytes in memory, read as a little-endian u32. */
#define SQCQ_MAGIC		0x51435153u
#define SQCQ_VERSION		1u

/* Every line of the doorbell area is one 64-byte cache line. */
#define SQCQ_LINE_SIZE		64u
/* Guest-physical alignment the area must have. */
#define SQCQ_AREA_ALIGN		4096u
/* Upper bound on request queues one area may describe (in-tree vhost-scsi
 * allows 1024 I/O virtqueues on current kernels).
 */
#define SQCQ_MAX_QUEUES		1024u

/*
 * Vendor task-management subtypes, sent with type = VIRTIO_SCSI_T_TMF on the
 * control queue.  The virtio spec defines subtypes 0..7; these sit far above
 * them so a stock device answers FUNCTION_REJECTED.
 */
#define SQCQ_TMF_SUBTYPE_SETUP		0x53510001u
#define SQCQ_TMF_SUBTYPE_TEARDOWN	0x53510002u

/* virtio-scsi values the setup exchange uses (same numbers as the spec). */
#define SQCQ_VIRTIO_SCSI_T_TMF			0u
#define SQCQ_VIRTIO_SCSI_S_FUNCTION_COMPLETE	0u
#define SQCQ_VIRTIO_SCSI_S_BAD_TARGET		3u
#define SQCQ_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED	10u
#define SQCQ_VIRTIO_SCSI_S_FUNCTION_REJECTED	11u
/* sizeof(struct virtio_scsi_cmd_resp) with the default 96-byte sense. */
#define SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE		108u

/* sqcq_sq.flags, written by the host only. */
#define SQCQ_SQ_F_NEED_WAKEUP	(1u << 0)	/* host poller asleep: kick */
#define SQCQ_SQ_F_STOPPED	(1u << 1)	/* host stopped polling for good */
/* sqcq_cq.flags, written by the guest only. */
#define SQCQ_CQ_F_NEED_WAKEUP	(1u << 0)	/* guest poller asleep: interrupt */
#define SQCQ_CQ_F_STOPPED	(1u << 1)	/* guest stopped polling for good */

/* sqcq_setup_req.flags / sqcq_setup_resp.flags */
#define SQCQ_F_SQ_POLL		(1u << 0)	/* host polls the SQ doorbells */
#define SQCQ_F_CQ_POLL		(1u << 1)	/* guest polls the CQ doorbells */
#define SQCQ_F_ALL		(SQCQ_F_SQ_POLL | SQCQ_F_CQ_POLL)

/* sqcq_setup_resp.status */
enum sqcq_status {
	SQCQ_S_OK		= 0,
	SQCQ_S_BAD_MAGIC	= 1,	/* request or area header magic */
	SQCQ_S_BAD_VERSION	= 2,
	SQCQ_S_BAD_ALIGN	= 3,	/* area address not SQCQ_AREA_ALIGN aligned */
	SQCQ_S_BAD_LEN		= 4,	/* area too short for nqueues, or too long */
	SQCQ_S_BAD_ADDR		= 5,	/* area not inside one memory region */
	SQCQ_S_BAD_QUEUES	= 6,	/* zero, or more than the request queues */
	SQCQ_S_BAD_FLAGS	= 7,	/* unknown flag bits */
	SQCQ_S_BUSY		= 8,	/* already set up, or I/O in flight */
	SQCQ_S_DISABLED		= 9,	/* host has sqcq=0 */
	SQCQ_S_NOT_SETUP	= 10,	/* teardown without setup */
	SQCQ_S_NO_RESOURCES	= 11,	/* host could not map or start pollers */
	SQCQ_S_BAD_REQUEST	= 12,	/* malformed descriptors or lengths */
	SQCQ_S_MAX
};

/* ------------------------------------------------------------------ */
/* Doorbell area                                                       */
/* ------------------------------------------------------------------ */

/* Line 0 of the area, written by the guest before setup. */
struct sqcq_area_hdr {
	__le32 magic;		/* SQCQ_MAGIC */
	__le16 version;		/* SQCQ_VERSION */
	__le16 nqueues;		/* request queues described */
	__le16 line_size;	/* SQCQ_LINE_SIZE */
	__le16 reserved0;
	__le32 reserved[13];
};

/* Submission doorbell: idx by the guest, flags by the host. */
struct sqcq_sq {
	__le16 idx;		/* the avail index the guest published */
	__le16 flags;		/* SQCQ_SQ_F_* */
};

/* Completion doorbell: idx by the host, flags by the guest. */
struct sqcq_cq {
	__le16 idx;		/* the used index the host published */
	__le16 flags;		/* SQCQ_CQ_F_* */
};

/* Each doorbell owns a whole cache line so the two writers never share one. */
struct sqcq_sq_line {
	struct sqcq_sq sq;
	__u8 pad[SQCQ_LINE_SIZE - sizeof(struct sqcq_sq)];
} __attribute__((aligned(64)));

struct sqcq_cq_line {
	struct sqcq_cq cq;
	__u8 pad[SQCQ_LINE_SIZE - sizeof(struct sqcq_cq)];
} __attribute__((aligned(64)));

/* Per request queue: the SQ line, then the CQ line. */
struct sqcq_queue_lines {
	struct sqcq_sq_line sq_line;
	struct sqcq_cq_line cq_line;
};

/* The area: header line, then nqueues pairs of lines. */
struct sqcq_area {
	struct sqcq_area_hdr hdr;	/* exactly one line, see below */
	struct sqcq_queue_lines q[];
} __attribute__((aligned(64)));

#define SQCQ_AREA_HDR_BYTES	SQCQ_LINE_SIZE
#define SQCQ_QUEUE_BYTES	(2u * SQCQ_LINE_SIZE)

/* Bytes an area describing nq queues needs. */
static inline __u32 sqcq_area_bytes(__u32 nq)
{
	return SQCQ_AREA_HDR_BYTES + nq * SQCQ_QUEUE_BYTES;
}

/* Byte offsets of queue i's lines from the start of the area. */
static inline __u32 sqcq_sq_offset(__u32 i)
{
	return SQCQ_AREA_HDR_BYTES + i * SQCQ_QUEUE_BYTES;
}

static inline __u32 sqcq_cq_offset(__u32 i)
{
	return sqcq_sq_offset(i) + SQCQ_LINE_SIZE;
}

/* Largest area a valid request may name, rounded up to whole pages. */
#define SQCQ_AREA_MAX_BYTES \
	((SQCQ_AREA_HDR_BYTES + SQCQ_MAX_QUEUES * SQCQ_QUEUE_BYTES + \
	  SQCQ_AREA_ALIGN - 1) & ~(SQCQ_AREA_ALIGN - 1))

/* ------------------------------------------------------------------ */
/* Setup exchange on the control queue                                 */
/* ------------------------------------------------------------------ */

/*
 * Device-readable part of a setup or teardown request:
 *   struct sqcq_tmf_req     (same bytes as struct virtio_scsi_ctrl_tmf_req)
 *   struct sqcq_setup_req
 * Device-writable part:
 *   struct sqcq_setup_in    (TMF response byte, padding, setup response),
 *   which is at least SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE bytes and must be the
 *   first device-writable descriptor (docs/protocol.md section 3: stock hosts may write a
 *   whole virtio_scsi_cmd_resp there).
 */
struct sqcq_tmf_req {
	__le32 type;		/* SQCQ_VIRTIO_SCSI_T_TMF */
	__le32 subtype;		/* SQCQ_TMF_SUBTYPE_* */
	__u8 lun[8];
	__le64 tag;
};

struct sqcq_setup_req {
	__le32 magic;		/* SQCQ_MAGIC */
	__le16 version;		/* SQCQ_VERSION */
	__le16 nqueues;		/* request queues the area describes */
	__le64 area_gpa;	/* device address (guest-physical without
				 * ACCESS_PLATFORM), SQCQ_AREA_ALIGN aligned
				 */
	__le32 area_len;	/* bytes, >= sqcq_area_bytes(nqueues) */
	__le32 flags;		/* SQCQ_F_* wanted, at least one */
	__le32 poll_idle_us;	/* the guest's setting, for the host's log */
	__le32 reserved[9];	/* zero */
};

struct sqcq_setup_resp {
	__le32 magic;		/* SQCQ_MAGIC */
	__le16 version;		/* SQCQ_VERSION */
	__le16 status;		/* enum sqcq_status */
	__le16 nqueues;		/* queues the host polls */
	__le16 nthreads;	/* host poll threads serving them */
	__le32 flags;		/* SQCQ_F_* accepted */
	__le32 poll_idle_us;	/* the host's idle timeout */
	__le32 reserved[3];
};

struct sqcq_setup_in {
	__u8 response;		/* SQCQ_VIRTIO_SCSI_S_* (TMF response) */
	__u8 reserved[7];
	struct sqcq_setup_resp resp;
	__u8 pad[SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE + 20 - 8 -
		 sizeof(struct sqcq_setup_resp)];
};

/* ------------------------------------------------------------------ */
/* Layout checks                                                       */
/* ------------------------------------------------------------------ */

#define SQCQ_ASSERT(cond, msg) _Static_assert(cond, msg)

SQCQ_ASSERT(sizeof(struct sqcq_area_hdr) == 64, "area header is one line");
SQCQ_ASSERT(sizeof(struct sqcq_sq) == 4, "sqcq_sq is 4 bytes");
SQCQ_ASSERT(sizeof(struct sqcq_cq) == 4, "sqcq_cq is 4 bytes");
SQCQ_ASSERT(sizeof(struct sqcq_sq_line) == SQCQ_LINE_SIZE, "SQ line size");
SQCQ_ASSERT(sizeof(struct sqcq_cq_line) == SQCQ_LINE_SIZE, "CQ line size");
SQCQ_ASSERT(sizeof(struct sqcq_queue_lines) == SQCQ_QUEUE_BYTES,
	    "queue pair size");
SQCQ_ASSERT(offsetof(struct sqcq_area, q) == SQCQ_AREA_HDR_BYTES,
	    "queues start after the header line");
SQCQ_ASSERT(offsetof(struct sqcq_queue_lines, cq_line) == SQCQ_LINE_SIZE,
	    "CQ line follows SQ line");
SQCQ_ASSERT(sizeof(struct sqcq_area) == SQCQ_AREA_HDR_BYTES, "area head");
SQCQ_ASSERT(sizeof(struct sqcq_tmf_req) == 24,
	    "matches struct virtio_scsi_ctrl_tmf_req");
SQCQ_ASSERT(sizeof(struct sqcq_setup_req) == 64, "setup request size");
SQCQ_ASSERT(sizeof(struct sqcq_setup_resp) == 32, "setup response size");
SQCQ_ASSERT(offsetof(struct sqcq_setup_in, resp) == 8, "response offset");
SQCQ_ASSERT(sizeof(struct sqcq_setup_in) >= SQCQ_VIRTIO_SCSI_CMD_RESP_SIZE,
	    "writable part covers a stock virtio_scsi_cmd_resp");
SQCQ_ASSERT(sizeof(struct sqcq_setup_in) == 128, "setup_in size");
SQCQ_ASSERT(SQCQ_AREA_MAX_BYTES == 135168, "max area bytes");

/* ------------------------------------------------------------------ */
/* Access and barrier primitives                                       */
/* ------------------------------------------------------------------ */

#ifdef __KERNEL__
/*
 * virt_*mb() stay real barriers on a !SMP guest kernel: the other side of
 * the doorbell area is always another CPU (the host, or the guest).
 */
#define sqcq_mb()		virt_mb()
#define sqcq_wmb()		virt_wmb()
#define sqcq_rmb()		virt_rmb()
#define sqcq_load16(p)		le16_to_cpu(READ_ONCE(*(p)))
#define sqcq_store16(p, v)	WRITE_ONCE(*(p), cpu_to_le16(v))
#elif !defined(SQCQ_TEST_PRIMITIVES)
/*
 * Userspace.  A unit test that defines SQCQ_TEST_PRIMITIVES supplies all
 * five primitives itself, to record what each helper does in which order
 * (tests/unit/test_barriers.c).
 */
#define sqcq_mb()		__atomic_thread_fence(__ATOMIC_SEQ_CST)
#define sqcq_wmb()		__atomic_thread_fence(__ATOMIC_RELEASE)
#define sqcq_rmb()		__atomic_thread_fence(__ATOMIC_ACQUIRE)
#define sqcq_load16(p)		le16_to_cpu(__atomic_load_n((p), __ATOMIC_RELAXED))
#define sqcq_store16(p, v) \
	__atomic_store_n((p), cpu_to_le16((__u16)(v)), __ATOMIC_RELAXED)
#endif

/**
 * sqcq_consume_idx() - read a doorbell index, consumer side
 * @idx: the doorbell index (sqcq_sq.idx or sqcq_cq.idx)
 *
 * Read barrier after the load, before the ring entries the index covers
 * are read.  Pairs with the sqcq_wmb() in sqcq_publish().
 *
 * Return: the index.
 */
static inline __u16 sqcq_consume_idx(const __le16 *idx)
{
	__u16 v = sqcq_load16(idx);

	sqcq_rmb();
	return v;
}

/* ------------------------------------------------------------------ */
/* Ring index arithmetic (16-bit, wraps at 65535)                      */
/* ------------------------------------------------------------------ */

/* Entries published between old and new, modulo 2^16. */
static inline __u16 sqcq_idx_pending(__u16 new_idx, __u16 old_idx)
{
	return (__u16)(new_idx - old_idx);
}

/*
 * A peer may only move an index forward by at most the ring size.  Anything
 * else is a hostile or broken peer and must not be trusted.
 */
static inline bool sqcq_idx_advance_ok(__u16 new_idx, __u16 old_idx,
				       __u16 ring_num)
{
	return sqcq_idx_pending(new_idx, old_idx) <= ring_num;
}

/* ------------------------------------------------------------------ */
/* The NEED_WAKEUP handshake (docs/protocol.md section 4)             */
/*                                                                     */
/* Producer: publish index, full barrier, read peer flag, notify if set. */
/* Consumer: set flag, full barrier, re-read index; if it moved, clear  */
/* the flag and keep polling; otherwise sleep until notified.           */
/* Either the producer sees the flag or the consumer sees the index.    */
/* ------------------------------------------------------------------ */

/**
 * sqcq_publish() - publish a doorbell index, producer side
 * @idx: the doorbell index (sqcq_sq.idx for the guest, sqcq_cq.idx for
 *       the host)
 * @new_idx: the value to publish
 * @peer_flags: the consumer's flags word (sqcq_sq.flags / sqcq_cq.flags)
 * @need: the consumer's NEED_WAKEUP bit
 *
 * The ring contents (descriptors, avail or used entries and the ring's own
 * idx) must already be written.  Write barrier, index store, full barrier,
 * flag load (docs/protocol.md section 4).
 *
 * Return: true when the producer must notify (kick or interrupt) the peer.
 */
static inline bool sqcq_publish(__le16 *idx, __u16 new_idx,
				const __le16 *peer_flags, __u16 need)
{
	/* Ring contents before the doorbell index; pairs with the consumer's
	 * read of the ring after it sees the new doorbell index.
	 */
	sqcq_wmb();
	sqcq_store16(idx, new_idx);
	/* Index store before flag load.  Pairs with the full barrier in
	 * sqcq_prepare_sleep(): at least one side sees the other's store.
	 */
	sqcq_mb();
	return (sqcq_load16(peer_flags) & need) != 0;
}

/**
 * sqcq_prepare_sleep() - ask for notifications before sleeping, consumer side
 * @own_flags: the consumer's flags word
 * @need: its NEED_WAKEUP bit
 * @idx: the doorbell index it consumes
 * @seen: the index value it has processed up to
 *
 * Flag store, full barrier, index re-read (docs/protocol.md section 4).
 * The caller must already be armed for the notification (set_current_state()
 * or prepare_to_wait() in the kernel, or a counting object such as an
 * eventfd): a notification sent between a true return and the actual sleep
 * must still end that sleep.
 *
 * Return: true when the consumer may sleep (flag left set: the producer
 * will notify), false when new work arrived (flag cleared again: keep
 * polling).
 */
static inline bool sqcq_prepare_sleep(__le16 *own_flags, __u16 need,
				      const __le16 *idx, __u16 seen)
{
	sqcq_store16(own_flags, sqcq_load16(own_flags) | need);
	/* Flag store before index load.  Pairs with the full barrier in
	 * sqcq_publish().
	 */
	sqcq_mb();
	if (sqcq_load16(idx) != seen) {
		sqcq_store16(own_flags, sqcq_load16(own_flags) & ~need);
		return false;
	}
	return true;
}

/**
 * sqcq_clear_need_wakeup() - stop asking for notifications, consumer side
 * @own_flags: the consumer's flags word
 * @need: its NEED_WAKEUP bit
 *
 * After a wakeup or a yield.  No barrier: the consumer polls the index after
 * this, and goes through sqcq_prepare_sleep() (with its full barrier) before
 * it sleeps again, so a publish that raced with the clear is seen by that
 * re-check at the latest.
 */
static inline void sqcq_clear_need_wakeup(__le16 *own_flags, __u16 need)
{
	sqcq_store16(own_flags, sqcq_load16(own_flags) & ~need);
}

/**
 * sqcq_request_notify() - ask for notifications without sleeping
 * @own_flags: the consumer's flags word
 * @need: its NEED_WAKEUP bit, possibly with more bits to set
 *
 * For a consumer that cannot poll for a while (it yields the CPU, or it was
 * kept from running) but is not going to sleep.  Full barrier so that its
 * next check of the index (it drains right after) cannot pass the flag
 * store; pairs with the full barrier in sqcq_publish().
 * sqcq_clear_need_wakeup() ends it when polling resumes.
 */
static inline void sqcq_request_notify(__le16 *own_flags, __u16 need)
{
	sqcq_store16(own_flags, sqcq_load16(own_flags) | need);
	sqcq_mb();
}

/**
 * sqcq_stop_polling() - stop polling for good
 * @own_flags: the stopping side's flags word
 * @need: its NEED_WAKEUP bit
 * @stopped: its STOPPED bit
 *
 * Graceful degradation (docs/protocol.md section 5): NEED_WAKEUP set for
 * good, plus STOPPED for observability, so that the peer notifies on every
 * publish.  Full barrier so that a later check of the index by the stopping
 * side (draining) cannot pass the flag store.
 */
static inline void sqcq_stop_polling(__le16 *own_flags, __u16 need,
				     __u16 stopped)
{
	sqcq_request_notify(own_flags, need | stopped);
}

/* ------------------------------------------------------------------ */
/* Validation shared by the host and the tests                         */
/* ------------------------------------------------------------------ */

/*
 * Checks of a setup request that need no knowledge of guest memory.
 * @max_queues is the number of request queues the device has.  The caller
 * still checks that [area_gpa, area_gpa + area_len) lies in one memory
 * region.  Returns SQCQ_S_OK or the status to answer with.
 */
static inline enum sqcq_status
sqcq_check_setup_req(const struct sqcq_setup_req *req, __u32 max_queues)
{
	__u64 gpa = le64_to_cpu(req->area_gpa);
	__u32 len = le32_to_cpu(req->area_len);
	__u32 nq = le16_to_cpu(req->nqueues);
	__u32 flags = le32_to_cpu(req->flags);
	unsigned int i;

	if (le32_to_cpu(req->magic) != SQCQ_MAGIC)
		return SQCQ_S_BAD_MAGIC;
	if (le16_to_cpu(req->version) != SQCQ_VERSION)
		return SQCQ_S_BAD_VERSION;
	for (i = 0; i < sizeof(req->reserved) / sizeof(req->reserved[0]); i++)
		if (req->reserved[i])
			return SQCQ_S_BAD_REQUEST;
	if (!flags || (flags & ~SQCQ_F_ALL))
		return SQCQ_S_BAD_FLAGS;
	if (nq == 0 || nq > max_queues || nq > SQCQ_MAX_QUEUES)
		return SQCQ_S_BAD_QUEUES;
	if (gpa & (SQCQ_AREA_ALIGN - 1))
		return SQCQ_S_BAD_ALIGN;
	if (len < sqcq_area_bytes(nq) || len > SQCQ_AREA_MAX_BYTES)
		return SQCQ_S_BAD_LEN;
	if (gpa + len < gpa)
		return SQCQ_S_BAD_ADDR;
	return SQCQ_S_OK;
}

/* The area header the guest wrote must agree with the request. */
static inline enum sqcq_status
sqcq_check_area_hdr(const struct sqcq_area_hdr *hdr,
		    const struct sqcq_setup_req *req)
{
	if (le32_to_cpu(hdr->magic) != SQCQ_MAGIC)
		return SQCQ_S_BAD_MAGIC;
	if (le16_to_cpu(hdr->version) != SQCQ_VERSION)
		return SQCQ_S_BAD_VERSION;
	if (le16_to_cpu(hdr->line_size) != SQCQ_LINE_SIZE)
		return SQCQ_S_BAD_LEN;
	if (hdr->nqueues != req->nqueues)
		return SQCQ_S_BAD_QUEUES;
	return SQCQ_S_OK;
}

/*
 * Guest side: lay out a zeroed area for nq queues.  Both NEED_WAKEUP bits
 * start set, which is exactly classic behaviour (kick on every submit,
 * interrupt on every completion) until a poller clears its own bit.
 */
static inline void sqcq_area_init(struct sqcq_area *a, __u16 nq)
{
	__u32 i;

	a->hdr.magic = cpu_to_le32(SQCQ_MAGIC);
	a->hdr.version = cpu_to_le16(SQCQ_VERSION);
	a->hdr.nqueues = cpu_to_le16(nq);
	a->hdr.line_size = cpu_to_le16(SQCQ_LINE_SIZE);
	for (i = 0; i < nq; i++) {
		a->q[i].sq_line.sq.idx = 0;
		a->q[i].sq_line.sq.flags = cpu_to_le16(SQCQ_SQ_F_NEED_WAKEUP);
		a->q[i].cq_line.cq.idx = 0;
		a->q[i].cq_line.cq.flags = cpu_to_le16(SQCQ_CQ_F_NEED_WAKEUP);
	}
}

static inline const char *sqcq_status_str(unsigned int status)
{
	switch (status) {
	case SQCQ_S_OK:			return "ok";
	case SQCQ_S_BAD_MAGIC:		return "bad magic";
	case SQCQ_S_BAD_VERSION:	return "unsupported version";
	case SQCQ_S_BAD_ALIGN:		return "misaligned area";
	case SQCQ_S_BAD_LEN:		return "bad area length";
	case SQCQ_S_BAD_ADDR:		return "area outside guest memory";
	case SQCQ_S_BAD_QUEUES:		return "bad queue count";
	case SQCQ_S_BAD_FLAGS:		return "unknown flags";
	case SQCQ_S_BUSY:		return "busy";
	case SQCQ_S_DISABLED:		return "disabled on host";
	case SQCQ_S_NOT_SETUP:		return "not set up";
	case SQCQ_S_NO_RESOURCES:	return "no resources";
	case SQCQ_S_BAD_REQUEST:	return "malformed request";
	default:			return "unknown status";
	}
}

#endif /* SQCQ_UAPI_H */
