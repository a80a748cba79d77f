// SPDX-License-Identifier: GPL-2.0-only
/*
 * The shared poll parameters (common/sqcq_param.c) as an object of this
 * module, so that they are vhost_scsi_sqcq's: Kbuild builds an object in
 * the directory of the module it belongs to.
 */
#include "../common/sqcq_param.c"
