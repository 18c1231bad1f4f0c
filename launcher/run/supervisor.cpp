#include "launcher/run/supervisor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "framework/core/error.hpp"
#include "launcher/run/attempt.hpp"
#include "launcher/run/command.hpp"
#include "launcher/run/elastic.hpp"
#include "launcher/run/exit_codes.hpp"
#include "launcher/run/node_probe.hpp"
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

// An elastic job's state across attempts (--nodes MIN:MAX).
struct Elastic {
  NodeRange range;
  Nodes all;      // every host given, in order
  Nodes current;  // the nodes of the attempt being run
  NodeHealth health;
  std::optional<BatchLayout> base;  // the batch as the first attempt reported it
  ProbeSpec probe;
  double grace_s = 30;
  std::string change;    // why the size changed before this attempt ("": it did not)
  std::string log_file;  // <log-dir>/elastic.log: every change of size, one line each

  std::vector<std::string> names(const Nodes& n) const {
    std::vector<std::string> v;
    for (const Node& x : n) v.push_back(x.host);
    return v;
  }
  int world() const { return total_slots(current); }
  // The program arguments for `nodes` (batch overrides when the world differs from the first).
  std::vector<std::string> overrides(const Nodes& nodes) const {
    if (!base || total_slots(nodes) == base->world) return {};
    return batch_overrides(*base, plan_resize(*base, total_slots(nodes)));
  }
  void log(const std::string& line) const {
    say(line);
    std::ofstream out(log_file, std::ios::app);
    const std::time_t t = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
    out << stamp << " " << line << "\n";
  }
  // "2 -> 1 nodes (n1): 4 -> 2 ranks, dp 2 -> 1, ..." (the batch part only when known).
  std::string describe(const Nodes& to) const {
    if (!base)
      return fmt::format("{} -> {} node{} ({})", current.size(), to.size(),
                         to.size() == 1 ? "" : "s", host_names(to));
    return describe_resize(current, to, *base, plan_resize(*base, total_slots(current)),
                           plan_resize(*base, total_slots(to)));
  }
};

// While an elastic job runs on fewer than MAX nodes: probes the nodes left out (not the
// unhealthy ones) every `interval` seconds, in the background.
class GrowMonitor {
 public:
  GrowMonitor(const ProbeSpec& spec, std::vector<std::string> hosts, double interval_s)
      : spec_(spec),
        hosts_(std::move(hosts)),
        interval_(
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s))),
        next_(Clock::now() + interval_) {}
  // The hosts that answered in the round that just ended (empty most of the time).
  std::vector<std::string> poll(Clock::time_point now) {
    if (probes_.empty()) {
      if (now < next_) return {};
      for (const std::string& h : hosts_) probes_.push_back(std::make_unique<NodeProbe>(spec_, h));
    }
    std::vector<std::string> answered;
    for (auto& p : probes_) {
      const auto r = p->poll();
      if (!r) return {};
      if (*r) answered.push_back(p->host());
    }
    probes_.clear();
    next_ = now + interval_;
    return answered;
  }

 private:
  ProbeSpec spec_;
  std::vector<std::string> hosts_;
  Clock::duration interval_;
  Clock::time_point next_;
  std::vector<std::unique_ptr<NodeProbe>> probes_;
};

// Runs one attempt to its end. Signals: the first SIGINT/SIGTERM asks the ranks to save and
// exit (SIGUSR1 to mpirun, which forwards it to every rank's wrapper, which sends SIGTERM to
// the program); the second kills the job.
// With an elastic job below MAX nodes, `el` is set: nodes that answer again make the ranks save
// and stop at the next step (SIGUSR1, the graceful stop), and r.grow_to names the larger set.
AttemptResult run_attempt(const RunOptions& o, const LaunchPlan& plan, const AttemptDirs& dirs,
                          SignalPipe& signals, const Elastic* el = nullptr) {
  AttemptResult r;
  r.number = dirs.attempt;
  r.direct = plan.direct;
  const auto start = Clock::now();
  const pid_t pid = spawn({plan.argv, plan.env, true, SIGTERM, true, {}});
  Watchdog watchdog(o.watchdog_s, o.startup_s(), o.ranks, start);
  std::optional<Clock::time_point> term_sent, failed_at;
  const auto grace = std::chrono::duration<double>(o.kill_grace_s);
  std::unique_ptr<GrowMonitor> grow;
  if (el && static_cast<int>(el->current.size()) < el->range.max && el->base &&
      el->base->checkpoints) {
    std::vector<std::string> out;
    for (const Node& n : el->all)
      if (std::find(el->current.begin(), el->current.end(), n) == el->current.end() &&
          !el->health.unhealthy(n.host))
        out.push_back(n.host);
    if (!out.empty())
      grow = std::make_unique<GrowMonitor>(el->probe, out, std::clamp(el->grace_s / 2, 1.0, 10.0));
  }
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
    // Nodes back: grow at the next step, once every rank is training (a stop before the
    // program handles SIGTERM would kill it).
    if (grow && r.stop_signals == 0 && !r.hung && !failed_at && !term_sent) {
      const ProgressMap p = read_progress(dirs.progress_dir);
      if (static_cast<int>(p.size()) >= o.ranks)
        if (const auto back = grow->poll(now); !back.empty()) {
          std::set<std::string> answering(back.begin(), back.end());
          for (const Node& n : el->current) answering.insert(n.host);
          const Nodes to = choose_nodes(el->all, answering, el->health, el->range.max);
          try {
            el->overrides(to);  // the batch must divide on the larger set too
            r.grow_to = to;
            r.grow_reason = fmt::format("node{} {} answer{} again", back.size() == 1 ? "" : "s",
                                        fmt::join(back, ","), back.size() == 1 ? "s" : "");
            say(
                fmt::format("{}: growing to {} nodes at the next step (the ranks save a "
                            "checkpoint and stop; the job restarts on {})",
                            r.grow_reason, to.size(), host_names(to)));
            kill(pid, SIGUSR1);
          } catch (const UserError& e) {
            say(fmt::format("{} answer again, but the job stays on {}: {}", fmt::join(back, ","),
                            host_names(el->current), e.what()));
          }
          grow.reset();
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
  grow.reset();  // its probe, if one runs
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

// The nodes of the attempt after a failed one, for an elastic job: the node whose rank failed
// first is blamed (two attempts in a row: left out); every node not left out is probed, and the
// attempt's nodes that do not answer get --node-grace seconds to come back. Returns an exit
// status to stop with, or nullopt to go on (el.current and el.change updated).
std::optional<int> elastic_after_failure(Elastic& el, const AttemptResult& r, SignalPipe& signals,
                                         const std::vector<AttemptResult>& attempts) {
  std::string blamed;
  for (const ExitRecord& rec : r.records)
    if (!rec.collateral) {
      const int i = node_of_rank(el.current, rec.rank);
      if (i >= 0) blamed = el.current[static_cast<std::size_t>(i)].host;
      break;
    }
  if (el.health.record_failure(el.names(el.current), blamed))
    el.log(fmt::format("node {} is left out: its ranks failed first in {} attempts in a row",
                       blamed, el.health.streak(blamed)));
  std::vector<std::string> candidates;
  for (const Node& n : el.all)
    if (!el.health.unhealthy(n.host)) candidates.push_back(n.host);
  std::set<std::string> answering = probe_nodes(el.probe, candidates);
  auto missing_of = [&] {
    std::vector<std::string> m;
    for (const Node& n : el.current)
      if (!el.health.unhealthy(n.host) && !answering.count(n.host)) m.push_back(n.host);
    return m;
  };
  std::vector<std::string> missing = missing_of();
  if (!missing.empty()) {
    say(fmt::format(
        "node{} {} do{} not answer (probe: {}; its output in {}/probe/); waiting up to "
        "{:g} s (--node-grace) for {} to come back",
        missing.size() == 1 ? "" : "s", fmt::join(missing, ","), missing.size() == 1 ? "es" : "",
        fmt::join(probe_command(el.probe, missing[0]), " "), el.probe.log_dir, el.grace_s,
        missing.size() == 1 ? "it" : "them"));
    const auto until = Clock::now() + std::chrono::duration<double>(el.grace_s);
    while (!missing.empty() && Clock::now() < until) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      if (!signals.wait(static_cast<int>(std::min<long long>(left.count(), 2000)) + 1).empty()) {
        say(fmt::format("stopped before restarting:\n{}", summary(attempts)));
        return kExitStopKilled;
      }
      for (const std::string& h : probe_nodes(el.probe, missing)) answering.insert(h);
      missing = missing_of();
    }
  }
  const Nodes next = choose_nodes(el.all, answering, el.health, el.range.max);
  std::string why;
  if (!missing.empty())
    why = fmt::format("node{} {} did not answer within --node-grace {:g} s",
                      missing.size() == 1 ? "" : "s", fmt::join(missing, ","), el.grace_s);
  for (const Node& n : el.current)
    if (el.health.unhealthy(n.host))
      why += fmt::format("{}node {} left out (its ranks failed first twice in a row)",
                         why.empty() ? "" : "; ", n.host);
  if (static_cast<int>(next.size()) < el.range.min) {
    say(fmt::format(
        "giving up: {} node{} can run the job ({}) and --nodes {}:{} needs at least {}{}"
        ":\n{}",
        next.size(), next.size() == 1 ? "" : "s", next.empty() ? "none" : host_names(next),
        el.range.min, el.range.max, el.range.min, why.empty() ? "" : "; " + why,
        summary(attempts)));
    return kExitGaveUp;
  }
  if (next == el.current) return std::nullopt;
  if (!el.base && total_slots(next) != total_slots(el.current))
    user_fail("run",
              "cannot restart on {} ({} ranks instead of {}): the program did not report "
              "its batch layout ($STRATA_PROGRESS_DIR/layout, which train_gpt writes at start), so "
              "the global batch cannot be kept",
              host_names(next), total_slots(next), total_slots(el.current));
  if (why.empty()) why = "nodes answer again";
  const std::string change = fmt::format("{}: {}", el.describe(next), why);
  el.log("resizing " + change);
  el.change = change;
  el.current = next;
  return std::nullopt;
}

}  // namespace

int supervise(RunOptions o) {
  const PlanContext ctx = current_context();
  const bool user_gave_n = o.ranks_given;
  apply_allocation(o, ctx.getenv);
  validate(o);
  std::optional<Elastic> el;
  if (!o.nodes.empty()) {
    el.emplace();
    el->range = parse_node_range(o.nodes);
    el->all = o.hostfile.empty() ? nodes_from_hosts(o.hosts) : nodes_from_hostfile(o.hostfile);
    el->current = check_elastic(el->range, el->all, user_gave_n ? o.ranks : 0);
    el->grace_s = o.node_grace_s;
    o.hostfile.clear();
    o.hosts = host_arg(el->current);
    o.ranks = total_slots(el->current);
    o.force_mpirun = true;  // every node is reached through mpirun, also a one-rank one
  }
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
  if (el) {
    const AttemptDirs d = attempt_dirs(o.log_dir, 1);
    el->probe = {o.mpirun, o.mpi_args, {}, d.log_dir, 10};
    if (ctx.root)
      el->probe.env = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};
    el->log_file = (fs::path(d.log_dir) / "elastic.log").string();
  }

  become_subreaper();
  SignalPipe signals({SIGINT, SIGTERM});
  std::vector<AttemptResult> attempts;
  int failures = 0;
  for (int attempt = 1;; ++attempt) {
    const AttemptDirs dirs = attempt_dirs(o.log_dir, attempt);
    fresh_dir(dirs.progress_dir);
    fresh_dir(dirs.status_dir);
    RunOptions ao = o;  // this attempt's nodes and batch (elastic)
    if (el) {
      ao.hosts = host_arg(el->current);
      ao.ranks = el->world();
      const std::vector<std::string> extra = el->overrides(el->current);
      ao.program.insert(ao.program.end(), extra.begin(), extra.end());
      if (!el->change.empty()) ao.launcher_env.emplace_back("STRATA_ELASTIC_CHANGE", el->change);
    }
    const LaunchPlan plan = build_plan(ao, dirs, ctx);
    if (attempt == 1 && !o.slurm_job.empty())
      say(fmt::format("Slurm job {}: {} rank{} on {}", o.slurm_job, o.ranks,
                      o.ranks == 1 ? "" : "s", o.hosts));
    if (attempt == 1 && el && o.watchdog_s == 0)
      say("note: --nodes without --watchdog: a node that dies without a word (power, network) is "
          "noticed only when the other ranks' collectives time out (strata.comm.timeout_s, 300 s "
          "by default)");
    if (attempt == 1)
      say(fmt::format("{} rank{} {}{}; logs in {}/rank_XXXXX.log", o.ranks, o.ranks == 1 ? "" : "s",
                      plan.direct ? "without mpirun" : "with mpirun",
                      el ? fmt::format(" on {} (--nodes {}:{})", host_arg(el->current),
                                       el->range.min, el->range.max)
                         : std::string(),
                      dirs.log_dir));
    else if (el && ao.hosts != attempts.back().hosts)
      say(fmt::format("attempt {}: {} rank{} on {}", attempt, ao.ranks, ao.ranks == 1 ? "" : "s",
                      ao.hosts));
    else
      say(fmt::format("attempt {} (restart {} of {})", attempt, failures, o.max_restarts));
    attempts.push_back(run_attempt(ao, plan, dirs, signals, el ? &*el : nullptr));
    attempts.back().hosts = ao.hosts;
    const AttemptResult& r = attempts.back();
    if (el) {
      if (!el->base) el->base = read_layout(dirs.progress_dir);
      // The change reaches the ranks (and the metrics) until an attempt trains a step with it.
      if (!r.progress.empty()) el->change.clear();
    }
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
    const bool all_done = static_cast<int>(r.progress.size()) >= ao.ranks &&
                          std::all_of(r.progress.begin(), r.progress.end(),
                                      [](const auto& p) { return p.second.done; });
    if (r.ok() && r.grow_to && !all_done) {
      el->health.record_success(el->names(el->current));
      const std::string change = fmt::format("{}: {}", el->describe(*r.grow_to), r.grow_reason);
      el->log("resizing " + change);
      el->change = change;
      el->current = *r.grow_to;
      continue;  // not a failure: no restart counted, no delay
    }
    if (r.ok()) {
      if (attempts.size() > 1)
        say(fmt::format("finished after {} restart{}:\n{}", attempts.size() - 1,
                        attempts.size() == 2 ? "" : "s", summary(attempts)));
      return kExitOk;
    }
    say(fmt::format("attempt {} {}", attempt, r.outcome()));
    ++failures;
    if (const ExitRecord* f = r.final_failure(); f && !o.always_restart) {
      say(
          fmt::format("not restarting: rank {} exited with status {} ({}), which a restart "
                      "cannot change{}",
                      f->rank, f->code, exit_status_meaning(f->code),
                      attempts.size() > 1 ? ":\n" + summary(attempts) : std::string()));
      return f->code;
    }
    if (failures > o.max_restarts) {
      say(fmt::format("giving up: the job failed {} time{} (--max-restarts {}):\n{}", failures,
                      failures == 1 ? "" : "s", o.max_restarts, summary(attempts)));
      return kExitGaveUp;
    }
    if (el)
      if (const auto stop = elastic_after_failure(*el, r, signals, attempts)) return *stop;
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
