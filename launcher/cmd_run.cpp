// strata run: launches a job's ranks through mpirun (or directly for -n 1), restarts it from
// the newest complete checkpoint after a failure, and kills it when its ranks stop making
// progress. Also the hidden `strata _rank`, the wrapper mpirun starts as each rank.
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "launcher/commands.hpp"
#include "launcher/run/exit_codes.hpp"
#include "launcher/run/rank_wrapper.hpp"
#include "launcher/run/supervisor.hpp"

namespace strata::launcher {

namespace {

// The subcommands' status is not just success or failure; they end the process with it.
[[noreturn]] void exit_with(int status) {
  std::cout.flush();
  std::cerr.flush();
  std::exit(status);
}

void add_rank_wrapper(CLI::App& app) {
  auto o = std::make_shared<run::RankWrapperOptions>();
  auto* cmd = app.add_subcommand("_rank", "Internal: the wrapper `strata run` starts as each rank");
  cmd->group("");  // hidden from --help
  cmd->add_option("--log-dir", o->log_dir)->required();
  cmd->add_option("--status-dir", o->status_dir)->required();
  cmd->add_option("program", o->program, "The program and its arguments")->required();
  cmd->callback([o] { exit_with(run::run_rank(*o)); });
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<run::RunOptions>();
  auto* cmd = app.add_subcommand(
      "run",
      "Run a job on N ranks through mpirun; restart it from the newest complete checkpoint when "
      "it fails, kill it when its ranks stop making progress (usage: strata run -n N [options] "
      "-- PROGRAM ARGS...)");
  auto* np = cmd->add_option("-n,--np", o->ranks,
                             "Number of ranks (inside a Slurm allocation: SLURM_NTASKS)");
  cmd->add_option("--hostfile", o->hostfile, "Open MPI hostfile (\"host slots=N\" per line)");
  cmd->add_option("--host", o->hosts, "Hosts and slots: h1:4,h2:4");
  cmd->add_flag("--no-slurm", o->no_slurm,
                "Inside a Slurm allocation, do not take the hosts and ranks from it (give -n and "
                "--host/--hostfile)");
  cmd->add_option("--nodes", o->nodes,
                  "Elastic: MIN:MAX (or N) nodes of the hosts given. A node that fails and does "
                  "not answer within --node-grace is left out and the job restarts on the rest "
                  "(at least MIN) from its last complete checkpoint, same global batch (gradient "
                  "accumulation changes); nodes that answer again join at the next step, up to "
                  "MAX; a node whose ranks fail first twice in a row is left out");
  auto* grace = cmd->add_option("--node-grace", o->node_grace_s,
                  "With --nodes: seconds a node that stopped answering may take to come back "
                  "before the job goes on without it")
      ->capture_default_str();
  cmd->add_option("--max-restarts", o->max_restarts, "Restarts after a failure before giving up")
      ->capture_default_str();
  cmd->add_option("--restart-delay", o->restart_delay_s, "Seconds to wait before a restart")
      ->capture_default_str();
  cmd->add_option("--watchdog", o->watchdog_s,
                  "Kill and restart the job when no rank advanced a step for this many seconds "
                  "(0: off)")
      ->capture_default_str();
  cmd->add_option("--watchdog-startup", o->watchdog_startup_s,
                  "Seconds allowed before the first step is reported (default: --watchdog)");
  cmd->add_option(
         "--kill-grace", o->kill_grace_s,
         "Seconds a job may take to end after a rank failed before it is killed; also the time "
         "between SIGTERM to mpirun and SIGKILL, and what processes outliving mpirun (its "
         "daemons cleaning up) get to end before SIGKILL")
      ->capture_default_str();
  cmd->add_option("--log-dir", o->log_dir,
                  "Where rank_XXXXX.log, progress/ and status/ go (default strata-logs/run-<time>)");
  cmd->add_option("-x,--env", o->env,
                  "Export a variable to the ranks: NAME (its value here) or NAME=VALUE; every "
                  "STRATA_* variable is exported anyway")
      ->allow_extra_args(false);
  cmd->add_option("--mpi-arg", o->mpi_args, "An extra argument for mpirun (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--mpirun", o->mpirun, "The mpirun to use")->capture_default_str();
  cmd->add_flag("--use-mpirun", o->force_mpirun, "Use mpirun even for -n 1 on this machine");
  cmd->add_flag("--dry-run", o->dry_run, "Print the command that would run, and exit");
  cmd->add_flag("--always-restart", o->always_restart,
                "Restart after any failure; by default a rank that exits with status 1 (bad "
                "input), 2 (usage) or 7 (out of memory) stops the job at once, since a restart "
                "cannot change it (for programs that do not follow Strata's exit statuses)");
  cmd->add_option("program", o->program, "The program and its arguments (after --)")->required();
  cmd->footer(run::kExitCodesHelp);
  cmd->callback([o, np, grace] {
    o->ranks_given = np->count() > 0;
    o->node_grace_given = grace->count() > 0;
    exit_with(run::supervise(*o));
  });
  add_rank_wrapper(app);
}

}  // namespace strata::launcher
