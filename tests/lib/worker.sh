# shellcheck shell=bash
# The host module's workers, for the VM-side test scripts (sourced).  Each
# device has one, named "vhost-sqcq-<owner tgid>" (cut to 15 bytes): a
# thread of the owner where the kernel has vhost_task (6.11+), a kthread
# elsewhere.  /proc lists thread groups only, so look in every task/.

# sqcq_worker_tids: the thread ids of all workers, one a line.
sqcq_worker_tids() {
	grep -l '^vhost-sqcq-' /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null | cut -d/ -f5
}
sqcq_workers() { sqcq_worker_tids | wc -l; }
# sqcq_worker_of PID: the worker of the device that process PID owns runs.
sqcq_worker_of() {
	local name
	name=$(printf 'vhost-sqcq-%s' "$1" | cut -c1-15)
	grep -qx "$name" /proc/[0-9]*/task/[0-9]*/comm 2>/dev/null
}
# sqcq_vhost_task: the kernel has vhost_task, so workers are threads of
# their owner (the module uses it where it is, see common/sqcq_compat.h).
sqcq_vhost_task() { grep -q ' vhost_task_create$' /proc/kallsyms; }
