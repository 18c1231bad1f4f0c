// Tensor, pipeline and 3D parallelism against data parallelism on the same N ranks, with the same
// global batch: dp = N (every rank the whole model), tp = N (every layer split N ways), pp = N
// (one stage per rank) and, on 4 ranks, tp 2 x pp 2. The jobs are alive at once and run in
// alternating rounds so that load from other processes hits them alike. Per layout: the median
// step time (slowest rank) and its ratio to dp's, and for tensor-parallel layouts the bytes rank 0
// all-reduced over its tp group per step against the formula (nn::gpt_tp_allreduce_bytes) and the
// share of the step rank 0 spent in those all-reduces.
//
//   mpirun -np 2 build/release/bench/model_parallel/bench_model_parallel [--layers 4 --embd 256]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <vector>

#include "bench/common/cpu_flags.hpp"
#include "bench/model_parallel/common.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/gpt_stage.hpp"
#include "framework/train/from_config.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

using namespace strata;
using namespace strata::parallel;
using Clock = std::chrono::steady_clock;

namespace {

struct Layout {
  std::string name;
  int tp = 1, pp = 1;
};

struct Job {
  Layout layout;
  MemoryLedger ledger;
  config::Config cfg;
  nn::Gpt gpt;
  std::unique_ptr<Training> training;
  std::vector<double> step_s;
  std::int64_t tp_bytes = 0;
  double tp_wait_s = 0, busy_s = 0;

  Job(const nn::GptConfig& c, const Group& world, config::Config base, const Layout& l, int m)
      : layout(l),
        cfg(with(std::move(base), l, world.size(), m)),
        gpt(c, tensor_shard(cfg, world)) {
    training = std::make_unique<Training>(cfg, world, gpt, TrainingExtras::on(&ledger));
  }
  // The same global batch for every layout: m micro-batches over the dp replicas.
  static config::Config with(config::Config cfg, const Layout& l, int ranks, int m) {
    cfg.strata.tensor_parallel_size = l.tp;
    cfg.strata.pipeline_parallel_size = l.pp;
    cfg.gradient_accumulation_steps = m / (ranks / (l.tp * l.pp));
    return cfg;
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tensor / pipeline / 3D parallelism vs data parallelism: step time, tp bytes"};
  bench::ModelParallelRun run;
  int m = 8;
  run.add_options(app);
  app.add_option("--m", m,
                 "micro-batches per step of a one-replica layout (a multiple of the ranks)");
  CLI11_PARSE(app, argc, argv);
  const nn::GptConfig& gc = run.gpt;
  const int micro = run.micro;
  try {
    World world;
    const Group& w = world.group();
    const int N = w.size(), rank = w.rank();
    const bool lead = rank == 0;
    if (N < 2) user_fail("bench", "run under mpirun with 2 or more ranks");
    if (m % N != 0) user_fail("bench", "--m {} is not a multiple of the {} ranks", m, N);
    cpu::set_num_threads(run.threads);
    config::Config cfg;
    cfg.train_micro_batch_size_per_gpu = micro;
    cfg.optimizer.params.set("betas", optim::HPair{0.9, 0.95});
    cfg.optimizer.params.set("weight_decay", 0.1);
    std::vector<Layout> layouts{{fmt::format("dp {}", N), 1, 1},
                                {fmt::format("tp {}", N), N, 1},
                                {fmt::format("pp {}", N), 1, N}};
    if (N == 4) layouts.push_back({"tp 2 x pp 2", 2, 2});
    std::vector<std::unique_ptr<Job>> jobs;
    for (const Layout& l : layouts) jobs.push_back(std::make_unique<Job>(gc, w, cfg, l, m));
    Philox rng(7 + static_cast<std::uint64_t>(rank));
    auto next_batch = [&](nn::Batch& b) { bench::random_tokens(rng, gc.vocab_size, b); };
    if (lead) {
      std::printf(
          "model-parallel benchmark: %d ranks over %s, %d kernel thread(s) per rank, CPU "
          "flags: %s\nGPT L=%d d=%d heads=%d T=%d vocab=%d, micro-batch %d, %d "
          "micro-batches per step of a one-replica layout (global batch %d sequences), "
          "fp32 AdamW, activation checkpointing off\n",
          N, std::string(w.transport()).c_str(), cpu::num_threads(), bench::cpu_flags().c_str(),
          gc.n_layer, gc.n_embd, gc.n_head, gc.block_size, gc.vocab_size, micro, m, m * micro);
      std::fflush(stdout);
    }
    auto step = [&](Job& j, bool timed) {
      const GroupTpComm* comm = j.training->tp_comm();
      const std::int64_t b0 = comm ? comm->bytes() : 0;
      const double w0 = comm ? comm->wait_seconds() : 0;
      const auto t0 = Clock::now();
      j.training->engine().train_step(next_batch);
      if (!timed) return;
      j.busy_s += std::chrono::duration<double>(Clock::now() - t0).count();
      if (comm) {
        j.tp_bytes = comm->bytes() - b0;
        j.tp_wait_s += comm->wait_seconds() - w0;
      }
    };
    bench::run_rounds(w, jobs, run, step);
    const double dp_step = bench::median_of(jobs[0]->step_s);
    if (lead)
      std::printf("%-12s %12s %10s %16s %16s %14s\n", "layout", "step ms", "vs dp", "tp bytes/step",
                  "formula", "tp wait share");
    std::ostringstream js;
    js << "{\"bench\": \"model_parallel\", \"ranks\": " << N << ", \"rows\": [";
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      Job& j = *jobs[i];
      const double t = bench::median_of(j.step_s);
      std::int64_t formula = 0;
      if (j.layout.tp > 1) {
        const std::vector<int> cut = nn::gpt_stage_blocks(gc, j.layout.pp);
        const int s = j.training->grid().coords().pp;
        formula = j.cfg.gradient_accumulation_steps *
                  nn::gpt_tp_allreduce_bytes(gc, j.layout.tp,
                                             static_cast<std::int64_t>(micro) * gc.block_size,
                                             train::activation_dtype(j.cfg), false, cut[s],
                                             cut[s + 1], s == 0, s == j.layout.pp - 1);
      }
      const double share = j.tp_wait_s / j.busy_s;
      if (lead)
        std::printf("%-12s %12.1f %9.2fx %16lld %16lld %14.3f\n", j.layout.name.c_str(), t * 1e3,
                    t / dp_step, static_cast<long long>(j.tp_bytes),
                    static_cast<long long>(formula), share);
      js << (i ? ", " : "") << "{\"layout\": \"" << j.layout.name << "\", \"step_ms\": " << t * 1e3
         << ", \"vs_dp\": " << t / dp_step << ", \"tp_bytes_per_step\": " << j.tp_bytes
         << ", \"tp_bytes_formula\": " << formula << ", \"tp_wait_share\": " << share << "}";
    }
    js << "]}";
    if (lead) std::printf("%s\n", js.str().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_model_parallel: %s\n", e.what());
    return 1;
  }
}
