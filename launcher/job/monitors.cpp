#include "launcher/job/monitors.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "framework/core/error.hpp"

namespace strata::job {

namespace {

namespace fs = std::filesystem;

std::string job_dir(const config::Monitor& m, const char* default_root) {
  return (fs::path(m.output_path.empty() ? default_root : m.output_path) / m.job_name).string();
}

}  // namespace

std::vector<std::pair<std::string, double>> monitor_events(const StepReport& r,
                                                           const MemorySnapshot& memory) {
  std::vector<std::pair<std::string, double>> e = {{"Train/Samples/train_loss", r.loss},
                                                   {"Train/Samples/lr", r.result.lr}};
  if (r.fp16) e.emplace_back("Train/Samples/loss_scale", r.result.loss_scale);
  if (std::isfinite(r.result.grad_norm)) e.emplace_back("Train/Samples/grad_norm", r.result.grad_norm);
  if (r.val_loss) e.emplace_back("Train/Samples/val_loss", *r.val_loss);
  e.emplace_back("Train/Samples/tokens_per_s", r.tokens_per_s);
  for (std::size_t t = 0; t < kNumTiers; ++t)
    if (memory.tier_peak[t] > 0)
      e.emplace_back(fmt::format("Memory/{}/peak_bytes", tier_name(static_cast<Tier>(t))),
                     static_cast<double>(memory.tier_peak[t]));
  return e;
}

CsvMonitor::CsvMonitor(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) user_fail("monitor", "cannot create the csv_monitor folder {}: {}", dir_, ec.message());
}

void CsvMonitor::write(std::int64_t samples, const std::vector<std::pair<std::string, double>>& events) {
  for (const auto& [tag, value] : events) {
    std::string name = tag;
    for (char& c : name)
      if (c == '/' || c == ' ') c = '_';
    const std::string path = (fs::path(dir_) / (name + ".csv")).string();
    // A resumed run appends to the files of the run it resumes (the header once, as DeepSpeed).
    std::error_code ec;
    const bool header = !started_[tag] && !(fs::exists(path, ec) && fs::file_size(path, ec) > 0);
    std::FILE* f = std::fopen(path.c_str(), "a");
    if (!f) user_fail("monitor", "cannot write {}: {}", path, std::strerror(errno));
    bool ok = true;
    if (header) ok = std::fprintf(f, "step,%s\n", tag.substr(tag.rfind('/') + 1).c_str()) > 0;
    ok = ok && std::fprintf(f, "%lld,%.17g\n", static_cast<long long>(samples), value) > 0;
    ok = std::fclose(f) == 0 && ok;
    if (!ok) user_fail("monitor", "cannot write {}: {}", path, std::strerror(errno));
    started_[tag] = true;
  }
}

Monitors::Monitors(const config::Config& cfg, bool lead) {
  if (!lead) return;
  if (cfg.tensorboard.enabled)
    tensorboard_ = std::make_unique<TfEventsWriter>(job_dir(cfg.tensorboard, "tensorboard"));
  if (cfg.csv_monitor.enabled)
    csv_ = std::make_unique<CsvMonitor>(job_dir(cfg.csv_monitor, "csv_monitor"));
}

void Monitors::write(std::int64_t samples, const StepReport& r, const MemorySnapshot& memory) {
  if (!any()) return;
  const auto events = monitor_events(r, memory);
  if (tensorboard_) tensorboard_->scalars(samples, events);
  if (csv_) csv_->write(samples, events);
}

}  // namespace strata::job
