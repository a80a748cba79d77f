# shellcheck shell=bash
# Loading a module by path in a test VM (sourced).

# load_deps KO: load what modinfo says KO depends on (insmod does not).
load_deps() {
	local d
	for d in $(modinfo -F depends "$1" | tr ',' ' '); do
		modprobe "$d" || return 1
	done
}
