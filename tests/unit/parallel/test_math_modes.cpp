// A job's config sets the process's math modes (framework/backend/math_mode.hpp) when its Training
// is built: strata.allow_tf32 and strata.allow_rounded_attention, which the CUDA kernels read at
// each call. A later job with the defaults turns them off again. On the CPU the modes change no
// result; their effect on a GPU is tested by tests/cuda_emu/test_attention.cpp and
// GptCuda.cuda_RoundedAttentionTracksTheSplitFormAndRepeats.
#include <gtest/gtest.h>

#include "framework/backend/math_mode.hpp"
#include "framework/config/config.hpp"
#include "framework/nn/gpt.hpp"
#include "framework/train/from_config.hpp"
#include "parallel/comm/init.hpp"
#include "parallel/engine/training.hpp"

namespace strata {
namespace {
namespace test_math_modes {

config::Config small_job(bool tf32, bool rounded) {
  config::json doc = config::json::parse(R"({
    "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
    "strata": {"device": "cpu", "model": {"type": "gpt", "n_layer": 1, "n_head": 2, "n_embd": 16,
                                          "block_size": 8, "vocab_size": 32}}})");
  doc["strata"]["allow_tf32"] = tf32;
  doc["strata"]["allow_rounded_attention"] = rounded;
  config::Config cfg = config::parse_config(doc);
  config::resolve_batch(cfg, 1);
  return cfg;
}

const parallel::Group& one_rank() {
  static const parallel::Group g = [] {
    parallel::InitOptions o;
    o.transport = "local";
    return parallel::init_world(o);
  }();
  return g;
}

void build(const config::Config& cfg) {
  nn::Gpt model(train::gpt_config(cfg));
  parallel::Training job(cfg, one_rank(), model);
}

TEST(MathModes, ATrainingSetsThemFromItsConfig) {
  const MathModeGuard restore(allow_tf32(), allow_rounded_attention());
  build(small_job(false, true));
  EXPECT_FALSE(allow_tf32());
  EXPECT_TRUE(allow_rounded_attention());
  build(small_job(true, false));
  EXPECT_TRUE(allow_tf32());
  EXPECT_FALSE(allow_rounded_attention());
  build(small_job(false, false));  // the defaults turn both off again
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
