/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Tracepoints of virtio_scsi_sqcq (tracefs events/virtio_scsi_sqcq/), the
 * stable interface of docs/observability.md: SQ/CQ set up, refused and
 * ended per controller, and its poll thread's sleeps and wake-ups with the
 * reason.  Each is a static key: nothing runs while it is off.  host is
 * the SCSI host number (/sys/class/scsi_host/hostN).
 *
 * Defined once, by guest/virtio_scsi_sqcq_main.c with CREATE_TRACE_POINTS;
 * Kbuild puts guest/ on the include path, where trace/define_trace.h finds
 * this file again (TRACE_INCLUDE_PATH below).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM virtio_scsi_sqcq

#if !defined(SQCQ_GUEST_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define SQCQ_GUEST_TRACE_H

#include <linux/tracepoint.h>

#include "sqcq_poll.h"

/* Room for a reason string (why classic, why SQ/CQ ended). */
#define SQCQ_TRACE_WHY_LEN	48

/* Why the sleeping poll thread runs again (poll_wake's reason). */
#ifndef SQCQ_GUEST_WAKE_REASONS
#define SQCQ_GUEST_WAKE_REASONS
enum sqcq_guest_wake {
	SQCQ_WAKE_INTERRUPT,	/* a queue interrupt: a CQ index moved */
	SQCQ_WAKE_STOP,		/* the thread is stopped */
	SQCQ_WAKE_OTHER,
};
#endif

TRACE_DEFINE_ENUM(SQCQ_SLEEP_IDLE);
TRACE_DEFINE_ENUM(SQCQ_SLEEP_CONTENDED);
TRACE_DEFINE_ENUM(SQCQ_SLEEP_STOLEN);
TRACE_DEFINE_ENUM(SQCQ_WAKE_INTERRUPT);
TRACE_DEFINE_ENUM(SQCQ_WAKE_STOP);
TRACE_DEFINE_ENUM(SQCQ_WAKE_OTHER);

TRACE_EVENT(sqcq_setup,
	TP_PROTO(unsigned int host, unsigned int nqueues, u32 flags,
		 bool poll_thread),
	TP_ARGS(host, nqueues, flags, poll_thread),
	TP_STRUCT__entry(
		__field(unsigned int, host)
		__field(unsigned int, nqueues)
		__field(u32, flags)
		__field(bool, poll_thread)
	),
	TP_fast_assign(
		__entry->host = host;
		__entry->nqueues = nqueues;
		__entry->flags = flags;
		__entry->poll_thread = poll_thread;
	),
	TP_printk("host=%u queues=%u flags=%#x poll_thread=%d", __entry->host,
		  __entry->nqueues, __entry->flags, __entry->poll_thread)
);

/* An event of a SCSI host with the reason for it. */
DECLARE_EVENT_CLASS(sqcq_host_why,
	TP_PROTO(unsigned int host, const char *why),
	TP_ARGS(host, why),
	TP_STRUCT__entry(
		__field(unsigned int, host)
		__array(char, why, SQCQ_TRACE_WHY_LEN)
	),
	TP_fast_assign(
		__entry->host = host;
		strscpy(__entry->why, why, SQCQ_TRACE_WHY_LEN);
	),
	TP_printk("host=%u why=%s", __entry->host, __entry->why)
);

/* A setup that ended classic (at probe, restore or renegotiation). */
DEFINE_EVENT(sqcq_host_why, sqcq_classic,
	TP_PROTO(unsigned int host, const char *why),
	TP_ARGS(host, why)
);

/* SQ/CQ in use ended: the host stopped it, or the device was reset. */
DEFINE_EVENT(sqcq_host_why, sqcq_teardown,
	TP_PROTO(unsigned int host, const char *why),
	TP_ARGS(host, why)
);

TRACE_EVENT(poll_sleep,
	TP_PROTO(unsigned int host, int reason, u64 window_ns),
	TP_ARGS(host, reason, window_ns),
	TP_STRUCT__entry(
		__field(unsigned int, host)
		__field(int, reason)
		__field(u64, window_ns)
	),
	TP_fast_assign(
		__entry->host = host;
		__entry->reason = reason;
		__entry->window_ns = window_ns;
	),
	TP_printk("host=%u reason=%s window_ns=%llu", __entry->host,
		  __print_symbolic(__entry->reason,
				   { SQCQ_SLEEP_IDLE, "idle" },
				   { SQCQ_SLEEP_CONTENDED, "contended" },
				   { SQCQ_SLEEP_STOLEN, "stolen" }),
		  (unsigned long long)__entry->window_ns)
);

TRACE_EVENT(poll_wake,
	TP_PROTO(unsigned int host, int reason),
	TP_ARGS(host, reason),
	TP_STRUCT__entry(
		__field(unsigned int, host)
		__field(int, reason)
	),
	TP_fast_assign(
		__entry->host = host;
		__entry->reason = reason;
	),
	TP_printk("host=%u reason=%s", __entry->host,
		  __print_symbolic(__entry->reason,
				   { SQCQ_WAKE_INTERRUPT, "interrupt" },
				   { SQCQ_WAKE_STOP, "stop" },
				   { SQCQ_WAKE_OTHER, "other" }))
);

#endif /* SQCQ_GUEST_TRACE_H */

/* This file again, for trace/define_trace.h: guest/ is on the include path. */
#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE sqcq_guest_trace
#include <trace/define_trace.h>
