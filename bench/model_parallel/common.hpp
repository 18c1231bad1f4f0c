// What the model-parallel benchmarks share: their GPT and timing options, the rounds that time
// every job alike, the median of a rank's step times, and micro-batches of random tokens.
#pragma once

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/nn/batch.hpp"
#include "bench/common/gpt_options.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/comm/group.hpp"

namespace strata::bench {

// The model (a small GPT by default) and how the jobs are timed.
struct ModelParallelRun {
  nn::GptConfig gpt;
  int micro = 4, steps = 3, warmup = 1, rounds = 3, threads = 1;

  ModelParallelRun() {
    gpt.n_layer = 4;
    gpt.n_embd = 256;
    gpt.n_head = 4;
    gpt.block_size = 64;
    gpt.vocab_size = 256;
  }
  void add_options(CLI::App& app) {
    add_gpt_shape_options(app, gpt, " (a multiple of the tensor-parallel size)");
    app.add_option("--micro", micro, "micro-batch (sequences)");
    app.add_option("--steps", steps, "timed steps per job per round");
    app.add_option("--warmup", warmup, "untimed steps per job before the first round");
    app.add_option("--rounds", rounds, "rounds (each runs every job in turn)");
    app.add_option("--threads", threads, "kernel threads per rank");
  }
};

// Runs `warmup` untimed steps of every job, then `rounds` rounds that run each job `steps` times
// in turn (the order reversed every other round, so that load from other processes hits the jobs
// alike). step(job, timed) runs one training step (timed: false for the warm-up steps, which
// should count nothing); each timed step's time, the slowest rank's, is appended to job.step_s.
template <typename Job, typename Step>
void run_rounds(const parallel::Group& w, std::vector<std::unique_ptr<Job>>& jobs,
                const ModelParallelRun& o, Step&& step) {
  for (auto& j : jobs)
    for (int s = 0; s < o.warmup; ++s) step(*j, false);
  for (int round = 0; round < o.rounds; ++round)
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      Job& j = *jobs[round % 2 == 0 ? i : jobs.size() - 1 - i];
      for (int s = 0; s < o.steps; ++s) {
        w.barrier().wait();
        const auto t0 = std::chrono::steady_clock::now();
        step(j, true);
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        j.step_s.push_back(w.all_reduce_value(t, parallel::ReduceOp::max));
      }
    }
}

inline double median_of(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Fills a GPT micro-batch ("tokens", "targets") with random token ids below `vocab`.
inline void random_tokens(Philox& rng, int vocab, nn::Batch& b) {
  std::int32_t* in = b["tokens"].data<std::int32_t>();
  std::int32_t* tgt = b["targets"].data<std::int32_t>();
  for (std::int64_t i = 0; i < b["tokens"].numel(); ++i) {
    in[i] = static_cast<std::int32_t>(rng.next_below(vocab));
    tgt[i] = static_cast<std::int32_t>(rng.next_below(vocab));
  }
}

}  // namespace strata::bench
