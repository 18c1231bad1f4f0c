// Inside a Slurm allocation: the hosts and ranks `strata run` takes from it (SLURM_JOB_NODELIST,
// SLURM_TASKS_PER_NODE, SLURM_NTASKS), in place of a host list typed by hand.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/run/options.hpp"

namespace strata::launcher::run {

// Slurm's compressed host list: "node[01-03,07],gpu-a[1-2]" → node01 node02 node03 node07
// gpu-a1 gpu-a2 (zero padding kept; several bracket groups in one name multiply). Throws
// UserError naming `what` (the variable) on bad syntax.
std::vector<std::string> expand_hostlist(const std::string& list, const std::string& what);

// Slurm's tasks per node: "2(x3),1" → 2 2 2 1. Throws UserError naming `what` on bad syntax.
std::vector<int> expand_tasks_per_node(const std::string& spec, const std::string& what);

struct SlurmAllocation {
  std::string job_id;
  std::vector<std::string> hosts;
  std::vector<int> slots;  // ranks per host, as hosts
  int ntasks = 0;          // SLURM_NTASKS (0: not set): the ranks when -n is not given
  int total_slots() const;
  std::string host_arg() const;  // "n1:2,n2:2", mpirun's --host
};

// The allocation this process runs in, read from the environment; job_id empty outside one.
SlurmAllocation read_allocation(const std::function<const char*(const char*)>& getenv);

// Fills o.hosts and (where -n was not given) o.ranks from the allocation when `strata run` runs
// inside one (SLURM_JOB_ID set) and --no-slurm was not given. Throws UserError for conflicts:
// --host/--hostfile inside an allocation, -n above the allocation's slots, no -n outside one.
void apply_allocation(RunOptions& o, const std::function<const char*(const char*)>& getenv);

}  // namespace strata::launcher::run
