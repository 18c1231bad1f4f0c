#include "launcher/run/process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "framework/core/error.hpp"

extern char** environ;

namespace strata::launcher::run {

pid_t spawn(const SpawnSpec& spec) {
  STRATA_CHECK(!spec.argv.empty(), "run", "spawn: empty command");
  // Everything the child needs is prepared before fork: no allocation after it.
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const auto eq = kv.find('=');
    env[kv.substr(0, eq)] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  for (const auto& [k, v] : spec.env) env[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string exec_failed = fmt::format("strata run: cannot execute {}: ", args[0]);
  const pid_t parent = getpid();
  const int out_fd =
      spec.output_file.empty()
          ? -1
          : open(spec.output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

  const pid_t pid = fork();
  if (pid < 0) {
    if (out_fd >= 0) close(out_fd);
    fail("run", "fork failed: {}", std::strerror(errno));
  }
  if (pid == 0) {
    if (out_fd >= 0) {
      dup2(out_fd, 1);
      dup2(out_fd, 2);
    }
    if (spec.own_process_group) setpgid(0, 0);
    if (spec.death_signal) {
      prctl(PR_SET_PDEATHSIG, spec.death_signal);
      if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    if (spec.stdin_null) {
      const int fd = open("/dev/null", O_RDONLY);
      if (fd >= 0 && fd != 0) {
        dup2(fd, 0);
        close(fd);
      }
    }
    execvpe(argv[0], argv.data(), envp.data());
    const char* why = std::strerror(errno);
    (void)!write(2, exec_failed.data(), exec_failed.size());
    (void)!write(2, why, std::strlen(why));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  if (out_fd >= 0) close(out_fd);
  return pid;
}

void become_subreaper() {
  prctl(PR_SET_CHILD_SUBREAPER, 1);
}

std::vector<pid_t> descendants(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  if (DIR* d = opendir("/proc")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (*end != '\0' || pid <= 0) continue;
      std::ifstream in(fmt::format("/proc/{}/stat", pid));
      std::string stat;
      if (!std::getline(in, stat)) continue;
      const auto paren = stat.rfind(')');  // the command name may hold spaces and parentheses
      if (paren == std::string::npos || paren + 4 >= stat.size()) continue;
      const char state = stat[paren + 2];
      if (state == 'Z' || state == 'X') continue;
      const long ppid = std::strtol(stat.c_str() + paren + 4, nullptr, 10);
      children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
    }
    closedir(d);
  }
  std::vector<pid_t> out, todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto it = lo; it != hi; ++it) {
      out.push_back(it->second);
      todo.push_back(it->second);
    }
  }
  return out;
}

void signal_tree(pid_t root, int sig) {
  // Collect first, then signal: a killed parent's children move to the reaper meanwhile.
  const std::vector<pid_t> tree = descendants(root);
  if (root > 0) kill(root, sig);
  for (pid_t p : tree) kill(p, sig);
}

namespace {
// Children reaped by reap() while it watched another one (node probes during an attempt).
std::map<pid_t, int>& reaped_others() {
  static std::map<pid_t, int> m;
  return m;
}
}  // namespace

bool reap(pid_t watched, int* status) {
  bool got = false;
  for (;;) {
    int st = 0;
    const pid_t p = waitpid(-1, &st, WNOHANG);
    if (p <= 0) break;
    if (p == watched) {
      got = true;
      *status = st;
    } else {
      reaped_others()[p] = st;
    }
  }
  return got;
}

bool reap_child(pid_t pid, int* status) {
  auto& others = reaped_others();
  if (const auto it = others.find(pid); it != others.end()) {
    *status = it->second;
    others.erase(it);
    return true;
  }
  int st = 0;
  if (waitpid(pid, &st, WNOHANG) == pid) {
    *status = st;
    return true;
  }
  return false;
}

void kill_leftovers(std::chrono::milliseconds patience, std::chrono::milliseconds limit) {
  // First let them end by themselves: once mpirun is gone, Open MPI's daemons (orted, and on
  // nodes reached through an rsh agent the agent's processes) kill their ranks, delete the job's
  // session directory and shared-memory segments and exit. SIGKILLed at once they leave those
  // behind (in /tmp and /dev/shm, on every node, after every failed attempt).
  const auto patient_until = std::chrono::steady_clock::now() + patience;
  for (;;) {
    int st = 0;
    while (waitpid(-1, &st, WNOHANG) > 0) {
    }
    if (descendants(getpid()).empty() || std::chrono::steady_clock::now() >= patient_until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const auto until = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::vector<pid_t> left = descendants(getpid());
    for (pid_t p : left) kill(p, SIGKILL);
    int st = 0;
    while (waitpid(-1, &st, WNOHANG) > 0) {
    }
    if (left.empty() || std::chrono::steady_clock::now() >= until) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string describe_signal(int sig) {
  const char* name = sigabbrev_np(sig);
  const char* what = sigdescr_np(sig);
  return fmt::format("signal {} ({}{}{})", sig, name ? "SIG" : "", name ? name : "",
                     what ? fmt::format("{}{}", name ? ", " : "", what) : "");
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by " + describe_signal(WTERMSIG(status));
  return fmt::format("ended with wait status {}", status);
}

}  // namespace strata::launcher::run
