#include "launcher/run/node_probe.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <filesystem>
#include <memory>
#include <thread>

#include "launcher/run/process.hpp"

namespace strata::launcher::run {

namespace fs = std::filesystem;

std::vector<std::string> probe_command(const ProbeSpec& spec, const std::string& host) {
  std::vector<std::string> argv = {spec.mpirun, "-np", "1", "--host", host + ":1"};
  argv.insert(argv.end(), spec.mpi_args.begin(), spec.mpi_args.end());
  argv.push_back("true");
  return argv;
}

NodeProbe::NodeProbe(const ProbeSpec& spec, std::string host) : host_(std::move(host)) {
  std::string out;
  if (!spec.log_dir.empty()) {
    std::error_code ec;
    fs::create_directories(fs::path(spec.log_dir) / "probe", ec);
    if (!ec) out = (fs::path(spec.log_dir) / "probe" / (host_ + ".log")).string();
  }
  SpawnSpec s{probe_command(spec, host_), spec.env, true, SIGKILL, true, out};
  pid_ = spawn(s);
  deadline_ = std::chrono::steady_clock::now() +
              std::chrono::milliseconds(static_cast<long long>(spec.timeout_s * 1000));
}

NodeProbe::~NodeProbe() {
  if (result_ || pid_ <= 0) return;
  signal_tree(pid_, SIGKILL);
  int st = 0;
  for (int i = 0; i < 100 && !reap_child(pid_, &st); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

std::optional<bool> NodeProbe::poll() {
  if (result_) return result_;
  int st = 0;
  if (reap_child(pid_, &st)) {
    result_ = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  } else if (std::chrono::steady_clock::now() > deadline_) {
    signal_tree(pid_, SIGKILL);  // mpirun and the agent it started (ssh, rsh, srun)
    for (int i = 0; i < 100 && !reap_child(pid_, &st); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    result_ = false;
  }
  return result_;
}

std::set<std::string> probe_nodes(const ProbeSpec& spec, const std::vector<std::string>& hosts) {
  std::vector<std::unique_ptr<NodeProbe>> probes;
  for (const std::string& h : hosts) probes.push_back(std::make_unique<NodeProbe>(spec, h));
  std::set<std::string> answered;
  for (;;) {
    bool running = false;
    for (auto& p : probes) {
      const auto r = p->poll();
      if (!r)
        running = true;
      else if (*r)
        answered.insert(p->host());
    }
    if (!running) return answered;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace strata::launcher::run
