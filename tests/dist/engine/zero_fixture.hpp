// Shared pieces of the multi-rank engine tests: a tiny GPT, deterministic global batches, and a
// replica (model + store + trainer + engine) at a given ZeRO stage.
#pragma once

#include <cmath>
#include <vector>

#include "framework/core/rng.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/nn/param_store.hpp"
#include "framework/train/trainer.hpp"
#include "parallel/engine/dp_engine.hpp"

namespace strata::test {

inline nn::GptConfig tiny_gpt() {
  nn::GptConfig c;
  c.vocab_size = 64;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  return c;
}

// Global row `key`: a deterministic token window with some structure.
inline void global_row(std::int64_t key, int T, int V, std::int32_t* in, std::int32_t* tgt) {
  Philox r(static_cast<std::uint64_t>(key) * 7919 + 1);
  std::int32_t t = static_cast<std::int32_t>(r.next_below(V));
  for (int i = 0; i <= T; ++i) {
    if (i < T) in[i] = t;
    if (i > 0) tgt[i - 1] = t;
    t = r.next_uniform() < 0.6f ? (t + 5) % V : static_cast<std::int32_t>(r.next_below(V));
  }
}

// Feeds micro-batches as the sampler would: the k-th micro-batch over all dp ranks covers global
// rows k*N*b .. k*N*b + N*b - 1 and rank r takes rows r*b .. r*b + b - 1 of it.
struct BatchFeed {
  int N, rank, b, T, V;
  std::int64_t calls = 0;
  void operator()(std::int32_t* in, std::int32_t* tgt) {
    for (int i = 0; i < b; ++i)
      global_row(calls * N * b + rank * b + i, T, V, in + i * T, tgt + i * T);
    ++calls;
  }
};

inline parallel::EngineOptions engine_options(int micro, int accum, int T, int stage,
                                              std::int64_t bucket, bool overlap) {
  parallel::EngineOptions e;
  e.micro_batch = micro;
  e.accumulation = accum;
  e.seq_len = T;
  e.zero.stage = stage;
  e.zero.bucket_elements = bucket;
  e.zero.overlap = overlap;
  return e;
}

struct Replica {
  nn::Gpt gpt;
  nn::ParamStore store;
  train::Trainer trainer;
  parallel::DataParallelEngine engine;
  Replica(const nn::GptConfig& c, const train::TrainerOptions& o, const parallel::Group& dp,
          int micro, int accum, int stage, DType dt = DType::f32, std::int64_t bucket = 1000,
          bool overlap = true, bool checkpointing = true, TensorOptions mem = {})
      : gpt(c),
        store(gpt.units(), parallel::ZeroHooks::store_options(
                               nn::ParamStoreOptions{dt, dt,
                                                     train::state_pad_multiple(o, stage == 0 ? 1 : dp.size()),
                                                     mem},
                               stage, dp)),
        // initialise before the trainer copies values into its master weights
        trainer((store.initialize(5), store), o,
                stage > 0 ? parallel::dp_reductions(dp) : train::ShardReductions{}),
        engine(dp, gpt, store, trainer, engine_options(micro, accum, c.block_size, stage, bucket, overlap),
               context(mem)) {
    gpt.set_checkpointing(checkpointing);
  }
  static nn::Context context(const TensorOptions& mem) {
    nn::Context ctx;
    ctx.activations.ledger = mem.ledger;
    ctx.workspace.ledger = mem.ledger;
    return ctx;
  }
  // The full fp32 master weights of every unit, gathered over dp (padding stripped).
  std::vector<float> master_weights() {
    const auto& dp = engine.dp();
    const int n = store.options().shard_count;
    std::vector<float> out;
    for (std::size_t u = 0; u < store.num_units(); ++u) {
      const auto& l = store.layout(u);
      std::vector<float> mine = trainer.master_shard(u).to_vector();
      std::vector<float> full(static_cast<std::size_t>(l.padded));
      if (n == 1) full = mine;
      else dp.all_gather(parallel::span(mine.data(), mine.size()), parallel::span(full.data(), full.size())).wait();
      out.insert(out.end(), full.begin(), full.begin() + l.numel);
    }
    return out;
  }
};

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

inline double rel_max(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::abs(static_cast<double>(a[i]) - b[i]));
    den = std::max(den, std::abs(static_cast<double>(b[i])));
  }
  return num / den;
}

}  // namespace strata::test
