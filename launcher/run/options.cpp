#include "launcher/run/options.hpp"

#include "framework/core/error.hpp"

namespace strata::launcher::run {

void validate(const RunOptions& o) {
  if (o.ranks < 1) user_fail("run", "-n {}: the number of ranks must be at least 1", o.ranks);
  if (!o.hostfile.empty() && !o.hosts.empty())
    user_fail("run", "give either --hostfile or --host, not both");
  if (o.max_restarts < 0) user_fail("run", "--max-restarts {} must be >= 0", o.max_restarts);
  if (o.restart_delay_s < 0) user_fail("run", "--restart-delay {} must be >= 0", o.restart_delay_s);
  if (o.watchdog_s < 0) user_fail("run", "--watchdog {} must be >= 0 (0: off)", o.watchdog_s);
  if (o.kill_grace_s < 0) user_fail("run", "--kill-grace {} must be >= 0", o.kill_grace_s);
  if (o.watchdog_startup_s && *o.watchdog_startup_s < 0)
    user_fail("run", "--watchdog-startup {} must be >= 0", *o.watchdog_startup_s);
  if (o.program.empty())
    user_fail("run", "no program to run (write: strata run -n N -- PROGRAM ARGS...)");
}

}  // namespace strata::launcher::run
