// Shared checks of the model-parallel tests (pipeline stages, tensor-parallel parts): a parallel
// run and its reference stepped side by side (losses and gradient norms within 1e-6), and
// checkpoints moved between layouts of one axis (masters and moments bitwise, next loss within
// 1e-6).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "framework/checkpoint/naming.hpp"
#include "tests/dist/engine/test_resume_fixture.hpp"

namespace strata::test {

struct StepAgreement {
  double worst_loss = 0, worst_norm = 0;  // relative
};

// `steps` steps of `run` and `ref`; every loss within 1e-6 relative, every gradient norm within
// `norm_tolerance` relative (1e-6 by default).
inline StepAgreement step_side_by_side(parallel::DataParallelEngine& run, BatchFeed& feed,
                                       parallel::DataParallelEngine& ref, BatchFeed& ref_feed,
                                       int steps, double norm_tolerance = 1e-6) {
  StepAgreement out;
  for (int s = 0; s < steps; ++s) {
    const auto a = run.train_step(std::ref(feed));
    const auto r = ref.train_step(std::ref(ref_feed));
    out.worst_loss = std::max(out.worst_loss, std::abs(a.loss - r.loss) / r.loss);
    out.worst_norm = std::max(out.worst_norm, std::abs(a.result.grad_norm - r.result.grad_norm) /
                                                  r.result.grad_norm);
    EXPECT_NEAR(a.loss, r.loss, 1e-6 * r.loss) << "step " << s;
    EXPECT_NEAR(a.result.grad_norm, r.result.grad_norm, norm_tolerance * r.result.grad_norm)
        << "step " << s;
  }
  return out;
}

// Every parameter by global name (which: 0 masters, 1/2 moments) on every rank.
using WholeModel = std::function<std::map<std::string, std::vector<float>>(parallel::Training&, int)>;

// For each ordered pair of `layouts` (sizes of one axis): spec(size) trained 3 steps at ZeRO 2 and
// saved, then loaded into spec(other size) at ZeRO 1 — masters and moments bitwise, and the next
// step's loss within 1e-6 of the run that went on (same global batch: 2 rows per rank). With
// size_of, a layout is a code that spec reads and size_of(code) is its axis size.
inline void expect_checkpoints_move(const std::vector<int>& layouts, const std::string& tag,
                                    const std::function<JobSpec(int size, int zero)>& spec,
                                    const WholeModel& whole, int vocab,
                                    const std::function<int(int)>& size_of = {}) {
  const auto size = [&](int layout) { return size_of ? size_of(layout) : layout; };
  const auto& w = world();
  SharedTempDir tmp(w, tag);
  const std::string tokens = write_tokens(w, tmp.sub("train.tok"), vocab, 1601);
  const int global_rows = 2 * w.size();
  for (int from : layouts)
    for (int to : layouts) {
      if (from == to) continue;
      SCOPED_TRACE(fmt::format("{} {} -> {}", tag, from, to));
      const std::string root = tmp.sub(fmt::format("ck_{}_{}", from, to));
      JobSpec save_spec = spec(from, 2);
      save_spec.tokens = tokens;
      save_spec.micro = global_rows / (w.size() / size(from));
      save_spec.ckpt.root = root;
      std::map<std::string, std::vector<float>> master, m, v;
      double next_loss = 0;
      {
        Job a(w, save_spec);
        for (int s = 0; s < 3; ++s) a.train_step();
        a.save();
        master = whole(*a.r->training, 0);
        m = whole(*a.r->training, 1);
        v = whole(*a.r->training, 2);
        next_loss = a.train_step();
      }
      JobSpec load_spec = spec(to, 1);
      load_spec.tokens = tokens;
      load_spec.micro = global_rows / (w.size() / size(to));
      Job b(w, load_spec);
      b.scramble();
      b.apply(b.ck->load(checkpoint::join_path(root, checkpoint::step_dir_name(3))));
      EXPECT_TRUE(whole(*b.r->training, 0) == master) << "masters differ";
      EXPECT_TRUE(whole(*b.r->training, 1) == m) << "first moments differ";
      EXPECT_TRUE(whole(*b.r->training, 2) == v) << "second moments differ";
      const double loss = b.train_step();
      EXPECT_LT(std::abs(loss - next_loss) / next_loss, 1e-6) << loss << " vs " << next_loss;
    }
}

}  // namespace strata::test
