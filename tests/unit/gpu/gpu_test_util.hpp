// Helpers of the whole-job GPU tests (tests/unit/gpu, every test cuda_*): why a GPU cannot run
// them here, a small GPT's config on a device, batches that are a function of (step, position)
// only, a job trained for some steps (its losses and f32 masters), and the comparisons.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "framework/backend/cuda_runtime.hpp"
#include "framework/backend/ops/op_table.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata::gpu_test {

using plan_test::gpt_config;
using plan_test::one_rank;

#define SKIP_WITHOUT_GPU() \
  if (const std::string why = ::strata::gpu_test::why_no_gpu(); !why.empty()) GTEST_SKIP() << why

inline std::string why_no_gpu() {
  if (!cuda::compiled()) return "this build has no CUDA support";
  if (!ops::cuda_op_table()) return "this build has no CUDA kernels";
  if (cuda::device_count() == 0) return "no GPU is visible: " + cuda::describe_devices();
  return "";
}

// A small GPT (2 layers, C = 64, T = 32, vocab 64) with `sets` applied, on `device`.
inline config::Config job_config(const std::string& device, std::vector<std::string> sets = {}) {
  sets.push_back("strata.device=" + device);
  return gpt_config(sets);
}

// Tokens a function of (step, position) only: both devices see the same batches.
struct Feed {
  std::int64_t k = 0;
  void operator()(nn::Batch& b) {
    for (const char* f : {"tokens", "targets"}) {
      auto* p = b[f].data<std::int32_t>();
      const std::int64_t salt = f[0] == 't' && f[1] == 'a' ? 1 : 0;
      for (std::int64_t i = 0; i < b[f].numel(); ++i)
        p[i] = static_cast<std::int32_t>((k * 131 + (i + salt) * 7 + (i * i) % 13) % 64);
    }
    ++k;
  }
};

struct Trained {
  std::vector<double> losses;
  std::vector<float> masters;  // every unit's f32 master, concatenated
};

inline std::vector<float> masters_of(parallel::Training& job) {
  std::vector<float> out;
  for (std::size_t u = 0; u < job.store().num_units(); ++u) {
    const std::vector<float> m = job.trainer().master_shard(u).to_vector();
    out.insert(out.end(), m.begin(), m.end());
  }
  return out;
}

inline Trained train(const config::Config& cfg, int steps) {
  nn::Gpt model(train::gpt_config(cfg));
  parallel::Training job(cfg, one_rank(), model);
  Trained r;
  Feed feed;
  for (int s = 0; s < steps; ++s)
    r.losses.push_back(job.step([&](nn::Batch& b) { feed(b); }).loss);
  r.masters = masters_of(job);
  return r;
}

inline double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / std::max(1e-12, std::abs(b[i])));
  return m;
}

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    d += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    n += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(d / std::max(n, 1e-30));
}

}  // namespace strata::gpu_test
