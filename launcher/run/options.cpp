#include "launcher/run/options.hpp"

#include <cmath>

#include "framework/core/error.hpp"
#include "launcher/run/elastic.hpp"

namespace strata::launcher::run {

namespace {

// A duration option: a finite number of seconds in [0, max] (NaN, infinity and absurd values
// would wait forever or be taken as 0).
void check_seconds(const char* flag, double v, double max, const char* zero_means = "") {
  if (!std::isfinite(v) || v < 0)
    user_fail("run", "{} {}: give a number of seconds >= 0{}", flag, v, zero_means);
  if (v > max) user_fail("run", "{} {}: at most {:g} seconds are accepted", flag, v, max);
}

}  // namespace

void validate(const RunOptions& o) {
  if (!o.ranks_given && o.nodes.empty())
    user_fail("run", "-n N is required outside a Slurm allocation (inside one, the ranks are "
              "SLURM_NTASKS)");
  if (o.ranks < 1) user_fail("run", "-n {}: the number of ranks must be at least 1", o.ranks);
  if (!o.hostfile.empty() && !o.hosts.empty())
    user_fail("run", "give either --hostfile or --host, not both");
  if (o.max_restarts < 0) user_fail("run", "--max-restarts {} must be >= 0", o.max_restarts);
  check_seconds("--restart-delay", o.restart_delay_s, 86400);
  check_seconds("--watchdog", o.watchdog_s, 7 * 86400, " (0: off)");
  check_seconds("--kill-grace", o.kill_grace_s, 3600);
  if (o.watchdog_startup_s) check_seconds("--watchdog-startup", *o.watchdog_startup_s, 7 * 86400);
  if (!o.nodes.empty()) {
    parse_node_range(o.nodes);
    if (o.hostfile.empty() && o.hosts.empty())
      user_fail("run", "--nodes {} needs the nodes: give --host n1:4,n2:4 or --hostfile FILE (one "
                "'host slots=N' line per node), or run inside a Slurm allocation", o.nodes);
  }
  check_seconds("--node-grace", o.node_grace_s, 86400);
  if (o.node_grace_given && o.nodes.empty())
    user_fail("run", "--node-grace is for elastic jobs: add --nodes MIN:MAX, or leave it out");
  if (o.program.empty())
    user_fail("run", "no program to run (write: strata run -n N -- PROGRAM ARGS...)");
}

}  // namespace strata::launcher::run
