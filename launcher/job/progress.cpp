#include "launcher/job/progress.hpp"

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "framework/memory/size.hpp"

namespace strata::job {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const auto t = static_cast<std::int64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}h{:02}m", t / 3600, (t / 60) % 60);
  if (t >= 60) return fmt::format("{}m{:02}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

std::string progress_line(const StepReport& r) {
  std::string s = fmt::format("step {}/{} | loss {:.4f}", r.step, r.total, r.loss);
  if (r.val_loss) s += fmt::format(" | val {:.4f}", *r.val_loss);
  s += fmt::format(" | lr {:.3e} | grad norm {:.3f}", r.result.lr, r.result.grad_norm);
  if (r.fp16) s += fmt::format(" | scale {:g}", r.result.loss_scale);
  if (!r.result.applied) s += " | skipped (overflow)";
  s += fmt::format(" | {:.0f} tok/s | peak {} | ETA {}", r.tokens_per_s, format_bytes(r.peak_device),
                   format_duration(r.eta_s));
  return s;
}

std::string metrics_json(const StepReport& r, const MemorySnapshot& m) {
  nlohmann::json j;
  j["step"] = r.step;
  j["total_steps"] = r.total;
  j["loss"] = r.loss;
  if (r.val_loss) j["val_loss"] = *r.val_loss;
  j["lr"] = r.result.lr;
  j["grad_norm"] = std::isfinite(r.result.grad_norm) ? nlohmann::json(r.result.grad_norm) : nlohmann::json();
  j["loss_scale"] = r.result.loss_scale;
  j["applied"] = r.result.applied;
  j["tokens_per_s"] = r.tokens_per_s;
  j["elapsed_s"] = r.elapsed_s;
  j["eta_s"] = r.eta_s;
  j["peak_device_max"] = r.peak_device;
  j["rank"] = r.rank;
  j["world_size"] = r.world_size;
  if (r.data_parallel_size > 0) j["data_parallel_size"] = r.data_parallel_size;
  if (r.accumulation > 0) j["gradient_accumulation_steps"] = r.accumulation;
  if (!r.resize.empty()) j["resize"] = r.resize;
  nlohmann::json mem;
  for (std::size_t t = 0; t < kNumTiers; ++t) {
    nlohmann::json tier;
    for (std::size_t c = 0; c < kNumCategories; ++c) {
      if (m.peak[t][c] == 0 && m.current[t][c] == 0) continue;
      tier[std::string(category_name(static_cast<Category>(c)))] = {{"current", m.current[t][c]},
                                                                    {"peak", m.peak[t][c]}};
    }
    tier["total"] = {{"current", m.tier_current[t]}, {"peak", m.tier_peak[t]}};
    mem[std::string(tier_name(static_cast<Tier>(t)))] = tier;
  }
  j["memory"] = mem;
  return j.dump();
}

std::string metrics_path(const std::string& pattern, int rank) {
  const std::string key = "{rank}";
  const auto at = pattern.find(key);
  if (at == std::string::npos) return rank == 0 ? pattern : std::string();
  std::string out = pattern;
  for (auto p = at; p != std::string::npos; p = out.find(key))
    out.replace(p, key.size(), std::to_string(rank));
  return out;
}

}  // namespace strata::job
