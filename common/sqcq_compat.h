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

#endif /* SQCQ_COMPAT_H */
