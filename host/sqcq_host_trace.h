/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Tracepoints of vhost_scsi_sqcq (tracefs events/vhost_scsi_sqcq/), the
 * stable interface of docs/observability.md: SQ/CQ set up, refused and
 * ended per device, and each poller's sleeps and wake-ups with the reason.
 * Each is a static key: nothing runs while it is off.  dev is the device
 * number (devN of debugfs and of the kernel log, "device:" of the TPG's
 * sqcq_status).
 *
 * Defined once, by host/vhost_scsi_sqcq_main.c with CREATE_TRACE_POINTS;
 * Kbuild puts host/ on the include path, where trace/define_trace.h finds this
 * file again (TRACE_INCLUDE_PATH below).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM vhost_scsi_sqcq

#if !defined(SQCQ_HOST_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define SQCQ_HOST_TRACE_H

#include <linux/tracepoint.h>

#include "sqcq_poll.h"

/* Room for a reason string (a setup status, why SQ/CQ ended). */
#define SQCQ_TRACE_WHY_LEN	40

/* Why a sleeping device worker runs again (poll_wake's reason). */
#ifndef SQCQ_HOST_WAKE_REASONS
#define SQCQ_HOST_WAKE_REASONS
enum sqcq_host_wake {
	SQCQ_WAKE_REQUEST,	/* a request queue's SQ index moved */
	SQCQ_WAKE_WORK,		/* a queue queued without one: completions, control */
	SQCQ_WAKE_CPUS,		/* poll_cpu, poll_shared or the TPG's CPUs changed */
	SQCQ_WAKE_STOP,		/* SQ/CQ ended or the worker stops */
	SQCQ_WAKE_OTHER,
};

/* How the device's poller ran before it slept (poll_sleep's poller). */
enum sqcq_host_poller {
	SQCQ_POLLER_SERVE,	/* no poll CPU: serves what is kicked */
	SQCQ_POLLER_SPIN,	/* the worker spun on its poll CPU */
	SQCQ_POLLER_SHARED,	/* parked on the shared poller of its CPU */
};
#endif

TRACE_DEFINE_ENUM(SQCQ_SLEEP_IDLE);
TRACE_DEFINE_ENUM(SQCQ_SLEEP_CONTENDED);
TRACE_DEFINE_ENUM(SQCQ_SLEEP_STOLEN);
TRACE_DEFINE_ENUM(SQCQ_WAKE_REQUEST);
TRACE_DEFINE_ENUM(SQCQ_WAKE_WORK);
TRACE_DEFINE_ENUM(SQCQ_WAKE_CPUS);
TRACE_DEFINE_ENUM(SQCQ_WAKE_STOP);
TRACE_DEFINE_ENUM(SQCQ_WAKE_OTHER);
TRACE_DEFINE_ENUM(SQCQ_POLLER_SERVE);
TRACE_DEFINE_ENUM(SQCQ_POLLER_SPIN);
TRACE_DEFINE_ENUM(SQCQ_POLLER_SHARED);

#define sqcq_trace_sleep_name(r)					\
	__print_symbolic(r, { SQCQ_SLEEP_IDLE, "idle" },		\
			 { SQCQ_SLEEP_CONTENDED, "contended" },		\
			 { SQCQ_SLEEP_STOLEN, "stolen" })

TRACE_EVENT(sqcq_setup,
	TP_PROTO(int dev, int owner, unsigned int nqueues, u32 flags),
	TP_ARGS(dev, owner, nqueues, flags),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(int, owner)
		__field(unsigned int, nqueues)
		__field(u32, flags)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->owner = owner;
		__entry->nqueues = nqueues;
		__entry->flags = flags;
	),
	TP_printk("dev=%d owner=%d queues=%u flags=%#x",
		  __entry->dev, __entry->owner, __entry->nqueues,
		  __entry->flags)
);

/* A setup request refused: the guest stays in classic mode. */
TRACE_EVENT(sqcq_classic,
	TP_PROTO(int dev, int owner, unsigned int status, const char *why),
	TP_ARGS(dev, owner, status, why),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(int, owner)
		__field(unsigned int, status)
		__array(char, why, SQCQ_TRACE_WHY_LEN)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->owner = owner;
		__entry->status = status;
		strscpy(__entry->why, why, SQCQ_TRACE_WHY_LEN);
	),
	TP_printk("dev=%d owner=%d status=%u why=%s", __entry->dev,
		  __entry->owner, __entry->status, __entry->why)
);

TRACE_EVENT(sqcq_teardown,
	TP_PROTO(int dev, int owner, const char *why),
	TP_ARGS(dev, owner, why),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(int, owner)
		__array(char, why, SQCQ_TRACE_WHY_LEN)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->owner = owner;
		strscpy(__entry->why, why, SQCQ_TRACE_WHY_LEN);
	),
	TP_printk("dev=%d owner=%d why=%s", __entry->dev, __entry->owner,
		  __entry->why)
);

TRACE_EVENT(poll_sleep,
	TP_PROTO(int dev, int reason, int poller, u64 window_ns),
	TP_ARGS(dev, reason, poller, window_ns),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(int, reason)
		__field(int, poller)
		__field(u64, window_ns)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->reason = reason;
		__entry->poller = poller;
		__entry->window_ns = window_ns;
	),
	TP_printk("dev=%d reason=%s poller=%s window_ns=%llu", __entry->dev,
		  sqcq_trace_sleep_name(__entry->reason),
		  __print_symbolic(__entry->poller,
				   { SQCQ_POLLER_SERVE, "serve" },
				   { SQCQ_POLLER_SPIN, "spin" },
				   { SQCQ_POLLER_SHARED, "shared" }),
		  (unsigned long long)__entry->window_ns)
);

TRACE_EVENT(poll_wake,
	TP_PROTO(int dev, int reason, bool parked),
	TP_ARGS(dev, reason, parked),
	TP_STRUCT__entry(
		__field(int, dev)
		__field(int, reason)
		__field(bool, parked)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->reason = reason;
		__entry->parked = parked;
	),
	TP_printk("dev=%d reason=%s parked=%d", __entry->dev,
		  __print_symbolic(__entry->reason,
				   { SQCQ_WAKE_REQUEST, "request" },
				   { SQCQ_WAKE_WORK, "work" },
				   { SQCQ_WAKE_CPUS, "cpus" },
				   { SQCQ_WAKE_STOP, "stop" },
				   { SQCQ_WAKE_OTHER, "other" }),
		  __entry->parked)
);

#endif /* SQCQ_HOST_TRACE_H */

/* This file again, for trace/define_trace.h: host/ is on the include path. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE sqcq_host_trace
#include <trace/define_trace.h>
