#include "launcher/run/rank_wrapper.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "framework/core/error.hpp"
#include "launcher/run/exit_record.hpp"
#include "launcher/run/log_mux.hpp"
#include "launcher/run/process.hpp"
#include "launcher/run/signals.hpp"

namespace strata::launcher::run {

namespace fs = std::filesystem;

namespace {

// A pseudo-terminal for the program's stdout, in raw mode (no "\r\n" translation), so C stdio
// line-buffers as it does under plain mpirun. Falls back to a pipe.
bool open_output(int* read_end, int* write_end) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master >= 0 && grantpt(master) == 0 && unlockpt(master) == 0) {
    char name[128];
    if (ptsname_r(master, name, sizeof name) == 0) {
      const int slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
      if (slave >= 0) {
        termios t{};
        if (tcgetattr(slave, &t) == 0) {
          cfmakeraw(&t);
          tcsetattr(slave, TCSANOW, &t);
        }
        *read_end = master;
        *write_end = slave;
        return true;
      }
    }
  }
  if (master >= 0) close(master);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return false;
  *read_end = p[0];
  *write_end = p[1];
  return true;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  return buf;
}

std::int64_t wall_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

// Reads what is available; false at end of stream (EOF, or EIO from a pty whose slave closed).
bool pump(int fd, RankOutput& out, bool is_stdout) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      const std::string_view data(buf, static_cast<std::size_t>(n));
      is_stdout ? out.on_stdout(data) : out.on_stderr(data);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
}

}  // namespace

int rank_from_environment() {
  for (const char* k : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    if (const char* v = std::getenv(k)) {
      char* end = nullptr;
      const long r = std::strtol(v, &end, 10);
      if (*v && *end == '\0' && r >= 0) return static_cast<int>(r);
    }
  }
  return 0;
}

int run_rank(const RankWrapperOptions& o) {
  STRATA_CHECK(!o.program.empty(), "run", "_rank: no program");
  const int rank = rank_from_environment();
  std::error_code ec;
  fs::create_directories(o.log_dir, ec);
  fs::create_directories(o.status_dir, ec);
  const std::string log_path =
      (fs::path(o.log_dir) / fmt::format("rank_{:05d}.log", rank)).string();
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  RankOutput output(rank, log_fd);
  if (log_fd < 0)
    output.note(fmt::format("strata run: cannot open {}: {}", log_path, std::strerror(errno)));
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const char* attempt = std::getenv("STRATA_RUN_ATTEMPT");
  if (log_fd >= 0)
    write_all(log_fd,
              fmt::format("===== strata run: attempt {}, rank {}, host {}, pid {}, {} =====\n",
                          attempt ? attempt : "1", rank, host, getpid(), now_text()));

  SignalPipe signals({SIGTERM, SIGINT, SIGUSR1, SIGCHLD});
  int out_r = -1, out_w = -1, err[2] = {-1, -1};
  if (!open_output(&out_r, &out_w) || pipe2(err, O_CLOEXEC) != 0)
    fail("run", "rank {}: cannot create output pipes: {}", rank, std::strerror(errno));

  std::vector<std::string> args = o.program;
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string exec_failed = fmt::format("cannot execute {}: ", args[0]);
  const pid_t self = getpid();
  const pid_t child = fork();
  if (child < 0) fail("run", "rank {}: fork failed: {}", rank, std::strerror(errno));
  if (child == 0) {
    // Its own process group: signals mpirun sends to the wrapper's group do not reach it, and
    // the wrapper decides what the program gets. It dies with the wrapper.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != self) _exit(127);
    dup2(out_w, 1);
    dup2(err[1], 2);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execvp(argv[0], argv.data());
    const char* why = std::strerror(errno);
    (void)!write(2, exec_failed.data(), exec_failed.size());
    (void)!write(2, why, std::strlen(why));
    (void)!write(2, "\n", 1);
    _exit(127);
  }
  close(out_w);
  close(err[1]);
  fcntl(out_r, F_SETFL, fcntl(out_r, F_GETFL) | O_NONBLOCK);
  fcntl(err[0], F_SETFL, fcntl(err[0], F_GETFL) | O_NONBLOCK);

  bool out_open = true, err_open = true, reaped = false;
  bool told_to_stop = false, collateral = false;
  int status = 0;
  std::int64_t ended_ns = 0;
  auto drain_until = std::chrono::steady_clock::time_point::max();
  while (!reaped || ((out_open || err_open) && std::chrono::steady_clock::now() < drain_until)) {
    pollfd fds[3] = {{signals.fd(), POLLIN, 0},
                     {out_open ? out_r : -1, POLLIN, 0},
                     {err_open ? err[0] : -1, POLLIN, 0}};
    poll(fds, 3, reaped ? 50 : 500);
    for (int sig : signals.drain()) {
      if (sig == SIGCHLD || reaped) continue;
      // SIGUSR1: `strata run` asks for a graceful stop (through mpirun, which forwards it).
      // SIGTERM: mpirun is ending the job because another rank failed.
      if (sig == SIGUSR1)
        told_to_stop = true;
      else if (!told_to_stop)
        collateral = true;
      kill(-child, SIGTERM);  // the program's process group, as a terminal would
    }
    if (out_open && !pump(out_r, output, true)) out_open = false;
    if (err_open && !pump(err[0], output, false)) err_open = false;
    output.tick();
    if (!reaped && waitpid(child, &status, WNOHANG) == child) {
      reaped = true;
      ended_ns = wall_ns();
      // Whatever is still buffered comes now; a grandchild holding the pipes open is not
      // waited for beyond this.
      drain_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    }
  }
  output.finish();

  int rc = 0;
  if (WIFEXITED(status))
    rc = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    rc = 128 + WTERMSIG(status);
  if (rc != 0) {
    ExitRecord r{rank,
                 WIFSIGNALED(status),
                 WIFSIGNALED(status) ? WTERMSIG(status) : rc,
                 collateral,
                 ended_ns,
                 {}};
    // The program's last words go to the launcher, which prints them once for all ranks; a
    // rank that mpirun was stopping shows them as they are.
    if (collateral)
      output.show_held();
    else
      r.message = output.take_held();
    write_exit_record(o.status_dir, r);
    output.note(fmt::format("strata run: {}{}", r.describe(),
                            collateral ? " (after mpirun stopped the job)" : ""));
  } else {
    output.show_held();
  }
  close(out_r);
  close(err[0]);
  if (log_fd >= 0) close(log_fd);
  return rc;
}

}  // namespace strata::launcher::run
