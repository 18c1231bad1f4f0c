// Starting and ending processes: spawn with a new process group and a death signal, find every
// descendant through /proc, signal a whole tree, and describe wait statuses.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace strata::launcher::run {

struct SpawnSpec {
  std::vector<std::string> argv;                         // argv[0] is looked up on PATH
  std::vector<std::pair<std::string, std::string>> env;  // added to this process's environment
  bool own_process_group = true;  // so a terminal's Ctrl-C reaches only the launcher
  int death_signal = 0;           // sent to the child when this process dies (0: none)
  bool stdin_null = true;
  std::string output_file;  // non-empty: stdout and stderr appended to this file
};

// fork + exec. A failed exec prints one line on the child's stderr and exits 127.
pid_t spawn(const SpawnSpec& spec);

// Makes this process the reaper of its orphaned descendants (ranks whose wrapper died), so
// they can still be found and killed.
void become_subreaper();

// Every live descendant of `root` (not `root` itself), found through /proc's parent links.
std::vector<pid_t> descendants(pid_t root);

// Sends `sig` to `root` (if root > 0) and to all its descendants.
void signal_tree(pid_t root, int sig);

// Reaps exited children without blocking; returns the wait status of `watched` if it was reaped.
// Other children reaped meanwhile keep their status for reap_child.
bool reap(pid_t watched, int* status);
// Whether child `pid` has exited (reaped here or by an earlier reap), without blocking.
bool reap_child(pid_t pid, int* status);

// Waits up to `patience` for every descendant of this process to end by itself (reaping them),
// then SIGKILLs those left and reaps them, waiting at most `limit` more.
void kill_leftovers(std::chrono::milliseconds patience, std::chrono::milliseconds limit);

// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);
std::string describe_signal(int sig);

}  // namespace strata::launcher::run
