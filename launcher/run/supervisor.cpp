#include "launcher/run/supervisor.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>

#include "framework/core/error.hpp"
#include "launcher/run/attempt.hpp"
#include "launcher/run/command.hpp"
#include "launcher/run/exit_codes.hpp"
#include "launcher/run/process.hpp"
#include "launcher/run/signals.hpp"
#include "launcher/run/slurm.hpp"
#include "launcher/run/watchdog.hpp"

namespace strata::launcher::run {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

void say(const std::string& line) {
  std::cout.flush();
  std::cerr << "strata run: " << line << "\n" << std::flush;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// strata-logs/run-20260101-120000 (unique).
std::string default_log_dir() {
  const std::time_t t = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&t));
  fs::path dir = fs::path("strata-logs") / fmt::format("run-{}", stamp);
  for (int i = 2; fs::exists(dir); ++i)
    dir = fs::path("strata-logs") / fmt::format("run-{}-{}", stamp, i);
  return dir.string();
}

void fresh_dir(const std::string& dir) {
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) user_fail("run", "cannot create {}: {}", dir, ec.message());
}

// Runs one attempt to its end. Signals: the first SIGINT/SIGTERM asks the ranks to save and
// exit (SIGUSR1 to mpirun, which forwards it to every rank's wrapper, which sends SIGTERM to
// the program); the second kills the job.
AttemptResult run_attempt(const RunOptions& o, const LaunchPlan& plan, const AttemptDirs& dirs,
                          SignalPipe& signals) {
  AttemptResult r;
  r.number = dirs.attempt;
  r.direct = plan.direct;
  const auto start = Clock::now();
  const pid_t pid = spawn({plan.argv, plan.env, true, SIGTERM, true});
  Watchdog watchdog(o.watchdog_s, o.startup_s(), o.ranks, start);
  std::optional<Clock::time_point> term_sent, failed_at;
  const auto grace = std::chrono::duration<double>(o.kill_grace_s);
  for (;;) {
    for (int sig : signals.wait(200)) {
      if (++r.stop_signals == 1) {
        say(fmt::format("{}: asking the ranks to save and exit (press Ctrl-C again to kill them)",
                        sig == SIGINT ? "interrupted" : "terminated"));
        kill(pid, SIGUSR1);
      } else if (!r.killed) {
        say("killing the job");
        signal_tree(pid, SIGKILL);
        r.killed = true;
      }
    }
    if (reap(pid, &r.wait_status)) break;
    const auto now = Clock::now();
    if (watchdog.enabled() && !r.hung && r.stop_signals == 0) {
      if (auto why = watchdog.check(now, read_progress(dirs.progress_dir))) {
        r.hung = why;
        say(*why + "; killing the job");
        kill(pid, SIGTERM);  // mpirun takes the ranks down, on every node
        term_sent = now;
      }
    }
    // mpirun does not always take down the rest of a job whose rank failed (Open MPI 4.1 was
    // seen leaving ranks blocked in a collective running): end it after the grace period.
    if (!failed_at && !read_exit_records(dirs.status_dir).empty()) failed_at = now;
    if (failed_at && !term_sent && !r.killed && now - *failed_at > grace) {
      say(fmt::format("a rank failed and the job did not end within {:g} s; killing it",
                      o.kill_grace_s));
      kill(pid, SIGTERM);
      term_sent = now;
    }
    if (term_sent && !r.killed && now - *term_sent > grace) {
      signal_tree(pid, SIGKILL);
      r.killed = true;
    }
  }
  // Ranks whose wrapper died are our children now (subreaper): none may outlive the attempt.
  // What is left gets --kill-grace to end by itself (Open MPI's daemons clean up after mpirun
  // ended), unless the job was killed on purpose (a second Ctrl-C).
  kill_leftovers(r.stop_signals >= 2 ? std::chrono::milliseconds(0)
                                     : std::chrono::duration_cast<std::chrono::milliseconds>(grace),
                 std::chrono::seconds(5));
  r.seconds = seconds_since(start);
  r.records = read_exit_records(dirs.status_dir);
  r.progress = read_progress(dirs.progress_dir);
  return r;
}

}  // namespace

int supervise(RunOptions o) {
  const PlanContext ctx = current_context();
  apply_allocation(o, ctx.getenv);
  validate(o);
  resolve_executable(o.program.front(), "program");
  if (o.log_dir.empty()) o.log_dir = default_log_dir();
  if (o.dry_run) {
    std::cout << build_plan(o, attempt_dirs(o.log_dir, 1), ctx).describe() << "\n";
    return kExitOk;
  }
  if (!o.direct()) resolve_executable(o.mpirun, "mpirun");
  build_plan(o, attempt_dirs(o.log_dir, 1), ctx);  // bad --env, hostfile, ...: before starting
  std::error_code ec;
  fs::create_directories(o.log_dir, ec);
  if (ec) user_fail("run", "cannot create the log directory {}: {}", o.log_dir, ec.message());

  become_subreaper();
  SignalPipe signals({SIGINT, SIGTERM});
  std::vector<AttemptResult> attempts;
  for (int attempt = 1;; ++attempt) {
    const AttemptDirs dirs = attempt_dirs(o.log_dir, attempt);
    fresh_dir(dirs.progress_dir);
    fresh_dir(dirs.status_dir);
    const LaunchPlan plan = build_plan(o, dirs, ctx);
    if (attempt == 1 && !o.slurm_job.empty())
      say(fmt::format("Slurm job {}: {} rank{} on {}", o.slurm_job, o.ranks,
                      o.ranks == 1 ? "" : "s", o.hosts));
    if (attempt == 1)
      say(fmt::format("{} rank{} {}; logs in {}/rank_XXXXX.log", o.ranks, o.ranks == 1 ? "" : "s",
                      plan.direct ? "without mpirun" : "with mpirun", dirs.log_dir));
    else
      say(fmt::format("attempt {} (restart {} of {})", attempt, attempt - 1, o.max_restarts));
    attempts.push_back(run_attempt(o, plan, dirs, signals));
    const AttemptResult& r = attempts.back();
    if (!r.ok()) {
      // The failed ranks' last words (their errors), once each, not once per rank.
      std::cout.flush();
      std::cerr << r.last_words() << std::flush;
    }

    if (r.stop_signals > 0) {
      const bool clean = r.ok() && !r.killed;
      say(clean ? "stopped; every rank saved and exited cleanly (run the same command to resume)"
                : fmt::format("stopped; the job did not end cleanly: {}", r.failure()));
      return clean ? kExitStopped : kExitStopKilled;
    }
    if (r.ok()) {
      if (attempts.size() > 1)
        say(fmt::format("finished after {} restart{}:\n{}", attempts.size() - 1,
                        attempts.size() == 2 ? "" : "s", summary(attempts)));
      return kExitOk;
    }
    say(fmt::format("attempt {} {}", attempt, r.outcome()));
    if (const ExitRecord* f = r.final_failure(); f && !o.always_restart) {
      say(
          fmt::format("not restarting: rank {} exited with status {} ({}), which a restart "
                      "cannot change{}",
                      f->rank, f->code, exit_status_meaning(f->code),
                      attempts.size() > 1 ? ":\n" + summary(attempts) : std::string()));
      return f->code;
    }
    if (attempt > o.max_restarts) {
      say(fmt::format("giving up: the job failed {} time{} (--max-restarts {}):\n{}",
                      attempts.size(), attempts.size() == 1 ? "" : "s", o.max_restarts,
                      summary(attempts)));
      return kExitGaveUp;
    }
    if (o.restart_delay_s > 0) {
      say(fmt::format("restarting in {:g} s", o.restart_delay_s));
      const auto until = Clock::now() + std::chrono::duration<double>(o.restart_delay_s);
      while (Clock::now() < until) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
        if (!signals.wait(static_cast<int>(left.count()) + 1).empty()) {
          say(fmt::format("stopped before restarting:\n{}", summary(attempts)));
          return kExitStopKilled;
        }
      }
    }
  }
}

}  // namespace strata::launcher::run
