// SPDX-License-Identifier: GPL-2.0
/*
 * Self-test of t.h: one test that passes and one that must fail.  run.sh
 * checks that the failing one is reported as FAIL and makes the exit status
 * non-zero (it does not pass these lines through).
 */
#include "t.h"

TEST(selftest_pass)
{
	CHECK(1 + 1 == 2);
	CHECK_EQ(3u, 3);
	CHECK_STR_EQ("a", "a");
}

TEST(selftest_fail)
{
	CHECK(1 + 1 == 2);
	CHECK_EQ(2u, 3);	/* must fail */
}

int main(int argc, char **argv)
{
	t_init(argc, argv);
	RUN(selftest_pass);
	RUN(selftest_fail);
	return t_done();
}
