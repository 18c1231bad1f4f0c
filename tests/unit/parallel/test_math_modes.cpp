// A job's config sets the process's math modes (framework/backend/math_mode.hpp) when its Training
// is built: strata.allow_tf32 and strata.allow_rounded_attention, which the CUDA kernels read at
// each call. A later job with the defaults turns them off again. On the CPU the modes change no
// result; their effect on a GPU is tested by tests/cuda_emu/test_attention.cpp and
// GptCuda.cuda_RoundedAttentionTracksTheSplitFormAndRepeats.
#include <gtest/gtest.h>

#include "framework/backend/math_mode.hpp"
#include "tests/unit/plan/plan_test_util.hpp"

namespace strata {
namespace {
namespace test_math_modes {

// plan_test's small GPT on the CPU with `sets` applied, its Training built.
void build(const std::vector<std::string>& sets) {
  const config::Config cfg = plan_test::gpt_config(sets);
  nn::Gpt model(train::gpt_config(cfg));
  parallel::Training job(cfg, plan_test::one_rank(), model);
}

TEST(MathModes, ATrainingSetsThemFromItsConfig) {
  const MathModeGuard restore(allow_tf32(), allow_rounded_attention());
  build({"strata.allow_rounded_attention=true"});
  EXPECT_FALSE(allow_tf32());
  EXPECT_TRUE(allow_rounded_attention());
  build({"strata.allow_tf32=true"});
  EXPECT_TRUE(allow_tf32());
  EXPECT_FALSE(allow_rounded_attention());
  build({});  // the defaults turn both off again
  EXPECT_FALSE(allow_tf32());
  EXPECT_FALSE(allow_rounded_attention());
}

TEST(MathModes, TheGuardRestoresThePreviousModes) {
  set_allow_tf32(false);
  set_allow_rounded_attention(true);
  {
    const MathModeGuard g(true, false);
    EXPECT_TRUE(allow_tf32());
    EXPECT_FALSE(allow_rounded_attention());
  }
  EXPECT_FALSE(allow_tf32());
  EXPECT_TRUE(allow_rounded_attention());
  set_allow_rounded_attention(false);
}

}  // namespace test_math_modes
}  // namespace
}  // namespace strata
