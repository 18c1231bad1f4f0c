// fake_rank: a stand-in for a training job, for the `strata run` tests. It "trains" a number of
// steps deterministically (each rank's state is a running hash, mixed across ranks by an
// all-reduce every step), checkpoints like Strata does (per-rank temporary file + rename, then
// `latest` moved by rank 0 after a barrier), resumes from `latest`, writes the launcher's
// progress files, saves and exits 0 on SIGTERM, and prints its final state.
//
// usage: fake_rank --steps S --ckpt DIR [--ckpt-every K] [--step-ms M]
// Fault knobs (environment):
//   FAKE_RANK_PID_DIR=D          write D/rank_N.pid = "<attempt> <pid>" at start
//   FAKE_RANK_SLOW_SAVE_STEP=s   when saving step s (in attempt FAKE_RANK_SLOW_SAVE_ATTEMPT,
//   FAKE_RANK_SLOW_SAVE_RANK=r   default 1), rank r touches D/rank_r.saving after writing its
//   FAKE_RANK_SLOW_SAVE_MS=m     temporary file and sleeps m ms before renaming it
//   FAKE_RANK_FAIL_STEP=s        rank FAKE_RANK_FAIL_RANK (-1: every rank) fails right after
//   FAKE_RANK_FAIL_RANK=r        step s, every attempt: FAKE_RANK_FAIL_HOW=exit (status
//   FAKE_RANK_FAIL_STATUS=n      FAKE_RANK_FAIL_STATUS, default 3) or segv
//   FAKE_RANK_IGNORE_TERM=1      ignore SIGTERM (a rank that will not stop)
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "parallel/comm/init.hpp"

namespace fs = std::filesystem;
using namespace strata;

namespace {

volatile std::sig_atomic_t g_term = 0;
void on_term(int) {
  g_term = 1;
}

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

long env_long(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtol(v, nullptr, 10) : fallback;
}

// Writes `text` to `path` atomically (temporary file, fsync, rename).
void write_atomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + tmp.string());
  (void)!write(fd, text.data(), text.size());
  fsync(fd);
  close(fd);
  fs::rename(tmp, path);
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

struct Args {
  long steps = 20, every = 5, step_ms = 0;
  fs::path ckpt;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--steps")
      a.steps = std::atol(argv[i + 1]);
    else if (k == "--ckpt-every")
      a.every = std::atol(argv[i + 1]);
    else if (k == "--step-ms")
      a.step_ms = std::atol(argv[i + 1]);
    else if (k == "--ckpt")
      a.ckpt = argv[i + 1];
    else
      throw std::runtime_error("unknown argument " + k);
  }
  if (a.ckpt.empty()) throw std::runtime_error("--ckpt DIR is required");
  return a;
}

int run(const Args& a) {
  parallel::World world;
  const parallel::Group& g = world.group();
  const int rank = g.rank();
  const long attempt = env_long("STRATA_RUN_ATTEMPT", 1);
  const char* pid_dir = std::getenv("FAKE_RANK_PID_DIR");
  if (pid_dir)
    write_atomic(fs::path(pid_dir) / fmt::format("rank_{}.pid", rank),
                 fmt::format("{} {}\n", attempt, getpid()));
  const char* progress_dir = std::getenv("STRATA_PROGRESS_DIR");
  auto progress = [&](const std::string& text) {
    if (progress_dir)
      write_atomic(fs::path(progress_dir) / fmt::format("rank_{:05d}.progress", rank), text + "\n");
  };

  // Resume from `latest`, if any.
  long step = 0;
  std::uint64_t state = mix(0x5eed0000ULL + static_cast<std::uint64_t>(rank));
  if (fs::exists(a.ckpt / "latest")) {
    const fs::path file =
        a.ckpt / read_file(a.ckpt / "latest") / fmt::format("rank_{:05d}.state", rank);
    std::ifstream in(file);
    std::string word;
    if (!(in >> word >> step >> word >> std::hex >> state))
      throw std::runtime_error("latest names a checkpoint without a readable " + file.string());
    fmt::print("rank {} resumed from step {}\n", rank, step);
  }
  std::fflush(stdout);

  auto save = [&](long s) {
    const fs::path dir = a.ckpt / fmt::format("step_{:08d}", s);
    fs::create_directories(dir);
    const fs::path file = dir / fmt::format("rank_{:05d}.state", rank);
    const fs::path tmp = file.string() + ".tmp";
    {
      std::ofstream out(tmp);
      out << fmt::format("step {} state {:x}\n", s, state);
    }
    if (s == env_long("FAKE_RANK_SLOW_SAVE_STEP", -1) &&
        rank == env_long("FAKE_RANK_SLOW_SAVE_RANK", 1) &&
        attempt == env_long("FAKE_RANK_SLOW_SAVE_ATTEMPT", 1)) {
      if (pid_dir) write_atomic(fs::path(pid_dir) / fmt::format("rank_{}.saving", rank), "1\n");
      std::this_thread::sleep_for(std::chrono::milliseconds(env_long("FAKE_RANK_SLOW_SAVE_MS", 0)));
    }
    fs::rename(tmp, file);
    g.barrier().wait();
    if (rank == 0) write_atomic(a.ckpt / "latest", fmt::format("step_{:08d}", s));
    g.barrier().wait();
  };

  while (step < a.steps) {
    ++step;
    if (a.step_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(a.step_ms));
    state =
        mix(state ^ (static_cast<std::uint64_t>(step) << 20) ^ static_cast<std::uint64_t>(rank));
    std::int64_t in[2] = {static_cast<std::int64_t>(state & 0xffffffffULL), g_term ? 1 : 0};
    std::int64_t out[2] = {0, 0};
    g.all_reduce(parallel::span(static_cast<const std::int64_t*>(in), 2), parallel::span(out, 2))
        .wait();
    state = mix(state + static_cast<std::uint64_t>(out[0]));
    progress(std::to_string(step));
    const long fail_rank = env_long("FAKE_RANK_FAIL_RANK", 0);
    if (step == env_long("FAKE_RANK_FAIL_STEP", -1) && (rank == fail_rank || fail_rank == -1)) {
      if (fail_rank == -1)  // the same words from every rank, as after bad input
        fmt::print(stderr, "every rank failing on purpose after step {}\n", step);
      else
        fmt::print(stderr, "rank {} failing on purpose after step {}\n", rank, step);
      std::fflush(stderr);
      if (std::string(std::getenv("FAKE_RANK_FAIL_HOW") ? std::getenv("FAKE_RANK_FAIL_HOW") : "") ==
          "segv") {
        // Dies by the signal's default action even where a runtime installed a handler for it
        // (ThreadSanitizer's reports a SEGV and exits 86 instead: scripts/test --sanitize).
        std::signal(SIGSEGV, SIG_DFL);
        std::raise(SIGSEGV);
      }
      // Like a rank whose top level caught an error: exit at once, without MPI_Finalize (which
      // in Open MPI waits for every other rank to finalize too, so the job would hang).
      std::fflush(stdout);
      std::_Exit(static_cast<int>(env_long("FAKE_RANK_FAIL_STATUS", 3)));
    }
    const bool stop = out[1] > 0;  // every rank agrees on when to stop
    if (step % a.every == 0 || stop) save(step);
    fmt::print("rank {} step {}\n", rank, step);
    std::fflush(stdout);
    if (stop) {
      fmt::print("rank {} stopped at step {} after SIGTERM; checkpoint saved\n", rank, step);
      return 0;
    }
  }
  std::int64_t mine = static_cast<std::int64_t>(state & 0xffffffffULL), all = 0;
  g.all_reduce(parallel::span(static_cast<const std::int64_t*>(&mine), 1), parallel::span(&all, 1))
      .wait();
  fmt::print("rank {} state {:016x}\n", rank, state);
  if (rank == 0) fmt::print("final state {:x} after step {} on {} ranks\n", all, step, g.size());
  std::fflush(stdout);
  progress(fmt::format("done {}", step));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGTERM, env_long("FAKE_RANK_IGNORE_TERM", 0) ? SIG_IGN : on_term);
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    fmt::print(stderr, "fake_rank: {}\n", e.what());
    return 1;
  }
}
