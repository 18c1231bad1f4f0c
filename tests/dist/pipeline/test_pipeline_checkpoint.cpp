// Checkpoints under pipeline parallelism: each stage's ranks save their slices of the stage's
// units, every parameter once under its global name (the last stage's copy of the tied embedding
// is not saved), the manifest records the layout; a run resumed from step 5 equals the run that
// never stopped, bitwise (losses, masters, moments) at every ZeRO stage; and a checkpoint moves
// between pipeline layouts (pp 2 <-> pp 1, pp 4) with every master and moment bitwise and the next
// loss within 1e-6 of the uninterrupted run.
#include <gtest/gtest.h>

#include "framework/checkpoint/reader.hpp"
#include "framework/checkpoint/naming.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/pipeline/pipeline_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {

JobSpec pipe_spec(const std::string& tokens, int pp, int zero, DType dt = DType::f32) {
  JobSpec s;
  s.model = pipe_gpt();
  s.tokens = tokens;
  s.dtype = dt;
  s.trainer = trainer_options(dt);
  s.stage = zero;
  s.pp = pp;
  s.micro = 2;
  s.accum = 4;
  return s;
}

struct ResumeCase {
  int zero;
  DType dtype = DType::f32;
  bool async = false;
};

class PipelineResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(PipelineResume, TenStepsEqualFiveSaveLoadFive) {
  const ResumeCase c = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  SharedTempDir tmp(w, "pipe_resume");
  const std::string tokens = write_tokens(w, tmp.sub("train.tok"), pipe_gpt().vocab_size, 1601);
  for (int pp : {2, 4}) {
    if (w.size() % pp != 0) continue;
    SCOPED_TRACE(fmt::format("pp {} x dp {}", pp, w.size() / pp));
    JobSpec spec = pipe_spec(tokens, pp, c.zero, c.dtype);
    spec.ckpt.root = tmp.sub("ck" + std::to_string(pp));
    spec.ckpt.async = c.async;
    std::vector<double> straight;
    std::map<std::string, std::vector<float>> master, m, v;
    {
      Job a(w, spec);
      EXPECT_FALSE(a.resume("auto"));
      for (int s = 0; s < 5; ++s) straight.push_back(a.train_step());
      a.save();
      for (int s = 5; s < 10; ++s) straight.push_back(a.train_step());
      a.ck->wait();
      master = by_name(*a.r->training, 0);
      m = by_name(*a.r->training, 1);
      v = by_name(*a.r->training, 2);
    }
    Job r(w, spec);
    r.scramble();
    ASSERT_TRUE(r.resume("auto"));
    EXPECT_EQ(r.step, 5);
    for (int s = 5; s < 10; ++s) EXPECT_EQ(r.train_step(), straight[static_cast<std::size_t>(s)]) << "step " << s + 1;
    EXPECT_TRUE(by_name(*r.r->training, 0) == master) << "masters differ";
    EXPECT_TRUE(by_name(*r.r->training, 1) == m) << "first moments differ";
    EXPECT_TRUE(by_name(*r.r->training, 2) == v) << "second moments differ";

    // What the files hold: the layout, and each parameter once (wte from the first stage only).
    if (w.rank() == 0) {
      checkpoint::CheckpointReader reader(
          checkpoint::join_path(spec.ckpt.root, checkpoint::step_dir_name(5)));
      const auto& man = reader.manifest();
      EXPECT_EQ(man.layout, (checkpoint::WorldLayout{w.size(), w.size() / pp, 1, pp}));
      EXPECT_EQ(man.params.size(), r.r->gpt.parameters().size());
      const parallel::Grid& grid = r.r->training->grid();
      for (const auto& p : man.params)
        for (const auto& sl : p.slices) {
          const int rank = std::stoi(sl.file.substr(sl.file.find('_') + 1));
          if (p.name == "transformer.wte.weight") {
            EXPECT_EQ(grid.coords_of(rank).pp, 0) << sl.file << " holds a copy of wte";
          }
        }
    }
  }
}

std::string resume_name(const ::testing::TestParamInfo<ResumeCase>& i) {
  return "zero" + std::to_string(i.param.zero) + "_" + std::string(dtype_name(i.param.dtype)) +
         (i.param.async ? "_async" : "");
}

INSTANTIATE_TEST_SUITE_P(Stages, PipelineResume,
                         ::testing::Values(ResumeCase{0}, ResumeCase{1}, ResumeCase{2},
                                           ResumeCase{3}, ResumeCase{1, DType::bf16},
                                           ResumeCase{3, DType::f16, true}),
                         resume_name);

// Saved with one pipeline layout, loaded with another: masters and moments bitwise, and the next
// step's loss like the run that never stopped (same global batch).
TEST(PipelineReshard, CheckpointsMoveBetweenPipelineLayouts) {
  const SingleThreaded one_thread;
  std::vector<int> layouts{1, 2};
  if (world().size() % 4 == 0) layouts.push_back(4);
  expect_checkpoints_move(
      layouts, "pipe_reshard", [](int pp, int zero) { return pipe_spec("", pp, zero); },
      [](parallel::Training& t, int which) { return whole_model(t, which); }, pipe_gpt().vocab_size);
}

}  // namespace
