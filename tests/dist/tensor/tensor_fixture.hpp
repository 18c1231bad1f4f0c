// Shared pieces of the tensor-parallel tests: a GPT whose heads split 4 ways, a job config with tp
// parts (Replica builds the model as this rank's part), and the whole model reassembled from the
// parts by each parameter's placement (to compare with a tp = 1 run by global name).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/dist/pipeline/pipeline_fixture.hpp"

namespace strata::test {

inline nn::GptConfig tp_gpt() {
  nn::GptConfig c = tiny_gpt();
  c.n_head = 4;  // head size 8; splits over tp = 2 and 4
  return c;
}

inline config::Config tp_config(const train::TrainerOptions& o, int micro, int accum, int zero,
                                int tp, DType dt = DType::f32) {
  config::Config cfg = job_config(o, micro, accum, zero, dt, 1000, true, true);
  cfg.strata.tensor_parallel_size = tp;
  return cfg;
}

// Every parameter of the model by global name, on every rank: each tensor-parallel part writes
// its slice at the global positions its placement gives (a replicated parameter: part 0 only),
// summed over the tp group (x + 0 is exact). which: 0 masters, 1/2 the moments (by_name).
inline std::map<std::string, std::vector<float>> assemble_tp(parallel::Training& t, int which = 0) {
  const auto mine = by_name(t, which);
  const auto& tp = t.grid().tp();
  std::map<std::string, std::vector<float>> out;
  for (const nn::Parameter* p : t.model().parameters()) {
    const std::vector<float>& part = mine.at(p->name);
    std::vector<float> whole(static_cast<std::size_t>(p->placement.global_shape(p->shape).numel()), 0.0f);
    if (p->placement.split() || tp.rank() == 0)
      p->placement.for_each_run(p->shape, [&](std::int64_t local, std::int64_t global, std::int64_t n) {
        std::copy_n(part.begin() + local, n, whole.begin() + global);
      });
    if (tp.size() > 1)
      tp.all_reduce(parallel::span(whole.data(), whole.size()),
                    parallel::span(whole.data(), whole.size()), parallel::ReduceOp::sum)
          .wait();
    out[p->name] = std::move(whole);
  }
  return out;
}

// Every parameter of the model by global name, on every rank, whatever the tp x pp layout: each
// stage contributes the parameters it holds (a tied copy only from its owner stage), each tp part
// its slice at the global positions its placement gives (a replicated parameter: part 0 only),
// summed over the tp and the pipeline groups (x + 0 is exact). which: 0 masters, 1/2 moments.
inline std::map<std::string, std::vector<float>> assemble_3d(parallel::Training& t, int which = 0) {
  auto mine = by_name(t, which);
  drop_tied_copies(t, mine);
  const auto& tp = t.grid().tp();
  std::map<std::string, std::vector<float>> out;
  for (const nn::Parameter* p : t.model().parameters()) {
    std::vector<float> whole(static_cast<std::size_t>(p->placement.global_shape(p->shape).numel()),
                             0.0f);
    const auto it = mine.find(p->name);
    if (it != mine.end() && (p->placement.split() || tp.rank() == 0))
      p->placement.for_each_run(p->shape, [&](std::int64_t local, std::int64_t global,
                                              std::int64_t n) {
        std::copy_n(it->second.begin() + local, n, whole.begin() + global);
      });
    for (const parallel::Group* g : {&tp, &t.grid().pp()})
      if (g->size() > 1)
        g->all_reduce(parallel::span(whole.data(), whole.size()),
                      parallel::span(whole.data(), whole.size()), parallel::ReduceOp::sum)
            .wait();
    out[p->name] = std::move(whole);
  }
  return out;
}

// The parameters that are not split differ between tensor-parallel parts (bitwise): their names.
inline std::vector<std::string> replicated_mismatches(parallel::Training& t) {
  const auto mine = by_name(t);
  std::vector<std::string> bad;
  for (const nn::Parameter* p : t.model().parameters()) {
    // (With pipeline stages every rank of a tp group holds the same stage's parameters.)
    if (p->placement.split() || !mine.count(p->name)) continue;
    std::vector<float> first = mine.at(p->name);
    t.grid().tp().broadcast(parallel::span(first.data(), first.size()), 0).wait();
    if (first != mine.at(p->name)) bad.push_back(p->name);
  }
  return bad;
}

}  // namespace strata::test
