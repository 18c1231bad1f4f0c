// Checkpoints under tensor parallelism: each part saves its split parameters as slices of the whole
// parameters (by placement: a range, or a hyperslab of rows for a parameter split along a later
// dimension) and part 0 the replicated ones, so the files hold whole parameters
// under their global names and shapes and the manifest records tp; a tp = 2 run resumed from step
// 3 equals the run that never stopped, bitwise (also with sequence parallelism); and a checkpoint
// moves between tensor layouts (tp 2 <-> tp 1, tp 4, with a ZeRO-stage change; with and without
// sequence parallelism, whose checkpoints are the same) with every master and moment bitwise and
// the next loss within 1e-6 of the uninterrupted run.
#include <gtest/gtest.h>

#include "framework/checkpoint/naming.hpp"
#include "framework/checkpoint/reader.hpp"
#include "tests/dist/engine/model_parallel_fixture.hpp"
#include "tests/dist/tensor/tensor_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {

JobSpec tp_spec(const std::string& tokens, int tp, int zero) {
  JobSpec s;
  s.model = tp_gpt();
  s.tokens = tokens;
  s.trainer = trainer_options(DType::f32);
  s.stage = zero;
  s.tp = tp;
  s.micro = 2;
  s.accum = 2;
  return s;
}

TEST(TensorResume, SixStepsEqualThreeSaveLoadThree) {
  const SingleThreaded one_thread;
  const auto& w = world();
  SharedTempDir tmp(w, "tp_resume");
  const std::string tokens = write_tokens(w, tmp.sub("train.tok"), tp_gpt().vocab_size, 1601);
  for (const auto& [zero, sp] : {std::pair{1, false}, std::pair{3, false}, std::pair{1, true}}) {
    SCOPED_TRACE(fmt::format("tp 2 x dp {}, ZeRO {}{}", w.size() / 2, zero,
                             sp ? ", sequence parallel" : ""));
    JobSpec spec = tp_spec(tokens, 2, zero);
    spec.sp = sp;
    spec.ckpt.root = tmp.sub(fmt::format("ck{}{}", zero, sp ? "sp" : ""));
    std::vector<double> straight;
    std::map<std::string, std::vector<float>> master, m, v, saved;
    {
      Job a(w, spec);
      for (int s = 0; s < 3; ++s) straight.push_back(a.train_step());
      a.save();
      saved = assemble_tp(*a.r->training, 0);
      for (int s = 3; s < 6; ++s) straight.push_back(a.train_step());
      master = assemble_tp(*a.r->training, 0);
      m = assemble_tp(*a.r->training, 1);
      v = assemble_tp(*a.r->training, 2);
    }
    Job r(w, spec);
    r.scramble();
    ASSERT_TRUE(r.resume("auto"));
    EXPECT_EQ(r.step, 3);
    for (int s = 3; s < 6; ++s) EXPECT_EQ(r.train_step(), straight[static_cast<std::size_t>(s)]) << "step " << s + 1;
    EXPECT_TRUE(assemble_tp(*r.r->training, 0) == master) << "masters differ";
    EXPECT_TRUE(assemble_tp(*r.r->training, 1) == m) << "first moments differ";
    EXPECT_TRUE(assemble_tp(*r.r->training, 2) == v) << "second moments differ";
    // The files hold whole parameters under their global shapes, and the layout records tp.
    if (w.rank() == 0) {
      checkpoint::CheckpointReader reader(
          checkpoint::join_path(spec.ckpt.root, checkpoint::step_dir_name(3)));
      const auto& man = reader.manifest();
      EXPECT_EQ(man.layout, (checkpoint::WorldLayout{w.size(), w.size() / 2, 2, 1}));
      nn::Gpt whole(tp_gpt());
      EXPECT_EQ(man.params.size(), whole.parameters().size());
      for (const nn::Parameter* p : whole.parameters())
        EXPECT_EQ(reader.read_f32(checkpoint::kParam, p->name), saved.at(p->name)) << p->name;
      // A part's rows of a parameter split along its second dimension (row-parallel c_proj) are
      // hyperslab slices, not a slice per row: at most 3 per rank and kind (a ZeRO range may cut
      // a first and a last row), where one per row would be 32 per part.
      EXPECT_EQ(man.format_version, checkpoint::kManifestFormatVersion);
      bool strided = false;
      for (const auto& pe : man.params) {
        std::map<std::string, int> per_kind;
        for (const auto& sl : pe.slices) {
          ++per_kind[sl.kind];
          strided = strided || sl.run > 0;
        }
        for (const auto& [kind, count] : per_kind)
          EXPECT_LE(count, 3 * w.size()) << kind << " " << pe.name;
      }
      EXPECT_TRUE(strided) << "no hyperslab slice in a tp 2 checkpoint";
    }
  }
}

// Saved with one tensor layout, loaded with another.
TEST(TensorReshard, CheckpointsMoveBetweenTensorLayouts) {
  const SingleThreaded one_thread;
  std::vector<int> layouts{1, 2};
  if (world().size() % 4 == 0) layouts.push_back(4);
  expect_checkpoints_move(
      layouts, "tp_reshard", [](int tp, int zero) { return tp_spec("", tp, zero); },
      [](parallel::Training& t, int which) { return assemble_tp(t, which); }, tp_gpt().vocab_size);
}

// Sequence parallelism changes where activations live, not the parameters: a checkpoint written
// with it loads into a run without it and back: tp 2 without it <-> tp 2 with it (on 2 ranks
// only: the checkpoints' slices do not depend on it, and the 4-rank case would add a minute of
// checkpoint I/O to the suite). A layout code is tp, plus 100 with sequence parallelism.
TEST(TensorReshard, SequenceParallelCheckpointsMoveToAndFromRunsWithout) {
  const SingleThreaded one_thread;
  if (world().size() != 2) GTEST_SKIP() << "runs on 2 ranks";
  const std::vector<int> layouts{2, 102};
  expect_checkpoints_move(
      layouts, "sp_reshard",
      [](int code, int zero) {
        JobSpec s = tp_spec("", code % 100, zero);
        s.sp = code > 100;
        return s;
      },
      [](parallel::Training& t, int which) { return assemble_tp(t, which); }, tp_gpt().vocab_size,
      [](int code) { return code % 100; });
}

}  // namespace
