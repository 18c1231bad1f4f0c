// Whether a node answers, asked the way the job is launched on it: `mpirun -np 1 --host NODE:1
// [the job's --mpi-arg ...] true`, which starts Open MPI's daemon there through the same agent
// (ssh, the rsh agent given with --mpi-arg, or srun inside Slurm) and the same network as the job.
// A probe that has not ended within its time limit is killed and counts as "does not answer".
// Its output goes to <log-dir>/probe/<host>.log.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace strata::launcher::run {

struct ProbeSpec {
  std::string mpirun = "mpirun";
  std::vector<std::string> mpi_args;
  std::vector<std::pair<std::string, std::string>> env;  // OMPI_ALLOW_RUN_AS_ROOT* as root
  std::string log_dir;
  double timeout_s = 10;
};

// One probe of one host, running in the background.
class NodeProbe {
 public:
  NodeProbe(const ProbeSpec& spec, std::string host);
  ~NodeProbe();  // kills and reaps it if it still runs
  NodeProbe(const NodeProbe&) = delete;
  NodeProbe& operator=(const NodeProbe&) = delete;
  const std::string& host() const { return host_; }
  // nullopt while it runs; then whether the node answered (mpirun exited 0 in time).
  std::optional<bool> poll();

 private:
  std::string host_;
  pid_t pid_ = -1;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<bool> result_;
};

// The command a probe runs (for the log and the tests).
std::vector<std::string> probe_command(const ProbeSpec& spec, const std::string& host);

// Probes `hosts` at once and waits for every answer: the hosts that answered.
std::set<std::string> probe_nodes(const ProbeSpec& spec, const std::vector<std::string>& hosts);

}  // namespace strata::launcher::run
