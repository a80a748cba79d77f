#!/bin/bash
# tests/vm/fetch-kernel.sh <id|abi>
#
# Download and unpack a Debian kernel (amd64 flavour) for the VM tests into
#   $SQCQ_CACHE/kimage/<abi>/
#     vmlinuz                    the bzImage as Debian ships it
#     vmlinux                    the same kernel, uncompressed ELF (boots via
#                                PVH: no in-guest decompression, faster on TCG)
#     kver                       `uname -r` of that kernel (e.g. 6.1.0-57-amd64)
#     config                     its .config
#     lib/modules/<kver>/        its modules tree, depmod'ed (modules may be
#                                .ko.xz; bookworm's kmod loads them as they are)
#
# The result is built in a temporary directory next to it and renamed into
# place, so a half-done download never looks like a cached kernel. Prints the
# directory on stdout. Idempotent: a complete cached kernel is reused.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tests/vm/common.sh
. "$here/common.sh"

[ $# -eq 1 ] || sqcq_die "usage: $0 <id|abi>"
sqcq_vm_fetch_kernel "$1"
