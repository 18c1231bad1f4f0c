// Shared pieces of the pipeline tests: a GPT deep enough for 4 stages, a test job's config with
// pipeline stages, and a rank's fp32 masters (or optimizer moments) by global parameter name,
// gathered over its dp group, to compare with a pp = 1 run slice by slice.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "tests/dist/engine/zero_fixture.hpp"

namespace strata::test {

inline nn::GptConfig pipe_gpt() {
  nn::GptConfig c = tiny_gpt();
  c.n_layer = 4;
  return c;
}

// The pipeline sizes a world of `world` ranks can run (pp divides the world; pipe_gpt has 4
// layers).
inline std::vector<int> pipeline_sizes(int world) {
  std::vector<int> out;
  for (int pp : {2, 4})
    if (world % pp == 0) out.push_back(pp);
  return out;
}

// job_config (zero_fixture.hpp) with `pp` pipeline stages.
inline config::Config pipe_config(const train::TrainerOptions& o, int micro, int accum, int zero,
                                  int pp, DType dt = DType::f32, bool checkpointing = true) {
  config::Config cfg = job_config(o, micro, accum, zero, dt, 1000, true, checkpointing);
  cfg.strata.pipeline_parallel_size = pp;
  return cfg;
}

// Global parameter name -> its full values, for the parameters this rank's stage holds: which = 0
// the fp32 masters, 1 the first moment, 2 AdamW's second moment.
inline std::map<std::string, std::vector<float>> by_name(parallel::Training& t, int which = 0) {
  const auto& dp = t.dp();
  nn::ParamStore& store = t.store();
  std::map<std::string, std::vector<float>> out;
  for (std::size_t u = 0; u < store.num_units(); ++u) {
    const auto& l = store.layout(u);
    std::vector<float> mine;
    if (which == 0) {
      mine = t.trainer().master_shard(u).to_vector();
    } else {
      auto& s = t.trainer().states().acquire(u);
      mine = s[which == 1 ? 0 : 1].to_vector();  // AdamW's m and v, SGD's momentum
      t.trainer().states().release(u, false);
    }
    std::vector<float> full(static_cast<std::size_t>(l.padded));
    if (store.options().shard_count == 1)
      full = mine;
    else
      dp.all_gather(parallel::span(mine.data(), mine.size()), parallel::span(full.data(), full.size()))
          .wait();
    for (std::size_t i = 0; i < l.params.size(); ++i) {
      const auto a = static_cast<std::size_t>(l.offsets[i]);
      const auto n = static_cast<std::size_t>(l.params[i]->shape.numel());
      out[l.params[i]->name].assign(full.begin() + static_cast<std::ptrdiff_t>(a),
                                    full.begin() + static_cast<std::ptrdiff_t>(a + n));
    }
  }
  return out;
}

// Every parameter of the model by name on every rank, whatever the pipeline layout: each stage
// contributes the parameters it holds (the tied copy only once, from its owner), summed over the
// pipeline group (x + 0 is exact).
// Leaves out of `mine` (by_name of t) the parameters of a tied copy this stage holds but does not
// own (the last stage's wte): its owner stage contributes them.
inline void drop_tied_copies(parallel::Training& t,
                             std::map<std::string, std::vector<float>>& mine) {
  if (const nn::ModelStage* st = t.stage())
    for (const nn::TiedUnit& tu : st->tied_units())
      if (!tu.owner)
        for (const nn::Parameter* p : t.store().layout(static_cast<std::size_t>(tu.unit)).params)
          mine.erase(p->name);
}

inline std::map<std::string, std::vector<float>> whole_model(parallel::Training& t, int which = 0) {
  auto mine = by_name(t, which);
  drop_tied_copies(t, mine);
  std::map<std::string, std::vector<float>> out;
  for (const nn::Parameter* p : t.model().parameters()) {
    std::vector<float> v(static_cast<std::size_t>(p->shape.numel()), 0.0f);
    if (auto it = mine.find(p->name); it != mine.end()) v = it->second;
    if (t.grid().pp_size() > 1)
      t.grid().pp().all_reduce(parallel::span(v.data(), v.size()), parallel::span(v.data(), v.size()),
                               parallel::ReduceOp::sum).wait();
    out[p->name] = std::move(v);
  }
  return out;
}

// Parameter by parameter (slice by slice), `got` (one stage's) against `want` (every parameter):
// the worst relative L2 difference and its parameter, except for the key third of each attention
// c_attn.bias. Its gradient is zero in exact arithmetic (q . b_k is the same for every key and
// softmax ignores a constant), so AdamW, which divides by sqrt(v), moves it by +-lr times
// round-off noise whose sign depends on the summation order: it is compared by its largest
// absolute difference instead.
struct WeightComparison {
  double worst_rel_l2 = 0;
  std::string worst;
  double key_bias_abs = 0;
};

inline WeightComparison compare_weights(const std::map<std::string, std::vector<float>>& got,
                                        const std::map<std::string, std::vector<float>>& want,
                                        int n_embd) {
  WeightComparison out;
  const std::string key_bias = "attn.c_attn.bias";
  const auto C = static_cast<std::ptrdiff_t>(n_embd);
  for (const auto& [name, v] : got) {
    const std::vector<float>& r = want.at(name);
    std::vector<float> a = v, b = r;
    if (name.size() > key_bias.size() && name.ends_with(key_bias)) {
      for (std::ptrdiff_t i = C; i < 2 * C; ++i)
        out.key_bias_abs = std::max(out.key_bias_abs, static_cast<double>(std::abs(v[static_cast<std::size_t>(i)] - r[static_cast<std::size_t>(i)])));
      a.erase(a.begin() + C, a.begin() + 2 * C);
      b.erase(b.begin() + C, b.begin() + 2 * C);
    }
    const double d = rel_l2(a, b);
    if (d >= out.worst_rel_l2) {
      out.worst_rel_l2 = d;
      out.worst = name;
    }
  }
  return out;
}

}  // namespace strata::test
