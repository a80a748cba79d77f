// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test build of the host module, never packaged: the same source with the
 * fault hooks of common/sqcq_faults.h live, under a module name of its own
 * (vhost_scsi_sqcq_faults).  tests/host/takeover-race.sh loads it.
 */
#include <linux/moduleparam.h>

unsigned int fault_takeover_wait_ms;
module_param(fault_takeover_wait_ms, uint, 0644);
MODULE_PARM_DESC(fault_takeover_wait_ms, "Test only: with takeover=1, wait up to this many ms after the check for the in-tree vhost_scsi, before /dev/vhost-scsi and the fabric are registered (writing 0 ends the wait)");

/* From host/ (-I in Kbuild), or beside this file in a copy of the tree. */
#include "vhost_scsi_sqcq_main.c"
