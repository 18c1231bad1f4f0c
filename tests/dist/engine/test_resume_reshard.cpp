// Resharding: a checkpoint written at one dp size and ZeRO stage loads at any other — the
// loaded fp32 masters and moments equal the saved ones bitwise (padding stripped) and the next
// step's loss matches the run that never stopped (same global batch, within 1e-6).
#include <gtest/gtest.h>

#include <cmath>

#include "tests/dist/engine/test_resume_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {

constexpr int kGlobalRows = 12;  // per step, whatever the dp size (divisible by 1, 2, 3, 4)
constexpr int kSteps = 3;

struct Saved {
  std::vector<float> master, m, v;
  double next_loss = 0;  // the loss of step kSteps + 1 without interruption
};

JobSpec base_spec(const std::string& tokens, DType dt) {
  JobSpec s;
  s.tokens = tokens;
  s.dtype = dt;
  s.trainer = trainer_options(dt);
  s.accum = 1;
  return s;
}

// Trains kSteps on group g at `stage`, saves under root, then one more step.
Saved train_and_save(const parallel::Group& g, JobSpec spec, int stage, const std::string& root) {
  spec.stage = stage;
  spec.micro = kGlobalRows / g.size();
  spec.ckpt.root = root;
  Job j(g, spec);
  for (int s = 0; s < kSteps; ++s) j.train_step();
  j.save();
  Saved out{j.gather(0), j.gather(1), j.gather(2), 0};
  out.next_loss = j.train_step();
  return out;
}

// Loads step_dir on group g at `stage` into brand-new, scrambled objects and checks them.
void load_and_check(const parallel::Group& g, JobSpec spec, int stage, const std::string& step_dir,
                    const Saved& want, const std::string& what) {
  spec.stage = stage;
  spec.micro = kGlobalRows / g.size();
  Job j(g, spec);
  j.scramble();
  j.apply(j.ck->load(step_dir));
  EXPECT_EQ(j.step, kSteps) << what;
  EXPECT_TRUE(j.gather(0) == want.master) << what << ": fp32 masters differ";
  EXPECT_TRUE(j.gather(1) == want.m) << what << ": exp_avg differs";
  EXPECT_TRUE(j.gather(2) == want.v) << what << ": exp_avg_sq differs";
  const double loss = j.train_step();
  EXPECT_LT(std::abs(loss - want.next_loss) / want.next_loss, 1e-6)
      << what << ": next loss " << loss << " vs uninterrupted " << want.next_loss;
}

void broadcast_floats(const parallel::Group& g, std::vector<float>& v) {
  g.broadcast(parallel::span(v.data(), v.size()), 0).wait();
}

TEST(ResumeReshard, SaveOnAllRanksStage3LoadOnSmallerGroups) {
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs >= 2 ranks";
  SharedTempDir tmp(w, "reshard");
  const JobSpec spec = base_spec(write_tokens(w, tmp.sub("t.tok"), 64, 2001), DType::f32);
  const Saved saved = train_and_save(w, spec, 3, tmp.sub("ck"));
  const std::string step_dir = tmp.sub("ck") + "/step_00000003";
  // Pairs (dp 2) at stage 1; then ranks 0-2 (dp 3) at stage 2 and a rank 3 alone at stage 0.
  const parallel::Group pairs = w.split(w.rank() / 2, w.rank(), "pairs");
  load_and_check(pairs, spec, pairs.size() > 1 ? 1 : 0, step_dir, saved,
                 fmt::format("dp {} (saved on dp {} stage 3)", pairs.size(), w.size()));
  const parallel::Group threes = w.split(w.rank() < 3 ? 0 : 1, w.rank(), "threes");
  load_and_check(threes, spec, threes.size() > 1 ? 2 : 0, step_dir, saved,
                 fmt::format("dp {} (saved on dp {} stage 3)", threes.size(), w.size()));
}

TEST(ResumeReshard, SaveOnTwoRanksLoadOnAllRanks) {
  const SingleThreaded one_thread;
  const auto& w = world();
  if (w.size() < 2) GTEST_SKIP() << "needs >= 2 ranks";
  SharedTempDir tmp(w, "reshard_up");
  const JobSpec spec = base_spec(write_tokens(w, tmp.sub("t.tok"), 64, 2001), DType::bf16);
  // Ranks 0-1 save on dp 2 at stage 1 (the others train a group of their own alongside).
  const int color = w.rank() < 2 ? 0 : 1;
  const parallel::Group small = w.split(color, w.rank(), "small");
  Saved saved = train_and_save(small, spec, 1, tmp.sub("ck" + std::to_string(color)));
  broadcast_floats(w, saved.master);
  broadcast_floats(w, saved.m);
  broadcast_floats(w, saved.v);
  w.broadcast(parallel::span(&saved.next_loss, 1), 0).wait();
  const std::string step_dir = tmp.sub("ck0") + "/step_00000003";
  for (int stage : {3, 0})
    load_and_check(w, spec, stage, step_dir, saved,
                   fmt::format("dp {} stage {} (saved on dp 2 stage 1)", w.size(), stage));
}

}  // namespace
