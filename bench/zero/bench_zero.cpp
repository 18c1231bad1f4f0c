// ZeRO stages side by side in one job: every stage trains its own replica of the same GPT (all
// alive at once, each charging its own memory ledger), and rounds of steps alternate between the
// stages so that load from other processes hits them alike. Per stage it reports the median step
// time (slowest rank) and its ratio to stage 0, the bytes this rank sent per step by ring
// algorithms (ZeroHooks::volume) against the theory — stage 0 all-reduces Ψ (2Ψ(N-1)/N), stages
// 1-2 reduce-scatter gradients and all-gather parameters (2Ψ(N-1)/N), stage 3 gathers parameters
// for forward and for backward and reduce-scatters gradients (3Ψ(N-1)/N), Ψ in bytes — and the
// peak memory per rank (max over ranks) with the paper's model-state prediction. With gradient
// accumulation a, stage 2 sends (a+1)Ψ(N-1)/N and stage 3 3aΨ(N-1)/N.
//
//   mpirun -np 2 build/release/bench/zero/bench_zero [--layers 4 --embd 512 --seq 64 --micro 2]
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/common/stats.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/ledger.hpp"
#include "framework/memory/size.hpp"
#include "bench/common/gpt_options.hpp"
#include "framework/nn/gpt.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"
#include "parallel/zero/zero_memory.hpp"

using namespace strata;
using namespace strata::parallel;
using Clock = std::chrono::steady_clock;

namespace {

// Process CPU seconds (all threads: kernels and the communication progress thread) and minor
// page faults so far: load-independent costs beside the wall-clock step time.
struct Usage {
  double cpu_s;
  double faults;
};
Usage usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec),
          static_cast<double>(u.ru_minflt)};
}

using bench::median;

// One stage's job (the shared training assembly), charging `ledger` for everything it allocates.
struct Replica {
  int stage;
  MemoryLedger ledger;
  nn::Gpt gpt;
  std::unique_ptr<Training> training;
  nn::ParamStore* store;
  DataParallelEngine* engine;
  std::vector<double> step_s;
  std::uint64_t peak = 0;
  double ring_bytes = 0;  // sent by this rank during the timed steps
  double cpu_s = 0, faults = 0;  // this rank's, over the timed steps
  int timed = 0;

  Replica(int st, const nn::GptConfig& c, const Group& dp, config::Config cfg) : stage(st), gpt(c) {
    cfg.zero_optimization.stage = st;
    training = std::make_unique<Training>(cfg, dp, gpt, TrainingExtras::on(&ledger));
    store = &training->store();
    engine = &training->engine();
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ZeRO stages 0-3: step time, communication volume and memory (run under mpirun)"};
  nn::GptConfig gc;
  gc.n_layer = 4;
  gc.n_embd = 512;
  gc.n_head = 8;
  gc.block_size = 64;
  gc.vocab_size = 256;
  int micro = 2, accum = 1, steps = 4, warmup = 1, rounds = 3, threads = 0;
  std::vector<int> stages{0, 1, 2, 3};
  std::int64_t bucket = 500'000'000;
  bool overlap = true;
  bench::add_gpt_shape_options(app, gc);
  app.add_option("--micro", micro, "micro-batch per rank");
  app.add_option("--accum", accum, "gradient accumulation steps");
  app.add_option("--steps", steps, "timed steps per stage per round");
  app.add_option("--warmup", warmup, "untimed steps per stage before the first round");
  app.add_option("--rounds", rounds, "rounds (each runs every stage in turn)");
  app.add_option("--stages", stages, "stages to compare (0 is the reference)")->delimiter(',');
  app.add_option("--threads", threads, "kernel threads per rank (default: cores / ranks)");
  app.add_option("--bucket", bucket, "reduce_bucket_size (elements)");
  app.add_option("--overlap", overlap, "overlap_comm (1/0)");
  CLI11_PARSE(app, argc, argv);
  try {
    World world;
    const Group& dp = world.group();
    const int N = dp.size(), rank = dp.rank();
    const bool lead = rank == 0;
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu::set_num_threads(threads > 0 ? threads : std::max(1, hw / N));
    // fp32 AdamW (beta2 0.95, weight decay 0.1); stage 3 releases every unit after each use and
    // keeps none persistent, so its traffic is the 3Psi of the theory.
    config::Config cfg;
    cfg.train_micro_batch_size_per_gpu = micro;
    cfg.gradient_accumulation_steps = accum;
    cfg.optimizer.params.set("betas", optim::HPair{0.9, 0.95});
    cfg.optimizer.params.set("weight_decay", 0.1);
    cfg.zero_optimization.reduce_bucket_size = bucket;
    cfg.zero_optimization.overlap_comm = overlap;
    cfg.zero_optimization.stage3_param_persistence_threshold = 0;
    cfg.zero_optimization.stage3_max_reuse_distance = 0;
    std::vector<std::unique_ptr<Replica>> reps;
    for (int st : stages) reps.push_back(std::make_unique<Replica>(st, gc, dp, cfg));
    double psi_elems = 0;
    for (std::size_t u = 0; u < reps[0]->store->num_units(); ++u)
      psi_elems += static_cast<double>(reps[0]->store->layout(u).padded);
    const double psi_bytes = psi_elems * 4.0;

    Philox rng(99 + static_cast<std::uint64_t>(rank));
    auto next_batch = [&](nn::Batch& b) {
      std::int32_t* in = b["tokens"].data<std::int32_t>();
      std::int32_t* tgt = b["targets"].data<std::int32_t>();
      const std::size_t n = static_cast<std::size_t>(micro) * gc.block_size;
      for (std::size_t i = 0; i < n; ++i) {
        in[i] = static_cast<std::int32_t>(rng.next_below(gc.vocab_size));
        tgt[i] = static_cast<std::int32_t>(rng.next_below(gc.vocab_size));
      }
    };
    if (lead) {
      std::printf("ZeRO benchmark: %d ranks over %s, %d kernel threads per rank; GPT L=%d d=%d "
                  "heads=%d T=%d vocab=%d, micro %d x accum %d, fp32 AdamW, overlap_comm %d; "
                  "Psi = %.0f elements (%s)\n",
                  N, std::string(dp.transport()).c_str(), cpu::num_threads(), gc.n_layer,
                  gc.n_embd, gc.n_head, gc.block_size, gc.vocab_size, micro, accum, overlap ? 1 : 0,
                  psi_elems, format_bytes(static_cast<std::uint64_t>(psi_bytes)).c_str());
      std::fflush(stdout);
    }
    for (auto& r : reps)
      for (int s = 0; s < warmup; ++s) r->engine->train_step(next_batch);
    for (int round = 0; round < rounds; ++round) {
      // Alternate the order of the stages between rounds.
      for (std::size_t i = 0; i < reps.size(); ++i) {
        Replica& r = *reps[round % 2 == 0 ? i : reps.size() - 1 - i];
        const CommVolume v0 = r.engine->zero().volume();
        r.ledger.reset_peaks();
        const Usage u0 = usage();
        for (int s = 0; s < steps; ++s) {
          dp.barrier().wait();
          const auto t0 = Clock::now();
          r.engine->train_step(next_batch);
          double t = std::chrono::duration<double>(Clock::now() - t0).count();
          dp.all_reduce(span(&t, 1), span(&t, 1), ReduceOp::max).wait();
          r.step_s.push_back(t);
        }
        const Usage u1 = usage();
        r.cpu_s += u1.cpu_s - u0.cpu_s;
        r.faults += u1.faults - u0.faults;
        r.peak = std::max(r.peak, r.ledger.peak(Tier::device));
        const CommVolume v1 = r.engine->zero().volume();
        CommVolume d;
        d.all_reduce = v1.all_reduce - v0.all_reduce;
        d.reduce_scatter = v1.reduce_scatter - v0.reduce_scatter;
        d.all_gather = v1.all_gather - v0.all_gather;
        r.ring_bytes += d.ring_bytes_sent(N);
        r.timed += steps;
      }
    }

    const double t0 = median(reps[0]->step_s);
    const double f = static_cast<double>(N - 1) / N;
    if (lead) {
      std::printf("%-6s %22s %9s %14s %14s %8s %12s %12s %9s %9s\n", "stage",
                  "step ms med (min..max)", "x stage0", "sent/step/rank", "theory", "ratio",
                  "peak mem", "model states", "cpu ms", "faults");
    }
    std::ostringstream js;
    js << "{\"bench\": \"zero\", \"ranks\": " << N << ", \"psi_bytes\": " << psi_bytes
       << ", \"stages\": [";
    for (std::size_t i = 0; i < reps.size(); ++i) {
      Replica& r = *reps[i];
      double peak = static_cast<double>(r.peak);
      dp.all_reduce(span(&peak, 1), span(&peak, 1), ReduceOp::max).wait();
      const double med = median(r.step_s);
      const double sent = r.ring_bytes / r.timed;
      // Per step: stage 0/1 reduce once per step, stage 2 reduce-scatters every micro-batch,
      // stage 3 also gathers twice per micro-batch and needs no gather after the update.
      const double units = r.stage <= 1 ? 2.0 : r.stage == 2 ? accum + 1.0 : 3.0 * accum;
      const double theory = units * psi_bytes * f;
      const auto pred = zero_prediction(r.stage, N, psi_elems, 4, 4, 8);
      double per[2] = {r.cpu_s / r.timed, r.faults / r.timed};  // per step, mean over ranks
      dp.all_reduce(span(per, 2), span(per, 2), ReduceOp::avg).wait();
      if (lead) {
        std::printf("%-6d %9.1f (%5.1f..%6.1f) %8.2fx %14s %14s %8.3f %12s %12s %9.1f %9.0f\n",
                    r.stage,
                    med * 1e3, *std::min_element(r.step_s.begin(), r.step_s.end()) * 1e3,
                    *std::max_element(r.step_s.begin(), r.step_s.end()) * 1e3, med / t0,
                    format_bytes(static_cast<std::uint64_t>(sent)).c_str(),
                    format_bytes(static_cast<std::uint64_t>(theory)).c_str(), sent / theory,
                    format_bytes(static_cast<std::uint64_t>(peak)).c_str(),
                    format_bytes(static_cast<std::uint64_t>(pred.total())).c_str(), per[0] * 1e3,
                    per[1]);
      }
      js << (i ? ", " : "") << "{\"stage\": " << r.stage << ", \"step_ms\": " << med * 1e3
         << ", \"vs_stage0\": " << med / t0 << ", \"sent_bytes_per_step\": " << sent
         << ", \"theory_bytes_per_step\": " << theory << ", \"peak_bytes\": " << peak
         << ", \"model_state_prediction_bytes\": " << pred.total()
         << ", \"cpu_ms_per_step\": " << per[0] * 1e3 << ", \"faults_per_step\": " << per[1] << "}";
    }
    js << "]}";
    if (lead) std::printf("%s\n", js.str().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_zero: %s\n", e.what());
    return 1;
  }
}
