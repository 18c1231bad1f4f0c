// Data-parallel overlap: the fraction of the gradient all-reduce (ZeRO stage 0 buckets) hidden
// behind backward. Every rank times, interleaved, with the slowest rank's time per iteration:
//   backward  backward alone (no hooks: what dp = 1 does; every rank computes at once, so the
//             cores are as busy as in the real step)
//   comm      the same bucketed all-reduces of the gradient buffers, posted in backward's order
//             with nothing else running, until the last completes
//   overlap   backward with overlap_comm on (each unit's buckets posted as its backward ends)
//             through finish_gradients (every reduction complete)
//   serial    the same with overlap_comm off (all posted after backward)
// hidden = (backward + comm - step) / comm, from the medians, for overlap and for serial.
//
//   mpirun -np 2 build/release/bench/dp/bench_dp [--layers 4 --embd 512 --seq 64 --micro 2]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/common/stats.hpp"
#include "framework/backend/cpu/kernels.hpp"
#include "framework/core/rng.hpp"
#include "framework/memory/size.hpp"
#include "bench/common/gpt_options.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/zero/zero_hooks.hpp"

using namespace strata;
using namespace strata::parallel;
using Clock = std::chrono::steady_clock;

namespace {

using bench::median;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Data-parallel gradient all-reduce hidden behind backward (run under mpirun)"};
  nn::GptConfig gc;
  gc.n_layer = 4;
  gc.n_embd = 512;
  gc.n_head = 8;
  gc.block_size = 64;
  gc.vocab_size = 256;
  int micro = 2, iters = 10, warmup = 2, threads = 0;
  std::int64_t bucket = 500'000'000;
  bench::add_gpt_shape_options(app, gc);
  app.add_option("--micro", micro, "micro-batch per rank");
  app.add_option("--iters", iters, "timed iterations (each runs all four measurements)");
  app.add_option("--warmup", warmup, "untimed iterations first");
  app.add_option("--threads", threads, "kernel threads per rank (default: cores / ranks)");
  app.add_option("--bucket", bucket, "reduce_bucket_size (elements)");
  CLI11_PARSE(app, argc, argv);
  try {
    World world;
    const Group& dp = world.group();
    const int N = dp.size(), rank = dp.rank();
    const bool lead = rank == 0;
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu::set_num_threads(threads > 0 ? threads : std::max(1, hw / N));

    nn::Gpt gpt(gc);
    nn::ParamStore store(gpt.units(),
                         ZeroHooks::store_options(nn::ParamStoreOptions{}, 0, dp));
    store.initialize(1234);
    ZeroOptions zo;
    zo.stage = 0;
    zo.bucket_elements = bucket;
    zo.overlap = true;
    ZeroHooks overlap(store, dp, zo);
    zo.overlap = false;
    ZeroHooks serial(store, dp, zo);

    const int T = gc.block_size;
    Philox rng(77 + static_cast<std::uint64_t>(rank));
    std::vector<std::int32_t> in(static_cast<std::size_t>(micro) * T), tgt(in.size());
    for (auto& x : in) x = static_cast<std::int32_t>(rng.next_below(gc.vocab_size));
    for (auto& x : tgt) x = static_cast<std::int32_t>(rng.next_below(gc.vocab_size));

    // Units in the order backward finishes them: ln_f (last), blocks L..1, embeddings (0).
    std::vector<std::size_t> order;
    for (std::size_t u = store.num_units(); u-- > 1;) order.push_back(u);
    order.push_back(0);
    double bytes = 0;
    for (std::size_t u = 0; u < store.num_units(); ++u)
      bytes += static_cast<double>(store.layout(u).numel) * 4.0;

    auto slowest = [&](double t) {
      dp.all_reduce(span(&t, 1), span(&t, 1), ReduceOp::max).wait();
      return t;
    };
    // One timed backward (after an untimed forward) through `hooks` (null: none).
    auto backward = [&](ZeroHooks* hooks) {
      nn::Context ctx;
      ctx.hooks = hooks;
      if (hooks) hooks->set_sync(true);
      gpt.forward(ctx, in.data(), tgt.data(), micro, T);
      dp.barrier().wait();
      const auto t0 = Clock::now();
      gpt.backward(ctx, 1.0f);
      if (hooks) {
        hooks->end_backward();
        hooks->finish_gradients();
      }
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      store.zero_grads();
      return slowest(t);
    };
    auto comm = [&] {
      dp.barrier().wait();
      const auto t0 = Clock::now();
      std::vector<Work> works;
      for (std::size_t u : order) {
        const Tensor& g = store.grads(u);
        const std::int64_t n = store.layout(u).numel;
        for (std::int64_t lo = 0; lo < n; lo += bucket)
          works.push_back(dp.all_reduce(g.slice(0, lo, std::min(n, lo + bucket)), ReduceOp::avg));
      }
      for (auto& w : works) w.wait();
      return slowest(std::chrono::duration<double>(Clock::now() - t0).count());
    };

    std::vector<double> tb, tc, to, ts;
    for (int it = 0; it < warmup + iters; ++it) {
      // Rotate the order of the four measurements between iterations.
      for (int k = 0; k < 4; ++k) {
        const int m = (k + it) % 4;
        const double t = m == 0 ? backward(nullptr)
                         : m == 1 ? comm()
                         : m == 2 ? backward(&overlap)
                                  : backward(&serial);
        if (it < warmup) continue;
        (m == 0 ? tb : m == 1 ? tc : m == 2 ? to : ts).push_back(t);
      }
    }
    const double b = median(tb), c = median(tc), o = median(to), s = median(ts);
    const double hidden = (b + c - o) / c, hidden_serial = (b + c - s) / c;
    // The same per iteration (its four times were taken seconds apart), then the median: less
    // sensitive to load that changes during the run.
    std::vector<double> hi, hs;
    for (std::size_t i = 0; i < tb.size(); ++i) {
      hi.push_back((tb[i] + tc[i] - to[i]) / tc[i]);
      hs.push_back((tb[i] + tc[i] - ts[i]) / tc[i]);
    }
    if (lead) {
      std::printf("DP overlap benchmark: %d ranks over %s, %d kernel threads per rank; GPT L=%d "
                  "d=%d heads=%d T=%d vocab=%d, micro-batch %d; all-reduce of %s gradients "
                  "(bucket %lld elements); %d iterations, medians of the slowest rank "
                  "(min..max)\n",
                  N, std::string(dp.transport()).c_str(), cpu::num_threads(), gc.n_layer,
                  gc.n_embd, gc.n_head, T, gc.vocab_size, micro,
                  format_bytes(static_cast<std::uint64_t>(bytes)).c_str(),
                  static_cast<long long>(bucket), iters);
      auto row = [](const char* what, const std::vector<double>& v) {
        std::printf("  %-34s %8.1f ms (%.1f..%.1f)\n", what, median(v) * 1e3,
                    *std::min_element(v.begin(), v.end()) * 1e3,
                    *std::max_element(v.begin(), v.end()) * 1e3);
      };
      row("backward alone (t_backward)", tb);
      row("all-reduces alone (t_comm)", tc);
      row("backward + comm, overlap_comm on", to);
      row("backward + comm, overlap_comm off", ts);
      std::printf("  hidden fraction of the all-reduce: overlap on %.2f, overlap off %.2f "
                  "(from the medians)\n",
                  hidden, hidden_serial);
      const auto [hi_min, hi_max] = std::minmax_element(hi.begin(), hi.end());
      const auto [hs_min, hs_max] = std::minmax_element(hs.begin(), hs.end());
      std::printf("  per-iteration median: overlap on %.2f (%.2f..%.2f), overlap off %.2f "
                  "(%.2f..%.2f)\n",
                  median(hi), *hi_min, *hi_max, median(hs), *hs_min, *hs_max);
      std::printf("{\"bench\": \"dp\", \"ranks\": %d, \"backward_ms\": %.3f, \"comm_ms\": %.3f, "
                  "\"overlap_ms\": %.3f, \"serial_ms\": %.3f, \"hidden\": %.4f, "
                  "\"hidden_serial\": %.4f, \"hidden_per_iter\": %.4f, "
                  "\"hidden_serial_per_iter\": %.4f}\n",
                  N, b * 1e3, c * 1e3, o * 1e3, s * 1e3, hidden, hidden_serial, median(hi),
                  median(hs));
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_dp: %s\n", e.what());
    return 1;
  }
}
