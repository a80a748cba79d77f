// SPDX-License-Identifier: GPL-2.0
/*
 * Barrier census of common/sqcq_uapi.h: every helper of the NEED_WAKEUP
 * handshake is run with the header's access and barrier primitives
 * replaced by recorders, and the exact sequence of loads, stores and
 * barriers it performs is compared with the protocol's
 * (docs/protocol.md section 4).  A barrier deleted or moved in the header
 * fails here deterministically, whatever the hardware reorders.
 *
 * Built by tests/unit/run.sh against the real header, and against copies
 * of it with one barrier line removed each (SQCQ_UAPI_HEADER): every such
 * copy must fail.
 */
#include <stdint.h>
#include <string.h>

enum ev_kind { EV_NONE, EV_MB, EV_WMB, EV_RMB, EV_LOAD, EV_STORE };

struct ev {
	enum ev_kind kind;
	const void *addr;	/* loads and stores */
};

static struct ev trace[32];
static unsigned int ntrace;

static void rec(enum ev_kind kind, const void *addr)
{
	if (ntrace < sizeof(trace) / sizeof(trace[0]))
		trace[ntrace] = (struct ev){ kind, addr };
	ntrace++;
}

static uint16_t rec_load(const void *p)
{
	uint16_t v;

	rec(EV_LOAD, p);
	memcpy(&v, p, sizeof(v));	/* little-endian test machine */
	return v;
}

static void rec_store(void *p, unsigned int v)
{
	uint16_t w = (uint16_t)v;

	rec(EV_STORE, p);
	memcpy(p, &w, sizeof(w));
}

#define SQCQ_TEST_PRIMITIVES
#define sqcq_mb()		rec(EV_MB, NULL)
#define sqcq_wmb()		rec(EV_WMB, NULL)
#define sqcq_rmb()		rec(EV_RMB, NULL)
#define sqcq_load16(p)		rec_load(p)
#define sqcq_store16(p, v)	rec_store((p), (v))

#ifndef SQCQ_UAPI_HEADER
#define SQCQ_UAPI_HEADER "../../common/sqcq_uapi.h"
#endif
#include SQCQ_UAPI_HEADER
#include "t.h"

static __le16 idx, flags;

#define B(k)	{ EV_##k, NULL }
#define L(a)	{ EV_LOAD, &(a) }
#define S(a)	{ EV_STORE, &(a) }

/* The recorded trace equals @want (@n events), else print both. */
static int trace_is(const struct ev *want, unsigned int n)
{
	static const char *const names[] = { "-", "mb", "wmb", "rmb", "load", "store" };
	unsigned int i;
	int same = ntrace == n;

	for (i = 0; same && i < n; i++)
		same = trace[i].kind == want[i].kind && trace[i].addr == want[i].addr;
	if (same)
		return 1;
	fprintf(stderr, "  want:");
	for (i = 0; i < n; i++)
		fprintf(stderr, " %s%s", names[want[i].kind],
			want[i].addr == &idx ? "(idx)" : want[i].addr ? "(flags)" : "");
	fprintf(stderr, "\n  got: ");
	for (i = 0; i < ntrace && i < 32; i++)
		fprintf(stderr, " %s%s", names[trace[i].kind],
			trace[i].addr == &idx ? "(idx)" : trace[i].addr ? "(flags)" : "");
	fprintf(stderr, "\n");
	return 0;
}

#define EXPECT_TRACE(...)						\
	do {								\
		static const struct ev want_[] = { __VA_ARGS__ };	\
		CHECK(trace_is(want_, sizeof(want_) / sizeof(want_[0]))); \
	} while (0)

static void reset(void)
{
	ntrace = 0;
	idx = 0;
	flags = 0;
}

/* Consumer reads the index, then a read barrier before the ring. */
TEST(census_consume_idx)
{
	reset();
	(void)sqcq_consume_idx(&idx);
	EXPECT_TRACE(L(idx), B(RMB));
}

/* Producer: wmb, index store, full barrier, flag load. */
TEST(census_publish)
{
	reset();
	(void)sqcq_publish(&idx, 5, &flags, SQCQ_SQ_F_NEED_WAKEUP);
	EXPECT_TRACE(B(WMB), S(idx), B(MB), L(flags));
}

/* Consumer going to sleep: flag store, full barrier, index re-read. */
TEST(census_prepare_sleep)
{
	reset();
	CHECK(sqcq_prepare_sleep(&flags, SQCQ_CQ_F_NEED_WAKEUP, &idx, 0));
	EXPECT_TRACE(L(flags), S(flags), B(MB), L(idx));
}

/* ... and when the index moved: the flag is cleared again after it. */
TEST(census_prepare_sleep_moved)
{
	reset();
	idx = 1;	/* le16 1 on the little-endian test machine */
	CHECK(!sqcq_prepare_sleep(&flags, SQCQ_CQ_F_NEED_WAKEUP, &idx, 0));
	EXPECT_TRACE(L(flags), S(flags), B(MB), L(idx), L(flags), S(flags));
}

/* Notification asked for without sleeping: flag store, full barrier. */
TEST(census_request_notify)
{
	reset();
	sqcq_request_notify(&flags, SQCQ_SQ_F_NEED_WAKEUP);
	EXPECT_TRACE(L(flags), S(flags), B(MB));
}

TEST(census_stop_polling)
{
	reset();
	sqcq_stop_polling(&flags, SQCQ_SQ_F_NEED_WAKEUP, SQCQ_SQ_F_STOPPED);
	EXPECT_TRACE(L(flags), S(flags), B(MB));
}

/* No barrier here, by design (the header says why). */
TEST(census_clear_need_wakeup)
{
	reset();
	sqcq_clear_need_wakeup(&flags, SQCQ_SQ_F_NEED_WAKEUP);
	EXPECT_TRACE(L(flags), S(flags));
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	RUN(census_consume_idx);
	RUN(census_publish);
	RUN(census_prepare_sleep);
	RUN(census_prepare_sleep_moved);
	RUN(census_request_notify);
	RUN(census_stop_polling);
	RUN(census_clear_need_wakeup);
	return t_done();
}
