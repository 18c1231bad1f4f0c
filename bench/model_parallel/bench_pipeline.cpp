// Pipeline parallelism against data parallelism on the same ranks: for each number of
// micro-batches m, a pp = N job (one stage per rank, 1F1B over m micro-batches) and a dp = N job
// (every rank the whole model, m / N micro-batches each: the same global batch) train replicas of
// the same GPT, alive at once, rounds alternating between them so that load from other processes
// hits both alike. Per m it reports the median step time (slowest rank) of each and their ratio,
// and the pipeline's bubble: the share of a stage's step spent waiting for its neighbours (the
// executor's pipeline wait over forward + backward + that wait, mean over stages) against 1F1B's
// (pp − 1) / (m + pp − 1) for stages of equal cost.
//
// Then the interleaved schedule (strata.virtual_pipeline_stages v): for each v in --v and m in
// --im, a pp = N job of v chunks per rank over a GPT of a multiple of N * max(v) blocks (the same
// model for every v), its bubble relative to the ideal step — each rank's pipeline wait over its
// forward + backward time, mean over ranks — against Narayanan et al.'s (pp − 1) / (v m), and the
// ratio measured / formula (real runs on the CPU; the LM head makes the last chunk dearer, so the
// chunks are not quite equal).
//
//   mpirun -np 2 build/release/bench/model_parallel/bench_pipeline [--layers 4 --embd 256 --micro 4]
#include <CLI/CLI.hpp>
#include <fmt/format.h>

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
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

using namespace strata;
using namespace strata::parallel;

namespace {

// One job (pp stages or dp replicas) with its own ledger and model.
struct Job {
  MemoryLedger ledger;
  nn::Gpt gpt;
  std::unique_ptr<Training> training;
  std::vector<double> step_s;
  double busy_s = 0, wait_s = 0;  // this rank's compute and pipeline wait over the timed steps

  Job(const nn::GptConfig& c, const Group& world, config::Config cfg, int pp, int accum,
      int chunks = 1)
      : gpt(c) {
    cfg.strata.pipeline_parallel_size = pp;
    cfg.strata.virtual_pipeline_stages = chunks;
    cfg.gradient_accumulation_steps = accum;
    training = std::make_unique<Training>(cfg, world, gpt, TrainingExtras::on(&ledger));
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pipeline parallelism vs data parallelism on the same ranks: step time, bubble"};
  bench::ModelParallelRun run;
  std::vector<int> ms{2, 4, 8, 16};
  std::vector<int> vs{1, 2, 4}, ims{4, 8, 16};
  run.add_options(app);
  app.add_option("--m", ms, "micro-batches per step of the pipeline (multiples of the ranks)")
      ->delimiter(',');
  app.add_option("--v", vs, "model chunks per rank for the interleaved table")->delimiter(',');
  app.add_option("--im", ims, "micro-batches per step for the interleaved table (multiples of the "
                 "ranks)")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  const nn::GptConfig& gc = run.gpt;
  const int micro = run.micro;
  try {
    World world;
    const Group& w = world.group();
    const int N = w.size(), rank = w.rank();
    const bool lead = rank == 0;
    if (N < 2) user_fail("bench", "run under mpirun with 2 or more ranks");
    for (int m : ms)
      if (m % N != 0) user_fail("bench", "--m {} is not a multiple of the {} ranks", m, N);
    for (int m : ims)
      if (m % N != 0) user_fail("bench", "--im {} is not a multiple of the {} ranks", m, N);
    cpu::set_num_threads(run.threads);
    config::Config cfg;
    cfg.train_micro_batch_size_per_gpu = micro;
    cfg.optimizer.params.set("betas", optim::HPair{0.9, 0.95});
    cfg.optimizer.params.set("weight_decay", 0.1);
    // For each m: the pipeline job (index 2i) and the data-parallel one (2i + 1).
    std::vector<std::unique_ptr<Job>> jobs;
    for (int m : ms) {
      jobs.push_back(std::make_unique<Job>(gc, w, cfg, N, m));
      jobs.push_back(std::make_unique<Job>(gc, w, cfg, 1, m / N));
    }
    Philox rng(7 + static_cast<std::uint64_t>(rank));
    auto next_batch = [&](nn::Batch& b) { bench::random_tokens(rng, gc.vocab_size, b); };
    const std::vector<int> cut = nn::gpt_stage_blocks(gc, N);
    if (lead) {
      std::string blocks;
      for (int s = 0; s < N; ++s) blocks += fmt::format("{}{}", s ? "," : "", cut[s + 1] - cut[s]);
      std::printf("pipeline benchmark: %d ranks over %s, %d kernel thread(s) per rank, avx512: %s\n"
                  "GPT L=%d d=%d heads=%d T=%d vocab=%d, micro-batch %d, fp32 AdamW; blocks per "
                  "stage %s; global batch m x %d sequences for both jobs\n",
                  N, std::string(w.transport()).c_str(), cpu::num_threads(),
                  bench::avx512_flags().empty() ? "none" : bench::avx512_flags().c_str(), gc.n_layer, gc.n_embd,
                  gc.n_head, gc.block_size, gc.vocab_size, micro, blocks.c_str(), micro);
      std::fflush(stdout);
    }
    auto step = [&](Job& j, bool timed) {
      const EngineStep e = j.training->engine().train_step(next_batch);
      if (!timed) return;
      j.busy_s += e.times.forward + e.times.backward;
      j.wait_s += e.times.pipeline_wait;
    };
    bench::run_rounds(w, jobs, run, step);
    if (lead)
      std::printf("%4s %14s %14s %12s %14s %14s\n", "m", "pp step ms", "dp step ms", "pp / dp",
                  "bubble meas.", "(p-1)/(m+p-1)");
    std::ostringstream js;
    js << "{\"bench\": \"pipeline\", \"ranks\": " << N << ", \"rows\": [";
    for (std::size_t i = 0; i < ms.size(); ++i) {
      Job& pp = *jobs[2 * i];
      Job& dp = *jobs[2 * i + 1];
      const double tp = bench::median_of(pp.step_s), td = bench::median_of(dp.step_s);
      const double bubble = w.all_reduce_value(pp.wait_s / (pp.busy_s + pp.wait_s), ReduceOp::avg);
      const double theory = static_cast<double>(N - 1) / (ms[i] + N - 1);
      if (lead)
        std::printf("%4d %14.1f %14.1f %11.2fx %14.3f %14.3f\n", ms[i], tp * 1e3, td * 1e3, tp / td,
                    bubble, theory);
      js << (i ? ", " : "") << "{\"m\": " << ms[i] << ", \"pp_step_ms\": " << tp * 1e3
         << ", \"dp_step_ms\": " << td * 1e3 << ", \"pp_over_dp\": " << tp / td
         << ", \"bubble\": " << bubble << ", \"bubble_theory\": " << theory << "}";
    }
    js << "]";

    // The interleaved schedule: one model of a multiple of N * max(v) blocks for every v.
    if (!vs.empty() && !ims.empty()) {
      const int vmax = *std::max_element(vs.begin(), vs.end());
      nn::GptConfig gi = gc;
      gi.n_layer = (std::max(gc.n_layer, N * vmax) + N * vmax - 1) / (N * vmax) * (N * vmax);
      std::vector<std::unique_ptr<Job>> ijobs;
      for (int v : vs)
        for (int m : ims) ijobs.push_back(std::make_unique<Job>(gi, w, cfg, N, m, v));
      bench::run_rounds(w, ijobs, run, step);
      if (lead)
        std::printf("\ninterleaved 1F1B, pp = %d, GPT L=%d (%d blocks per chunk at v=%d): bubble "
                    "= pipeline wait / (forward + backward), mean over ranks\n"
                    "%3s %4s %14s %14s %14s %12s\n",
                    N, gi.n_layer, gi.n_layer / (N * vmax), vmax, "v", "m", "step ms",
                    "bubble meas.", "(p-1)/(v m)", "meas./form.");
      js << ", \"interleaved\": [";
      std::size_t i = 0;
      for (int v : vs)
        for (int m : ims) {
          Job& j = *ijobs[i];
          const double meas = w.all_reduce_value(j.wait_s / j.busy_s, ReduceOp::avg);
          const double form = static_cast<double>(N - 1) / (v * m);
          const double t = bench::median_of(j.step_s);
          if (lead)
            std::printf("%3d %4d %14.1f %14.3f %14.3f %11.2fx\n", v, m, t * 1e3, meas, form,
                        meas / form);
          js << (i ? ", " : "") << "{\"v\": " << v << ", \"m\": " << m << ", \"step_ms\": "
             << t * 1e3 << ", \"bubble\": " << meas << ", \"bubble_formula\": " << form << "}";
          ++i;
        }
      js << "]";
    }
    js << "}";
    if (lead) std::printf("%s\n", js.str().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_pipeline: %s\n", e.what());
    return 1;
  }
}
