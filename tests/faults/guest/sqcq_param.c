// SPDX-License-Identifier: GPL-2.0-only
/* The shared poll parameters as an object of the guest's test build. */
#include "../../../common/sqcq_param.c"
