// SPDX-License-Identifier: GPL-2.0-only
/*
 * Test build of the guest driver, never packaged: the same source with the
 * fault hooks of common/sqcq_faults.h live, under a module name of its own
 * (virtio_scsi_sqcq_faults).  tests/guest/inside.sh loads it.
 */
#include <linux/moduleparam.h>

unsigned int fault_setup_unsent;
module_param(fault_setup_unsent, uint, 0644);
MODULE_PARM_DESC(fault_setup_unsent, "Test only: the next N SQ/CQ setup requests are queued without notifying the device (to the driver, a device that never answers)");

#include "../../../guest/virtio_scsi_sqcq.c"
