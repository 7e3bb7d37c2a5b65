// The CPUs this process may run on. A job scheduler (Slurm's --cpus-per-task, a container's
// cpuset), taskset or an MPI launcher's binding confines a process to fewer CPUs than the
// machine has online, and std::thread::hardware_concurrency() still counts them all: threads
// sized by it would take turns on the few cores the process has. Every count of cores that
// sizes threads or refuses oversubscription comes from here.
#pragma once

#include <string>
#include <vector>

namespace scalescope {

// The CPU numbers of this process's affinity mask, ascending; every online CPU where the
// system does not say (never empty).
std::vector<int> usable_cpus();
// How many there are.
int usable_core_count();

// Whether two processes with these CPU sets (ascending) run on a core in common: processes an
// MPI launcher bound to cores of their own do not, unbound ones of a node share all of its.
bool cpu_sets_intersect(const std::vector<int>& a, const std::vector<int>& b);

// The CPU sets as a process sends them to the others of a launch ("0-3,8,10-11") and back.
// Parsing throws Error naming the text unless it lists ascending CPU numbers.
std::string format_cpu_set(const std::vector<int>& cpus);
std::vector<int> parse_cpu_set(const std::string& text);

}  // namespace scalescope
