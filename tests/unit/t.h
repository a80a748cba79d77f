/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A tiny test framework for the userspace unit tests.
 *
 *   TEST(name) { CHECK(cond); CHECK_EQ(a, b); }
 *   ...
 *   int main(int argc, char **argv) { t_init(argc, argv); RUN(name); return t_done(); }
 *
 * Each RUN() prints exactly one line, "PASS: unit <name>" or
 * "FAIL: unit <name>", after the diagnostics of its failed checks (stderr).
 * An optional argv[1] is appended to every name ("<name>.<tag>") so that the
 * sanitizer build reports under distinct names.
 */
#ifndef SQCQ_TEST_T_H
#define SQCQ_TEST_T_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *t_tag;
static const char *t_cur;
static unsigned int t_checks_failed;	/* in the current test */
static unsigned int t_tests_failed;
static unsigned int t_tests_passed;

#define T_NAME_FMT "%s%s%s"
#define T_NAME_ARGS(n) (n), t_tag ? "." : "", t_tag ? t_tag : ""

static inline void t_check_failed(const char *file, int line, const char *what)
{
	fprintf(stderr, "  %s:%d: [" T_NAME_FMT "] check failed: %s\n",
		file, line, T_NAME_ARGS(t_cur), what);
	fflush(stderr);
	t_checks_failed++;
}

#define CHECK(cond)							\
	do {								\
		if (!(cond))						\
			t_check_failed(__FILE__, __LINE__, #cond);	\
	} while (0)

/* Compares as unsigned long long and prints both values on failure. */
#define CHECK_EQ(a, b)							\
	do {								\
		unsigned long long t_a_ = (unsigned long long)(a);	\
		unsigned long long t_b_ = (unsigned long long)(b);	\
		if (t_a_ != t_b_) {					\
			t_check_failed(__FILE__, __LINE__, #a " == " #b); \
			fprintf(stderr, "    left 0x%llx, right 0x%llx\n", \
				t_a_, t_b_);				\
		}							\
	} while (0)

#define CHECK_STR_EQ(a, b)						\
	do {								\
		const char *t_a_ = (a), *t_b_ = (b);			\
		if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_)) {		\
			t_check_failed(__FILE__, __LINE__, #a " == " #b); \
			fprintf(stderr, "    left \"%s\", right \"%s\"\n", \
				t_a_ ? t_a_ : "(null)",			\
				t_b_ ? t_b_ : "(null)");		\
		}							\
	} while (0)

#define TEST(name) static void test_##name(void)
#define RUN(name) t_run(#name, test_##name)

static inline void t_init(int argc, char **argv)
{
	t_tag = argc > 1 && argv[1][0] ? argv[1] : NULL;
	setvbuf(stdout, NULL, _IOLBF, 0);
}

static inline void t_report(const char *name, int ok)
{
	printf("%s: unit " T_NAME_FMT "\n", ok ? "PASS" : "FAIL",
	       T_NAME_ARGS(name));
	fflush(stdout);
	if (ok)
		t_tests_passed++;
	else
		t_tests_failed++;
}

static inline void t_run(const char *name, void (*fn)(void))
{
	t_cur = name;
	t_checks_failed = 0;
	fn();
	t_report(name, t_checks_failed == 0);
}

static inline int t_done(void)
{
	return t_tests_failed ? 1 : 0;
}

#endif /* SQCQ_TEST_T_H */
