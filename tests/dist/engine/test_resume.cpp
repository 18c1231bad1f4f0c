// Bit-exact resume: 20 steps (checkpoint at 10) equal a brand-new model, store, trainer,
// engine and sampler that load the step-10 checkpoint and train 10 steps — every loss and the final
// masters and moments bitwise — at ZeRO stages 0-3, fp32 and bf16 (plus fp16 with a moving loss
// scale, SGD momentum, and a background save), on a shuffled token file that crosses epochs;
// also with the optimizer state and gradients offloaded to the host or NVMe (ZeRO 1-3), and with
// the units updated in backward (strata.optimizer_in_backward).
#include <gtest/gtest.h>

#include "tests/dist/engine/test_resume_fixture.hpp"

using namespace strata;
using namespace strata::test;

namespace {
namespace test_resume {  // file-local names, unique in a unity build

struct ResumeCase {
  int stage;
  DType dtype;
  bool sgd = false;
  bool async = false;
  config::OffloadDevice offload = config::OffloadDevice::none;
  bool in_backward = false;  // strata.optimizer_in_backward (no clipping)
};

class BitExactResume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(BitExactResume, TwentyStepsEqualTenSaveLoadTen) {
  const ResumeCase c = GetParam();
  const SingleThreaded one_thread;
  const auto& w = world();
  SharedTempDir tmp(w, "resume");
  JobSpec spec;
  spec.dtype = c.dtype;
  spec.stage = c.stage;
  spec.trainer = trainer_options(c.dtype, c.sgd);
  if (c.in_backward) {
    spec.trainer.step_in_backward = true;
    spec.trainer.max_grad_norm = 0;
  }
  // 50 windows of 16 tokens: the 4..16 rows per step cross epochs, so the shuffle's epoch matters.
  spec.tokens = write_tokens(w, tmp.sub("train.tok"), spec.model.vocab_size, 801);
  const int steps = 20, half = 10;

  spec.ckpt.root = tmp.sub("ck");
  spec.offload = c.offload;
  spec.swap = tmp.sub("swap");
  spec.ckpt.async = c.async;
  // The uninterrupted run: a checkpoint at step 10 must not disturb it (nor, saved in the
  // background, be disturbed by the steps that follow while it is written).
  std::vector<double> straight;
  std::vector<float> master_a, m_a, v_a;
  std::int64_t updates_a = 0;
  float scale_a = 0;
  {
    Job a(w, spec);
    EXPECT_FALSE(a.resume("auto"));  // nothing saved yet: start fresh
    for (int s = 0; s < half; ++s) straight.push_back(a.train_step());
    a.save();
    for (int s = half; s < steps; ++s) straight.push_back(a.train_step());
    a.ck->wait();
    master_a = a.gather(0);
    m_a = a.gather(1);
    if (!c.sgd) v_a = a.gather(2);
    updates_a = a.r->trainer.updates();
    scale_a = a.r->trainer.loss_scale();
  }
  Job r(w, spec);  // brand-new objects
  r.scramble();    // so that anything the load leaves out shows
  ASSERT_TRUE(r.resume("auto"));
  EXPECT_EQ(r.step, half);
  std::vector<double> resumed;
  for (int s = half; s < steps; ++s) resumed.push_back(r.train_step());
  for (int s = half; s < steps; ++s)
    EXPECT_EQ(resumed[s - half], straight[s]) << "step " << s + 1 << " after resuming at " << half;
  EXPECT_TRUE(r.gather(0) == master_a) << "fp32 masters differ after 20 steps";
  EXPECT_TRUE(r.gather(1) == m_a) << "first moments differ after 20 steps";
  if (!c.sgd) {
    EXPECT_TRUE(r.gather(2) == v_a) << "second moments differ after 20 steps";
  }
  EXPECT_EQ(r.r->trainer.updates(), updates_a);
  EXPECT_EQ(r.r->trainer.loss_scale(), scale_a);
}

std::string case_name(const ::testing::TestParamInfo<ResumeCase>& i) {
  return "stage" + std::to_string(i.param.stage) + "_" + std::string(dtype_name(i.param.dtype)) +
         (i.param.sgd ? "_sgd" : "") + (i.param.async ? "_async" : "") +
         (i.param.offload == config::OffloadDevice::none
              ? ""
              : "_offload_" + std::string(config::to_string(i.param.offload))) +
         (i.param.in_backward ? "_in_backward" : "");
}

INSTANTIATE_TEST_SUITE_P(Stages, BitExactResume,
                         ::testing::Values(ResumeCase{0, DType::f32}, ResumeCase{1, DType::f32},
                                           ResumeCase{2, DType::f32}, ResumeCase{3, DType::f32},
                                           ResumeCase{0, DType::bf16}, ResumeCase{1, DType::bf16},
                                           ResumeCase{2, DType::bf16}, ResumeCase{3, DType::bf16},
                                           ResumeCase{2, DType::f16},
                                           ResumeCase{3, DType::f32, true},
                                           ResumeCase{1, DType::bf16, false, true},
                                           ResumeCase{3, DType::f32, false, true},
                                           ResumeCase{1, DType::bf16, false, false,
                                                      config::OffloadDevice::nvme},
                                           ResumeCase{2, DType::f32, false, false,
                                                      config::OffloadDevice::cpu},
                                           ResumeCase{3, DType::bf16, false, false,
                                                      config::OffloadDevice::nvme},
                                           ResumeCase{1, DType::f32, false, false,
                                                      config::OffloadDevice::none, true},
                                           ResumeCase{3, DType::bf16, false, false,
                                                      config::OffloadDevice::nvme, true}),
                         case_name);

}  // namespace test_resume
}  // namespace
