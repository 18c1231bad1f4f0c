#include "launcher/run/command.hpp"

#include <fmt/format.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "framework/core/error.hpp"

extern char** environ;

namespace strata::launcher::run {

namespace fs = std::filesystem;

namespace {

// Distinct (package, core) pairs among the CPUs this process may run on: Open MPI's default
// slot count. Falls back to the number of usable CPUs.
int physical_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const bool have_mask = sched_getaffinity(0, sizeof(set), &set) == 0;
  const int usable = have_mask ? CPU_COUNT(&set) : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::ifstream in("/proc/cpuinfo");
  std::set<std::pair<int, int>> cores;
  int cpu = -1, package = 0;
  std::string line;
  while (std::getline(in, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_last_not_of(" \t", colon - 1) + 1);
    const int value = std::atoi(line.c_str() + colon + 1);
    if (key == "processor")
      cpu = value;
    else if (key == "physical id")
      package = value;
    else if (key == "core id" && cpu >= 0 && (!have_mask || CPU_ISSET(cpu, &set)))
      cores.insert({package, value});
  }
  const int n = cores.empty() ? usable : static_cast<int>(cores.size());
  return std::max(1, n);
}

bool env_name_ok(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

PlanContext current_context() {
  PlanContext ctx;
  std::error_code ec;
  ctx.self_exe = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) fail("run", "cannot find the strata executable (/proc/self/exe): {}", ec.message());
  ctx.cores = physical_cores();
  ctx.root = geteuid() == 0;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (kv.rfind("STRATA_", 0) == 0) ctx.strata_env.push_back(kv.substr(0, kv.find('=')));
  }
  ctx.getenv = [](const char* k) -> const char* { return std::getenv(k); };
  return ctx;
}

AttemptDirs attempt_dirs(const std::string& log_dir, int attempt) {
  const fs::path root = fs::absolute(log_dir).lexically_normal();
  return {root.string(), (root / "progress").string(), (root / "status").string(), attempt};
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-+=/.,:@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string LaunchPlan::describe() const {
  std::string line;
  for (const auto& [k, v] : env) line += k + "=" + shell_quote(v) + " ";
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i) line += ' ';
    line += shell_quote(argv[i]);
  }
  return line;
}

int count_host_slots(const std::string& hosts) {
  int total = 0;
  std::stringstream ss(hosts);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto colon = item.rfind(':');
    if (colon == std::string::npos) {
      total += 1;
      continue;
    }
    const std::string n = item.substr(colon + 1);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v < 1)
      user_fail("run", "--host {}: '{}' is not a positive slot count (write host:slots)", hosts, n);
    total += static_cast<int>(v);
  }
  if (total == 0) user_fail("run", "--host '{}' names no host", hosts);
  return total;
}

int count_hostfile_slots(const std::string& path) {
  std::ifstream in(path);
  if (!in) user_fail("run", "cannot open hostfile {}", path);
  int total = 0, hosts = 0;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::stringstream ss(line);
    std::string word;
    if (!(ss >> word)) continue;
    ++hosts;
    int slots = -1;
    while (ss >> word)
      if (word.rfind("slots=", 0) == 0) slots = std::atoi(word.c_str() + 6);
    if (slots < 1) return -1;  // Open MPI counts that host's cores: unknown here
    total += slots;
  }
  if (hosts == 0) user_fail("run", "hostfile {} names no host", path);
  return total;
}

std::string resolve_executable(const std::string& name, const std::string& what) {
  auto ok = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && access(p.c_str(), X_OK) == 0;
  };
  if (name.find('/') != std::string::npos) {
    if (!ok(name))
      user_fail("run", "{} '{}' {}", what, name,
                fs::exists(name) ? "is not an executable file" : "does not exist");
    return fs::absolute(name).lexically_normal().string();
  }
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (ok(p)) return p.string();
  }
  user_fail("run", "{} '{}' was not found on PATH", what, name);
}

LaunchPlan build_plan(const RunOptions& o, const AttemptDirs& dirs, const PlanContext& ctx) {
  LaunchPlan plan;
  plan.direct = o.direct();
  plan.env.emplace_back("STRATA_PROGRESS_DIR", dirs.progress_dir);
  plan.env.emplace_back("STRATA_RUN_ATTEMPT", std::to_string(dirs.attempt));
  for (const auto& kv : o.launcher_env) plan.env.push_back(kv);
  if (!plan.direct) {
    // Tells the ranks how many they are (init_world checks it against MPI's world).
    plan.env.emplace_back("STRATA_WORLD_SIZE", std::to_string(o.ranks));
    if (ctx.root) {
      plan.env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
      plan.env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
  }
  // The user's variables: NAME (from our environment) or NAME=VALUE.
  std::vector<std::string> user_names;
  for (const std::string& e : o.env) {
    const auto eq = e.find('=');
    const std::string name = e.substr(0, eq);
    if (!env_name_ok(name)) user_fail("run", "--env '{}': '{}' is not a variable name", e, name);
    if (eq == std::string::npos) {
      if (!ctx.getenv(name.c_str()))
        user_fail("run", "--env {}: {} is not set in this environment (write {}=VALUE)", name, name,
                  name);
    } else if (plan.direct) {
      plan.env.emplace_back(name, e.substr(eq + 1));
    }
    user_names.push_back(e);
  }

  std::vector<std::string> wrapper = {ctx.self_exe,   "_rank",         "--log-dir", dirs.log_dir,
                                      "--status-dir", dirs.status_dir, "--"};
  if (plan.direct) {
    plan.argv = wrapper;
    plan.argv.insert(plan.argv.end(), o.program.begin(), o.program.end());
    return plan;
  }

  plan.argv = {o.mpirun, "-np", std::to_string(o.ranks)};
  int slots = ctx.cores;
  if (!o.hostfile.empty()) {
    plan.argv.insert(plan.argv.end(), {"--hostfile", o.hostfile});
    slots = count_hostfile_slots(o.hostfile);
  } else if (!o.hosts.empty()) {
    plan.argv.insert(plan.argv.end(), {"--host", o.hosts});
    slots = count_host_slots(o.hosts);
  }
  if (slots > 0 && o.ranks > slots) {
    plan.oversubscribed = true;
    plan.argv.insert(plan.argv.end(), {"--oversubscribe", "--bind-to", "none"});
  }
  // Export every STRATA_* variable (ours and the user's) and the listed ones, once each.
  std::set<std::string> exported;
  auto export_var = [&](const std::string& v) {
    if (exported.insert(v.substr(0, v.find('='))).second)
      plan.argv.insert(plan.argv.end(), {"-x", v});
  };
  for (const auto& [k, v] : plan.env)
    if (k.rfind("STRATA_", 0) == 0) export_var(k);
  std::vector<std::string> inherited = ctx.strata_env;
  std::sort(inherited.begin(), inherited.end());
  for (const std::string& k : inherited) export_var(k);
  for (const std::string& e : user_names) export_var(e);
  plan.argv.insert(plan.argv.end(), o.mpi_args.begin(), o.mpi_args.end());
  plan.argv.insert(plan.argv.end(), wrapper.begin(), wrapper.end());
  plan.argv.insert(plan.argv.end(), o.program.begin(), o.program.end());
  return plan;
}

}  // namespace strata::launcher::run
