// SPDX-License-Identifier: GPL-2.0
/*
 * Two-thread stress test of the NEED_WAKEUP handshake (docs/protocol.md section 4), using
 * the very helpers of common/sqcq_uapi.h on a real doorbell area laid out by
 * sqcq_area_init().
 *
 *   producer thread: writes a payload into a ring slot, sqcq_publish()es the
 *     doorbell index and writes the eventfd only when sqcq_publish() says so.
 *     It publishes in random bursts with random pauses, and sometimes waits
 *     until the consumer drained everything (like a guest at queue depth N
 *     waiting for completions), which turns any lost wakeup into a hang.
 *   consumer thread (the poller): polls the index a bounded number of spins,
 *     then sqcq_prepare_sleep() and blocks on the eventfd, then
 *     sqcq_clear_need_wakeup() and polls again.
 *
 * A lost wakeup is detected exactly, not guessed from a slow run: when the
 * consumer's wait times out it checks whether the producer has *finished*
 * the notify decision for an index the consumer has not seen (the producer
 * publishes a "decided" count after it notified or chose not to) while the
 * eventfd is still not readable.  Then the producer decided not to notify a
 * sleeping consumer: LOST WAKEUP.  A merely slow producer is waited for.
 *
 * To hit the race windows often, the consumer waits a random 0-4 us between
 * its last poll and sqcq_prepare_sleep() (where a real poller checks its
 * timeout and sets its task state), and the producer now and then aims a
 * burst at that window: either right after the consumer gave up polling, or
 * while the consumer holds still just before sqcq_prepare_sleep() until the
 * producer starts publishing.  These instruments are plain test variables;
 * they touch neither the doorbell area nor the helpers.
 *
 * At the end the consumer stops polling for good (sqcq_stop_polling()) and
 * the producer publishes more items, every one of which must notify
 * (graceful degradation, docs/protocol.md section 5).
 *
 * Usage: test_stress sq|cq [items [tag]]
 *   sq: guest producer, host poller (sqcq_sq.idx, SQCQ_SQ_F_NEED_WAKEUP)
 *   cq: host producer, guest poller (sqcq_cq.idx, SQCQ_CQ_F_NEED_WAKEUP)
 *
 * Mutations (compile time, for proving the test can fail; run.sh expects
 * these builds to report a lost wakeup):
 *   -DSQCQ_TEST_BROKEN_RECHECK      prepare_sleep without the re-check of the
 *                                   index (flag set, barrier, sleep).
 *   -DSQCQ_TEST_BROKEN_PRODUCER_MB  publish without the full barrier, with
 *                                   the store->load reordering that this
 *                                   permits on x86-TSO *forced*: the flag is
 *                                   loaded before the index store becomes
 *                                   visible (store held back 0-40 us).
 *   -DSQCQ_TEST_BROKEN_CONSUMER_MB  prepare_sleep without the full barrier,
 *                                   the same reordering forced.
 *   -DSQCQ_TEST_BROKEN_NOFENCE      both full barriers simply deleted, no
 *                                   forcing: whether the hardware reorders
 *                                   within the run is luck (informational).
 */
#define _GNU_SOURCE
#include "../../common/sqcq_uapi.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>

#define RING		256u		/* ring entries: max items in flight */
#define MAX_BURST	24u
#define SPIN_LIMIT	200u		/* polls without work before sleeping */
#define WAIT_SLICE_MS	50		/* eventfd wait slice before checking */
#define STALL_MS	30000		/* a producer stuck this long: fail */
#define STOPPED_ITEMS	2000u		/* published after stop_polling */

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax()	__builtin_ia32_pause()
#else
#define cpu_relax()	__asm__ __volatile__("" ::: "memory")
#endif

/* ------------------------------------------------------------------ */
/* The helpers under test, or a deliberately broken local copy         */
/* ------------------------------------------------------------------ */

static void spin_delay(unsigned int n)
{
	while (n--)
		cpu_relax();
}

/* Busy-wait about ns nanoseconds (pause is slow and erratic under a
 * hypervisor's pause-loop exiting, so count time, not pauses).
 */
static __attribute__((unused)) void delay_ns(uint64_t ns)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	do {
		cpu_relax();
		clock_gettime(CLOCK_MONOTONIC, &b);
	} while ((uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u +
		 (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec < ns);
}

static __thread uint64_t rnd_state;

static uint32_t rnd(void)
{
	/* xorshift64* */
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return (uint32_t)((rnd_state * 2685821657736338717ull) >> 32);
}

#if defined(SQCQ_TEST_BROKEN_RECHECK)
#define MUTATION "consumer re-check removed (prepare_sleep sleeps without re-reading the index)"
static bool t_publish(__le16 *idx, __u16 v, const __le16 *pf, __u16 need)
{
	return sqcq_publish(idx, v, pf, need);
}

static bool t_prepare_sleep(__le16 *own, __u16 need, const __le16 *idx,
			    __u16 seen)
{
	(void)idx;
	(void)seen;
	sqcq_store16(own, sqcq_load16(own) | need);
	sqcq_mb();
	return true;		/* MUTATION: no re-check */
}
#elif defined(SQCQ_TEST_BROKEN_PRODUCER_MB)
#define MUTATION "producer full barrier removed; store->load reordering forced (flag loaded before the index store is visible)"
static bool t_publish(__le16 *idx, __u16 v, const __le16 *pf, __u16 need)
{
	bool notify;

	sqcq_wmb();
	/* MUTATION: what a store buffer does without the barrier, forced:
	 * the index store becomes visible only after the flag load.
	 */
	notify = (sqcq_load16(pf) & need) != 0;
	delay_ns(rnd() % 40000);
	sqcq_store16(idx, v);
	return notify;
}

static bool t_prepare_sleep(__le16 *own, __u16 need, const __le16 *idx,
			    __u16 seen)
{
	return sqcq_prepare_sleep(own, need, idx, seen);
}
#elif defined(SQCQ_TEST_BROKEN_CONSUMER_MB)
#define MUTATION "consumer full barrier removed; store->load reordering forced (index loaded before the flag store is visible)"
static bool t_publish(__le16 *idx, __u16 v, const __le16 *pf, __u16 need)
{
	return sqcq_publish(idx, v, pf, need);
}

static bool t_prepare_sleep(__le16 *own, __u16 need, const __le16 *idx,
			    __u16 seen)
{
	/* MUTATION: the flag store becomes visible only after the index
	 * load, as a store buffer allows without the barrier.
	 */
	bool moved = sqcq_load16(idx) != seen;

	delay_ns(rnd() % 40000);
	sqcq_store16(own, sqcq_load16(own) | need);
	if (moved) {
		sqcq_store16(own, sqcq_load16(own) & ~need);
		return false;
	}
	return true;
}
#elif defined(SQCQ_TEST_BROKEN_NOFENCE)
#define MUTATION "both full barriers deleted, nothing forced (x86 must reorder by itself)"
static bool t_publish(__le16 *idx, __u16 v, const __le16 *pf, __u16 need)
{
	sqcq_wmb();
	sqcq_store16(idx, v);
	/* MUTATION: no sqcq_mb() */
	return (sqcq_load16(pf) & need) != 0;
}

static bool t_prepare_sleep(__le16 *own, __u16 need, const __le16 *idx,
			    __u16 seen)
{
	sqcq_store16(own, sqcq_load16(own) | need);
	/* MUTATION: no sqcq_mb() */
	if (sqcq_load16(idx) != seen) {
		sqcq_store16(own, sqcq_load16(own) & ~need);
		return false;
	}
	return true;
}
#else
#define MUTATION ((const char *)0)
static bool t_publish(__le16 *idx, __u16 v, const __le16 *pf, __u16 need)
{
	return sqcq_publish(idx, v, pf, need);
}

static bool t_prepare_sleep(__le16 *own, __u16 need, const __le16 *idx,
			    __u16 seen)
{
	return sqcq_prepare_sleep(own, need, idx, seen);
}
#endif

/* ------------------------------------------------------------------ */
/* Shared state                                                        */
/* ------------------------------------------------------------------ */

struct chan {
	const char *dir;
	__le16 *idx;		/* doorbell index, written by the producer */
	__le16 *flags;		/* consumer's flags word */
	__u16 need, stopped;
	__u16 start;		/* initial index (so the run wraps early) */
	int efd;
	uint64_t items;		/* items before stop_polling */
	uint64_t total;		/* items + STOPPED_ITEMS */
	uint32_t ring[RING];	/* payloads */

	/* written by the consumer */
	uint64_t consumed;	/* atomic: items consumed */
	int stop_acked;		/* atomic: consumer has stopped polling */
	/* written by the producer */
	uint64_t decided;	/* atomic: items whose notify decision is done */
	/* either */
	int abort;		/* atomic */
	/* test instrument, not protocol: bumped by the consumer right before
	 * it heads for sqcq_prepare_sleep(), so the producer can aim its next
	 * publish at the race window
	 */
	uint64_t pre_sleep_seq;	/* atomic */
	int aim_hold;		/* atomic, producer: consumer, wait for aim_go */
	int aim_go;		/* atomic, producer: publishing now */
	int holding;		/* atomic, consumer: holding for aim_go */

	/* statistics, each written by one thread, read after join */
	uint64_t notifies, notifies_after_stop, missed_notify_after_stop;
	uint64_t producer_waits, producer_aimed;
	uint64_t held, polls_hit, sleeps, aborted_sleeps, wakeups, spurious;
	uint64_t max_batch;
	char error[512];
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t payload(uint64_t n)
{
	return (uint32_t)(n * 2654435761u) ^ 0x5a5a5a5au;
}

static uint64_t ld64(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static void st64(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static int aborted(struct chan *c)
{
	return __atomic_load_n(&c->abort, __ATOMIC_ACQUIRE);
}

static void fail(struct chan *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(struct chan *c, const char *fmt, ...)
{
	va_list ap;

	if (__atomic_exchange_n(&c->abort, 1, __ATOMIC_ACQ_REL))
		return;		/* first error wins */
	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
}

static void notify(struct chan *c)
{
	uint64_t one = 1;

	if (write(c->efd, &one, sizeof(one)) != sizeof(one))
		fail(c, "eventfd write: %s", strerror(errno));
}

/* ------------------------------------------------------------------ */
/* Producer                                                            */
/* ------------------------------------------------------------------ */

/* Spin until cond holds or the run is aborted. */
#define WAIT_UNTIL(c, cond)						\
	do {								\
		unsigned int w_ = 0;					\
		while (!(cond) && !aborted(c)) {			\
			if (++w_ % 1024 == 0)				\
				sched_yield();				\
			else						\
				cpu_relax();				\
		}							\
	} while (0)

static void produce_one(struct chan *c, uint64_t *p, bool must_notify)
{
	bool n;

	/* Never more than RING items in flight. */
	WAIT_UNTIL(c, *p - ld64(&c->consumed) < RING);
	if (aborted(c))
		return;
	c->ring[*p % RING] = payload(*p);
	(*p)++;
	n = t_publish(c->idx, (__u16)(c->start + *p), c->flags, c->need);
	if (n) {
		notify(c);
		c->notifies++;
		if (must_notify)
			c->notifies_after_stop++;
	} else if (must_notify) {
		c->missed_notify_after_stop++;
		fail(c, "publish of item %" PRIu64 " after stop_polling did not ask for a notification",
		     *p);
	}
	st64(&c->decided, *p);
}

/*
 * Aim the next burst at the consumer's way to sleep (a test instrument, not
 * protocol; both schedules below are ones a real system can produce):
 *  - hold: the consumer, once it has given up polling, holds still right
 *    before sqcq_prepare_sleep() (as if interrupted there) until the
 *    producer starts publishing;
 *  - chase: the producer waits until the consumer gives up polling, then
 *    publishes after a random delay spanning its pre-sleep window.
 * Called with everything published; returns with the burst to be published
 * right away.
 */
static void aim(struct chan *c, uint64_t p)
{
	uint64_t seq = ld64(&c->pre_sleep_seq);
	unsigned int w = 0;

	if (rnd() & 1) {
		__atomic_store_n(&c->aim_go, 0, __ATOMIC_SEQ_CST);
		__atomic_store_n(&c->aim_hold, 1, __ATOMIC_SEQ_CST);
		WAIT_UNTIL(c, ld64(&c->consumed) == p);
		while (!__atomic_load_n(&c->holding, __ATOMIC_SEQ_CST) &&
		       ++w < 64 * SPIN_LIMIT && !aborted(c))
			cpu_relax();
		__atomic_store_n(&c->aim_go, 1, __ATOMIC_SEQ_CST);
		c->producer_aimed++;
		return;
	}
	WAIT_UNTIL(c, ld64(&c->consumed) == p);
	while (ld64(&c->pre_sleep_seq) == seq && ++w < 64 * SPIN_LIMIT &&
	       !aborted(c))
		cpu_relax();
	delay_ns(rnd() % 8000);
	c->producer_aimed++;
}

static void *producer(void *arg)
{
	struct chan *c = arg;
	uint64_t p = 0;

	rnd_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)c;
	while (p < c->items && !aborted(c)) {
		unsigned int burst = 1 + rnd() % MAX_BURST, r;

		while (burst-- && p < c->items && !aborted(c))
			produce_one(c, &p, false);
		r = rnd() % 16;
		if (r < 6) {
			/* straight on */
		} else if (r < 10) {
			/* a pause around the consumer's spin budget */
			spin_delay(rnd() % (4 * SPIN_LIMIT));
		} else if (r < 12) {
			/* queue-depth style: wait for everything to drain */
			c->producer_waits++;
			WAIT_UNTIL(c, ld64(&c->consumed) == p);
			spin_delay(rnd() % (4 * SPIN_LIMIT));
		} else if (r < 15) {
			c->producer_waits++;
			aim(c, p);
		} else {
			sched_yield();
		}
	}
	/* Graceful degradation: after the consumer stopped polling, every
	 * publish must ask for a notification.
	 */
	WAIT_UNTIL(c, __atomic_load_n(&c->stop_acked, __ATOMIC_ACQUIRE));
	while (p < c->total && !aborted(c)) {
		produce_one(c, &p, true);
		if (rnd() % 4 == 0)
			WAIT_UNTIL(c, ld64(&c->consumed) == p);
	}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Consumer (the poller)                                               */
/* ------------------------------------------------------------------ */

/* Consume what was published since *seen.  Returns true if there was work. */
static bool consume(struct chan *c, uint64_t *seen)
{
	__u16 cur = sqcq_consume_idx(c->idx);
	__u16 old = (__u16)(c->start + *seen);
	__u16 n;

	if (cur == old)
		return false;
	if (!sqcq_idx_advance_ok(cur, old, RING)) {
		fail(c, "index jumped from %u to %u (ring %u)", old, cur, RING);
		return false;
	}
	n = sqcq_idx_pending(cur, old);
	if (n > c->max_batch)
		c->max_batch = n;
	while (n--) {
		uint32_t want = payload(*seen);

		if (c->ring[*seen % RING] != want) {
			fail(c, "item %" PRIu64 ": payload 0x%08x, want 0x%08x",
			     *seen, c->ring[*seen % RING], want);
			return false;
		}
		(*seen)++;
	}
	st64(&c->consumed, *seen);
	return true;
}

/*
 * Sleep until the eventfd is written.  Returns false on error (lost wakeup,
 * stall, abort).
 */
static bool wait_notified(struct chan *c, uint64_t seen)
{
	struct pollfd pfd = { .fd = c->efd, .events = POLLIN };
	uint64_t t0 = now_ms(), val;

	for (;;) {
		int r = poll(&pfd, 1, WAIT_SLICE_MS);

		if (r < 0 && errno != EINTR) {
			fail(c, "poll: %s", strerror(errno));
			return false;
		}
		if (r > 0)
			break;
		if (aborted(c))
			return false;
		/* Timed out.  Has the producer finished deciding, without
		 * notifying, for an item this sleeping consumer has not seen?
		 * (decided is stored after the eventfd write, so a notify
		 * for it is visible to the poll below.)
		 */
		if (ld64(&c->decided) > seen) {
			r = poll(&pfd, 1, 0);
			if (r == 0) {
				fail(c, "LOST WAKEUP: consumer asleep having seen %" PRIu64
				     " items (index %u), producer published up to %" PRIu64
				     " (index %u) and decided not to notify",
				     seen, (__u16)(c->start + seen), ld64(&c->decided),
				     sqcq_load16(c->idx));
				return false;
			}
			if (r > 0)
				break;
		}
		if (now_ms() - t0 > STALL_MS) {
			fail(c, "stall: asleep %d ms, producer decided %" PRIu64
			     ", consumed %" PRIu64, STALL_MS, ld64(&c->decided), seen);
			return false;
		}
	}
	if (read(c->efd, &val, sizeof(val)) != sizeof(val)) {
		fail(c, "eventfd read: %s", strerror(errno));
		return false;
	}
	return true;
}

static void *consumer(void *arg)
{
	struct chan *c = arg;
	uint64_t seen = 0;
	unsigned int spins = 0;

	rnd_state = 0xd1b54a32d192ed03ull ^ (uint64_t)(uintptr_t)c;
	/* The poller starts: from now on it polls, no notifications. */
	sqcq_clear_need_wakeup(c->flags, c->need);
	while (seen < c->items && !aborted(c)) {
		if (consume(c, &seen)) {
			c->polls_hit++;
			spins = 0;
			continue;
		}
		if (++spins < SPIN_LIMIT) {
			cpu_relax();
			continue;
		}
		spins = 0;
		__atomic_fetch_add(&c->pre_sleep_seq, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&c->aim_hold, __ATOMIC_SEQ_CST)) {
			unsigned int w = 0;

			__atomic_store_n(&c->holding, 1, __ATOMIC_SEQ_CST);
			while (!__atomic_load_n(&c->aim_go, __ATOMIC_SEQ_CST) &&
			       sqcq_load16(c->idx) == (__u16)(c->start + seen) &&
			       ++w < 64 * SPIN_LIMIT && !aborted(c))
				cpu_relax();
			__atomic_store_n(&c->holding, 0, __ATOMIC_SEQ_CST);
			__atomic_store_n(&c->aim_hold, 0, __ATOMIC_SEQ_CST);
			c->held++;
		}
		/* Widen the window between the last poll and the sleep
		 * decision (a real poller checks timeouts, need_resched(),
		 * sets its task state here).
		 */
		delay_ns(rnd() % 4000);
		if (!t_prepare_sleep(c->flags, c->need, c->idx,
				     (__u16)(c->start + seen))) {
			c->aborted_sleeps++;
			continue;
		}
		c->sleeps++;
		if (!wait_notified(c, seen))
			break;
		c->wakeups++;
		sqcq_clear_need_wakeup(c->flags, c->need);
		if (sqcq_load16(c->idx) == (__u16)(c->start + seen))
			c->spurious++;
	}
	if (aborted(c))
		return NULL;
	/* Stop polling for good (teardown): the producer must now notify on
	 * every publish.  Drain once after the barrier, then only sleep.
	 */
	sqcq_stop_polling(c->flags, c->need, c->stopped);
	__atomic_store_n(&c->stop_acked, 1, __ATOMIC_RELEASE);
	while (seen < c->total && !aborted(c)) {
		if (consume(c, &seen))
			continue;
		if (!wait_notified(c, seen))
			break;
	}
	if (!aborted(c) && (sqcq_load16(c->flags) & (c->need | c->stopped)) !=
			    (c->need | c->stopped))
		fail(c, "flags 0x%x after stop_polling", sqcq_load16(c->flags));
	return NULL;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "sq";
	uint64_t items = argc > 2 ? strtoull(argv[2], NULL, 0) : 200000;
	const char *tag = argc > 3 ? argv[3] : NULL;
	struct sqcq_area *a;
	struct chan *c;
	pthread_t tp, tc;
	uint64_t t0, ms;
	char name[128];
	int ok;

	snprintf(name, sizeof(name), "stress_%s%s%s", dir, tag ? "." : "",
		 tag ? tag : "");
	setvbuf(stdout, NULL, _IOLBF, 0);
	a = aligned_alloc(SQCQ_AREA_ALIGN, SQCQ_AREA_ALIGN);
	c = calloc(1, sizeof(*c));
	if (!a || !c)
		return 2;
	memset(a, 0, SQCQ_AREA_ALIGN);
	sqcq_area_init(a, 1);
	c->dir = dir;
	if (!strcmp(dir, "sq")) {
		c->idx = &a->q[0].sq_line.sq.idx;
		c->flags = &a->q[0].sq_line.sq.flags;
		c->need = SQCQ_SQ_F_NEED_WAKEUP;
		c->stopped = SQCQ_SQ_F_STOPPED;
	} else if (!strcmp(dir, "cq")) {
		c->idx = &a->q[0].cq_line.cq.idx;
		c->flags = &a->q[0].cq_line.cq.flags;
		c->need = SQCQ_CQ_F_NEED_WAKEUP;
		c->stopped = SQCQ_CQ_F_STOPPED;
	} else {
		fprintf(stderr, "usage: %s sq|cq [items [tag]]\n", argv[0]);
		return 2;
	}
	/* Start close to the wrap so it happens early, then several times. */
	c->start = 65536 - 1000;
	sqcq_store16(c->idx, c->start);
	c->items = items;
	c->total = items + STOPPED_ITEMS;
	c->efd = eventfd(0, EFD_CLOEXEC);
	if (c->efd < 0) {
		perror("eventfd");
		return 2;
	}
	if (MUTATION != NULL)
		printf("  %s: MUTATION: %s\n", name, MUTATION);
	t0 = now_ms();
	if (pthread_create(&tc, NULL, consumer, c) ||
	    pthread_create(&tp, NULL, producer, c)) {
		perror("pthread_create");
		return 2;
	}
	pthread_join(tp, NULL);
	pthread_join(tc, NULL);
	ms = now_ms() - t0;

	ok = !c->abort && ld64(&c->consumed) == c->total;
	printf("  %s: %" PRIu64 " of %" PRIu64 " items consumed (the last %u after stop_polling) in %" PRIu64
	       " ms; consumer: %" PRIu64 " poll hits, %" PRIu64 " held before sleeping, %" PRIu64 " sleeps, %" PRIu64
	       " sleeps aborted by re-check, %" PRIu64 " wakeups (%" PRIu64
	       " spurious), max batch %" PRIu64 "; producer: %" PRIu64
	       " notifications (%" PRIu64 " after stop), %" PRIu64 " drain waits, %" PRIu64
	       " publishes aimed at the sleep window\n",
	       name, ld64(&c->consumed), c->total, STOPPED_ITEMS, ms, c->polls_hit, c->held,
	       c->sleeps, c->aborted_sleeps, c->wakeups, c->spurious, c->max_batch,
	       c->notifies, c->notifies_after_stop, c->producer_waits,
	       c->producer_aimed);
	if (c->error[0])
		printf("  %s: %s\n", name, c->error);
	/*
	 * The sleep path must really have run, in both its outcomes: a sleep
	 * that a wakeup ended, and one that the re-check after the full
	 * barrier called off (the race the handshake exists for; the
	 * producer aims publishes at that window, hundreds are seen a run).
	 */
	if (ok && (c->sleeps == 0 || c->wakeups == 0 || c->notifies == 0 ||
		   c->aborted_sleeps == 0)) {
		printf("  %s: the sleep/wakeup path did not run (%" PRIu64 " sleeps, %" PRIu64
		       " wakeups, %" PRIu64 " sleeps called off by the re-check)\n",
		       name, c->sleeps, c->wakeups, c->aborted_sleeps);
		ok = 0;
	}
	if (ok && c->notifies_after_stop != STOPPED_ITEMS) {
		printf("  %s: %" PRIu64 " notifications after stop, want %u\n", name,
		       c->notifies_after_stop, STOPPED_ITEMS);
		ok = 0;
	}
	printf("%s: unit %s\n", ok ? "PASS" : "FAIL", name);
	/* 0 pass, 1 fail, 3 fail by lost wakeup (run.sh tells them apart). */
	ok = ok ? 0 : strstr(c->error, "LOST WAKEUP") ? 3 : 1;
	close(c->efd);
	free(c);
	free(a);
	return ok;
}
